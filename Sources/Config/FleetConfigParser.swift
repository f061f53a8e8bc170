public import BeaconKit
import Contract
import Tracking

extension FleetConfig {
    static let topKeys = ["$schema", "broker", "topicPrefix", "uuids", "defaults", "gateways", "beacons",
                          "stores", "rules", "brain", "bridge", "homeAssistant", "history", "centre"]
    static let brokerKeys = ["url", "clientId", "username", "passwordFile", "tls", "keepalive", "linkTimeout",
                             "mqttVersion", "allowPlaintext"]
    static let tlsKeys = ["caFile", "caPath", "certFile", "keyFile", "insecure"]
    static let tuningKeys = ["pathLossExponent", "rssiOffset", "distanceModel", "thresholds", "publishInterval",
                             "exitTimeout", "staleAfter", "raw", "filter", "scan", "healthInterval", "queueLimit",
                             "reportInterval"]
    static let gatewayKeys = ["id", "source", "zone", "store", "position", "entrance", "advertise"] + tuningKeys
    static let storeKeys = ["major", "name", "ad", "broker", "bridge", "floorPlan", "roster", "proof"]
    static let beaconKeys = ["uuid", "major", "minor", "namespace", "instance", "name", "measuredPower", "latitude", "longitude",
                             "heading", "floor", "store", "ad", "owner", "profile", "position"]
    static let ruleKeys = ["name", "when", "beacons", "stores", "names", "zones", "rssiAbove", "then", "once", "cooldown",
                           "fallback"]

    /// Parses and validates a fleet config; throws every problem found.
    public static func parse(_ text: String) throws(ConfigErrors) -> FleetConfig {
        let document: JSONValue
        do {
            document = try JSONParser().parse(text)
        } catch {
            throw ConfigErrors([ConfigError(path: "", reason: error.description)])
        }
        return try parse(document)
    }

    public static func parse(_ document: JSONValue) throws(ConfigErrors) -> FleetConfig {
        var r = ConfigReader()
        guard let top = r.object(document, at: "", keys: topKeys) else { throw ConfigErrors(r.errors) }

        let broker = parseBroker(top["broker"], at: "broker", &r)
        var prefix = ""
        if let value = top["topicPrefix"], let text = r.string(value, at: "topicPrefix", nonEmpty: false), !text.isEmpty {
            if let problem = Topics.problem(withSegment: text, allowSlash: true) {
                r.fail("topicPrefix", "\"\(text)\" \(problem)")
            } else {
                prefix = text
            }
        }
        var uuids: [BeaconUUID] = []
        for (i, value) in (r.array(top["uuids"], at: "uuids") ?? []).enumerated() {
            if let uuid = r.uuid(value, at: "uuids[\(i)]") { uuids.append(uuid) }
        }

        var defaults = GatewayConfig(id: "defaults")
        var defaultStale: Double?
        if let object = r.object(top["defaults"], at: "defaults", keys: tuningKeys) {
            applyTuning(object, at: "defaults", to: &defaults, staleAfter: &defaultStale, &r)
        }

        var gateways: [GatewayConfig] = []
        for (i, value) in (r.array(top["gateways"], at: "gateways") ?? []).enumerated() {
            let path = "gateways[\(i)]"
            guard let object = r.object(value, at: path, keys: gatewayKeys) else { continue }
            var gateway = defaults
            var stale = defaultStale
            gateway.id = r.required(object, "id", at: path).flatMap { r.topicSegment($0, at: path + ".id") } ?? ""
            if !gateway.id.isEmpty, gateways.contains(where: { $0.id == gateway.id }) {
                r.fail(path + ".id", "\"\(gateway.id)\" is used by another gateway")
            }
            if BrokerIdentity.isReserved(gateway.id) {
                // A gateway logs in as its id: it must not become the brain or the operator.
                r.fail(path + ".id", "\"\(gateway.id)\" is the name of another role ("
                       + BrokerIdentity.reservedList + "); pick another id")
            }
            if let text = r.string(object["source"], at: path + ".source") {
                do { gateway.source = try SourceURI(parsing: text) } catch { r.fail(path + ".source", error.reason) }
            }
            // Zone and beacon names travel in every presence and sighting: bounded, so no valid
            // config makes a gateway write messages the brain must refuse.
            gateway.zone = r.string(object["zone"], at: path + ".zone", maxLength: FleetConfig.maxNameLength)
            gateway.store = r.u16(object["store"], at: path + ".store")
            gateway.position = parsePosition(object["position"], at: path + ".position", &r)
            if let advertise = object["advertise"] {
                gateway.advertise = parseAdvertise(advertise, at: path + ".advertise", &r)
            }
            if let entrance = r.bool(object["entrance"], at: path + ".entrance") { gateway.entrance = entrance }
            applyTuning(object, at: path, to: &gateway, staleAfter: &stale, &r)
            gateways.append(gateway)
        }

        var beacons: [BeaconEntry] = []
        for (i, value) in (r.array(top["beacons"], at: "beacons") ?? []).enumerated() {
            guard let entry = parseBeacon(value, at: "beacons[\(i)]", &r) else { continue }
            if let owner = entry.owner, gateways.contains(where: { $0.id == owner }) {
                // One user name space: an owner named like a gateway would log in as that gateway.
                r.fail("beacons[\(i)].owner", "\"\(owner)\" is a gateway's id; an owner is an app's user name")
            }
            if beacons.contains(where: { $0.match == entry.match }) {
                let what = switch entry.match {
                case .beacon(let id): "\(id)"
                case .uuid(let uuid): "every beacon of \(uuid)"
                }
                r.fail("beacons[\(i)]", "\(what) is listed twice")
            } else {
                beacons.append(entry)
            }
        }

        var stores: [StoreEntry] = []
        for (i, value) in (r.array(top["stores"], at: "stores") ?? []).enumerated() {
            let path = "stores[\(i)]"
            guard let object = r.object(value, at: path, keys: storeKeys) else { continue }
            guard let major = r.required(object, "major", at: path).flatMap({ r.u16($0, at: path + ".major") }) else {
                continue
            }
            if stores.contains(where: { $0.major == major }) { r.fail(path + ".major", "store \(major) is listed twice") }
            if case .object(let broker)? = object["broker"], broker["url"] == nil {
                r.fail(path + ".broker.url", "is required (the store broker's mqtt:// or mqtts:// URL)")
            }
            // Named in every roster summary the brain writes and reads back.
            var store = StoreEntry(major: major, name: r.string(object["name"], at: path + ".name",
                                                                maxLength: FleetConfig.maxNameLength),
                                   ad: parseAd(object["ad"], at: path + ".ad", &r),
                                   broker: object["broker"].flatMap { parseBroker($0, at: path + ".broker", &r) },
                                   bridge: parseStoreBridge(object["bridge"], at: path + ".bridge", &r))
            store.floorPlan = parseFloorPlan(object["floorPlan"], at: path + ".floorPlan", &r)
            store.roster = parseStoreRoster(object["roster"], at: path + ".roster", &r)
            store.proof = parseProof(object["proof"], at: path + ".proof", &r)
            stores.append(store)
        }

        var rules: [Rule] = []
        var ruleIndex: [String: Int] = [:]
        for (i, value) in (r.array(top["rules"], at: "rules") ?? []).enumerated() {
            guard let rule = parseRule(value, at: "rules[\(i)]", &r) else { continue }
            for (j, zone) in rule.zones.enumerated() where !gateways.contains(where: { $0.id == zone }) {
                let known = gateways.map(\.id)
                r.fail("rules[\(i)].zones[\(j)]", "\"\(zone)\" is not a gateway id" +
                       (known.isEmpty ? " (the config lists no gateways)" : "; the gateways are \(known.joined(separator: ", "))"))
            }
            // The brain remembers what a rule did by its name (once, cooldowns): two rules with
            // one name would share that memory.
            if let first = ruleIndex[rule.name] {
                r.fail("rules[\(i)].name", "\"\(rule.name)\" is also the name of rules[\(first)]; rule names must be unique")
            } else {
                ruleIndex[rule.name] = i
            }
            rules.append(rule)
        }

        var brain = BrainConfig()
        if let o = r.object(top["brain"], at: "brain", keys: brainKeys) {
            if let v = r.number(o["zoneConfidence"], at: "brain.zoneConfidence", in: 0.5...0.9999) { brain.zoneConfidence = v }
            if let v = r.number(o["zoneConfidenceWalking"], at: "brain.zoneConfidenceWalking", in: 0.5...0.9999) {
                brain.zoneConfidenceWalking = v
            }
            if let v = r.number(o["zoneMargin"], at: "brain.zoneMargin", in: 0...40, unit: " dB") { brain.zoneMargin = v }
            if let v = r.integer(o["zoneUpdates"], at: "brain.zoneUpdates", in: 1...100) { brain.zoneUpdates = v }
            if let v = r.number(o["zoneStaleAfter"], at: "brain.zoneStaleAfter", in: 0.5...60, unit: " s") { brain.zoneStaleAfter = v }
            if let v = r.number(o["zoneSettle"], at: "brain.zoneSettle", in: 0...3600, unit: " s") { brain.zoneSettle = v }
            if let v = r.oneOf(o["zoneModel"], at: "brain.zoneModel", ZoneModelKind.allCases.map(\.rawValue)) {
                brain.zoneModel = ZoneModelKind(rawValue: v)!
            }
            if let v = r.number(o["zoneDwell"], at: "brain.zoneDwell", in: 1...3600, unit: " s") { brain.zoneDwell = v }
            if let v = r.number(o["zoneSwitch"], at: "brain.zoneSwitch", in: 0.5...0.9999) { brain.zoneSwitch = v }
            if let v = r.number(o["zoneHold"], at: "brain.zoneHold", in: 0...60, unit: " s") { brain.zoneHold = v }
            if let v = r.number(o["zoneNoise"], at: "brain.zoneNoise", in: 0...40, unit: " dB") { brain.zoneNoise = v }
            if let v = r.number(o["rssiProcessNoise"], at: "brain.rssiProcessNoise", in: 0.01...1000) { brain.rssiProcessNoise = v }
            if let v = r.number(o["rssiTrendNoise"], at: "brain.rssiTrendNoise", in: 0...1000) { brain.rssiTrendNoise = v }
            if let v = r.number(o["rssiMeasurementNoise"], at: "brain.rssiMeasurementNoise", in: 0.01...1000) {
                brain.rssiMeasurementNoise = v
            }
            if let v = r.number(o["entryWindow"], at: "brain.entryWindow", in: 0...10, unit: " s") { brain.entryWindow = v }
            if let v = r.number(o["entranceWait"], at: "brain.entranceWait", in: 0...10, unit: " s") { brain.entranceWait = v }
            if let v = r.number(o["exitSamples"], at: "brain.exitSamples", in: 1...1000) { brain.exitSamples = v }
            if let v = r.number(o["exitMinimum"], at: "brain.exitMinimum", in: 0...3600, unit: " s") { brain.exitMinimum = v }
            if let v = r.number(o["clockHold"], at: "brain.clockHold", in: 0.1...60, unit: " s") { brain.clockHold = v }
            if let v = r.oneOf(o["joins"], at: "brain.joins", JoinAccess.allCases.map(\.rawValue)) {
                brain.joins = JoinAccess(rawValue: v)!
            }
            if let v = r.number(o["joinMaxAge"], at: "brain.joinMaxAge", in: 60...604_800, unit: " s") { brain.joinMaxAge = v }
            if let v = r.integer(o["lowBattery"], at: "brain.lowBattery", in: 1000...4000) { brain.lowBattery = v }
            if let v = r.number(o["missingAfter"], at: "brain.missingAfter", in: 60...31_536_000, unit: " s") { brain.missingAfter = v }
            brain.shards = parseShards(o["shards"], &r)
            brain.calibration = parseCalibration(o["calibration"], &r)
        }

        let bridge = parseBridge(top["bridge"], &r)
        checkPlacement(gateways, stores: stores, &r)
        let homeAssistant = parseHomeAssistant(top["homeAssistant"], &r)
        let history = parseHistory(top["history"], &r)
        let centre = parseCentre(top["centre"], &r)
        guard r.errors.isEmpty, let broker else { throw ConfigErrors(r.errors) }
        var config = FleetConfig(broker: broker, topicPrefix: prefix, uuids: uuids, gateways: gateways,
                                 beacons: beacons, stores: stores, rules: rules, brain: brain, bridge: bridge,
                                 homeAssistant: homeAssistant)
        config.history = history
        config.centre = centre
        checkBridging(config, &r)
        checkCentre(config, &r)
        checkRosters(config, &r)
        checkRecordBounds(config, &r)
        checkProofs(config, &r)
        guard r.errors.isEmpty else { throw ConfigErrors(r.errors) }
        return config
    }

    /// `stores[].proof`: `secretFile` (required) and `slotSeconds`.
    static func parseProof(_ value: JSONValue?, at path: String, _ r: inout ConfigReader) -> ProofConfig? {
        guard let value, let o = r.object(value, at: path, keys: ["secretFile", "slotSeconds"]) else { return nil }
        let file = r.required(o, "secretFile", at: path).flatMap { r.string($0, at: path + ".secretFile") }
        let slot = o["slotSeconds"].map { r.integer($0, at: path + ".slotSeconds", in: 5...3600) }
            ?? PresenceProof.defaultSlotSeconds
        guard let file, let slot else { return nil }
        return ProofConfig(secretFile: file, slotSeconds: slot)
    }

    /// A gateway whose minor is a proof advertises for a store that has one.
    static func checkProofs(_ config: FleetConfig, _ r: inout ConfigReader) {
        for (i, gateway) in config.gateways.enumerated() {
            guard let advertise = gateway.advertise, advertise.proof else { continue }
            let major = advertise.beacon.major
            if config.stores.first(where: { $0.major == major })?.proof == nil {
                r.fail("gateways[\(i)].advertise.proof", "store \(major) (its major) has no proof: give it "
                       + "\"proof\": {\"secretFile\": …} in stores[]")
            }
        }
    }

    /// The top-level `broker`, or a store's (`path` says which).
    static func parseBroker(_ value: JSONValue?, at path: String, _ r: inout ConfigReader) -> BrokerConfig? {
        var broker = BrokerConfig(url: BrokerURL(host: "localhost"))
        guard let value else { return broker }
        guard let object = r.object(value, at: path, keys: brokerKeys) else { return nil }
        if let text = r.string(object["url"], at: path + ".url") {
            do { broker.url = try BrokerURL(parsing: text) } catch { r.fail(path + ".url", error.reason) }
        }
        // One config serves every gateway and brain: a user or client id in it would be shared.
        if object["clientId"] != nil {
            r.fail(path + ".clientId", "a client id shared by every gateway and brain makes each take the others' "
                   + "connection over; remove it: a gateway connects as beacon-gateway-<id>, a brain as "
                   + "beacon-brain[-<stores>] or its --client-id")
        }
        if object["username"] != nil {
            r.fail(path + ".username", "a user name shared by every gateway and brain lets each speak for all of them; "
                   + "remove it: a gateway logs in as its id, the brain as \"brain\" (beaconctl provision writes "
                   + "their passwords and the ACL)")
        }
        if let user = broker.url.username {
            r.fail(path + ".url", "the user \"\(user)\" would be shared by every gateway and brain; remove it (each "
                   + "logs in as itself; --broker mqtt://user@host picks a user for one process)")
            broker.url.username = nil
        }
        broker.passwordFile = r.string(object["passwordFile"], at: path + ".passwordFile")
        if let tls = r.object(object["tls"], at: path + ".tls", keys: tlsKeys) {
            broker.tls = TLSConfig(caFile: r.string(tls["caFile"], at: path + ".tls.caFile"),
                                   caPath: r.string(tls["caPath"], at: path + ".tls.caPath"),
                                   certFile: r.string(tls["certFile"], at: path + ".tls.certFile"),
                                   keyFile: r.string(tls["keyFile"], at: path + ".tls.keyFile"),
                                   insecure: r.bool(tls["insecure"], at: path + ".tls.insecure") ?? false)
            if (broker.tls?.certFile == nil) != (broker.tls?.keyFile == nil) {
                r.fail(path + ".tls", "certFile and keyFile go together (client certificate authentication)")
            }
            if broker.tls?.caFile == nil && broker.tls?.caPath == nil {
                r.fail(path + ".tls", "needs caFile or caPath to verify the broker")
            }
        }
        if let v = r.integer(object["keepalive"], at: path + ".keepalive", in: 5...65535) { broker.keepalive = v }
        if let v = r.number(object["linkTimeout"], at: path + ".linkTimeout", in: 0...3600, unit: " s") { broker.linkTimeout = v }
        if let v = r.oneOf(object["mqttVersion"], at: path + ".mqttVersion", ["3.1.1", "5"]) {
            broker.mqttVersion = MQTTVersion(rawValue: v)!
        }
        broker.allowPlaintext = r.bool(object["allowPlaintext"], at: path + ".allowPlaintext") ?? false
        if let refusal = broker.refusal { r.fail(path + ".url", refusal) }
        return broker
    }

    static func applyTuning(_ o: JSONObject, at path: String, to g: inout GatewayConfig,
                            staleAfter: inout Double?, _ r: inout ConfigReader) {
        let p = { (key: String) in ConfigReader.join(path, key) }
        if let v = r.number(o["pathLossExponent"], at: p("pathLossExponent"), in: 1...6) { g.tracker.pathLossExponent = v }
        if let v = r.number(o["rssiOffset"], at: p("rssiOffset"), in: -50...50, unit: " dB") {
            g.tracker.rssiOffset = v
            g.rssiOffsetIsExplicit = true
        }
        if let v = r.oneOf(o["distanceModel"], at: p("distanceModel"), DistanceModel.allCases.map(\.rawValue)) {
            g.tracker.distanceModel = DistanceModel(rawValue: v)!
        }
        if let v = r.number(o["publishInterval"], at: p("publishInterval"), in: 0.05...3600, unit: " s") {
            g.tracker.publishInterval = v
        }
        if let v = r.number(o["exitTimeout"], at: p("exitTimeout"), in: 0.5...3600, unit: " s") { g.tracker.exitTimeout = v }
        if let v = r.number(o["staleAfter"], at: p("staleAfter"), in: 0.1...3600, unit: " s") { staleAfter = v }
        if let v = r.bool(o["raw"], at: p("raw")) { g.tracker.raw = v }
        if let v = r.number(o["healthInterval"], at: p("healthInterval"), in: 1...3600, unit: " s") { g.healthInterval = v }
        if let v = r.integer(o["queueLimit"], at: p("queueLimit"), in: 10...1_000_000) { g.queueLimit = v }
        if let v = r.number(o["reportInterval"], at: p("reportInterval"), in: 0...60, unit: " s") {
            if v > 0, v < 0.1 { r.fail(p("reportInterval"), "must be 0 (no reports) or at least 0.1 s") } else { g.reportInterval = v }
        }
        if let t = r.object(o["thresholds"], at: p("thresholds"), keys: ["immediate", "near", "hysteresis"]) {
            let tp = p("thresholds")
            if let v = r.number(t["immediate"], at: tp + ".immediate", in: 0.01...100, unit: " m") { g.tracker.thresholds.immediate = v }
            if let v = r.number(t["near"], at: tp + ".near", in: 0.01...1000, unit: " m") { g.tracker.thresholds.near = v }
            if let v = r.number(t["hysteresis"], at: tp + ".hysteresis", in: 0...0.9) { g.tracker.thresholds.hysteresis = v }
            if g.tracker.thresholds.near <= g.tracker.thresholds.immediate {
                r.fail(tp, "near (\(format(g.tracker.thresholds.near)) m) must be beyond immediate (\(format(g.tracker.thresholds.immediate)) m)")
            }
        }
        if let f = r.object(o["filter"], at: p("filter"), keys: ["processNoise", "measurementNoise"]) {
            if let v = r.number(f["processNoise"], at: p("filter") + ".processNoise", in: 0.001...1000) { g.tracker.filter.processNoise = v }
            if let v = r.number(f["measurementNoise"], at: p("filter") + ".measurementNoise", in: 0.01...1000) {
                g.tracker.filter.measurementNoise = v
            }
        }
        if let s = r.object(o["scan"], at: p("scan"), keys: ["active", "intervalMs", "windowMs", "stallTimeout"]) {
            if let v = r.bool(s["active"], at: p("scan") + ".active") { g.scan.active = v }
            if let v = r.number(s["intervalMs"], at: p("scan") + ".intervalMs", in: 2.5...10240, unit: " ms") { g.scan.intervalMs = v }
            if let v = r.number(s["windowMs"], at: p("scan") + ".windowMs", in: 2.5...10240, unit: " ms") { g.scan.windowMs = v }
            if let v = r.number(s["stallTimeout"], at: p("scan") + ".stallTimeout", in: 0...86400, unit: " s") { g.scan.stallTimeout = v }
            if g.scan.windowMs > g.scan.intervalMs {
                r.fail(p("scan") + ".windowMs", "the scan window cannot be longer than the interval")
            }
        }
        g.tracker.staleAfter = staleAfter ?? min(5, g.tracker.exitTimeout / 2)
        if g.tracker.staleAfter > g.tracker.exitTimeout {
            r.fail(p("staleAfter"), "must not be longer than exitTimeout (\(format(g.tracker.exitTimeout)) s)")
        }
    }

    static func parseAdvertise(_ value: JSONValue, at path: String, _ r: inout ConfigReader) -> AdvertiseConfig? {
        guard let o = r.object(value, at: path, keys: ["uuid", "major", "minor", "power", "intervalMs", "proof"]) else {
            return nil
        }
        let proof = o["proof"].flatMap { r.bool($0, at: path + ".proof") } ?? false
        let uuid = r.required(o, "uuid", at: path).flatMap { r.uuid($0, at: path + ".uuid") }
        let major = r.required(o, "major", at: path).flatMap { r.u16($0, at: path + ".major") }
        let minor: UInt16?
        if proof {
            if o["minor"] != nil { r.fail(path + ".minor", "with \"proof\": true the minor is the store's rotating value; leave it out") }
            minor = 0
        } else {
            minor = r.required(o, "minor", at: path).flatMap { r.u16($0, at: path + ".minor") }
        }
        let power = o["power"].map { r.integer($0, at: path + ".power", in: -127...20) } ?? -59
        let interval = o["intervalMs"].map { r.integer($0, at: path + ".intervalMs", in: 100...10240) } ?? 100
        guard let uuid, let major, let minor, let power, let interval else { return nil }
        return AdvertiseConfig(beacon: IBeacon(uuid: uuid, major: major, minor: minor, txPower: Int8(power)),
                               intervalMs: interval, proof: proof)
    }

    static func parseAd(_ value: JSONValue?, at path: String, _ r: inout ConfigReader) -> JSONValue? {
        guard let value else { return nil }
        guard case .object = value else {
            r.fail(path, "expected an object (the ad's JSON payload), found \(value.typeName)")
            return nil
        }
        return value
    }

    static func parseBeacon(_ value: JSONValue, at path: String, _ r: inout ConfigReader) -> BeaconEntry? {
        guard let o = r.object(value, at: path, keys: beaconKeys) else { return nil }
        // An Eddystone-UID beacon: namespace and instance instead of uuid, major and minor.
        let eddystone = o["namespace"] != nil || o["instance"] != nil
        if eddystone {
            for key in ["uuid", "major", "minor"] where o[key] != nil {
                r.fail(path + "." + key, "an Eddystone beacon (namespace, instance) has no \(key)")
            }
        }
        let uuid = eddystone ? nil : r.required(o, "uuid", at: path).flatMap { r.uuid($0, at: path + ".uuid") }
        let eddystoneID = eddystone ? r.eddystone(o, at: path) : nil
        // Without major and minor the entry describes every beacon of the UUID.
        let uuidOnly = !eddystone && o["major"] == nil && o["minor"] == nil
        if !eddystone, (o["major"] == nil) != (o["minor"] == nil) {
            r.fail(path, "major and minor go together (leave both out for every beacon of the UUID)")
        }
        let major = o["major"].flatMap { r.u16($0, at: path + ".major") }
        let minor = o["minor"].flatMap { r.u16($0, at: path + ".minor") }
        let name = r.string(o["name"], at: path + ".name", maxLength: FleetConfig.maxNameLength)
        let power = r.integer(o["measuredPower"], at: path + ".measuredPower", in: -127...20)
        let latitude = r.number(o["latitude"], at: path + ".latitude", in: -90...90)
        let longitude = r.number(o["longitude"], at: path + ".longitude", in: -180...180)
        let heading = r.number(o["heading"], at: path + ".heading", in: 0...360)
        let floor = r.integer(o["floor"], at: path + ".floor", in: -200...500)
        let store = r.u16(o["store"], at: path + ".store")
        let ad = parseAd(o["ad"], at: path + ".ad", &r)
        let owner = o["owner"].flatMap { r.topicSegment($0, at: path + ".owner") }
        let profile = parseProfile(o["profile"], at: path + ".profile", &r)
        let position = parsePosition(o["position"], at: path + ".position", &r)
        if o["position"] != nil, uuidOnly || eddystone {
            r.fail(path + ".position", "needs uuid, major and minor: a reference beacon is one beacon of a store")
        }
        if o["position"] != nil, power == nil {
            r.fail(path + ".measuredPower", "is required for a reference beacon (one with a position): calibration "
                   + "measures the gateways against its power at 1 m")
        }
        if let owner, BrokerIdentity.isReserved(owner) {
            r.fail(path + ".owner", "\"\(owner)\" is the name of another role; an owner is an app's user name")
        }
        if (o["latitude"] == nil) != (o["longitude"] == nil) {
            r.fail(path, "latitude and longitude go together")
        }
        if uuidOnly {
            if o["store"] != nil {
                r.fail(path + ".store", "needs major and minor: the beacons of a UUID-only entry belong to their own major's store")
            }
            if o["ad"] != nil {
                r.fail(path + ".ad", "needs major and minor (one beacon's offer); put an offer for all of them on their store")
            }
            if o["owner"] != nil {
                r.fail(path + ".owner", "needs major and minor: an owner owns one beacon")
            }
            if o["profile"] != nil {
                r.fail(path + ".profile", "needs major and minor: a profile is one customer's")
            }
        }
        let location: Location? = latitude != nil || longitude != nil || heading != nil || floor != nil
            ? Location(latitude: latitude, longitude: longitude, heading: heading, floor: floor) : nil
        if let eddystoneID {
            var entry = BeaconEntry(id: eddystoneID, name: name, measuredPower: power, location: location, store: store, ad: ad,
                                    owner: owner)
            entry.profile = profile
            return entry
        }
        guard let uuid else { return nil }
        if uuidOnly { return BeaconEntry(uuid: uuid, name: name, measuredPower: power, location: location) }
        guard let major, let minor else { return nil }
        var entry = BeaconEntry(id: BeaconID(uuid: uuid, major: major, minor: minor), name: name, measuredPower: power,
                                location: location, store: store, ad: ad, owner: owner)
        entry.profile = profile
        entry.position = position
        return entry
    }
}

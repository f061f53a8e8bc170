public import BeaconKit

/// A chain with a broker in every store, each bridged to a central broker: the parts of the
/// fleet config that describe it (docs/fleet.md).
///
/// - `stores[].broker`: the store's own broker. The store's gateways (`gateways[].store`)
///   connect to it, local displays read it, and it keeps working while the WAN is down.
/// - `broker` (top level): where the brains, dashboards and `beaconctl config push` connect;
///   in a bridged fleet, the central broker.
/// - `bridge`: how every store's broker reaches the central broker (the address as seen from
///   the stores, the CA that verifies it, keepalive, queue bound), and `stores[].bridge`: the
///   credentials of one store's bridge there. `beaconctl bridge` turns them into a Mosquitto
///   bridge section for each store broker.

/// The fleet config's `bridge`: how the store brokers reach the central broker.
public struct BridgeSettings: Sendable, Equatable {
    /// The central broker as the stores reach it; the fleet's `broker.url` when absent.
    public var url: BrokerURL?
    /// The CA that verifies the central broker (`caFile` or `caPath`) and `insecure`; a
    /// store's client certificate is in `stores[].bridge`. Defaults to the fleet broker's for
    /// the same URL.
    public var tls: TLSConfig?
    /// Seconds between the bridge's keepalive pings: the central broker declares a store
    /// unreachable 1.5 keepalives after its WAN went quiet.
    public var keepalive: Int
    public var mqttVersion: MQTTVersion
    /// Messages a store broker holds for the central broker while the WAN is down (its
    /// `max_queued_messages`). Every reconnection attempt also queues a copy of the store's
    /// retained state, so size it for the longest outage to ride out (docs/fleet.md).
    public var queueLimit: Int

    public init(url: BrokerURL? = nil, tls: TLSConfig? = nil, keepalive: Int = 10, mqttVersion: MQTTVersion = .v311,
                queueLimit: Int = 200_000) {
        self.url = url
        self.tls = tls
        self.keepalive = keepalive
        self.mqttVersion = mqttVersion
        self.queueLimit = queueLimit
    }
}

/// A store's `bridge`: who its bridge is at the central broker.
public struct StoreBridge: Sendable, Equatable {
    /// The bridge's client id at the central broker; `bridge-<major>` when absent.
    public var clientId: String?
    public var username: String?
    /// A file whose first line is the password; `beaconctl bridge` writes it into the
    /// generated configuration (Mosquitto reads bridge passwords from its configuration only).
    public var passwordFile: String?
    /// A client certificate and key for the central broker (instead of, or with, a password).
    public var certFile: String?
    public var keyFile: String?

    public init(clientId: String? = nil, username: String? = nil, passwordFile: String? = nil, certFile: String? = nil,
                keyFile: String? = nil) {
        self.clientId = clientId
        self.username = username
        self.passwordFile = passwordFile
        self.certFile = certFile
        self.keyFile = keyFile
    }
}

extension FleetConfig {
    /// The store (a major) listed in `stores`.
    public func store(_ major: UInt16) -> StoreEntry? { stores.first { $0.major == major } }

    /// The broker a gateway connects to: its store's broker when the store has one, else the
    /// fleet's.
    public func broker(forGateway id: String) -> BrokerConfig {
        guard let major = gateway(id: id)?.store, let broker = store(major)?.broker else { return broker }
        return broker
    }

    /// The stores with a broker of their own, bridged to the central broker.
    public var bridgedStores: [StoreEntry] { stores.filter { $0.broker != nil } }

    /// The gateways of a store (`gateways[].store`), in config order.
    public func gateways(ofStore major: UInt16) -> [GatewayConfig] { gateways.filter { $0.store == major } }

    /// The central broker as the stores reach it: `bridge.url`, else a NATS centre's nodes
    /// (the bridges fail over between them), else the fleet's broker.
    public var bridgeURL: BrokerURL {
        bridge.url ?? (centre.kind == .nats ? centre.mqttURL(tls: broker.url.tls) : nil) ?? broker.url
    }

    /// The central broker as store `major`'s bridge reaches it. A NATS centre's nodes in
    /// turn: the i-th bridged store (config order) lists node i mod n first, so each node
    /// carries about a third of the bridges rather than the first node all of them (the
    /// bridge fails over to the others in that order). An explicit `bridge.url` is kept as
    /// written: its order is the operator's.
    public func bridgeURL(ofStore major: UInt16) -> BrokerURL {
        let url = bridgeURL
        guard bridge.url == nil, centre.kind == .nats, url.endpoints.count > 1,
              let index = bridgedStores.firstIndex(where: { $0.major == major }) else { return url }
        var rotated = url
        let shift = index % url.endpoints.count
        rotated.endpoints = Array(url.endpoints[shift...] + url.endpoints[..<shift])
        return rotated
    }

    /// The CA settings the bridges verify the central broker with: `bridge.tls`, else the
    /// fleet broker's when the bridges reach the same URL.
    public var bridgeTLS: TLSConfig? {
        bridge.tls ?? (bridge.url == nil || bridge.url == broker.url ? broker.tls : nil)
    }

    /// The bridge's client id at the central broker.
    public func bridgeClientID(ofStore major: UInt16) -> String {
        store(major)?.bridge?.clientId ?? "bridge-\(major)"
    }

    static let bridgeKeys = ["url", "tls", "keepalive", "mqttVersion", "queueLimit"]
    static let storeBridgeKeys = ["clientId", "username", "passwordFile", "certFile", "keyFile"]

    static func parseBridge(_ value: JSONValue?, _ r: inout ConfigReader) -> BridgeSettings {
        var bridge = BridgeSettings()
        guard let object = r.object(value, at: "bridge", keys: bridgeKeys) else { return bridge }
        if let text = r.string(object["url"], at: "bridge.url") {
            do {
                let url = try BrokerURL(parsing: text)
                if url.username != nil {
                    r.fail("bridge.url", "a bridge's user name goes in stores[].bridge.username, not in the URL")
                }
                bridge.url = url
            } catch {
                r.fail("bridge.url", error.reason)
            }
        }
        if let tls = r.object(object["tls"], at: "bridge.tls", keys: ["caFile", "caPath", "insecure"]) {
            bridge.tls = TLSConfig(caFile: r.string(tls["caFile"], at: "bridge.tls.caFile"),
                                   caPath: r.string(tls["caPath"], at: "bridge.tls.caPath"),
                                   insecure: r.bool(tls["insecure"], at: "bridge.tls.insecure") ?? false)
            if bridge.tls?.caFile == nil && bridge.tls?.caPath == nil {
                r.fail("bridge.tls", "needs caFile or caPath to verify the central broker")
            }
        }
        if let v = r.integer(object["keepalive"], at: "bridge.keepalive", in: 5...3600) { bridge.keepalive = v }
        if let v = r.oneOf(object["mqttVersion"], at: "bridge.mqttVersion", ["3.1.1", "5"]) {
            bridge.mqttVersion = MQTTVersion(rawValue: v)!
        }
        if let v = r.integer(object["queueLimit"], at: "bridge.queueLimit", in: 1000...100_000_000) { bridge.queueLimit = v }
        return bridge
    }

    static func parseStoreBridge(_ value: JSONValue?, at path: String, _ r: inout ConfigReader) -> StoreBridge? {
        guard let object = r.object(value, at: path, keys: storeBridgeKeys) else { return nil }
        let bridge = StoreBridge(clientId: r.topicSegment(object["clientId"], at: path + ".clientId"),
                                 username: r.string(object["username"], at: path + ".username"),
                                 passwordFile: r.string(object["passwordFile"], at: path + ".passwordFile"),
                                 certFile: r.string(object["certFile"], at: path + ".certFile"),
                                 keyFile: r.string(object["keyFile"], at: path + ".keyFile"))
        if (bridge.certFile == nil) != (bridge.keyFile == nil) {
            r.fail(path, "certFile and keyFile go together (client certificate authentication)")
        }
        if bridge.passwordFile != nil && bridge.username == nil {
            r.fail(path + ".passwordFile", "a password needs a username")
        }
        return bridge
    }

    /// Checks across the bridged topology, once everything is parsed.
    static func checkBridging(_ config: FleetConfig, _ r: inout ConfigReader) {
        let majors = Set(config.stores.map(\.major))
        for (i, gateway) in config.gateways.enumerated() {
            if let major = gateway.store, !majors.contains(major) {
                r.fail("gateways[\(i)].store", "store \(major) is not in stores[] (list it there, with its broker if it has one)")
            }
        }
        var clientIDs: [String: UInt16] = [:]
        for (i, store) in config.stores.enumerated() {
            guard let broker = store.broker else {
                if store.bridge != nil { r.fail("stores[\(i)].bridge", "a store without a broker of its own has no bridge") }
                continue
            }
            if config.bridgeURL.endpoints.contains(where: { broker.url.endpoints.contains($0) }) {
                r.fail("stores[\(i)].broker.url", "is the central broker (\(config.bridgeURL)): a store broker cannot bridge to itself")
            }
            let id = config.bridgeClientID(ofStore: store.major)
            if let other = clientIDs[id] {
                r.fail("stores[\(i)].bridge.clientId", "\"\(id)\" is also store \(other)'s bridge: the central broker would drop one for the other")
            }
            clientIDs[id] = store.major
        }
    }

    static let brainKeys = ["zoneConfidence", "zoneConfidenceWalking", "zoneMargin", "zoneUpdates", "zoneStaleAfter",
                            "zoneSettle", "zoneModel", "zoneDwell", "zoneSwitch", "zoneHold", "zoneNoise",
                            "rssiProcessNoise", "rssiTrendNoise", "rssiMeasurementNoise", "entryWindow", "entranceWait",
                            "exitSamples", "exitMinimum", "clockHold", "joins", "joinMaxAge", "shards", "calibration",
                            "lowBattery", "missingAfter"]
    static let calibrationKeys = ["enabled", "minSamples", "minSeconds", "interval", "maxOffset", "minExponent",
                                  "maxExponent", "minChange"]

    /// `brain.calibration`: on/off and the limits of what the brain learns (docs/presence.md).
    static func parseCalibration(_ value: JSONValue?, _ r: inout ConfigReader) -> CalibrationSettings {
        var c = CalibrationSettings()
        let path = "brain.calibration"
        guard let o = r.object(value, at: path, keys: calibrationKeys) else { return c }
        if let v = r.bool(o["enabled"], at: path + ".enabled") { c.enabled = v }
        if let v = r.integer(o["minSamples"], at: path + ".minSamples", in: 10...1_000_000) { c.minSamples = v }
        if let v = r.number(o["minSeconds"], at: path + ".minSeconds", in: 0...86_400, unit: " s") { c.minSeconds = v }
        if let v = r.number(o["interval"], at: path + ".interval", in: 1...86_400, unit: " s") { c.interval = v }
        if let v = r.number(o["maxOffset"], at: path + ".maxOffset", in: 0...40, unit: " dB") { c.maxOffset = v }
        if let v = r.number(o["minExponent"], at: path + ".minExponent", in: 1...6) { c.minExponent = v }
        if let v = r.number(o["maxExponent"], at: path + ".maxExponent", in: 1...6) { c.maxExponent = v }
        if let v = r.number(o["minChange"], at: path + ".minChange", in: 0...10, unit: " dB") { c.minChange = v }
        if c.minExponent > c.maxExponent {
            r.fail(path + ".minExponent", "\(format(c.minExponent)) is above maxExponent \(format(c.maxExponent))")
        }
        return c
    }

    /// `brain.shards`: `[{"name": "a", "stores": [100, "101-149"]}, …]`.
    static func parseShards(_ value: JSONValue?, _ r: inout ConfigReader) -> [BrainShard] {
        var shards: [BrainShard] = []
        var owner: [UInt16: String] = [:]
        for (i, item) in (r.array(value, at: "brain.shards") ?? []).enumerated() {
            let path = "brain.shards[\(i)]"
            guard let object = r.object(item, at: path, keys: ["name", "stores"]) else { continue }
            let name = r.required(object, "name", at: path).flatMap { r.topicSegment($0, at: path + ".name") }
            var stores: [UInt16] = []
            for (j, entry) in (r.required(object, "stores", at: path).flatMap { r.array($0, at: path + ".stores") } ?? []).enumerated() {
                let at = path + ".stores[\(j)]"
                if case .string(let text) = entry {
                    let ends = text.split(separator: "-", omittingEmptySubsequences: false).map { UInt16($0) }
                    guard ends.count == 2, let low = ends[0], let high = ends[1], low <= high else {
                        r.fail(at, "\"\(text)\" is neither a store number nor a range such as \"100-149\"")
                        continue
                    }
                    stores += Array(low...high)
                } else if let major = r.u16(entry, at: at) {
                    stores.append(major)
                }
            }
            guard let name else { continue }
            if shards.contains(where: { $0.name == name }) { r.fail(path + ".name", "\"\(name)\" names another shard too") }
            if object["stores"] != nil && stores.isEmpty { r.fail(path + ".stores", "a shard needs at least one store") }
            for major in stores {
                if let other = owner[major], other != name {
                    r.fail(path + ".stores", "store \(major) is in shard \"\(other)\" already")
                    break
                }
                owner[major] = name
            }
            shards.append(BrainShard(name: name, stores: Array(Set(stores)).sorted()))
        }
        return shards
    }
}

/// One brain's part of the fleet: the stores (majors) it answers for.
public struct BrainShard: Sendable, Equatable {
    /// A topic segment: `beacon-brain --shard NAME`, `brain/shards/<name>/…`.
    public var name: String
    public var stores: [UInt16]

    public init(name: String, stores: [UInt16]) {
        self.name = name
        self.stores = stores
    }
}

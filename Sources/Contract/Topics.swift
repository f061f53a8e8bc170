import BeaconKit

/// Every MQTT topic of BeaconBridge (README "MQTT contract", docs/brain.md), under an
/// optional prefix: the contract's topics, the brain's own records, and the subscription
/// filters that read them.
///
/// The one place that builds and parses topic names, so that gateway, brain, observer and
/// tests cannot drift apart.
public struct Topics: Sendable, Equatable {
    /// Prepended with a `/` when not empty: prefix `acme` gives `acme/beacons/1/2`.
    public let prefix: String

    public init(prefix: String = "") { self.prefix = prefix }

    /// Why a prefix or topic segment is unusable, or `nil` when it is fine.
    public static func problem(withSegment text: String, allowSlash: Bool = false) -> String? {
        if text.isEmpty { return "is empty" }
        if text.contains("+") || text.contains("#") { return "contains an MQTT wildcard (+ or #)" }
        if text.unicodeScalars.contains(where: { $0.value < 0x20 }) { return "contains a control character" }
        if !allowSlash, text.contains("/") { return "contains '/'" }
        if text.hasPrefix("/") || text.hasSuffix("/") { return "starts or ends with '/'" }
        if text.hasPrefix("$") { return "starts with '$' (reserved by brokers)" }
        return nil
    }

    /// Any topic or filter under the prefix, from its tail: for the few that are written
    /// elsewhere (a rule's own topic, the patterns of a store's bridge).
    public func topic(_ tail: String) -> String { prefix.isEmpty ? tail : prefix + "/" + tail }

    /// A beacon's topic, `beacons/<major>/<minor>` or `eddystone/<namespace>/<instance>`; for
    /// a set of beacons the same with `+` where a level is open (`beacons/+/+`). Every
    /// builder below takes either, so filters and ACL patterns are the topics they match.
    public func beacon(_ beacons: some BeaconSelection) -> String { beacons.topic(in: self) }

    /// Sightings of a beacon (a gateway's, not retained): the beacon's own topic.
    public func sightings(of beacons: some BeaconSelection) -> String { beacon(beacons) }

    /// One gateway's retained view of a beacon.
    public func presence(of beacons: some BeaconSelection, seenBy gateway: String) -> String {
        beacon(beacons) + "/presence/" + gateway
    }

    /// The brain's fleet-wide retained presence.
    public func presence(of beacons: some BeaconSelection) -> String { beacon(beacons) + "/presence" }

    /// The beacon's standing offer (retained, the brain's).
    public func ad(of beacons: some BeaconSelection) -> String { beacon(beacons) + "/ad" }

    /// A beacon's last telemetry (Eddystone-TLM: battery, temperature, counts), retained,
    /// from the gateway that heard it last.
    public func telemetry(of beacons: some BeaconSelection) -> String { beacon(beacons) + "/telemetry" }

    /// The brain's zone decisions about a beacon (enter, zone, exit), with capture times.
    public func zoneEvents(of beacons: some BeaconSelection) -> String { beacon(beacons) + "/events" }

    /// An observer's join of a beacon (retained; empty when it leaves).
    public func observer(_ client: String, of beacons: some BeaconSelection) -> String { beacon(beacons) + "/observers/" + client }

    public func status(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/status") }
    public func health(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/health") }
    public func commands(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/cmd") }
    public func events(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/events") }
    /// A gateway's RSSI reports for the brain's zone fusion.
    public func rssiReports(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/rssi") }
    /// What the brain's calibration learned about a gateway (retained; written by the brain).
    public func calibration(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/calibration") }
    /// Every gateway's calibration record.
    public var calibrationFilter: String { calibration(ofGateway: Self.anyLevel) }

    public var fleetConfig: String { topic("fleet/config") }
    public func status(ofObserver client: String) -> String { topic("observers/\(client)/status") }
    public func inbox(of client: String) -> String { topic("observers/\(client)/inbox") }
    public func roster(ofStore major: UInt16) -> String { topic("stores/\(major)/roster") }
    public var brainStatus: String { topic("brain/status") }
    /// A store broker's bridge to the central broker: Mosquitto's `1` while connected, `0`
    /// (the bridge's will) when not.
    public func bridgeStatus(ofStore major: UInt16) -> String { topic("stores/\(major)/bridge") }

    /// Subscription filter for one gateway's own retained presence (read back on start).
    public func presenceFilter(seenBy gateway: String) -> [String] {
        [presence(of: .anyIBeacon, seenBy: gateway), presence(of: .anyEddystone, seenBy: gateway)]
    }

    // MARK: The brain's topics

    /// One customer of a store's roster (retained; see `Roster.Customer`).
    public func customer(_ client: String, ofStore store: UInt16) -> String { topic("stores/\(store)/customers/\(client)") }

    /// The brain's record of a visit (see `VisitRecord`): `brain/visits/<major>/<minor>` or
    /// `brain/visits/eddystone/<namespace>/<instance>`.
    public func visitRecord(of beacons: some BeaconSelection) -> String { topic("brain/visits/" + beacons.recordLevels) }

    /// The brain's health record of a registry beacon (retained, unsealed: the fleet page
    /// reads it): `brain/beacons/<major>/<minor>` or `brain/beacons/eddystone/<namespace>/<instance>`.
    public func beaconHealth(of beacons: some BeaconSelection) -> String { topic("brain/beacons/" + beacons.recordLevels) }
    /// The brain's record of an answered join (see `AnsweredRecord`).
    public func answeredRecord(of beacons: some BeaconSelection, client: String) -> String {
        topic("brain/answered/" + beacons.recordLevels + "/" + client)
    }
    /// Config reports of the brain, like `gateways/<id>/events` for a gateway.
    public var brainEvents: String { topic("brain/events") }
    /// One brain's counters, retained, refreshed periodically; per client id, since several
    /// brains may share a broker.
    public func brainHealth(_ client: String) -> String { topic("brain/health/\(client)") }
    /// Where a brain sends itself a marker after subscribing: when it comes back, the
    /// broker has delivered every retained message of the subscriptions made before.
    public func brainSync(_ client: String) -> String { topic("brain/sync/\(client)") }

    /// `online` while a shard's brain runs, `offline` as its will (retained).
    public func shardStatus(_ shard: String) -> String { topic("brain/shards/\(shard)/status") }
    /// The shard whose brain answers for `shard` while its own is away (retained; empty when none).
    public func shardHolder(_ shard: String) -> String { topic("brain/shards/\(shard)/holder") }
    /// A marker a shard's brain sends itself: the shards' retained state has been read.
    public func shardSync(_ shard: String) -> String { topic("brain/shards/\(shard)/sync") }

    // MARK: Filters and ACL patterns

    /// A level that matches any one level, in a filter or an ACL pattern: pass it for a
    /// gateway or client id (`status(ofGateway: Topics.anyLevel)` is `gateways/+/status`).
    public static let anyLevel = "+"
    /// Mosquitto's ACL substitution for the user name (`pattern` lines): pass it for a client
    /// id where the user name is the client id (`inbox(of: Topics.aclUser)`).
    public static let aclUser = "%u"

    /// The top levels of the contract's topics, for filters of everything under one.
    public enum Tree: String, Sendable, CaseIterable {
        case beacons, eddystone, gateways, observers, stores, brain
        /// Home Assistant trackers' states, which beacon-web writes.
        case displays
    }

    /// `<tree>/#`: every topic under one top level.
    public func everything(under tree: Tree) -> String { topic(tree.rawValue + "/#") }

    /// Every beacon health record (`brain/beacons/#`), of both families.
    public var beaconHealthFilter: String { topic("brain/beacons/#") }
    /// The shards' status and holder topics (`brain/shards/+/status`, `…/holder`).
    public var shardFilters: [String] { [shardStatus(Self.anyLevel), shardHolder(Self.anyLevel)] }

    public var gatewayStatusFilter: String { status(ofGateway: Self.anyLevel) }
    public var observerStatusFilter: String { status(ofObserver: Self.anyLevel) }
    /// Every gateway's RSSI reports (`rssiReports(ofGateway:)`).
    public var gatewayRSSIFilter: String { rssiReports(ofGateway: Self.anyLevel) }

    /// What others publish about the beacons of one store (`nil`: of every store) that
    /// the brain reads: the gateways' presence, joins. (Not sightings: the brain hears the
    /// gateways through their RSSI reports, whose topic names the gateway.)
    public func beaconFilters(ofStore major: UInt16?) -> [String] {
        let beacons = Beacons.ofStore(major)
        return [presence(of: beacons, seenBy: Self.anyLevel), observer(Self.anyLevel, of: beacons)]
    }

    /// The brain's own retained topics about the beacons of one store (`nil`: of every
    /// store): fleet presence, ads, its records of visits and answered joins.
    public func brainRecordFilters(ofStore major: UInt16?) -> [String] {
        let beacons = Beacons.ofStore(major)
        return [presence(of: beacons), ad(of: beacons), visitRecord(of: beacons), answeredRecord(of: beacons, client: Self.anyLevel),
                beaconHealth(of: beacons)]
    }

    /// What others publish about one Eddystone beacon (`nil`: about every one) that the
    /// brain reads: the gateways' presence, joins.
    public func eddystoneFilters(of ref: BeaconRef?) -> [String] {
        let beacons = Beacons.eddystone(ref?.eddystone)
        return [presence(of: beacons, seenBy: Self.anyLevel), observer(Self.anyLevel, of: beacons), telemetry(of: beacons)]
    }

    /// The brain's own retained topics about one Eddystone beacon (`nil`: about every one).
    public func eddystoneRecordFilters(of ref: BeaconRef?) -> [String] {
        let beacons = Beacons.eddystone(ref?.eddystone)
        return [presence(of: beacons), ad(of: beacons), visitRecord(of: beacons), answeredRecord(of: beacons, client: Self.anyLevel),
                beaconHealth(of: beacons)]
    }

    /// The roster of one store, or of every store.
    public func rosterFilter(ofStore store: UInt16?) -> String { topic("stores/\(store.map(String.init) ?? Self.anyLevel)/roster") }

    /// The customers of one store, or of every store.
    public func customersFilter(ofStore store: UInt16?) -> String {
        topic("stores/\(store.map(String.init) ?? Self.anyLevel)/customers/\(Self.anyLevel)")
    }

    /// The bridge status of one store, or of every store.
    public func bridgeStatusFilter(ofStore store: UInt16?) -> String {
        topic("stores/\(store.map(String.init) ?? Self.anyLevel)/bridge")
    }

    /// Splits a topic into its segments after the prefix; `nil` when outside the prefix.
    public func segments(of topic: String) -> [Substring]? {
        var rest = Substring(topic)
        if !prefix.isEmpty {
            guard rest.hasPrefix(prefix + "/") else { return nil }
            rest = rest.dropFirst(prefix.count + 1)
        }
        // Split on the byte `/`, as a broker splits levels: a split by `Character` (grapheme
        // clusters) cost 12,600 instructions a topic, read twice for every message the brain
        // takes in (its lanes, then its core).
        var levels: [Substring] = []
        let utf8 = rest.utf8
        var start = utf8.startIndex
        var index = start
        while index < utf8.endIndex {
            if utf8[index] == UInt8(ascii: "/") {
                levels.append(rest[start..<index])
                start = utf8.index(after: index)
            }
            index = utf8.index(after: index)
        }
        levels.append(rest[start..<utf8.endIndex])
        return levels
    }

    /// What a topic of the contract names: the one answer of `parse(_:)`.
    public enum Kind: Sendable, Equatable {
        /// A topic about one beacon, of either family: `beacons/<major>/<minor>[/…]` or
        /// `eddystone/<namespace>/<instance>[/…]`.
        case beacon(BeaconRef, BeaconTopic)
        case gatewayStatus(String)
        case gatewayHealth(String)
        case gatewayCommand(String)
        case gatewayEvents(String)
        case gatewayRSSI(String)
        /// `gateways/<gateway>/calibration`: what the brain's calibration learned about it.
        case gatewayCalibration(String)
        case observerStatus(String)
        case inbox(String)
        case roster(UInt16)
        /// `stores/<store>/customers/<client>`: one customer of a store's roster.
        case customer(store: UInt16, client: String)
        case bridgeStatus(UInt16)
        /// `brain/visits/…`, `brain/answered/…`, `brain/beacons/…`: the brain's own records.
        case brainRecord(BrainRecordTopic)
        /// `brain/shards/<shard>/status`: `online`, or `offline` as the shard's brain's will.
        case shardStatus(String)
        /// `brain/shards/<shard>/holder`: the shard answering for it while its brain is away.
        case shardHolder(String)
        /// `brain/shards/<shard>/sync`: a shard's brain's marker to itself.
        case shardSync(String)
        case fleetConfig
        case brainStatus
        /// `brain/events`: a brain's config reports and rejections.
        case brainEvents
        /// `brain/health/<client>`: one brain's counters.
        case brainHealth(String)
        /// `brain/sync/<client>`: a brain's marker to itself after subscribing.
        case brainSync(String)
    }

    /// What a beacon's topic is about.
    public enum BeaconTopic: Sendable, Equatable {
        /// A gateway's sighting.
        case sighting
        /// A gateway's retained view.
        case gatewayPresence(gateway: String)
        /// The brain's fleet presence.
        case fleetPresence
        /// An observer's join.
        case observer(client: String)
        /// The beacon's standing offer.
        case ad
        /// The brain's zone decisions.
        case zoneEvents
        /// A gateway's Eddystone-TLM telemetry of the beacon (retained).
        case telemetry
    }

    /// A topic of the brain's own records; `<beacon>` is `<major>/<minor>` or
    /// `eddystone/<namespace>/<instance>`.
    public enum BrainRecordTopic: Sendable, Equatable {
        /// `brain/visits/<beacon>`.
        case visit(BeaconRef)
        /// `brain/answered/<beacon>/<client>`.
        case answered(BeaconRef, client: String)
        /// `brain/beacons/<beacon>`: last seen and battery of a registry beacon.
        case health(BeaconRef)
    }

    /// Parses any topic of the contract; `nil` for anything else (another prefix, a number
    /// spelled two ways, a segment no client id can be). The UUID is not in the topic: a
    /// beacon is named by major and minor, or by namespace and instance (lower-case hex).
    public func parse(_ topic: String) -> Kind? {
        guard let s = segments(of: topic), let first = s.first else { return nil }
        switch first {
        case "beacons", "eddystone":
            guard s.count >= 3, let ref = first == "beacons" ? Self.ibeacon(s[1], s[2]) : Self.eddystone(s[1], s[2]).map(BeaconRef.init)
            else { return nil }
            return Self.about(s[3...], eddystone: ref.eddystone != nil).map { .beacon(ref, $0) }
        case "gateways":
            guard s.count == 3, let gateway = Self.name(s[1]) else { return nil }
            switch s[2] {
            case "rssi": return .gatewayRSSI(gateway)
            case "status": return .gatewayStatus(gateway)
            case "health": return .gatewayHealth(gateway)
            case "cmd": return .gatewayCommand(gateway)
            case "events": return .gatewayEvents(gateway)
            case "calibration": return .gatewayCalibration(gateway)
            default: return nil
            }
        case "observers":
            guard s.count == 3, let client = Self.name(s[1]) else { return nil }
            switch s[2] {
            case "status": return .observerStatus(client)
            case "inbox": return .inbox(client)
            default: return nil
            }
        case "stores":
            guard s.count >= 3, let store = Self.number(s[1]) else { return nil }
            switch (s.count, s[2]) {
            case (3, "roster"): return .roster(store)
            case (3, "bridge"): return .bridgeStatus(store)
            case (4, "customers"): return Self.name(s[3]).map { .customer(store: store, client: $0) }
            default: return nil
            }
        case "fleet": return s.count == 2 && s[1] == "config" ? .fleetConfig : nil
        case "brain":
            if s.count == 2 { return s[1] == "status" ? .brainStatus : s[1] == "events" ? .brainEvents : nil }
            if s.count == 3, let client = Self.name(s[2]) {
                switch s[1] {
                case "health": return .brainHealth(client)
                case "sync": return .brainSync(client)
                default: return nil
                }
            }
            if s.count == 4 && s[1] == "shards" {
                switch s[3] {
                case "status": return .shardStatus(String(s[2]))
                case "holder": return .shardHolder(String(s[2]))
                case "sync": return .shardSync(String(s[2]))
                default: return nil
                }
            }
            return Self.brainRecord(s).map { .brainRecord($0) }
        default: return nil
        }
    }

    /// The part of a beacon's topic after its name. Telemetry is Eddystone-TLM's: an iBeacon
    /// has none.
    private static func about(_ rest: ArraySlice<Substring>, eddystone: Bool) -> BeaconTopic? {
        switch rest.count {
        case 0: return .sighting
        case 1:
            switch rest[rest.startIndex] {
            case "presence": return .fleetPresence
            case "ad": return .ad
            case "events": return .zoneEvents
            case "telemetry" where eddystone: return .telemetry
            default: return nil
            }
        case 2:
            guard let last = name(rest[rest.startIndex + 1]) else { return nil }
            switch rest[rest.startIndex] {
            case "presence": return .gatewayPresence(gateway: last)
            case "observers": return .observer(client: last)
            default: return nil
            }
        default: return nil
        }
    }

    /// `brain/visits/<beacon>`, `brain/beacons/<beacon>` or `brain/answered/<beacon>/<client>`.
    private static func brainRecord(_ s: [Substring]) -> BrainRecordTopic? {
        guard s.count >= 4 else { return nil }
        let ref: BeaconRef
        let rest: ArraySlice<Substring>
        if s[2] == "eddystone" {
            guard s.count >= 5, let eddystone = eddystone(s[3], s[4]) else { return nil }
            ref = BeaconRef(eddystone)
            rest = s[5...]
        } else {
            guard let major = number(s[2]), let minor = number(s[3]) else { return nil }
            ref = BeaconRef(major: major, minor: minor)
            rest = s[4...]
        }
        switch (s[1], rest.count) {
        case ("visits", 0): return .visit(ref)
        case ("beacons", 0): return .health(ref)
        case ("answered", 1): return name(rest[rest.startIndex]).map { .answered(ref, client: $0) }
        default: return nil
        }
    }

    /// Major and minor as topics write them.
    static func ibeacon(_ major: Substring, _ minor: Substring) -> BeaconRef? {
        guard let major = number(major), let minor = number(minor) else { return nil }
        return BeaconRef(major: major, minor: minor)
    }

    /// Namespace and instance as topics write them: lower-case hex, 20 and 12 digits.
    static func eddystone(_ namespace: Substring, _ instance: Substring) -> EddystoneKey? {
        guard let ns = EddystoneNamespace(hex: String(namespace)), ns.description == namespace,
              let id = EddystoneInstance(hex: String(instance)), id.description == instance else { return nil }
        return EddystoneKey(namespace: ns, instance: id)
    }

    /// A major, minor or store number in a topic: digits only, no sign, no leading zero (so
    /// each number has one topic), at most 65535.
    static func number(_ text: Substring) -> UInt16? {
        let utf8 = text.utf8
        guard (1...5).contains(utf8.count), utf8.first != UInt8(ascii: "0") || utf8.count == 1 else { return nil }
        var value = 0
        for c in utf8 {
            guard c >= 0x30 && c <= 0x39 else { return nil }
            value = value * 10 + Int(c - 0x30)
        }
        return value <= Int(UInt16.max) ? UInt16(value) : nil
    }

    /// A gateway id or client id in a topic, when it is a usable segment.
    static func name(_ text: Substring) -> String? {
        // ASCII (every gateway and client id we make): one pass over the bytes, the same
        // answer as `problem(withSegment:)`, whose string searches cost 6,000 instructions.
        if text.utf8.allSatisfy({ $0 < 0x80 }) {
            guard let first = text.utf8.first, first != UInt8(ascii: "$") else { return nil }
            for byte in text.utf8 where byte < 0x20 || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "#")
                || byte == UInt8(ascii: "/") {
                return nil
            }
            return String(text)
        }
        return Topics.problem(withSegment: String(text)) == nil ? String(text) : nil
    }
}

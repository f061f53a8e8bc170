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
    ///
    /// Read on the topic's UTF-8 bytes, as a broker reads it: the prefix and the levels are
    /// compared byte for byte, and the levels are byte ranges on the stack, not an array of
    /// `Substring`s compared as Unicode text (5,100 instructions a topic, and the brain
    /// parses every topic it takes in: docs/PERFORMANCE.md §11). What it accepts is exactly
    /// what the builders above write (`TopicsTests.whatParsesIsWhatTheBuildersWrite`).
    public func parse(_ topic: String) -> Kind? {
        var topic = topic, prefix = prefix
        return topic.withUTF8 { bytes in
            prefix.withUTF8 { prefix in
                guard let rest = Self.after(prefix, in: bytes) else { return nil }
                return withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: Levels.capacity) { ranges in
                    Levels(rest, into: ranges).flatMap(Self.kind)
                }
            }
        }
    }

    /// The bytes after `prefix` and its `/`; all of them without a prefix; `nil` outside it.
    private static func after(_ prefix: UnsafeBufferPointer<UInt8>, in topic: UnsafeBufferPointer<UInt8>)
        -> UnsafeBufferPointer<UInt8>? {
        guard !prefix.isEmpty else { return topic }
        guard topic.count > prefix.count, topic[prefix.count] == UInt8(ascii: "/"),
              topic.prefix(prefix.count).elementsEqual(prefix) else { return nil }
        return UnsafeBufferPointer(rebasing: topic[(prefix.count + 1)...])
    }

    /// A topic's levels as byte ranges of its UTF-8, split on the byte `/`.
    private struct Levels {
        /// No topic of the contract has more than six levels (`brain/answered/eddystone/<namespace>/<instance>/<client>`).
        static let capacity = 6
        let bytes: UnsafeBufferPointer<UInt8>
        let ranges: UnsafeMutableBufferPointer<Range<Int>>
        let count: Int

        /// `nil` when the topic has more levels than any of the contract's.
        init?(_ bytes: UnsafeBufferPointer<UInt8>, into ranges: UnsafeMutableBufferPointer<Range<Int>>) {
            var count = 0, start = 0
            for index in bytes.indices where bytes[index] == UInt8(ascii: "/") {
                guard count < Self.capacity - 1 else { return nil }
                ranges.initializeElement(at: count, to: start..<index)
                count += 1
                start = index + 1
            }
            ranges.initializeElement(at: count, to: start..<bytes.count)
            self.bytes = bytes
            self.ranges = ranges
            self.count = count + 1
        }

        subscript(index: Int) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: bytes[ranges[index]]) }

        /// Whether level `index` is `word`, byte for byte.
        func level(_ index: Int, is word: StaticString) -> Bool {
            let level = self[index]
            guard level.count == word.utf8CodeUnitCount else { return false }
            for i in level.indices where level[i] != word.utf8Start[i] { return false }
            return true
        }

        /// Level `index` as text (for the rare levels read through the `Substring` helpers).
        func text(_ index: Int) -> Substring { Substring(String(decoding: self[index], as: UTF8.self)) }
    }

    private static func kind(_ s: Levels) -> Kind? {
        if s.level(0, is: "beacons") || s.level(0, is: "eddystone") {
            guard s.count >= 3 else { return nil }
            let ref: BeaconRef
            if s.level(0, is: "beacons") {
                guard let major = number(s[1]), let minor = number(s[2]) else { return nil }
                ref = BeaconRef(major: major, minor: minor)
            } else {
                guard let key = eddystone(s.text(1), s.text(2)) else { return nil }
                ref = BeaconRef(key)
            }
            return about(s, from: 3, eddystone: ref.eddystone != nil).map { .beacon(ref, $0) }
        }
        if s.level(0, is: "gateways") {
            guard s.count == 3, let gateway = name(s[1]) else { return nil }
            if s.level(2, is: "rssi") { return .gatewayRSSI(gateway) }
            if s.level(2, is: "status") { return .gatewayStatus(gateway) }
            if s.level(2, is: "health") { return .gatewayHealth(gateway) }
            if s.level(2, is: "cmd") { return .gatewayCommand(gateway) }
            if s.level(2, is: "events") { return .gatewayEvents(gateway) }
            if s.level(2, is: "calibration") { return .gatewayCalibration(gateway) }
            return nil
        }
        if s.level(0, is: "observers") {
            guard s.count == 3, let client = name(s[1]) else { return nil }
            if s.level(2, is: "status") { return .observerStatus(client) }
            if s.level(2, is: "inbox") { return .inbox(client) }
            return nil
        }
        if s.level(0, is: "stores") {
            guard s.count >= 3, let store = number(s[1]) else { return nil }
            if s.count == 3 && s.level(2, is: "roster") { return .roster(store) }
            if s.count == 3 && s.level(2, is: "bridge") { return .bridgeStatus(store) }
            if s.count == 4 && s.level(2, is: "customers") { return name(s[3]).map { .customer(store: store, client: $0) } }
            return nil
        }
        if s.level(0, is: "fleet") { return s.count == 2 && s.level(1, is: "config") ? .fleetConfig : nil }
        if s.level(0, is: "brain") {
            if s.count == 2 { return s.level(1, is: "status") ? .brainStatus : s.level(1, is: "events") ? .brainEvents : nil }
            if s.count == 3, let client = name(s[2]) {
                if s.level(1, is: "health") { return .brainHealth(client) }
                if s.level(1, is: "sync") { return .brainSync(client) }
                return nil
            }
            if s.count == 4 && s.level(1, is: "shards") {
                let shard = String(s.text(2))
                if s.level(3, is: "status") { return .shardStatus(shard) }
                if s.level(3, is: "holder") { return .shardHolder(shard) }
                if s.level(3, is: "sync") { return .shardSync(shard) }
                return nil
            }
            return brainRecord(s).map { .brainRecord($0) }
        }
        return nil
    }

    /// The part of a beacon's topic after its name, from level `first`. Telemetry is
    /// Eddystone-TLM's: an iBeacon has none.
    private static func about(_ s: Levels, from first: Int, eddystone: Bool) -> BeaconTopic? {
        switch s.count - first {
        case 0: return .sighting
        case 1:
            if s.level(first, is: "presence") { return .fleetPresence }
            if s.level(first, is: "ad") { return .ad }
            if s.level(first, is: "events") { return .zoneEvents }
            if eddystone && s.level(first, is: "telemetry") { return .telemetry }
            return nil
        case 2:
            guard let last = name(s[first + 1]) else { return nil }
            if s.level(first, is: "presence") { return .gatewayPresence(gateway: last) }
            if s.level(first, is: "observers") { return .observer(client: last) }
            return nil
        default: return nil
        }
    }

    /// `brain/visits/<beacon>`, `brain/beacons/<beacon>` or `brain/answered/<beacon>/<client>`.
    private static func brainRecord(_ s: Levels) -> BrainRecordTopic? {
        guard s.count >= 4 else { return nil }
        let ref: BeaconRef
        let rest: Int
        if s.level(2, is: "eddystone") {
            guard s.count >= 5, let eddystone = eddystone(s.text(3), s.text(4)) else { return nil }
            ref = BeaconRef(eddystone)
            rest = 5
        } else {
            guard let major = number(s[2]), let minor = number(s[3]) else { return nil }
            ref = BeaconRef(major: major, minor: minor)
            rest = 4
        }
        switch s.count - rest {
        case 0 where s.level(1, is: "visits"): return .visit(ref)
        case 0 where s.level(1, is: "beacons"): return .health(ref)
        case 1 where s.level(1, is: "answered"): return name(s[rest]).map { .answered(ref, client: $0) }
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
        var text = text
        return text.withUTF8 { number($0) }
    }

    private static func number(_ utf8: UnsafeBufferPointer<UInt8>) -> UInt16? {
        guard (1...5).contains(utf8.count), utf8.first != UInt8(ascii: "0") || utf8.count == 1 else { return nil }
        var value = 0
        for c in utf8 {
            guard c >= 0x30 && c <= 0x39 else { return nil }
            value = value * 10 + Int(c - 0x30)
        }
        return value <= Int(UInt16.max) ? UInt16(value) : nil
    }

    /// A gateway id or client id in a topic, when it is a usable segment.
    private static func name(_ text: UnsafeBufferPointer<UInt8>) -> String? {
        // ASCII (every gateway and client id we make): one pass over the bytes, the same
        // answer as `problem(withSegment:)`, whose string searches cost 6,000 instructions.
        if text.allSatisfy({ $0 < 0x80 }) {
            guard let first = text.first, first != UInt8(ascii: "$") else { return nil }
            for byte in text where byte < 0x20 || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "#")
                || byte == UInt8(ascii: "/") {
                return nil
            }
            return String(decoding: text, as: UTF8.self)
        }
        let text = String(decoding: text, as: UTF8.self)
        return Topics.problem(withSegment: text) == nil ? text : nil
    }
}

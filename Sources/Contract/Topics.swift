public import BeaconKit

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

    /// `beacons/<major>/<minor>` or `eddystone/<namespace>/<instance>`.
    public func beacon(_ id: BeaconID) -> String {
        switch id {
        case .ibeacon(_, let major, let minor):
            // Every sighting names its topic: written directly rather than interpolated.
            var writer = JSONWriter(capacity: prefix.utf8.count + 20)
            if !prefix.isEmpty {
                var copy = prefix
                copy.withUTF8 { writer.append(UnsafeRawBufferPointer($0)) }
                writer.append("/")
            }
            writer.append("beacons/")
            writer.appendDecimal(UInt64(major))
            writer.append("/")
            writer.appendDecimal(UInt64(minor))
            return writer.text
        case .eddystone(let namespace, let instance): return topic("eddystone/\(namespace)/\(instance)")
        }
    }

    /// Sightings of a beacon: the beacon's own topic.
    public func sightings(of id: BeaconID) -> String { beacon(id) }

    /// One gateway's retained view of a beacon.
    public func presence(of id: BeaconID, seenBy gateway: String) -> String {
        beacon(id) + "/presence/" + gateway
    }

    /// The brain's fleet-wide retained presence.
    public func presence(of id: BeaconID) -> String { beacon(id) + "/presence" }

    public func ad(of id: BeaconID) -> String { beacon(id) + "/ad" }

    /// A beacon's last telemetry (Eddystone-TLM: battery, temperature, counts), retained,
    /// from the gateway that heard it last.
    public func telemetry(of id: BeaconID) -> String { beacon(id) + "/telemetry" }


    public func observer(_ client: String, of id: BeaconID) -> String { beacon(id) + "/observers/" + client }

    public func status(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/status") }
    public func health(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/health") }
    public func commands(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/cmd") }
    public func events(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/events") }
    /// A gateway's RSSI reports for the brain's zone fusion.
    public func rssiReports(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/rssi") }
    /// What the brain's calibration learned about a gateway (retained; written by the brain).
    public func calibration(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/calibration") }
    /// Every gateway's calibration record.
    public var calibrationFilter: String { topic("gateways/+/calibration") }

    /// The gateway whose calibration record `topic` is; `nil` for any other topic.
    public func parseCalibration(_ topic: String) -> String? {
        guard let s = segments(of: topic), s.count == 3, s[0] == "gateways", s[2] == "calibration" else { return nil }
        return Self.name(s[1])
    }
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
        [topic("beacons/+/+/presence/\(gateway)"), topic("eddystone/+/+/presence/\(gateway)")]
    }

    // MARK: The brain's topics

    /// `beacons/<major>/<minor>`, or `eddystone/<namespace>/<instance>` for an Eddystone beacon.
    public func beacon(_ ref: BeaconRef) -> String {
        if let eddystone = ref.eddystone { return topic("eddystone/\(eddystone.namespace)/\(eddystone.instance)") }
        return topic("beacons/\(ref.major)/\(ref.minor)")
    }
    public func presence(of ref: BeaconRef) -> String { beacon(ref) + "/presence" }
    public func presence(of ref: BeaconRef, seenBy gateway: String) -> String { beacon(ref) + "/presence/" + gateway }
    public func ad(of ref: BeaconRef) -> String { beacon(ref) + "/ad" }
    /// The brain's zone decisions about a beacon (enter, zone, exit), with capture times.
    public func zoneEvents(of ref: BeaconRef) -> String { beacon(ref) + "/events" }
    public func observer(_ client: String, of ref: BeaconRef) -> String { beacon(ref) + "/observers/" + client }

    /// One customer of a store's roster (retained; see `Roster.Customer`).
    public func customer(_ client: String, ofStore store: UInt16) -> String { topic("stores/\(store)/customers/\(client)") }

    /// The part of the brain's record topics naming a beacon: `<major>/<minor>` or
    /// `eddystone/<namespace>/<instance>`.
    private func recordKey(_ ref: BeaconRef) -> String {
        ref.eddystone.map { "eddystone/\($0.namespace)/\($0.instance)" } ?? "\(ref.major)/\(ref.minor)"
    }

    /// The brain's record of a visit (see `VisitRecord`): `brain/visits/<major>/<minor>` or
    /// `brain/visits/eddystone/<namespace>/<instance>`.
    public func visitRecord(of ref: BeaconRef) -> String { topic("brain/visits/" + recordKey(ref)) }

    /// The brain's health record of a registry beacon (retained, unsealed: the fleet page
    /// reads it): `brain/beacons/<major>/<minor>` or `brain/beacons/eddystone/<namespace>/<instance>`.
    public func beaconHealth(of ref: BeaconRef) -> String { topic("brain/beacons/" + recordKey(ref)) }
    /// The brain's record of an answered join (see `AnsweredRecord`).
    public func answeredRecord(of ref: BeaconRef, client: String) -> String {
        topic("brain/answered/" + recordKey(ref) + "/" + client)
    }
    /// Config reports of the brain, like `gateways/<id>/events` for a gateway.
    public var brainEvents: String { topic("brain/events") }
    /// One brain's counters, retained, refreshed periodically; per client id, since several
    /// brains may share a broker.
    public func brainHealth(_ client: String) -> String { topic("brain/health/\(client)") }
    /// Where a brain sends itself a marker after subscribing: when it comes back, the
    /// broker has delivered every retained message of the subscriptions made before.
    public func brainSync(_ client: String) -> String { topic("brain/sync/\(client)") }

    // MARK: Subscription filters

    public var gatewayStatusFilter: String { topic("gateways/+/status") }
    public var observerStatusFilter: String { topic("observers/+/status") }
    /// Every gateway's RSSI reports (`rssiReports(ofGateway:)`).
    public var gatewayRSSIFilter: String { topic("gateways/+/rssi") }

    /// What others publish about the beacons of one store (`nil`: of every store) that
    /// the brain reads: the gateways' presence, joins. (Not sightings: the brain hears the
    /// gateways through their RSSI reports, whose topic names the gateway.)
    public func beaconFilters(ofStore major: UInt16?) -> [String] {
        let m = major.map(String.init) ?? "+"
        return ["beacons/\(m)/+/presence/+", "beacons/\(m)/+/observers/+"].map(topic)
    }

    /// The brain's own retained topics about the beacons of one store (`nil`: of every
    /// store): fleet presence, ads, its records of visits and answered joins.
    public func brainRecordFilters(ofStore major: UInt16?) -> [String] {
        let m = major.map(String.init) ?? "+"
        return ["beacons/\(m)/+/presence", "beacons/\(m)/+/ad", "brain/visits/\(m)/+", "brain/answered/\(m)/+/+",
                "brain/beacons/\(m)/+"].map(topic)
    }

    /// What others publish about one Eddystone beacon (`nil`: about every one) that the
    /// brain reads: the gateways' presence, joins.
    public func eddystoneFilters(of ref: BeaconRef?) -> [String] {
        let b = ref?.eddystone.map { "\($0.namespace)/\($0.instance)" } ?? "+/+"
        return ["eddystone/\(b)/presence/+", "eddystone/\(b)/observers/+", "eddystone/\(b)/telemetry"].map(topic)
    }

    /// The brain's own retained topics about one Eddystone beacon (`nil`: about every one).
    public func eddystoneRecordFilters(of ref: BeaconRef?) -> [String] {
        let b = ref?.eddystone.map { "\($0.namespace)/\($0.instance)" } ?? "+/+"
        return ["eddystone/\(b)/presence", "eddystone/\(b)/ad", "brain/visits/eddystone/\(b)", "brain/answered/eddystone/\(b)/+",
                "brain/beacons/eddystone/\(b)"]
            .map(topic)
    }

    /// The roster of one store, or of every store.
    public func rosterFilter(ofStore store: UInt16?) -> String { store.map(roster(ofStore:)) ?? topic("stores/+/roster") }

    /// The customers of one store, or of every store.
    public func customersFilter(ofStore store: UInt16?) -> String {
        topic("stores/\(store.map(String.init) ?? "+")/customers/+")
    }

    /// The bridge status of one store, or of every store.
    public func bridgeStatusFilter(ofStore store: UInt16?) -> String {
        store.map(bridgeStatus(ofStore:)) ?? topic("stores/+/bridge")
    }

    /// Splits a topic into its segments after the prefix; `nil` when outside the prefix.
    public func segments(of topic: String) -> [Substring]? {
        var rest = Substring(topic)
        if !prefix.isEmpty {
            guard rest.hasPrefix(prefix + "/") else { return nil }
            rest = rest.dropFirst(prefix.count + 1)
        }
        return rest.split(separator: "/", omittingEmptySubsequences: false)
    }

    /// What a beacon topic names, for subscribers. The UUID is not in the topic: an
    /// iBeacon id parsed here carries a zero UUID and is matched by major and minor.
    public enum Parsed: Sendable, Equatable {
        case sighting(major: UInt16, minor: UInt16)
        case gatewayPresence(major: UInt16, minor: UInt16, gateway: String)
        case fleetPresence(major: UInt16, minor: UInt16)
        case observer(major: UInt16, minor: UInt16, client: String)
        case ad(major: UInt16, minor: UInt16)
        case zoneEvents(major: UInt16, minor: UInt16)
        case gatewayStatus(String)
        case gatewayHealth(String)
        case gatewayCommand(String)
        case gatewayEvents(String)
        case gatewayRSSI(String)
        case observerStatus(String)
        case inbox(String)
        case roster(UInt16)
        case bridgeStatus(UInt16)
        case fleetConfig
        case brainStatus
    }

    /// Parses any topic of the contract; `nil` for anything else.
    public func parse(_ topic: String) -> Parsed? {
        guard let s = segments(of: topic) else { return nil }
        switch (s.count, s.first) {
        case (3, "beacons"):
            guard let major = Self.number(s[1]), let minor = Self.number(s[2]) else { return nil }
            return .sighting(major: major, minor: minor)
        case (4, "beacons"):
            guard let major = Self.number(s[1]), let minor = Self.number(s[2]) else { return nil }
            switch s[3] {
            case "presence": return .fleetPresence(major: major, minor: minor)
            case "ad": return .ad(major: major, minor: minor)
            case "events": return .zoneEvents(major: major, minor: minor)
            default: return nil
            }
        case (5, "beacons"):
            guard let major = Self.number(s[1]), let minor = Self.number(s[2]), let last = Self.name(s[4]) else { return nil }
            switch s[3] {
            case "presence": return .gatewayPresence(major: major, minor: minor, gateway: last)
            case "observers": return .observer(major: major, minor: minor, client: last)
            default: return nil
            }
        case (3, "gateways"):
            guard let gateway = Self.name(s[1]) else { return nil }
            switch s[2] {
            case "status": return .gatewayStatus(gateway)
            case "health": return .gatewayHealth(gateway)
            case "cmd": return .gatewayCommand(gateway)
            case "events": return .gatewayEvents(gateway)
            case "rssi": return .gatewayRSSI(gateway)
            default: return nil
            }
        case (3, "observers"):
            guard let client = Self.name(s[1]) else { return nil }
            switch s[2] {
            case "status": return .observerStatus(client)
            case "inbox": return .inbox(client)
            default: return nil
            }
        case (3, "stores"):
            guard let major = Self.number(s[1]) else { return nil }
            switch s[2] {
            case "roster": return .roster(major)
            case "bridge": return .bridgeStatus(major)
            default: return nil
            }
        case (2, "fleet") where s[1] == "config": return .fleetConfig
        case (2, "brain") where s[1] == "status": return .brainStatus
        default: return nil
        }
    }

    /// A topic of the brain's own records.
    public enum BrainRecordTopic: Sendable, Equatable {
        case visit(BeaconRef)
        case answered(BeaconRef, client: String)
        /// `brain/beacons/<beacon>`: last seen and battery of a registry beacon.
        case health(BeaconRef)
    }

    /// `brain/visits/<beacon>` or `brain/answered/<beacon>/<client>`, parsed; `<beacon>` is
    /// `<major>/<minor>` or `eddystone/<namespace>/<instance>`.
    public func parseBrainRecord(_ topic: String) -> BrainRecordTopic? {
        guard let s = segments(of: topic), s.count >= 4, s[0] == "brain" else { return nil }
        let ref: BeaconRef
        let rest: ArraySlice<Substring>
        if s[2] == "eddystone" {
            guard s.count >= 5, let eddystone = Self.eddystone(s[3], s[4]) else { return nil }
            ref = BeaconRef(eddystone)
            rest = s[5...]
        } else {
            guard let major = Self.number(s[2]), let minor = Self.number(s[3]) else { return nil }
            ref = BeaconRef(major: major, minor: minor)
            rest = s[4...]
        }
        switch (s[1], rest.count) {
        case ("visits", 0): return .visit(ref)
        case ("beacons", 0): return .health(ref)
        case ("answered", 1): return Self.name(rest[rest.startIndex]).map { .answered(ref, client: $0) }
        default: return nil
        }
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
        /// A gateway's Eddystone-TLM telemetry of the beacon (retained).
        case telemetry
    }

    /// Parses a topic about one beacon, of either family: `beacons/<major>/<minor>[/…]` or
    /// `eddystone/<namespace>/<instance>[/…]` (lower-case hex, one topic per beacon).
    public func parseBeacon(_ topic: String) -> (beacon: BeaconRef, about: BeaconTopic)? {
        switch parse(topic) {
        case .sighting(let major, let minor)?: return (BeaconRef(major: major, minor: minor), .sighting)
        case .gatewayPresence(let major, let minor, let gateway)?:
            return (BeaconRef(major: major, minor: minor), .gatewayPresence(gateway: gateway))
        case .fleetPresence(let major, let minor)?: return (BeaconRef(major: major, minor: minor), .fleetPresence)
        case .observer(let major, let minor, let client)?: return (BeaconRef(major: major, minor: minor), .observer(client: client))
        case .ad(let major, let minor)?: return (BeaconRef(major: major, minor: minor), .ad)
        case _?: return nil
        case nil: break
        }
        guard let s = segments(of: topic), (3...5).contains(s.count), s[0] == "eddystone",
              let eddystone = Self.eddystone(s[1], s[2]) else { return nil }
        let ref = BeaconRef(eddystone)
        switch (s.count, s.count > 3 ? s[3] : "") {
        case (3, _): return (ref, .sighting)
        case (4, "presence"): return (ref, .fleetPresence)
        case (4, "ad"): return (ref, .ad)
        case (4, "telemetry"): return (ref, .telemetry)
        case (5, "presence"): return Self.name(s[4]).map { (ref, .gatewayPresence(gateway: $0)) }
        case (5, "observers"): return Self.name(s[4]).map { (ref, .observer(client: $0)) }
        default: return nil
        }
    }

    /// Namespace and instance as topics write them: lower-case hex, 20 and 12 digits.
    static func eddystone(_ namespace: Substring, _ instance: Substring) -> EddystoneKey? {
        guard let ns = EddystoneNamespace(hex: String(namespace)), ns.description == namespace,
              let id = EddystoneInstance(hex: String(instance)), id.description == instance else { return nil }
        return EddystoneKey(namespace: ns, instance: id)
    }

    /// `stores/<store>/customers/<client>`, parsed; `nil` for any other topic.
    public func parseCustomer(_ topic: String) -> (store: UInt16, client: String)? {
        guard let s = segments(of: topic), s.count == 4, s[0] == "stores", s[2] == "customers",
              let store = Self.number(s[1]), let client = Self.name(s[3]) else { return nil }
        return (store, client)
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
        Topics.problem(withSegment: String(text)) == nil ? String(text) : nil
    }
}

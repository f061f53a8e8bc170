/// Every MQTT topic of the contract (SPEC §5), under an optional prefix.
///
/// One place builds and parses topic names so that gateway, brain, observer and tests
/// cannot drift apart.
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

    package func topic(_ tail: String) -> String { prefix.isEmpty ? tail : prefix + "/" + tail }

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

    public func observer(_ client: String, of id: BeaconID) -> String { beacon(id) + "/observers/" + client }

    public func status(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/status") }
    public func health(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/health") }
    public func commands(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/cmd") }
    public func events(ofGateway gateway: String) -> String { topic("gateways/\(gateway)/events") }
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
        case gatewayStatus(String)
        case gatewayHealth(String)
        case gatewayCommand(String)
        case gatewayEvents(String)
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
        func u16(_ text: Substring) -> UInt16? {
            // Digits only, no sign, no leading zero (so each number has one topic), ≤ 65535.
            let utf8 = text.utf8
            guard (1...5).contains(utf8.count), utf8.first != UInt8(ascii: "0") || utf8.count == 1 else { return nil }
            var value = 0
            for c in utf8 {
                guard c >= 0x30 && c <= 0x39 else { return nil }
                value = value * 10 + Int(c - 0x30)
            }
            return value <= Int(UInt16.max) ? UInt16(value) : nil
        }
        func name(_ text: Substring) -> String? {
            Topics.problem(withSegment: String(text)) == nil ? String(text) : nil
        }
        switch (s.count, s.first) {
        case (3, "beacons"):
            guard let major = u16(s[1]), let minor = u16(s[2]) else { return nil }
            return .sighting(major: major, minor: minor)
        case (4, "beacons"):
            guard let major = u16(s[1]), let minor = u16(s[2]) else { return nil }
            switch s[3] {
            case "presence": return .fleetPresence(major: major, minor: minor)
            case "ad": return .ad(major: major, minor: minor)
            default: return nil
            }
        case (5, "beacons"):
            guard let major = u16(s[1]), let minor = u16(s[2]), let last = name(s[4]) else { return nil }
            switch s[3] {
            case "presence": return .gatewayPresence(major: major, minor: minor, gateway: last)
            case "observers": return .observer(major: major, minor: minor, client: last)
            default: return nil
            }
        case (3, "gateways"):
            guard let gateway = name(s[1]) else { return nil }
            switch s[2] {
            case "status": return .gatewayStatus(gateway)
            case "health": return .gatewayHealth(gateway)
            case "cmd": return .gatewayCommand(gateway)
            case "events": return .gatewayEvents(gateway)
            default: return nil
            }
        case (3, "observers"):
            guard let client = name(s[1]) else { return nil }
            switch s[2] {
            case "status": return .observerStatus(client)
            case "inbox": return .inbox(client)
            default: return nil
            }
        case (3, "stores"):
            guard let major = u16(s[1]) else { return nil }
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
}

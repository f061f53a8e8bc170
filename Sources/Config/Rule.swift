public import BeaconKit

/// The brain's rules in the fleet config (README "Rules"): when, what, how often; and the
/// templates their messages are written in. The rest of the config is in FleetConfig.swift.

public struct Rule: Sendable, Equatable {
    public enum Trigger: Sendable, Equatable {
        case enter, exit, join, leave
        /// Proximity reaching this class (from any other).
        case proximity(Proximity)
        /// Every update of the beacon (a sighting from its zone gateway: proximity, RSSI,
        /// distance), whether or not anything changed; the navigation library's per-beacon
        /// callback. Rate-limited only by a `cooldown` in seconds: see `Rule.updateInterval`.
        case update

        public init?(_ text: String) {
            switch text {
            case "update": self = .update
            case "enter": self = .enter
            case "exit": self = .exit
            case "join": self = .join
            case "leave": self = .leave
            case "proximity:immediate": self = .proximity(.immediate)
            case "proximity:near": self = .proximity(.near)
            case "proximity:far": self = .proximity(.far)
            default: return nil
            }
        }

        public static let names = ["enter", "exit", "join", "leave",
                                   "proximity:immediate", "proximity:near", "proximity:far", "update"]
    }

    public enum Action: Sendable, Equatable {
        /// The beacon's ad to the observer's inbox.
        case ad
        /// A templated text to the observer's inbox.
        case greeting(template: String)
        /// The beacon's location from the registry to the observer's inbox.
        case locationFix
        /// A templated message to a templated topic.
        case publish(topic: String, template: String, retain: Bool, qos: Int)

        /// Whether the action sends a templated text (the rule's `fallback` applies to it).
        public var usesTemplate: Bool {
            switch self {
            case .greeting, .publish: true
            case .ad, .locationFix: false
            }
        }
    }

    public enum Cooldown: Sendable, Equatable {
        case seconds(Double)
        /// Re-armed only after this many updates at exactly `proximity` (the navigation
        /// library's reset rule: "after 5 updates at near"); updates at other classes neither
        /// count nor reset the count.
        case updates(count: Int, at: Proximity)
    }

    /// A beacon named by major/minor and, optionally, UUID; or an Eddystone-UID beacon by
    /// namespace and instance (then `eddystone` is set and major/minor are 0).
    public struct BeaconKey: Sendable, Equatable {
        public var uuid: BeaconUUID?
        public var major: UInt16
        public var minor: UInt16
        /// An Eddystone-UID beacon (`BeaconID.eddystone`).
        public var eddystone: BeaconID?

        public init(uuid: BeaconUUID? = nil, major: UInt16, minor: UInt16) {
            self.uuid = uuid
            self.major = major
            self.minor = minor
        }

        public init(namespace: EddystoneNamespace, instance: EddystoneInstance) {
            self.init(major: 0, minor: 0)
            eddystone = .eddystone(namespace: namespace, instance: instance)
        }
    }

    public var name: String
    public var trigger: Trigger
    /// Empty lists mean "any".
    public var beacons: [BeaconKey]
    public var stores: [UInt16]
    public var names: [String]
    /// Only while the beacon's zone is held by one of these gateways (by id): "the deal at
    /// the counter" rather than wherever the customer first comes close.
    public var zones: [String]
    /// Only when the smoothed RSSI is above this, dBm.
    public var rssiAbove: Double?
    public var actions: [Action]
    /// At most once per visit (a beacon's presence, or an observer's join).
    public var once: Bool
    public var cooldown: Cooldown?
    /// The text a greeting or a publish of this rule sends instead when its template uses a
    /// variable without a value (a customer without a name, a beacon without a location), so
    /// nobody reads "Hello ! A  is on its way.". Without one such a greeting is skipped.
    public var fallback: String?

    public init(name: String, trigger: Trigger, beacons: [BeaconKey] = [], stores: [UInt16] = [], names: [String] = [],
                zones: [String] = [], rssiAbove: Double? = nil, actions: [Action], once: Bool = false,
                cooldown: Cooldown? = nil, fallback: String? = nil) {
        self.fallback = fallback
        self.name = name
        self.trigger = trigger
        self.beacons = beacons
        self.stores = stores
        self.names = names
        self.zones = zones
        self.rssiAbove = rssiAbove
        self.actions = actions
        self.once = once
        self.cooldown = cooldown
    }

    /// An `update` rule with a `cooldown` in seconds fires at most once per that many
    /// seconds per beacon; `nil` for other rules: an `update` rule without one fires on every
    /// update, as the navigation library's callback did.
    public var updateInterval: Double? {
        guard trigger == .update, case .seconds(let seconds)? = cooldown else { return nil }
        return seconds
    }

    /// Whether this rule concerns a beacon with this identity and registry entry, whose zone
    /// is held by the gateway `zone` (`nil`: the beacon is present nowhere).
    public func matches(major: UInt16, minor: UInt16, uuid: BeaconUUID?, entry: BeaconEntry?, zone: String? = nil) -> Bool {
        if !beacons.isEmpty, !beacons.contains(where: { key in
            key.eddystone == nil && key.major == major && key.minor == minor
                && (key.uuid == nil || uuid == nil || key.uuid == uuid)
        }) { return false }
        if !stores.isEmpty, !stores.contains(entry?.store ?? major) { return false }
        if !names.isEmpty, !names.contains(where: { $0 == entry?.name }) { return false }
        if !zones.isEmpty, !zones.contains(where: { $0 == zone }) { return false }
        return true
    }

    /// Whether this rule concerns the Eddystone-UID beacon `id`, with this registry entry (an
    /// Eddystone beacon is in a store only by its entry's `store`).
    public func matches(eddystone id: BeaconID, entry: BeaconEntry?, zone: String? = nil) -> Bool {
        if !beacons.isEmpty, !beacons.contains(where: { $0.eddystone == id }) { return false }
        if !stores.isEmpty, !(entry?.storeMajor.map(stores.contains) ?? false) { return false }
        if !names.isEmpty, !names.contains(where: { $0 == entry?.name }) { return false }
        if !zones.isEmpty, !zones.contains(where: { $0 == zone }) { return false }
        return true
    }
}

/// The variables a template may use, as `{name}`.
public enum Template {
    public static let variables: Set<String> = [
        "major", "minor", "uuid", "name", "store", "zone", "gateway", "proximity", "distance", "rssi",
        "client", "customer", "favorite", "lat", "lon", "heading", "floor", "rule", "ts", "namespace", "instance",
    ]

    /// The first unknown or unterminated variable, or `nil` when the template is fine.
    public static func problem(in template: String) -> String? {
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            guard let close = rest[open...].firstIndex(of: "}") else { return "has an unclosed '{'" }
            let name = String(rest[rest.index(after: open)..<close])
            guard variables.contains(name) else {
                return "uses {\(name)}; known: " + variables.sorted().map { "{\($0)}" }.joined(separator: " ")
            }
            rest = rest[rest.index(after: close)...]
        }
        return nil
    }

    /// The variables a template uses, in order.
    public static func names(in template: String) -> [String] {
        var names: [String] = []
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            names.append(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return names
    }

    /// Whether every variable the template uses has a non-empty value.
    public static func isComplete(_ template: String, _ values: [String: String]) -> Bool {
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            guard let value = values[String(rest[rest.index(after: open)..<close])], !value.isEmpty else { return false }
            rest = rest[rest.index(after: close)...]
        }
        return true
    }

    /// Replaces `{variable}` by its value; unknown or missing ones become empty.
    public static func render(_ template: String, _ values: [String: String]) -> String {
        var out = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            out += rest[..<open]
            out += values[String(rest[rest.index(after: open)..<close])] ?? ""
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }
}

/// Decides which of the fleet config's rules fire, and remembers enough to honour `once`
/// and `cooldown`.
///
/// A rule's memory lives in a scope: a beacon (for `enter`, `exit` and `proximity`
/// rules: "once per visit" means once per fleet visit of that beacon) or one observer's
/// join of a beacon (for `join` and `leave` rules: once per join). Time is passed in.
///
/// - `once`: not again while the scope's current visit or join lasts (the rule's last firing
///   is at or after the scope's `since`).
/// - `cooldown` seconds: not again within that many seconds of the last firing, also across
///   visits (a customer who walks out and back in does not get the deal twice).
/// - `cooldown` "after N updates at near": after firing, the rule is disarmed until the
///   beacon has been reported at `near` or farther on N consecutive updates (sightings from
///   the zone gateway); one update closer starts the count again, an update at `unknown`
///   does neither; the beacon leaving the fleet re-arms it (the navigation plugin's reset
///   rule).
public struct RuleEngine: Sendable {
    public struct Scope: Hashable, Comparable, Sendable {
        public var beacon: BeaconRef
        /// The observer for join and leave rules; `nil` for beacon events.
        public var client: String?

        public init(beacon: BeaconRef, client: String? = nil) {
            self.beacon = beacon
            self.client = client
        }

        public static func < (lhs: Scope, rhs: Scope) -> Bool {
            (lhs.beacon, lhs.client ?? "") < (rhs.beacon, rhs.client ?? "")
        }
    }

    /// What a rule is checked against.
    public struct Context: Sendable {
        public var trigger: Rule.Trigger
        public var beacon: BeaconRef
        public var uuid: BeaconUUID?
        public var entry: BeaconEntry?
        /// The zone gateway's smoothed RSSI, dBm, for `rssiAbove`.
        public var rssi: Double?
        /// The gateway holding the beacon's zone, for `zones`; `nil` when it is present nowhere.
        public var zone: String?
        /// When the scope's visit or join began.
        public var since: Instant

        public init(trigger: Rule.Trigger, beacon: BeaconRef, uuid: BeaconUUID? = nil, entry: BeaconEntry? = nil,
                    rssi: Double? = nil, zone: String? = nil, since: Instant) {
            self.trigger = trigger
            self.beacon = beacon
            self.uuid = uuid
            self.entry = entry
            self.rssi = rssi
            self.zone = zone
            self.since = since
        }
    }

    public var rules: [Rule]
    private var memory: [BeaconRef: [Scope: RuleMemory]] = [:]

    public init(rules: [Rule] = []) { self.rules = rules }

    public func memory(for scope: Scope) -> RuleMemory? { memory[scope.beacon]?[scope] }

    /// Puts back what a previous run recorded.
    public mutating func restore(_ recorded: RuleMemory, for scope: Scope) {
        set(recorded.isEmpty ? nil : recorded, for: scope)
    }

    /// The rules that fire for `context`, in config order; their firing is remembered.
    public mutating func fire(_ context: Context, scope: Scope, at now: Instant) -> [Rule] {
        var state = memory(for: scope) ?? RuleMemory()
        var fired: [Rule] = []
        for rule in rules where rule.trigger == context.trigger {
            guard rule.matches(major: context.beacon.major, minor: context.beacon.minor, uuid: context.uuid,
                               entry: context.entry, zone: context.zone) else { continue }
            if let threshold = rule.rssiAbove {
                guard let rssi = context.rssi, rssi > threshold else { continue }
            }
            let last = state.fired[rule.name]
            if rule.once, let last, last >= context.since { continue }
            switch rule.cooldown {
            case .seconds(let seconds)?:
                if let last, now.seconds(since: last) < seconds { continue }
            case .updates?:
                if state.disarmed[rule.name] != nil { continue }
            case nil:
                break
            }
            if rule.once || rule.cooldown?.isSeconds == true { state.fired[rule.name] = now }
            if case .updates? = rule.cooldown { state.disarmed[rule.name] = 0 }
            fired.append(rule)
        }
        set(state.isEmpty ? nil : state, for: scope)
        return fired
    }

    /// One update of `beacon` at `proximity`: counts toward re-arming "after N updates"
    /// cooldowns. Returns the scopes in which a rule was re-armed.
    public mutating func update(_ beacon: BeaconRef, proximity: Proximity) -> [Scope] {
        guard let scopes = memory[beacon] else { return [] }
        var rearmed: [Scope] = []
        for (scope, var state) in scopes where !state.disarmed.isEmpty {
            var changed = false
            for (name, count) in state.disarmed {
                guard case .updates(let needed, let at)? = rule(named: name)?.cooldown else {
                    state.disarmed[name] = nil
                    changed = true
                    continue
                }
                if proximity == .unknown {
                    // No distance at all (a stale view, no RSSI): neither counts nor resets.
                    continue
                }
                if proximity >= at {
                    if count + 1 >= needed {
                        state.disarmed[name] = nil
                        changed = true
                    } else {
                        state.disarmed[name] = count + 1
                    }
                } else {
                    state.disarmed[name] = 0
                }
            }
            set(state.isEmpty ? nil : state, for: scope)
            if changed { rearmed.append(scope) }
        }
        return rearmed.sorted()
    }

    /// The scope's visit or join ended: everything but running cooldowns in seconds is
    /// forgotten. Returns whether anything is still remembered (then call again later, until
    /// it returns false, to let those cooldowns expire).
    @discardableResult
    public mutating func retire(_ scope: Scope, at now: Instant) -> Bool {
        guard var state = memory(for: scope) else { return false }
        state.disarmed = [:]
        state.fired = state.fired.filter { name, last in
            guard case .seconds(let seconds)? = rule(named: name)?.cooldown else { return false }
            return now.seconds(since: last) < seconds
        }
        set(state.isEmpty ? nil : state, for: scope)
        return !state.isEmpty
    }

    /// Forgets a scope entirely (its beacon is no longer this brain's to handle).
    public mutating func forget(_ scope: Scope) { set(nil, for: scope) }

    private func rule(named name: String) -> Rule? { rules.first { $0.name == name } }

    private mutating func set(_ state: RuleMemory?, for scope: Scope) {
        memory[scope.beacon, default: [:]][scope] = state
        if memory[scope.beacon]?.isEmpty == true { memory[scope.beacon] = nil }
    }
}

extension Rule.Cooldown {
    var isSeconds: Bool {
        if case .seconds = self { return true }
        return false
    }
}

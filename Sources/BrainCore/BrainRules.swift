public import BeaconKit
public import Contract
import Tracking
public import Config

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
///   beacon has been reported at exactly `near` on N updates (sightings from the zone
///   gateway), counted as the navigation library counted them: an update at any other class
///   neither counts nor resets the count; the beacon leaving the fleet re-arms it.
/// - `update` rules fire on every update of the beacon, as the navigation library called
///   back on every ranging update; only a `cooldown` in seconds rate-limits one (per beacon,
///   counted in the updates' capture time, so updates decided together are not mistaken for
///   a burst). That rate limit lives in memory only (not in the records: it changes every
///   second, and a restarted brain firing one update early is harmless).
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
        public var since: CaptureTime
        /// An update's capture time (the rate limit of `update` rules counts in it); `nil`:
        /// the time of `fire`.
        public var captured: CaptureTime?

        public init(trigger: Rule.Trigger, beacon: BeaconRef, uuid: BeaconUUID? = nil, entry: BeaconEntry? = nil,
                    rssi: Double? = nil, zone: String? = nil, since: CaptureTime) {
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
    /// When each `update` rule last fired, per beacon (the rate limit).
    private var lastUpdate: [BeaconRef: [String: CaptureTime]] = [:]

    public init(rules: [Rule] = []) { self.rules = rules }

    public func memory(for scope: Scope) -> RuleMemory? { memory[scope.beacon]?[scope] }

    /// Puts back what a previous run recorded. Memory of rules the config no longer has (a
    /// rule renamed or removed while no brain ran) is dropped; returns their names.
    @discardableResult
    public mutating func restore(_ recorded: RuleMemory, for scope: Scope) -> [String] {
        let names = Set(rules.map(\.name))
        var kept = recorded
        kept.fired = kept.fired.filter { names.contains($0.key) }
        kept.disarmed = kept.disarmed.filter { names.contains($0.key) }
        set(kept.isEmpty ? nil : kept, for: scope)
        return Set(recorded.fired.keys).union(recorded.disarmed.keys).subtracting(names).sorted()
    }

    /// The rules that fire for `context`, in config order; their firing is remembered.
    public mutating func fire(_ context: Context, scope: Scope, at now: CaptureTime) -> [Rule] {
        var state = memory(for: scope) ?? RuleMemory()
        var fired: [Rule] = []
        for rule in rules where rule.trigger == context.trigger {
            guard context.matches(rule) else { continue }
            if let threshold = rule.rssiAbove {
                guard let rssi = context.rssi, rssi > threshold else { continue }
            }
            let last = state.fired[rule.name]
            if rule.once, let last, last >= context.since { continue }
            if rule.trigger == .update {
                let interval = rule.updateInterval ?? 0
                if case .updates? = rule.cooldown, state.disarmed[rule.name] != nil { continue }
                let time = context.captured ?? now
                if let previous = lastUpdate[context.beacon]?[rule.name], time.seconds(since: previous) < interval { continue }
                lastUpdate[context.beacon, default: [:]][rule.name] = time
                if rule.once { state.fired[rule.name] = now }
                if case .updates? = rule.cooldown { state.disarmed[rule.name] = 0 }
                fired.append(rule)
                continue
            }
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
                // As the navigation library counted: only updates at that very class count,
                // and nothing else resets the count.
                guard proximity == at else { continue }
                if count + 1 >= needed {
                    state.disarmed[name] = nil
                    changed = true
                } else {
                    state.disarmed[name] = count + 1
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
    public mutating func retire(_ scope: Scope, at now: CaptureTime) -> Bool {
        if scope.client == nil { lastUpdate[scope.beacon] = nil }
        guard var state = memory(for: scope) else { return false }
        state.disarmed = [:]
        state.fired = state.fired.filter { name, last in
            guard case .seconds(let seconds)? = rule(named: name)?.cooldown else { return false }
            return now.seconds(since: last) < seconds
        }
        set(state.isEmpty ? nil : state, for: scope)
        return !state.isEmpty
    }

    /// Takes a new config's rules. What a rule did is remembered by its name, so a rule that
    /// was only renamed (or moved, when it has no name of its own: its name is its path) keeps
    /// its memory: an old name that is gone whose rule reappears unchanged under exactly one
    /// new name passes its memory on. Returns the renames, old name first.
    @discardableResult
    public mutating func replaceRules(with new: [Rule]) -> [(from: String, to: String)] {
        let oldNames = Set(rules.map(\.name))
        let newNames = Set(new.map(\.name))
        var renames: [(from: String, to: String)] = []
        for old in rules where !newNames.contains(old.name) {
            let matches = new.filter { candidate in
                guard !oldNames.contains(candidate.name) else { return false }
                var renamed = old
                renamed.name = candidate.name
                return renamed == candidate
            }
            if matches.count == 1 { renames.append((old.name, matches[0].name)) }
        }
        rules = new
        guard !renames.isEmpty else { return [] }
        for (beacon, scopes) in memory {
            for (scope, var state) in scopes {
                for (from, to) in renames {
                    if let last = state.fired.removeValue(forKey: from) { state.fired[to] = last }
                    if let count = state.disarmed.removeValue(forKey: from) { state.disarmed[to] = count }
                }
                memory[beacon]?[scope] = state
            }
        }
        return renames
    }

    /// Every scope something is remembered in.
    public var scopes: [Scope] { memory.values.flatMap(\.keys).sorted() }

    /// Forgets a scope entirely (its beacon is no longer this brain's to handle).
    public mutating func forget(_ scope: Scope) {
        if scope.client == nil { lastUpdate[scope.beacon] = nil }
        set(nil, for: scope)
    }

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

public import BeaconKit

/// The customer's phone of the original smart-iBeacon app, as a value: it ranges the
/// beacons it hears (the `RangeMonitor` of `beaconctl range`), joins the nearest one that
/// reaches `immediate`, and leaves once the brain has answered (the ad arrived), when the
/// beacon drops to `far` or is gone, or when no answer comes; over and over as it moves.
/// With `Settings.stay` it is the storefront greeter's customer app instead: it stays
/// joined after the answer while it ranges the beacon and leaves at `LeaveAt`.
///
/// It decides once a second, on the range report (as a phone's ranging callback comes once
/// a second with every beacon heard), so "nearest" compares every beacon heard in that
/// second. A beacon left after an answer (or after waiting in vain) is not joined again until
/// it has been `far` or gone, so a customer standing at the counter gets the ad once, and
/// again after walking away and coming back. One join at a time. Time is passed in (the
/// source's: live or a capture's), so a replay decides the same at any speed.
public struct AutoObserver: Sendable {
    /// What makes a beacon worth joining.
    public enum JoinTrigger: String, Sendable, Equatable, CaseIterable {
        /// Proximity `immediate` (under about 0.5 m), as the original app.
        case immediate
        /// Any sighting. For controllers that report no signal strength (RSSI 127, BlueZ's
        /// emulator), where proximity is always `unknown` and `immediate` never comes.
        case sighting
    }

    /// How far a beacon joined to stay (`Settings.stay`) may go before it is left: at this
    /// class or farther (`unknown` counts as farther than `far`), or only when it is gone.
    public enum LeaveAt: String, Sendable, Equatable, CaseIterable {
        /// As the storefront greeter's code: `leaveShop` at near, far and unknown.
        case near
        /// As the greeter's text: "the "leave shop" trigger at "far"" (and unknown).
        case far
        /// Only when not heard for the exit timeout (controllers without RSSI, whose
        /// proximity is always unknown).
        case gone
    }

    /// Why the observer left a beacon.
    public enum LeaveReason: String, Sendable, Equatable {
        case answered = "the ad arrived"
        case near = "the beacon is no longer at immediate"
        case unknown = "the beacon's proximity is unknown"
        case far = "the beacon is far"
        case gone = "the beacon is gone"
        case unanswered = "no answer came"
        case ended = "the brain ended the join"
        case stopped = "stopping"
    }

    public enum Action: Sendable, Equatable {
        /// Join this beacon (its line of the range report says how close it is).
        case join(RangeLine)
        case leave(BeaconID, LeaveReason)
    }

    public struct Settings: Sendable, Equatable {
        public var joinOn: JoinTrigger
        /// Seconds to wait for the brain's answer before leaving anyway.
        public var answerTimeout: Double
        /// Stay joined after the answer while the beacon is ranged, as the storefront
        /// greeter's customer app keeps its profile loaded while in the shop, and leave at
        /// `leaveAt`; `nil`: leave once the answer is in, as the smart-iBeacon app.
        public var stay: LeaveAt?

        public init(joinOn: JoinTrigger = .immediate, answerTimeout: Double = 10, stay: LeaveAt? = nil) {
            self.joinOn = joinOn
            self.answerTimeout = answerTimeout
            self.stay = stay
        }
    }

    /// The beacon joined and since when.
    public struct Joined: Sendable, Equatable {
        public var beacon: BeaconID
        public var since: CaptureTime
        /// The brain's answer came.
        public var answered = false
    }

    public let settings: Settings
    public private(set) var monitor: RangeMonitor
    public private(set) var joined: Joined?
    /// Beacons left after an answer (or none), not joined again until far or gone.
    public private(set) var spent: Set<BeaconID> = []
    /// When the next decision is due: a second after the previous one (the first a second
    /// after the first sign of life).
    private var nextDecision: CaptureTime?

    public init(settings: Settings = .init(), monitor: RangeMonitor = RangeMonitor()) {
        self.settings = settings
        self.monitor = monitor
    }

    /// One HCI event received at `time`.
    public mutating func observe(event: UnsafeRawBufferPointer, at time: CaptureTime) -> [Action] {
        let actions = advance(to: time)
        monitor.observe(event: event, at: time)
        return actions
    }

    /// Time passes (beacons go stale, go, or an answer is overdue): decides when a second
    /// has passed since the last decision.
    public mutating func advance(to now: CaptureTime) -> [Action] {
        guard let due = nextDecision else {
            nextDecision = now + 1
            return []
        }
        guard now >= due else { return [] }
        nextDecision = now + 1
        return decide(at: now)
    }

    /// The brain answered a join of the beacon `major`/`minor` (its ad arrived): leave it.
    public mutating func answered(major: UInt16, minor: UInt16) -> [Action] {
        guard let beacon = joined?.beacon, beacon.major == major, beacon.minor == minor else { return [] }
        guard settings.stay == nil else {
            // The greeter's app stays in the shop.
            joined?.answered = true
            return []
        }
        return leave(because: .answered, spend: true)
    }

    /// The brain ended the join of the beacon `major`/`minor` (the visit ended): it is left,
    /// and not joined again until it has been `far` or gone.
    public mutating func ended(major: UInt16, minor: UInt16) -> [Action] {
        guard let beacon = joined?.beacon, beacon.major == major, beacon.minor == minor else { return [] }
        return leave(because: .ended, spend: true)
    }

    /// Stopping: leave what is joined.
    public mutating func stop() -> [Action] {
        joined == nil ? [] : leave(because: .stopped, spend: false)
    }

    private mutating func decide(at now: CaptureTime) -> [Action] {
        var actions: [Action] = []
        let lines = monitor.report(at: now)
        for line in lines where line.gone {
            spent.remove(line.id)
            if joined?.beacon == line.id { actions += leave(because: .gone, spend: false) }
        }
        let present = lines.filter { !$0.gone }
        for line in present where line.proximity == .far { spent.remove(line.id) }
        if let current = joined {
            let proximity = present.first(where: { $0.id == current.beacon })?.proximity
            if let reason = leaving(at: proximity) {
                actions += leave(because: reason, spend: false)
            } else if !current.answered, now.seconds(since: current.since) >= settings.answerTimeout {
                actions += leave(because: .unanswered, spend: true)
            }
        }
        // Nearest first: the report's order.
        if joined == nil, let next = present.first(where: { isJoinable($0) && !spent.contains($0.id) }) {
            joined = Joined(beacon: next.id, since: now)
            actions.append(.join(next))
        }
        return actions
    }

    /// Whether the joined beacon, now at `proximity`, is to be left (gone is handled apart).
    private func leaving(at proximity: Proximity?) -> LeaveReason? {
        guard let proximity else { return nil }
        switch (settings.stay, proximity) {
        case (nil, .far), (.far?, .far), (.near?, .far): return .far
        case (.far?, .unknown), (.near?, .unknown): return .unknown
        case (.near?, .near): return .near
        default: return nil
        }
    }

    private func isJoinable(_ line: RangeLine) -> Bool {
        switch settings.joinOn {
        case .immediate: line.proximity == .immediate
        case .sighting: true
        }
    }

    private mutating func leave(because reason: LeaveReason, spend: Bool) -> [Action] {
        guard let beacon = joined?.beacon else { return [] }
        joined = nil
        if spend { spent.insert(beacon) }
        return [.leave(beacon, reason)]
    }
}

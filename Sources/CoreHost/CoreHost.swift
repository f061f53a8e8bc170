public import BeaconKit
public import LiveClock
public import Logging
public import MQTT
public import Synchronization
public import SystemCalls

/// What the gateway's and the brain's services share around their pure cores: the one lock
/// every input is handled under, the publishing of what the core decided (inside that lock,
/// so messages leave in the order decided), the outage outbox, and the timers, which run on
/// the injected `ServiceClock`. A service is then its MQTT wiring and its core.
///
/// `Core` is whatever the service keeps under the lock: its pure core (`GatewayEngine`,
/// `BrainCore`) and the little state of its own wiring.
///
/// While the broker is away a core's messages wait (one policy, `Outbox`: retained state
/// latest per topic, the rest in order, bounded, the oldest dropped first and counted).
/// Either the host keeps them (`OutagePolicy.outbox`, the brain) and sends them first on
/// `connected`, or the core keeps its own `Outbox` (`OutagePolicy.core`, the gateway, whose
/// engine interleaves them with its RSSI-report backlog and a brain handshake on reconnect)
/// and gets back what the client refused.
public final class CoreHost<Core: Sendable>: Sendable {
    /// Where messages go that cannot be published because the connection has gone.
    public enum OutagePolicy: Sendable {
        /// The host keeps them in an `Outbox` holding at most this many messages that are not
        /// retained; also everything published while the host is not connected.
        case outbox(limit: Int)
        /// The core keeps them: the message the client refused and all after it are handed
        /// back, in order (the core then publishes nothing until it reconnects).
        case core(@Sendable (inout Core, ArraySlice<MQTTMessage>) -> Void)
    }

    /// A timer registered with the host (`runTimers`): runs under the lock, in registration
    /// order with the others due, with the clock's monotonic seconds. Due first `firstAfter`
    /// seconds after the host was made (`epoch`), then every `seconds` after it ran (a round
    /// that came late does not run it twice); `HostState.schedule` moves it.
    public struct Timer: Sendable {
        public let name: String
        public let seconds: Double
        public let firstAfter: Double
        public let body: @Sendable (inout HostState<Core>, Double) -> Void

        public init(_ name: String, every seconds: Double, firstAfter: Double? = nil,
                    _ body: @escaping @Sendable (inout HostState<Core>, Double) -> Void) {
            self.name = name
            self.seconds = seconds
            self.firstAfter = firstAfter ?? seconds
            self.body = body
        }
    }

    @usableFromInline let state: Mutex<HostState<Core>>
    let client: MQTTClient
    let logger: Logger
    let policy: OutagePolicy
    /// Where the service reads the time.
    public let clock: any ServiceClock
    /// The clock's monotonic seconds when the host was made: timers count their first
    /// delay from here, so a test that advances the clock before they start misses no round.
    public let epoch: Double

    public init(_ core: Core, client: MQTTClient, logger: Logger, clock: any ServiceClock, outage: OutagePolicy) {
        var initial = HostState(core: core)
        if case .outbox(let limit) = outage { initial.outbox = Outbox(limit: limit) }
        state = Mutex(initial)
        self.client = client
        self.logger = logger
        self.policy = outage
        self.clock = clock
        epoch = clock.monotonic()
    }

    /// Runs `body` under the lock: the one way in to the core.
    @inlinable
    public func withLock<Result>(_ body: (inout HostState<Core>) throws -> Result) rethrows -> Result {
        try state.withLock { try body(&$0) }
    }

    /// Logs what a core wrote and publishes what it decided, in order (`publish`). The log
    /// lines keep the caller's module as their source (`[Gateway] enter`).
    public func emit(log entries: [LogEntry], messages: [MQTTMessage], in s: inout HostState<Core>,
                     file: String = #fileID, function: String = #function, line: UInt = #line) {
        for entry in entries { logger.log(entry, file: file, function: function, line: line) }
        publish(messages, in: &s, file: file, function: function, line: line)
    }

    /// Hands messages to the client, in order. One the client cannot take because the
    /// connection has gone waits for the reconnect with all after it (`OutagePolicy`); one
    /// it refuses for another reason is logged and counted (`HostState.refused`).
    public func publish(_ messages: [MQTTMessage], in s: inout HostState<Core>,
                        file: String = #fileID, function: String = #function, line: UInt = #line) {
        if s.outbox != nil, !s.isConnected { return keep(messages[...], in: &s) }
        for index in messages.indices {
            do {
                try client.publish(messages[index])
                s.published += 1
            } catch where error.isNoConnection {
                logger.debug("not connected; kept for the reconnect", metadata: ["topic": "\(messages[index].topic)"],
                             file: file, function: function, line: line)
                return keep(messages[index...], in: &s)
            } catch {
                s.refused += 1
                logger.error("publish failed", metadata: ["topic": "\(messages[index].topic)", "error": "\(error)"],
                             file: file, function: function, line: line)
            }
        }
    }

    func keep(_ messages: ArraySlice<MQTTMessage>, in s: inout HostState<Core>) {
        switch policy {
        case .outbox:
            for message in messages { s.outbox?.queue(message) }
        case .core(let handBack):
            handBack(&s.core, messages)
        }
    }

    /// The broker connection is up: counted, and what the host kept goes out first, in its
    /// order (`Outbox.drain`).
    public func connected(_ s: inout HostState<Core>) {
        s.connections += 1
        s.isConnected = true
        if let kept = s.outbox?.drain(), !kept.isEmpty { publish(kept, in: &s) }
    }

    /// The broker connection went: from now on the host keeps what is published (`.outbox`).
    public func disconnected(_ s: inout HostState<Core>) {
        s.isConnected = false
    }

    /// Runs the timers on the clock until the task is cancelled: sleeps until the earliest
    /// is due (`ServiceClock.sleep(until:)`: on a `ManualClock`, until a test advances it),
    /// runs every due one under the lock, then records the round (`HostState.rounds`,
    /// `timerRound`). `heartbeat` beats once a round, for the service watchdog. A timer
    /// scheduled earlier while the loop sleeps runs at the latest with the next one due.
    public func runTimers(_ timers: [Timer], heartbeat: Heartbeat? = nil) async {
        state.withLock { s in
            for timer in timers where s.deadlines[timer.name] == nil { s.deadlines[timer.name] = epoch + timer.firstAfter }
        }
        while !Task.isCancelled {
            heartbeat?.beat()
            let next = state.withLock { s in timers.compactMap { s.deadlines[$0.name] }.min() } ?? clock.monotonic() + 1
            do { try await clock.sleep(until: next) } catch { return }
            state.withLock { s in
                let now = clock.monotonic()
                for timer in timers {
                    guard let due = s.deadlines[timer.name], due <= now else { continue }
                    s.deadlines[timer.name] = now + timer.seconds
                    timer.body(&s, now)
                }
                s.rounds += 1
                s.timerRound = now
            }
        }
    }

    /// The clock's monotonic seconds of the last round of the timers (`nil` before the first):
    /// a test that advanced a `ManualClock` to `t` waits until this is at least `t`.
    public var timerRound: Double? { state.withLock { $0.timerRound } }
}

/// What a service keeps under its host's lock: its core and the host's own counters.
public struct HostState<Core: Sendable>: Sendable {
    public var core: Core
    /// Messages handed to the client.
    public internal(set) var published = 0
    /// Messages the client refused for a reason other than a lost connection.
    public internal(set) var refused = 0
    /// Connections made so far (1 after the first, `CoreHost.connected`).
    public internal(set) var connections = 0
    /// Between `CoreHost.connected` and `disconnected`.
    public internal(set) var isConnected = false
    /// Rounds of the timers so far.
    public internal(set) var rounds = 0
    public internal(set) var timerRound: Double?
    var outbox: Outbox?
    var deadlines: [String: Double] = [:]

    init(core: Core) { self.core = core }

    /// Messages dropped from a full outbox (`OutagePolicy.outbox`), oldest first.
    public var outboxDropped: Int { outbox?.dropped ?? 0 }

    /// Moves a timer (`CoreHost.Timer`): due at `time`, monotonic seconds of the host's clock.
    public mutating func schedule(_ timer: String, at time: Double) {
        deadlines[timer] = time
    }
}

import Synchronization

/// Keep-alives for the service manager's watchdog (`WatchdogSec=`), sent only while every
/// loop of the process goes round: a process that is stopped, deadlocked or stuck in one
/// loop stops sending them and systemd restarts it.
///
/// Each loop says when it last went round (monotonic seconds, `WallClock.monotonic()`).
/// Every half watchdog interval the watchdog checks them: all recent, it sends `WATCHDOG=1`
/// with a `STATUS=` line; one silent for longer than `hungAfter` (two intervals), it says which in
/// `STATUS=` and sends `WATCHDOG=trigger`, so systemd acts at once rather than after the
/// interval. The check runs as a task of its own, so a process whose tasks are all stuck
/// sends nothing at all.
public struct ServiceWatchdog: Sendable {
    public struct Loop: Sendable {
        public var name: String
        /// When the loop last went round; `nil` while it is not expected to (a replay that
        /// reached its end, a client not started yet).
        public var lastRound: @Sendable () -> Double?

        public init(_ name: String, lastRound: @escaping @Sendable () -> Double?) {
            self.name = name
            self.lastRound = lastRound
        }
    }

    public let notifier: ServiceNotifier
    public let loops: [Loop]
    /// Seconds of silence after which a loop counts as hung: twice the watchdog interval, so
    /// a slow moment (a loaded machine, a slow name lookup) is not taken for a hang; a hung
    /// loop is then restarted within 2 × WatchdogSec + RestartSec.
    public let hungAfter: Double?

    public init(notifier: ServiceNotifier, loops: [Loop], hungAfter: Double? = nil) {
        self.notifier = notifier
        self.loops = loops
        self.hungAfter = hungAfter ?? notifier.watchdogInterval.map { 2 * $0 }
    }

    /// The loops silent for longer than `hungAfter` at `now`, with how long. Silence is
    /// counted from `watchedSince` at the earliest: before it the watchdog itself did not run
    /// (the process was stopped or starved), which says nothing about one loop.
    public func hungLoops(at now: Double, watchedSince: Double = 0) -> [(name: String, silent: Double)] {
        guard let hungAfter else { return [] }
        return loops.compactMap { loop in
            guard let last = loop.lastRound() else { return nil }
            let silent = now - max(last, watchedSince)
            return silent > hungAfter ? (loop.name, silent) : nil
        }
    }

    /// What to send now: keep-alive and status, or the reason and the trigger.
    public func check(at now: Double, watchedSince: Double = 0, status: String) -> [ServiceNotifier.Field] {
        let hung = hungLoops(at: now, watchedSince: watchedSince)
        guard hung.isEmpty else {
            let names = hung.map { "\($0.name) loop silent for \(Int($0.silent.rounded())) s" }
            return [.status("hung: " + names.joined(separator: ", ") + "; asking for a restart"), .watchdogTrigger]
        }
        return notifier.watchdogInterval == nil ? [.status(status)] : [.status(status), .watchdog]
    }

    /// Until cancelled: a check every half watchdog interval (every 5 s without a watchdog,
    /// for `STATUS=` alone). After a trigger it keeps quiet, so a restart is not held off.
    /// A notification that cannot be sent is reported once through `failed`.
    public func run(status: @escaping @Sendable () -> String, failed: @escaping @Sendable (SystemError) -> Void) async {
        let period = min(notifier.watchdogInterval.map { $0 / 2 } ?? 5, 5)
        var reported = false
        var watchedSince = WallClock.monotonic()
        var expected = watchedSince
        while !Task.isCancelled {
            let now = WallClock.monotonic()
            // Woken much later than planned: the whole process stood still (SIGSTOP, a
            // starved machine); the loops get a fresh start before any is called hung.
            if now - expected > (hungAfter ?? period) / 2 { watchedSince = now }
            let fields = check(at: now, watchedSince: watchedSince, status: status())
            do {
                try notifier.send(fields)
            } catch {
                if !reported { failed(error) }
                reported = true
            }
            if fields.contains(.watchdogTrigger) { return }
            expected = WallClock.monotonic() + period
            try? await Task.sleep(nanoseconds: UInt64(period * 1e9))
        }
    }
}

/// When a loop last went round, written by the loop and read by the watchdog from any
/// thread without a lock.
public final class Heartbeat: Sendable {
    /// Monotonic nanoseconds of the last round; 0 while the loop is not expected to run.
    private let nanoseconds = Atomic<Int64>(0)

    public init() {}

    /// The loop went round (now, or at `time`, monotonic seconds).
    public func beat(at time: Double = WallClock.monotonic()) {
        nanoseconds.store(max(1, Int64(time * 1e9)), ordering: .relaxed)
    }

    /// The loop ended (or waits on purpose): nothing to watch until the next `beat`.
    public func pause() {
        nanoseconds.store(0, ordering: .relaxed)
    }

    /// Monotonic seconds of the last round; `nil` when paused or never started.
    public var lastRound: Double? {
        let value = nanoseconds.load(ordering: .relaxed)
        return value == 0 ? nil : Double(value) / 1e9
    }
}

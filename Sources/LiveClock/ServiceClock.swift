public import BeaconKit
import SystemCalls
import Synchronization

/// The time a service reads: the wall time its decisions and messages are dated with
/// (`now`), and monotonic seconds for its own timers (settling, health, memory checks).
/// The brain and the gateway take one instead of reading the system's clocks, so a test
/// drives their timers with a `ManualClock` (advance it, then wait for the timers' round at
/// that time, `CoreHost.timerRound`) instead of sleeping and hoping the machine kept up.
public protocol ServiceClock: Sendable {
    /// The wall time: the service's own, never a capture's (`asCaptureTime()` where a live
    /// service dates what it hears by it).
    func now() -> WallTime
    /// Seconds from an arbitrary start; never goes back.
    func monotonic() -> Double
    /// Returns once `monotonic()` has reached `deadline`; throws `CancellationError` if the
    /// task is cancelled first. The timers of `CoreHost` wait here, so on a `ManualClock`
    /// they go round when the test advances it, not when real time passes.
    func sleep(until deadline: Double) async throws
}

/// The system's clocks (`WallClock`): what the programs run on.
public struct SystemClock: ServiceClock {
    public init() {}
    public func now() -> WallTime { WallClock.now() }
    public func monotonic() -> Double { WallClock.monotonic() }

    public func sleep(until deadline: Double) async throws {
        let seconds = deadline - WallClock.monotonic()
        if seconds > 0 { try await Task.sleep(nanoseconds: UInt64(seconds * 1e9)) }
        try Task.checkCancellation()
    }
}

/// A clock that moves only when told: `advance` moves its wall time and its monotonic
/// seconds together, and wakes whoever sleeps until a time it passed. For tests (after
/// swift-nio's `EmbeddedEventLoop.advanceTime(by:)`).
public final class ManualClock: ServiceClock {
    private struct Sleeper {
        var id: Int
        var deadline: Double
        var wake: CheckedContinuation<Void, Never>
    }

    private struct Time {
        var wall: WallTime
        var monotonic: Double
        var sleepers: [Sleeper] = []
        var nextSleeper = 0
        /// Sleepers cancelled before they were registered.
        var cancelled: Set<Int> = []
    }

    private let time: Mutex<Time>

    public init(at start: WallTime) {
        time = Mutex(Time(wall: start, monotonic: 0))
    }

    public func now() -> WallTime { time.withLock { $0.wall } }
    public func monotonic() -> Double { time.withLock { $0.monotonic } }

    /// Moves both times forward by `seconds` (never back) and wakes the sleepers whose
    /// deadline it reached.
    public func advance(by seconds: Double) {
        precondition(seconds >= 0, "a clock does not go back")
        let woken = time.withLock { t in
            t.wall = t.wall + seconds
            t.monotonic += seconds
            let monotonic = t.monotonic
            let due = t.sleepers.filter { $0.deadline <= monotonic }
            t.sleepers.removeAll { $0.deadline <= monotonic }
            return due
        }
        for sleeper in woken { sleeper.wake.resume() }
    }

    public func sleep(until deadline: Double) async throws {
        let id = time.withLock { t in
            t.nextSleeper += 1
            return t.nextSleeper
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (wake: CheckedContinuation<Void, Never>) in
                let now = time.withLock { t in
                    if t.monotonic >= deadline || t.cancelled.remove(id) != nil { return true }
                    t.sleepers.append(Sleeper(id: id, deadline: deadline, wake: wake))
                    return false
                }
                if now { wake.resume() }
            }
        } onCancel: {
            let wake = time.withLock { t -> CheckedContinuation<Void, Never>? in
                if let index = t.sleepers.firstIndex(where: { $0.id == id }) { return t.sleepers.remove(at: index).wake }
                if t.monotonic < deadline { t.cancelled.insert(id) }
                return nil
            }
            wake?.resume()
        }
        try Task.checkCancellation()
    }
}

public import BeaconKit
import SystemCalls
import Synchronization

/// The time a service reads: the wall time its decisions and messages are dated with
/// (`now`), and monotonic seconds for its own timers (settling, health, memory checks).
/// The brain and the gateway take one instead of reading the system's clocks, so a test
/// drives their timers with a `ManualClock` (advance it, then wait for the service's next
/// tick) instead of sleeping and hoping the machine kept up.
public protocol ServiceClock: Sendable {
    /// The wall time.
    func now() -> Instant
    /// Seconds from an arbitrary start; never goes back.
    func monotonic() -> Double
}

/// The system's clocks (`WallClock`): what the programs run on.
public struct SystemClock: ServiceClock {
    public init() {}
    public func now() -> Instant { WallClock.now() }
    public func monotonic() -> Double { WallClock.monotonic() }
}

/// A clock that moves only when told: `advance` moves its wall time and its monotonic
/// seconds together. For tests.
public final class ManualClock: ServiceClock {
    private let time: Mutex<(wall: Instant, monotonic: Double)>

    public init(at start: Instant) {
        time = Mutex((start, 0))
    }

    public func now() -> Instant { time.withLock { $0.wall } }
    public func monotonic() -> Double { time.withLock { $0.monotonic } }

    /// Moves both times forward by `seconds` (never back).
    public func advance(by seconds: Double) {
        precondition(seconds >= 0, "a clock does not go back")
        time.withLock { $0 = ($0.wall + seconds, $0.monotonic + seconds) }
    }
}

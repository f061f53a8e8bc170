public import BeaconKit
public import SystemCalls

extension WallClock {
    /// The live time as an `Instant`: where the system clock (`SystemCalls`) meets the pure
    /// modules' time, for timestamps in messages and the gateway's and brain's timers.
    public static func now() -> Instant { Instant(nanoseconds: nanosecondsSinceEpoch()) }
}

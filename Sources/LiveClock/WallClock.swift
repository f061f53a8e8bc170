public import BeaconKit
public import SystemCalls

extension WallClock {
    /// The live time as a `WallTime`: where the system clock (`SystemCalls`) meets the pure
    /// modules' time, for what a service dates by its own clock (health, replies, log lines).
    /// What a radio hears now is dated from it with `asCaptureTime()`, where that is meant.
    public static func now() -> WallTime { WallTime(nanoseconds: nanosecondsSinceEpoch()) }
}

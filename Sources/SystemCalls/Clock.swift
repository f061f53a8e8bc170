#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The only place BeaconBridge reads the live clock (`clock_gettime`). The pure modules take
/// time as input (`WallTime`, the live clock's; `CaptureTime`, a radio's, which a replay
/// carries); the edges read it here, and nothing else in `Sources/` calls `clock_gettime`,
/// `ContinuousClock.now` or `Date()`. `WallClock.now()`, the live time as a `WallTime`, is in
/// `LiveClock`.
public enum WallClock {
    /// Wall-clock time (`CLOCK_REALTIME`), nanoseconds since 1970-01-01T00:00:00Z.
    public static func nanosecondsSinceEpoch() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// Monotonic seconds, for measuring durations and rates.
    public static func monotonic() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// CPU time used by this process, seconds.
    public static func processCPU() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

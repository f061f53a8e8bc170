#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import BeaconKit

/// The wall clock the brain stamps its inputs with: the one place it is read.
///
/// `SystemCalls.WallClock` does the same, but the `Brain` target does not depend on
/// `SystemCalls` (Package.swift); this stays until it does.
enum BrainClock {
    static func now() -> Instant {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Instant(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }
}

/// Which clock dated a `TimePoint`. The two kinds are the two clocks BeaconBridge has:
///
/// - `CaptureClock`: the time a radio heard an advertisement — a sighting's, a report's, a
///   decision's `ts`, a capture's record. In a replay it is the capture's time, hours or years
///   away from now; live, the gateway dates what it hears by its wall clock (the one place the
///   two meet, `WallTime.asCaptureTime()`).
/// - `ServiceWallClock`: the service's own clock — `ServiceClock.now()`, health, command
///   replies, log lines, the `since` of what a service dates itself.
///
/// The 2026-11-24 bug was a brain dating an `enter` by its wall clock in a replay; with the
/// kinds apart that line does not compile.
public protocol TimeKind: Sendable {}

/// The clock of capture: when a radio heard it. See `TimeKind`.
public enum CaptureClock: TimeKind {}

/// The clock of the service reading it. See `TimeKind`.
public enum ServiceWallClock: TimeKind {}

/// When a radio heard an advertisement (a sighting, a report, a decision's `ts`).
public typealias CaptureTime = TimePoint<CaptureClock>

/// The service's own time (`ServiceClock.now()`, health, command replies, log lines).
public typealias WallTime = TimePoint<ServiceWallClock>

/// A point in time, nanoseconds since 1970-01-01T00:00:00Z, tagged with the clock that read it.
///
/// One generic type rather than two structs: the arithmetic, the ISO-8601 form and its parser
/// are written once; the tag is a phantom (no stored field, no cost at run time), and code
/// indifferent to the clock (a proof's slot, a JSON member) takes `TimePoint<some TimeKind>`.
/// The compiler still keeps the kinds apart: a `WallTime` is not a `CaptureTime`, and the only
/// way across is a named conversion (`asCaptureTime()`, `asWallTime()`) where one is meant.
///
/// The pure modules never read a clock: callers pass times in (the live clock at the
/// edges, a capture's timestamps in a replay), which is what makes replays and tests
/// deterministic.

public struct TimePoint<Kind: TimeKind>: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    @inlinable
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    /// Saturates at the ends of the range (and takes NaN as the start of it) rather than trap.
    @inlinable
    public init(seconds: Double) { nanoseconds = Self.clamped((seconds * 1e9).rounded()) }

    @inlinable
    static func clamped(_ nanoseconds: Double) -> Int64 {
        nanoseconds < 9.2e18 ? (nanoseconds > -9.2e18 ? Int64(nanoseconds) : .min) : .max
    }

    @inlinable
    public static var epoch: Self { Self(nanoseconds: 0) }

    @inlinable
    public var seconds: Double { Double(nanoseconds) / 1e9 }

    @inlinable
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    @inlinable
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.nanoseconds == rhs.nanoseconds }

    @inlinable
    public func hash(into hasher: inout Hasher) { hasher.combine(nanoseconds) }

    /// Seconds from `other` to `self`.
    @inlinable
    public func seconds(since other: Self) -> Double {
        let (difference, overflow) = nanoseconds.subtractingReportingOverflow(other.nanoseconds)
        return overflow ? (Double(nanoseconds) - Double(other.nanoseconds)) / 1e9 : Double(difference) / 1e9
    }

    /// Saturates at the ends of the range: a damaged capture can carry any timestamp, and
    /// deadlines computed from it must not trap.
    @inlinable
    public static func + (lhs: Self, seconds: Double) -> Self {
        let delta = clamped((seconds * 1e9).rounded())
        let (sum, overflow) = lhs.nanoseconds.addingReportingOverflow(delta)
        return Self(nanoseconds: overflow ? (delta > 0 ? .max : .min) : sum)
    }

    @inlinable
    public static func - (lhs: Self, seconds: Double) -> Self { lhs + (-seconds) }

    /// ISO-8601 UTC with milliseconds: `2026-11-21T09:30:00.125Z`.
    public var iso8601: String {
        var out = ""
        out.reserveCapacity(24)
        appendISO8601(to: &out)
        return out
    }

    public var description: String { iso8601 }

    /// Appends the ISO-8601 form.
    public func appendISO8601(to out: inout String) {
        var writer = JSONWriter(capacity: 24)
        appendISO8601(to: &writer)
        out += writer.text
    }

    /// Writes the ISO-8601 form without intermediate strings (payload encoders).
    package func appendISO8601(to out: inout JSONWriter) {
        // Floor division that cannot overflow, even at Int64.min.
        let millis = nanoseconds >= 0 ? nanoseconds / 1_000_000 : -(-(nanoseconds + 1) / 1_000_000) - 1
        var days = millis >= 0 ? millis / 86_400_000 : (millis - 86_399_999) / 86_400_000
        let msOfDay = millis - days * 86_400_000
        // Howard Hinnant's civil-from-days.
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let doe = days - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        // Years before 0 cannot be written in four digits; they print as 0000, as before.
        let clampedYear = max(0, year)
        guard clampedYear <= 9999 else {
            out.appendDecimal(UInt64(clampedYear), width: 4)
            appendTime(month: month, day: day, msOfDay: msOfDay, to: &out)
            return
        }
        out.reserve(4) { p in
            p[0] = 0x30 &+ UInt8(truncatingIfNeeded: clampedYear / 1000)
            p[1] = 0x30 &+ UInt8(truncatingIfNeeded: clampedYear / 100 % 10)
            p[2] = 0x30 &+ UInt8(truncatingIfNeeded: clampedYear / 10 % 10)
            p[3] = 0x30 &+ UInt8(truncatingIfNeeded: clampedYear % 10)
        }
        appendTime(month: month, day: day, msOfDay: msOfDay, to: &out)
    }

    /// `-MM-DDTHH:MM:SS.mmmZ` in one write.
    private func appendTime(month: Int64, day: Int64, msOfDay: Int64, to out: inout JSONWriter) {
        out.reserve(20) { p in
            @inline(__always) func two(_ value: Int64, at i: Int) {
                p[i] = 0x30 &+ UInt8(truncatingIfNeeded: value / 10)
                p[i + 1] = 0x30 &+ UInt8(truncatingIfNeeded: value % 10)
            }
            p[0] = UInt8(ascii: "-")
            two(month, at: 1)
            p[3] = UInt8(ascii: "-")
            two(day, at: 4)
            p[6] = UInt8(ascii: "T")
            two(msOfDay / 3_600_000, at: 7)
            p[9] = UInt8(ascii: ":")
            two(msOfDay / 60_000 % 60, at: 10)
            p[12] = UInt8(ascii: ":")
            two(msOfDay / 1000 % 60, at: 13)
            p[15] = UInt8(ascii: ".")
            let millis = msOfDay % 1000
            p[16] = 0x30 &+ UInt8(truncatingIfNeeded: millis / 100)
            two(millis % 100, at: 17)
            p[19] = UInt8(ascii: "Z")
        }
    }

    /// Parses what `iso8601` writes (also without milliseconds); `nil` otherwise, including
    /// dates that do not exist and instants outside 1677-09-21 … 2262-04-11 (the range of
    /// 64-bit nanoseconds).
    public init?(iso8601 text: String) {
        let u = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int64? {
            guard range.upperBound <= u.count else { return nil }
            var value: Int64 = 0
            for i in range {
                guard u[i] >= 0x30 && u[i] <= 0x39 else { return nil }
                value = value * 10 + Int64(u[i] - 0x30)
            }
            return value
        }
        func separator(_ i: Int, _ c: Unicode.Scalar) -> Bool { u[i] == UInt8(ascii: c) }
        guard u.count == 20 || u.count == 24, u.last == UInt8(ascii: "Z"),
              separator(4, "-"), separator(7, "-"), separator(10, "T"), separator(13, ":"), separator(16, ":"),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays: [Int64] = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard day <= monthDays[Int(month) - 1] else { return nil }
        var millis: Int64 = 0
        if u.count == 24 {
            guard u[19] == UInt8(ascii: "."), let ms = number(20..<23) else { return nil }
            millis = ms
        }
        // days-from-civil
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = month > 2 ? month - 3 : month + 9
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        let total = ((days * 24 + hour) * 60 + minute) * 60 + second
        let (scaled, overflow) = (total * 1000 + millis).multipliedReportingOverflow(by: 1_000_000)
        guard !overflow else { return nil }
        nanoseconds = scaled
    }
}

// The two places the clocks meet. Each use says why at the call; `grep -rn 'asCaptureTime()\|asWallTime()'`
// lists them all.
extension TimePoint where Kind == ServiceWallClock {
    /// This wall time as the time of a capture: what hears a radio live (a gateway's source,
    /// a brain taking the gateways' clocks as its own) dates it by the wall clock.
    public func asCaptureTime() -> CaptureTime { CaptureTime(nanoseconds: nanoseconds) }
}

extension TimePoint where Kind == CaptureClock {
    /// This capture time as wall time: a replay paced against the wall clock, or a tool that
    /// shows how long ago (by its clock) a capture was made.
    public func asWallTime() -> WallTime { WallTime(nanoseconds: nanoseconds) }
}

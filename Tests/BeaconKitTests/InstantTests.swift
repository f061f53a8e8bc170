import BeaconKit
import Testing

@Suite("CaptureTime")
struct InstantTests {
    @Test(arguments: [
        (0, "1970-01-01T00:00:00.000Z"),
        (1, "1970-01-01T00:00:00.000Z"),                         // milliseconds are truncated, not rounded
        (999_999, "1970-01-01T00:00:00.000Z"),
        (1_000_000, "1970-01-01T00:00:00.001Z"),
        (1_999_999_999, "1970-01-01T00:00:01.999Z"),
        (-1, "1969-12-31T23:59:59.999Z"),                        // before the epoch: toward the past
        (-1_000_000, "1969-12-31T23:59:59.999Z"),
        (-1_000_001, "1969-12-31T23:59:59.998Z"),
        (-86_400_000_000_000, "1969-12-31T00:00:00.000Z"),
        (-86_400_000_000_001, "1969-12-30T23:59:59.999Z"),
        (951_782_400_000_000_000, "2000-02-29T00:00:00.000Z"),   // 2000 is a leap year (divisible by 400)
        (951_868_799_999_000_000, "2000-02-29T23:59:59.999Z"),
        (951_868_800_000_000_000, "2000-03-01T00:00:00.000Z"),
        (1_709_164_800_000_000_000, "2024-02-29T00:00:00.000Z"),
        (4_107_456_000_000_000_000, "2100-02-28T00:00:00.000Z"),  // 2100 is not
        (4_107_542_400_000_000_000, "2100-03-01T00:00:00.000Z"),
        (-2_203_891_200_000_000_000, "1900-03-01T00:00:00.000Z"), // nor 1900
        (1_795_253_400_125_000_000, "2026-11-21T09:30:00.125Z"),
        (946_684_799_999_999_999, "1999-12-31T23:59:59.999Z"),
        (Int64.min, "1677-09-21T00:12:43.145Z"),
        (Int64.max, "2262-04-11T23:47:16.854Z"),
    ] as [(Int64, String)])
    func formats(nanoseconds: Int64, text: String) {
        #expect(CaptureTime(nanoseconds: nanoseconds).iso8601 == text)
        #expect(CaptureTime(nanoseconds: nanoseconds).description == text)
    }

    @Test(arguments: [
        "1970-01-01T00:00:00.000Z", "2000-02-29T12:34:56.789Z", "2024-02-29T23:59:59.999Z", "1969-07-20T20:17:40.000Z",
        "1900-03-01T00:00:00.000Z", "2026-11-21T09:30:00.125Z", "2100-12-31T23:59:59.999Z", "1677-09-22T00:00:00.000Z",
    ])
    func roundTrip(_ text: String) throws {
        let instant = try #require(CaptureTime(iso8601: text))
        #expect(instant.iso8601 == text)
    }

    @Test func parsesWithoutMilliseconds() {
        #expect(CaptureTime(iso8601: "2026-11-21T09:30:00Z") == CaptureTime(iso8601: "2026-11-21T09:30:00.000Z"))
        #expect(CaptureTime(iso8601: "1970-01-01T00:00:01Z") == CaptureTime(nanoseconds: 1_000_000_000))
        #expect(CaptureTime(iso8601: "1969-12-31T23:59:59Z") == CaptureTime(nanoseconds: -1_000_000_000))
    }

    @Test(arguments: [
        "", "2026-11-21", "2026-11-21T09:30:00", "2026-11-21T09:30:00.1Z", "2026-11-21T09:30:00.12Z",
        "2026-11-21T09:30:00.1234Z", "2026-11-21T09:30:00+00:00", "2026-11-21 09:30:00Z", "2026-11-21T09:30:00z",
        "2026/11/21T09:30:00Z", "2026-11-21T09-30-00Z", "2026-11-21T09:30:00,125Z", "2026-11-21x09:30:00.125Z",
        "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-11-00T00:00:00Z", "2026-11-32T00:00:00Z",
        "2026-11-21T24:00:00Z", "2026-11-21T23:60:00Z", "2026-11-21T23:59:61Z",
        "2026-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-02-30T00:00:00Z", "2026-04-31T00:00:00Z",
        "+026-11-21T09:30:00Z", "2026-1a-21T09:30:00Z", "２026-11-21T09:30:00Z",
        // Outside what 64-bit nanoseconds hold (1677-09-21 … 2262-04-11): nil, not a trap.
        "9999-12-31T23:59:59.999Z", "2262-04-11T23:47:16.855Z", "2263-01-01T00:00:00Z", "0001-01-01T00:00:00Z",
        "1677-09-21T00:12:43.144Z",
    ])
    func rejects(_ text: String) {
        #expect(CaptureTime(iso8601: text) == nil)
    }

    @Test func theLastRepresentableMillisecond() {
        #expect(CaptureTime(iso8601: "2262-04-11T23:47:16.854Z") == CaptureTime(nanoseconds: 9_223_372_036_854_000_000))
    }

    @Test func arithmetic() {
        let t = CaptureTime(iso8601: "2026-11-21T09:30:00.000Z")!
        #expect((t + 1.5).iso8601 == "2026-11-21T09:30:01.500Z")
        #expect((t - 0.25).iso8601 == "2026-11-21T09:29:59.750Z")
        #expect((t + 0.000000001).nanoseconds == t.nanoseconds + 1)
        #expect((t + 2.5).seconds(since: t) == 2.5)
        #expect(t.seconds(since: t + 2.5) == -2.5)
        #expect(CaptureTime(seconds: 1.5) == CaptureTime(nanoseconds: 1_500_000_000))
        #expect(CaptureTime(seconds: -0.000000001).nanoseconds == -1)
        #expect(CaptureTime.epoch.seconds == 0)
        #expect(CaptureTime(nanoseconds: 1) > .epoch)
    }
}

/// Capture time and wall time: one arithmetic and one form, and a conversion that keeps the
/// point in time. That the compiler refuses to mix them is not a test's to show (it would not
/// compile); `GatewayClockTests` checks what the live conversion means.
@Suite("CaptureTime and WallTime")
struct TimeKindTests {
    @Test func bothKindsShareTheArithmeticAndTheForm() {
        let capture = CaptureTime(iso8601: "2026-11-21T09:30:00.125Z")!
        let wall = WallTime(iso8601: "2026-11-21T09:30:00.125Z")!
        #expect(capture.nanoseconds == wall.nanoseconds)
        #expect((capture + 1.5).iso8601 == (wall + 1.5).iso8601)
        #expect((wall + 2).seconds(since: wall) == 2)
        var writer = JSONWriter(capacity: 64)
        writer.object { o in
            o("ts", capture)
            o("at", wall)
        }
        #expect(writer.text == #"{"ts":"2026-11-21T09:30:00.125Z","at":"2026-11-21T09:30:00.125Z"}"#)
    }

    @Test func theConversionsKeepThePointInTime() {
        let wall = WallTime(nanoseconds: 1_795_253_400_125_000_001)
        #expect(wall.asCaptureTime().nanoseconds == wall.nanoseconds)
        #expect(wall.asCaptureTime().asWallTime() == wall)
        #expect(CaptureTime.self == CaptureTime.self)
    }

    @Test func aProofReadsEitherClockAlike() {
        let proof = PresenceProof(secret: Array("secret".utf8))
        let wall = WallTime(iso8601: "2026-11-21T09:00:07.000Z")!
        #expect(proof.value(store: 7, at: wall) == proof.value(store: 7, at: wall.asCaptureTime()))
        #expect(proof.nextSlotStart(after: wall).asCaptureTime() == proof.nextSlotStart(after: wall.asCaptureTime()))
    }
}

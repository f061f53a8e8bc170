import BeaconKit
import Contract
import BrainCore
import Testing
import Config

/// The pieces that keep the brain's work bounded under floods (docs/brain.md "Floods").
@Suite struct FloodLimitsTests {
    /// The limits run on the brain's running clock; a join is dated in capture time.
    static let t0 = WallTime(iso8601: "2026-11-21T09:00:00.000Z")!
    static let c0 = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!

    @Test func aRateLimiterAllowsABurstThenOneJoinPerInterval() {
        var limiter = JoinRateLimiter(burst: 3, interval: 2)
        var allowed = 0
        for _ in 0..<3 where limiter.allow("mal", at: Self.t0) { allowed += 1 }
        #expect(allowed == 3)
        let fourth = limiter.allow("mal", at: Self.t0)
        let early = limiter.allow("mal", at: Self.t0 + 1.9)
        let earned = limiter.allow("mal", at: Self.t0 + 2.1)
        let other = limiter.allow("ada", at: Self.t0 + 2.1)
        #expect(!fourth)
        #expect(!early)
        #expect(earned)
        #expect(other, "buckets are per client")
        // Full buckets are forgotten, so memory follows the active clients.
        #expect(limiter.tracked == 2)
        limiter.prune(at: Self.t0 + 30)
        #expect(limiter.tracked == 0)
    }

    @Test func rejectionReportsAreBoundedAndSummarised() throws {
        var reports = RejectionReports(perSecond: 2)
        var events: [BrainEvent] = []
        for i in 0..<5 {
            events += reports.report(kind: "join", topic: "beacons/1/1/observers/x", reason: "bad", bytes: i, at: Self.t0 + 0.1)
        }
        #expect(events.count == 2)
        events += reports.roll(at: Self.t0 + 0.5)
        #expect(events.count == 2, "the second is not over yet")
        events += reports.roll(at: Self.t0 + 1.2)
        #expect(events.last == .suppressed(count: 3, since: Self.t0 + 0.1, at: Self.t0 + 1.2))
        #expect(reports.roll(at: Self.t0 + 5).isEmpty)
    }

    @Test func theRosterBookKeepsOneEntryPerClientAndStore() {
        let topics = Topics()
        var book = RosterBook()
        let first = ObserverJoin(key: .init(beacon: BeaconRef(major: 100, minor: 1), client: "ada"),
                                 profile: ObserverProfile(name: "Ada"), since: Self.c0, fingerprint: "a")
        let later = ObserverJoin(key: .init(beacon: BeaconRef(major: 100, minor: 2), client: "ada"),
                                 profile: ObserverProfile(name: "Ada L.", photo: [0xFF, 0xD8, 0xFF]), since: Self.c0 + 5,
                                 fingerprint: "b")
        let entry = book.update(client: "ada", store: 100, joins: [later, first], topics: topics)
        #expect(entry?.name == "Ada L.")
        #expect(entry?.since == Self.c0)
        #expect(entry?.photo == "beacons/100/2/observers/ada")
        #expect(book.count(of: 100) == 1)
        #expect(book.update(client: "ada", store: 100, joins: [], topics: topics) == nil)
        #expect(book.count(of: 100) == 0)
        #expect(book.stores.isEmpty)
    }

    @Test(arguments: [
        ("stores/100/customers/ada", true), ("stores/0/customers/ada", true), ("stores/01/customers/ada", false),
        ("stores/100/customers", false), ("stores/100/customers/a+b", false), ("stores/70000/customers/a", false),
        ("stores/100/roster", false),
    ])
    func customerTopics(topic: String, valid: Bool) {
        let parsed = Topics().parse(topic)
        if case .customer? = parsed { #expect(valid) } else { #expect(!valid) }
        #expect(Topics(prefix: "acme").parse("acme/" + topic) == parsed)
    }

    @Test func zoneAndBeaconNamesAreBoundedInTheConfig() {
        let long = String(repeating: "z", count: FleetConfig.maxNameLength + 1)
        let text = """
        {"gateways": [{"id": "door", "zone": "\(long)"}],
         "beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 2, "name": "\(long)"}]}
        """
        #expect(throws: ConfigErrors.self) { try FleetConfig.parse(text) }
        do {
            _ = try FleetConfig.parse(text)
        } catch {
            #expect(error.errors.map(\.description) == [
                "gateways[0].zone: is 201 characters long; at most 200",
                "beacons[0].name: is 201 characters long; at most 200",
            ])
        }
    }
}

import BeaconKit
import Contract
import BrainCore
import Config
import Testing
import Tracking

/// Issue 19 item 4: decisions are dated in capture time, always, even for the first beacons
/// of a run, whose gateway's presence message arrives before any of its RSSI reports.
@Suite struct CaptureTimeTests {
    /// A replay of a capture a year old, run now.
    static let captured = t(-365 * 86_400)

    @Test func aPresenceBeforeAnyReportEntersAtItsCaptureTime() throws {
        var h = Harness(config: testConfig(rules: RecordSealTests.rules), at: t(0))
        let gateway = h.topics.presence(of: window, seenBy: "door")
        h.publish(gateway, presenceJSON(window, "door", rssi: -60, since: Self.captured + 0.2), retain: true, at: t(1))
        h.publish(h.topics.rssiReports(ofGateway: "door"),
                  rssiReport("door", from: Self.captured, to: Self.captured + 0.5, [(window, -60)]).json, at: t(1.1))
        let enter = try #require(h.sent.first { $0.topic == h.topics.zoneEvents(of: window) }?.json)
        #expect(enter["event"] == .string("enter"))
        #expect(enter["ts"] == .string((Self.captured + 0.2).iso8601), "\(enter)")
        #expect(enter["since"] == .string((Self.captured + 0.2).iso8601))
        #expect(h.core.presence[window]?.since == Self.captured + 0.2)
        let record = try #require(h.retained[h.topics.visitRecord(of: window)])
        #expect(record.contains((Self.captured + 0.2).iso8601), "the visit's since: \(record)")
        #expect(!h.sent.contains { $0.text.contains(t(1).iso8601.prefix(10)) && $0.topic.hasSuffix("/events") },
                "nothing dated by the wall clock")
    }

    /// A brain (re)started while a visit it never recorded goes on: the visit is dated by
    /// the gateway's capture time, not by the moment the brain settled.
    @Test func aVisitBegunWhileNoBrainRanIsDatedInCaptureTime() {
        let h = Harness(retained: ["beacons/100/2/presence/door": presenceJSON(window, "door", rssi: -60, since: Self.captured)],
                        at: t(0))
        #expect(h.core.presence[window]?.since == Self.captured)
        #expect(h.retained[h.topics.visitRecord(of: window)]?.contains(Self.captured.iso8601) == true)
    }
}

/// Issue 20 item 5: a brain restarted (SIGKILL) while customers stand still rebuilds their
/// zones silently from its sealed records and the gateways' retained presence: the first
/// seconds of reports after the restart (a few samples, one of them a reflection) move
/// nobody, and it publishes no zone decision for a customer who never moved.
@Suite struct RestartZoneTests {
    @Test func aRestartedBrainDecidesNoZoneForACustomerWhoNeverMoved() throws {
        let key = RecordSealTests.key
        var core = BrainCore(config: testConfig())
        core.recordSeal = key
        var h = Harness(core: core, at: t(0))
        h.announce(window, by: "door", rssi: -60, at: t(0.5))
        h.announce(window, by: "till", rssi: -75, at: t(0.5))
        func report(_ time: Double, door: Double, till: Double) {
            h.publish(h.topics.rssiReports(ofGateway: "door"), rssiReport("door", from: time, to: time + 0.5, [(window, door)]).json,
                      at: t(time + 0.5))
            h.publish(h.topics.rssiReports(ofGateway: "till"), rssiReport("till", from: time, to: time + 0.5, [(window, till)]).json,
                      at: t(time + 0.5))
        }
        var time = 0.0
        while time < 10 { report(time, door: -60, till: -75); time += 0.5 }
        #expect(h.core.presence[window]?.zone == "door")
        // SIGKILL; restarted 2 s later on what the broker holds.
        var restarted = BrainCore(config: testConfig())
        restarted.recordSeal = key
        var again = Harness(core: restarted, retained: h.retained, at: t(12))
        #expect(again.core.presence[window]?.zone == "door")
        h = again
        // The first window after the restart carries a reflection: the till hears −50.
        report(12, door: -70, till: -50)
        time = 12.5
        while time < 20 { report(time, door: -60, till: -75); time += 0.5 }
        again = h
        #expect(again.core.presence[window]?.zone == "door")
        let zoneEvents = again.sent.filter { $0.topic == again.topics.zoneEvents(of: window) }.map(\.text)
        #expect(zoneEvents.isEmpty, "\(zoneEvents)")
    }
}

/// Issue 20 item 4: what the evidence cannot support is reported as a gap, never invented.
@Suite struct ReportGapTests {
    @Test func aSpanAGatewaysReportsNeverCoveredIsReportedOnBrainEvents() throws {
        var h = Harness(at: t(0))
        for time in stride(from: 0.0, to: 2, by: 0.5) {
            h.publish(h.topics.rssiReports(ofGateway: "door"), rssiReport("door", from: time, to: time + 0.5, [(window, -60)]).json,
                      at: t(time + 0.5))
        }
        #expect(h.events.isEmpty)
        // The reports from 2 s to 7 s were lost (older than the gateway's backlog, say).
        h.publish(h.topics.rssiReports(ofGateway: "door"), rssiReport("door", from: 7, to: 7.5, [(window, -60)]).json, at: t(7.5))
        // Read back as Contract's BrainEvent; its bytes ("seconds":5 among them) are EventsTests'.
        #expect(h.events.last == .gap(gateway: "door", from: t(2), to: t(7)))
        #expect(h.log.contains { $0.message.contains("decided as unknown") })
        // The visit went on through the gap: unknown is not silence.
        #expect(h.core.presence[window] != nil)
        #expect(!h.sent.contains { $0.topic == h.topics.zoneEvents(of: window) && $0.text.contains(#""exit""#) })
    }
}

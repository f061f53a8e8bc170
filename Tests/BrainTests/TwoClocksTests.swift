import BeaconKit
import Brain
import BrainCore
import Config
import Contract
import LiveClock
import TestSupport
import Testing

/// Issue 21 item 3: where the brain's two clocks meet. A store's capture from 2019 is played
/// to a live brain whose clock (a `ManualClock`) reads 2030 (neither the capture's
/// time nor the machine's). Its health is dated by that
/// clock; its decisions (the enter's and exit's `ts` and `since`) in the capture's time; and
/// the one timer of the fleet presence that runs on the brain's own clock — a gateway gone
/// silent holds decisions back for `clockHold` seconds, then is let go — ends the visit
/// when the clock has moved `clockHold`, at the capture time a replay of the same reports
/// decides.
///
/// Fails if the report clock's patience ran on capture time (the silent gateway holds
/// capture time still: it would never be let go, and the visit would never end), if it
/// ran on the machine's clock instead of the service's (the visit would end, or not, with
/// real time, whatever the manual clock says), if a decision were dated by the brain's
/// clock (2030, not 2019), or if health were dated by anything but it.
@Suite("The brain's two clocks", .capturingLogs)
struct TwoClocksTests {
    static let captured = CaptureTime(iso8601: "2019-06-01T08:00:00.000Z")!
    static let wall = WallTime(iso8601: "2030-01-01T12:00:00.000Z")!

    /// The door hears the counter for 3 s, then reports it gone until 40 s; the till reports
    /// nothing for 3 s and then falls silent (no `offline`: it holds the decisions back).
    static let reports: [RSSIReport] = (0..<80).flatMap { window -> [RSSIReport] in
        let from = captured + Double(window) / 2
        let door = rssiReport("door", from: from, to: from + 0.5, window < 6 ? [(counter, -60)] : [])
        return window < 6 ? [door, rssiReport("till", from: from, to: from + 0.5, [])] : [door]
    }

    /// The same reports replayed straight into a core, its present the capture's time.
    static func replayed() throws -> [ZoneDecision] {
        var h = Harness(config: testConfig(), at: captured)
        for report in reports {
            h.publish(h.topics.rssiReports(ofGateway: report.gateway), report.json, at: report.to)
            h.advance(to: report.to)
        }
        return try h.sent.filter { $0.topic == h.topics.zoneEvents(of: counter) }
            .map { try ZoneDecision(parsing: try #require($0.json), topic: counter) }
    }

    @Test("a capture from 2019 played to a brain whose clock reads 2030: health in the brain's time, decisions in the capture's, a silent gateway let go after clockHold of the brain's clock")
    func aPastCaptureUnderAManualClock() async throws {
        let expected = try Self.replayed()
        try #require(expected.map(\.kind) == [.enter, .exit], "the replay: \(expected)")

        let directory = try TemporaryDirectory("brain-two-clocks")
        let broker = try await MosquittoBroker.start(in: directory)
        let clock = ManualClock(at: Self.wall)
        let brain = try await RunningBrain.start(testConfig(), broker: broker, clock: clock)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/100/1/events", "brain/health/+"],
                                                        in: directory)
        let gateways = try await Peer(broker)
        let topic = "beacons/100/1/events"

        let received = brain.statistics.counters.received
        for report in Self.reports { try gateways.publish("gateways/\(report.gateway)/rssi", report.json) }
        #expect(await eventually(timeout: 30) { brain.statistics.counters.received == received + Self.reports.count },
                "\(broker.diagnostics)")
        let enter = await watch.waitForJSON(on: topic, timeout: 30) { $0["event"] == .string("enter") }
        #expect(try enter.map { try ZoneDecision(parsing: $0, topic: counter) } == expected.first, "\(String(describing: enter))")

        /// Waits until the brain's timers have gone round at the time the clock moved to. In
        /// steps of 0.25 s: a longer gap between two rounds counts as the brain paused
        /// (`ReportClock.longestPause`), not as its gateways silent.
        func advance(by seconds: Double) async {
            var left = seconds
            while left > 0 {
                clock.advance(by: min(0.25, left))
                left -= 0.25
                let now = clock.monotonic()
                #expect(await eventually(timeout: 30) { (brain.statistics.timerRound ?? -1) >= now }, "no round at \(now) s")
            }
        }
        // Every report is in; the till holds the decisions at 3 s of capture time.
        await advance(by: 1.5)
        #expect(brain.statistics.beacons == 1, "1.5 s of the brain's clock: the till may still be late")
        await advance(by: 1.5)
        #expect(brain.statistics.beacons == 0, "3 s of the brain's clock: the till is let go, the exit decided")
        let exit = await watch.waitForJSON(on: topic, timeout: 30) { $0["event"] == .string("exit") }
        // Health: due as the brain settled, published at a round of its timers (before the
        // clock moved or at its first move), dated by that clock.
        let health = await watch.waitFor(timeout: 30) { $0.topic.hasPrefix("brain/health/") && !$0.payload.isEmpty }
        let healthTS = health.flatMap { try? JSONParser().parse($0.payload) }?["ts"]?.stringValue.flatMap(WallTime.init(iso8601:))
        #expect(healthTS.map { (Self.wall...Self.wall + 3).contains($0) } == true, "\(String(describing: health?.text))")
        let decided = try exit.map { try ZoneDecision(parsing: $0, topic: counter) }
        #expect(decided == expected.last, "live \(String(describing: exit)), replayed \(expected)")
        #expect(exit?["ts"]?.stringValue?.hasPrefix("2019-06-01T08:00:") == true, "capture time: \(String(describing: exit))")
        #expect(exit?["since"]?.stringValue?.hasPrefix("2019-06-01T08:00:00") == true)

        await gateways.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }
}

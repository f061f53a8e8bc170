import BeaconKit
import Contract
import BrainCore
import Testing
import Tracking

/// The zone fusion across a broker outage that began before it had decided anything: the
/// broker outage fault test's graceful stops (1 s into the replay) saw a beacon that never
/// left exit and enter again at the first reports after the restart.
@Suite struct FleetPresenceOutageTests {
    /// The door's only report before the outage was still waiting for the counter's (which
    /// never came before the broker went away) when the reports stopped. The gap between that
    /// report and the next one is unknown, not silence: 100/1, heard on both sides of it, stays
    /// one visit.
    @Test func reportsWaitingForAnotherGatewayWhenAnOutageBeganDoNotReadTheOutageAsSilence() {
        var fleet = newFleet()
        var events: [FleetEvent] = []
        for gateway in ["door", "counter"] { events += fleet.gatewayStatus(gateway, online: true) }
        // The door's retained presence enters both beacons; its first report waits for the counter's.
        events += fleet.gatewayPresence(presenceReport(counter, "door", rssi: -60), retained: false, at: t(0.2))
        events += fleet.gatewayPresence(presenceReport(window, "door", rssi: -60), retained: false, at: t(0.2))
        events += fleet.report(rssiReport("door", from: 0, to: 0.5, [(counter, -60), (window, -60)]), receivedAt: w(0.5))
        #expect(events.filter { if case .enter = $0 { true } else { false } }.count == 2)
        // The broker is away for 60 s (the door's will is held by the brain, then dropped on the
        // reconnect). The read-back: the door's retained presence of 100/1 (100/2's was deleted
        // while the brain was away) and both gateways online.
        events = fleet.gatewayPresence(presenceReport(counter, "door", rssi: -60), retained: true, at: t(61))
        for gateway in ["door", "counter"] { events += fleet.gatewayStatus(gateway, online: true) }
        // The reports again: 100/1 at the door all along.
        events += feed(&fleet, counter, gateways: ["door", "counter"], from: 61, to: 75) { gateway, _ in
            gateway == "door" ? -60 : nil
        }
        let about1 = events.filter { $0.beacon == counter }
        #expect(!about1.contains { if case .exit = $0 { true } else { false } }, "100/1 never left: \(about1)")
        #expect(!about1.contains(.enter(counter)), "100/1 never left: \(about1)")
        #expect(fleet[counter]?.zone == "door")
        #expect(fleet.takeDecisions().filter { $0.beacon == counter }.map(\.kind) == [.enter])
    }

    /// A view known from presence whose gateway deletes it ends the visit; the gateway's
    /// report entries of the beacon still waiting for another gateway's reports end with it
    /// (BrokerOutageTests 60 s runs saw 100/2 go door, absent, door, absent: decided later,
    /// they started a second visit).
    @Test
    func aDeletionThatEndsAVisitTakesItsPendingReportEntriesWithIt() {
        var fleet = newFleet()
        var events: [FleetEvent] = []
        for gateway in ["door", "counter"] { events += fleet.gatewayStatus(gateway, online: true) }
        events += fleet.gatewayPresence(presenceReport(window, "door", rssi: -60), retained: false, at: t(0.2))
        events += fleet.report(rssiReport("door", from: 0, to: 0.5, [(window, -60)]), receivedAt: w(0.5))
        events += fleet.gatewayPresenceDeleted(window, gateway: "door")
        events += feed(&fleet, window, gateways: ["door", "counter"], from: 0.5, to: 20) { _, _ in nil }
        #expect(fleet.takeDecisions().filter { $0.beacon == window }.map(\.kind) == [.enter, .exit], "\(events)")
    }

    /// After an outage a gateway sends the reports it kept, then its presence: the deletion
    /// of a beacon it stopped hearing in the outage can arrive while its reports of that
    /// beacon still wait for the other gateway's. The reports decide the exit, dated by their
    /// silence in capture time as in a run without the outage, not by how far the brain had
    /// decided when the deletion came (BrokerOutageTests: 100/9's exit at 0 s, not 3.5 s).
    @Test
    func aDeletionThatArrivesBeforeTheGatewaysReportsAreDecidedLeavesTheExitToThem() {
        func run(deletingEarly: Bool) -> [ZoneDecision] {
            var fleet = newFleet()
            for gateway in ["door", "counter"] { _ = fleet.gatewayStatus(gateway, online: true) }
            // The presence arrives first: the view is the presence's.
            _ = fleet.gatewayPresence(presenceReport(window, "door", rssi: -60), retained: false, at: t(0.2))
            // The door heard 100/2 for 1.5 s; its reports wait for the counter's.
            for from in stride(from: 0.0, to: 6, by: 0.5) {
                _ = fleet.report(rssiReport("door", from: from, to: from + 0.5, from < 1.5 ? [(window, -60)] : []),
                                 receivedAt: w(20))
            }
            if deletingEarly { _ = fleet.gatewayPresenceDeleted(window, gateway: "door") }
            _ = feed(&fleet, window, gateways: ["counter"], from: 0, to: 6) { _, _ in nil }
            _ = feed(&fleet, window, gateways: ["door", "counter"], from: 6, to: 30) { _, _ in nil }
            if !deletingEarly { _ = fleet.gatewayPresenceDeleted(window, gateway: "door") }
            return fleet.takeDecisions().filter { $0.beacon == window }
        }
        let live = run(deletingEarly: false)
        #expect(live.map(\.kind) == [.enter, .exit])
        #expect(run(deletingEarly: true) == live)
        #expect(live.last.map { $0.at > t(1.5) } == true, "dated by the silence after 1.5 s: \(live)")
    }
}

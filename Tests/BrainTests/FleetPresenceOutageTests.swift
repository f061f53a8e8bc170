import BeaconKit
import Contract
import BrainCore
import Config
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

    /// Every gateway's reports stop at once: the brain's own path died before it noticed (a
    /// node cut off, a paused broker; it then reconnects), or the one path they share did (a
    /// store's bridge). The gateway whose report had not come yet used to be let go after
    /// `clockHold` as if it alone had stopped, and when the reports came back, the other
    /// gateway's first, they decided its beacons past their exitTimeout: an exit, and an
    /// enter with its next reports (issue 22: NATSNodeFaultTests' cuts, "100/1 ended at
    /// 7.25 s"). Nobody heard, nobody is let go: the span is unknown, decided as such.
    @Test(arguments: [true, false])
    func whenNoGatewayIsHeardNoneIsLetGoAndTheSilenceEndsNoVisit(brainReconnects: Bool) {
        var fleet = FleetPresence(settings: .init(BrainConfig(), defaultViewTimeout: 3, step: 0.5))
        for gateway in ["door", "counter"] { _ = fleet.gatewayStatus(gateway, online: true) }
        // 100/2 at the door, 100/1 at the counter, throughout.
        func reports(_ from: Double, _ gateways: [String] = ["door", "counter"]) {
            for gateway in gateways {
                _ = fleet.report(rssiReport(gateway, from: from, to: from + 0.5, [(gateway == "door" ? window : counter, -60)]),
                                 receivedAt: w(from + 0.5))
            }
        }
        for from in stride(from: 0.0, to: 10, by: 0.5) { reports(from) }
        // The door's next report got through, the counter's did not: then nothing for 8 s while
        // the brain ticks on.
        reports(10, ["door"])
        for tick in stride(from: 10.7, through: 18.5, by: 0.2) { _ = fleet.advance(to: w(tick)) }
        #expect(fleet.reportingGateways.late.isEmpty, "nobody let go while nobody was heard")
        if brainReconnects { fleet.reconnected(at: w(18.5), patience: 45) }
        // The reports again, the door's first in every window.
        for from in stride(from: 18.0, to: 30, by: 0.5) { reports(from) }
        let decisions = fleet.takeDecisions()
        #expect(decisions.filter { $0.beacon == counter }.map(\.kind) == [.enter], "100/1 never left: \(decisions)")
        #expect(decisions.filter { $0.beacon == window }.map(\.kind) == [.enter], "100/2 never left: \(decisions)")
        #expect(fleet.decidedUntil == t(30))
        // The counter alone silent while the door is heard is let go, as before (after a
        // reconnect, only once the reconnect's patience is over).
        guard !brainReconnects else { return }
        for from in stride(from: 30.0, to: 34, by: 0.5) {
            reports(from, ["door"])
            _ = fleet.advance(to: w(from + 0.5))
        }
        #expect(fleet.reportingGateways.late == ["counter"])
    }

    /// The brain's own connection drops (the broker dropped it, stopped or starved past one
    /// and a half keepalives) while the gateways' stay up: what they report meanwhile goes to
    /// no one (QoS 0, a clean session). Back, the brain asks each for its reports after the
    /// last it has (`resendAfter`, `{"reports":{"after":…}}`); the live reports that come
    /// first, after a hole, wait for them, and the retained presence of a beacon first heard
    /// in the hole starts no visit of its own. So it decides as the run without the drop.
    /// Seen in CI (BrokerOutageTests, the brain stopped 2 s four times, dropped by the broker
    /// at load): 100/2's exit at 27.25 s instead of 13 s, the hole taken as unknown, and
    /// 100/3's enter at 15.0 s from its retained presence instead of 15.25 s from the reports.
    /// A gateway that sends nothing again (an older version) leaves the hole a gap, after
    /// `resendWait`, as before.
    @Test(arguments: [true, false])
    func aBrainDroppedWhileTheGatewaysStayUpGetsTheirReportsAgain(gatewaysResend: Bool) {
        let third = BeaconRef(major: 100, minor: 3)
        // 100/2 at the door 0–10 s, 100/1 at the counter throughout, 100/3 at the counter from 8 s.
        func report(_ gateway: String, _ from: Double, resent: Bool = false) -> RSSIReport {
            let heard: [(BeaconRef, Double?)] = gateway == "door"
                ? (from < 10 ? [(window, -60)] : [])
                : [(counter, -60)] + (from >= 8 ? [(third, -62)] : [])
            return rssiReport(gateway, from: from, to: from + 0.5, heard, resent: resent)
        }
        func run(dropped: Bool) -> (decisions: [ZoneDecision], gaps: [ReportGap], after: CaptureTime?) {
            var fleet = FleetPresence(settings: .init(BrainConfig(), defaultViewTimeout: 3, step: 0.5))
            for gateway in ["door", "counter"] { _ = fleet.gatewayStatus(gateway, online: true) }
            var after: CaptureTime?
            for from in stride(from: 0.0, to: 40, by: 0.5) {
                let lost = dropped && from >= 6 && from < 14
                if dropped && from == 14 {
                    fleet.reconnected(at: w(14.2), patience: 45)
                    // Zone names as the reports give them (the config's, in a brain).
                    var late = presenceReport(third, "counter", rssi: -62, zone: "counter")
                    late.since = t(8)
                    _ = fleet.gatewayPresence(late, retained: true, at: t(14.2))
                    _ = fleet.gatewayPresence(presenceReport(counter, "counter", rssi: -60, zone: "counter"), retained: true,
                                              at: t(14.2))
                    after = fleet.resendAfter("door")
                    #expect(fleet.resendAfter("counter") == after)
                }
                if !lost {
                    for gateway in ["door", "counter"] { _ = fleet.report(report(gateway, from), receivedAt: w(from + 0.5)) }
                }
                // The request's answer comes after two live windows: every report sent after
                // the brain's last, the live ones it already has included.
                if dropped && gatewaysResend && from == 15, let after {
                    for gateway in ["door", "counter"] {
                        for resent in stride(from: after.seconds(since: t(0)), through: from, by: 0.5) {
                            _ = fleet.report(report(gateway, resent, resent: true), receivedAt: w(from + 0.6))
                        }
                    }
                }
                _ = fleet.advance(to: w(from + 0.5))
            }
            return (fleet.takeDecisions(), fleet.takeGaps(), after)
        }
        let undisturbed = run(dropped: false)
        #expect(undisturbed.decisions.map { "\($0.beacon) \($0.kind)" }
            == ["100/1 enter", "100/2 enter", "100/3 enter", "100/2 exit"], "\(undisturbed.decisions)")
        let dropped = run(dropped: true)
        #expect(dropped.after == t(6))
        if gatewaysResend {
            #expect(dropped.decisions == undisturbed.decisions)
            #expect(dropped.gaps.isEmpty)
        } else {
            // The hole is unknown: 100/2's exit waits for its end, 100/3 enters with the reports after it.
            #expect(dropped.decisions != undisturbed.decisions)
            #expect(dropped.gaps.map(\.gateway).sorted() == ["counter", "door"])
            #expect(dropped.decisions.first { $0.beacon == window && $0.kind == .exit }.map { $0.at >= t(14) } == true)
        }
    }

    /// After the brain's reconnect a gateway it knows from its presence only (none of its
    /// reports had reached the brain) is asked for every report it kept (after the epoch),
    /// not plainly: a gateway that stayed connected ignores a plain request, and what it
    /// reported meanwhile would be lost (NATSNodeFaultTests, the brain's node killed at the
    /// first effects: 100/9's exit at 11.5 s instead of 3.5 s).
    @Test func aGatewayKnownFromItsPresenceOnlyIsAskedForEverythingItKept() {
        let nine = BeaconRef(major: 100, minor: 9)
        var fleet = FleetPresence(settings: .init(BrainConfig(), defaultViewTimeout: 3, step: 0.5))
        for gateway in ["door", "counter"] { _ = fleet.gatewayStatus(gateway, online: true) }
        _ = fleet.gatewayPresence(presenceReport(nine, "counter", rssi: -62, zone: "counter"), retained: false, at: t(0.2))
        _ = fleet.report(rssiReport("door", from: 0, to: 0.5, [(counter, -60)]), receivedAt: w(0.5))
        #expect(fleet.resendAfter("counter") == nil, "no request but after the brain's own reconnect")
        fleet.reconnected(at: w(10), patience: 45)
        #expect(fleet.resendAfter("door") == t(0.5))
        #expect(fleet.resendAfter("counter") == .epoch)
        // A live report of the counter comes first: it waits for those sent again (else it
        // would set the counter's watermark past them, and they would come as stale).
        _ = fleet.report(rssiReport("counter", from: 10, to: 10.5, []), receivedAt: w(10.1))
        // Its reports sent again, all of them: 100/9 heard 0–0.5 s, decided from them.
        for from in stride(from: 0.0, through: 10, by: 0.5) {
            _ = fleet.report(rssiReport("counter", from: from, to: from + 0.5, from < 0.5 ? [(nine, -62)] : [], resent: true),
                             receivedAt: w(10.2))
        }
        for from in stride(from: 0.5, through: 10, by: 0.5) {
            _ = fleet.report(rssiReport("door", from: from, to: from + 0.5, [(counter, -60)], resent: true), receivedAt: w(10.2))
        }
        #expect(fleet.decidedUntil == t(10.5), "the held report taken after those sent again")
        let exits = fleet.takeDecisions().filter { $0.beacon == nine && $0.kind == .exit }
        #expect(exits.count == 1 && exits.first.map { $0.at < t(5) } == true, "decided from its reports: \(exits)")
    }

    /// The other side of it: a gateway the brain has no report of, back from an outage of its
    /// own that began at the first effects with the brain's, sends its backlog unmarked when
    /// asked (its `online` read back retained, so the brain cannot tell it from one that
    /// stayed connected), and its reports wait for the reports sent again that never come,
    /// until `resendWait`. Its queued presence of a beacon those held reports hear starts no
    /// visit meanwhile: the reports decide it, dated as without the outage
    /// (BrokerOutageTests, 60 s outages: 100/3 entered at 15.0 s from that presence instead
    /// of 15.25 s from the reports).
    /// `presenceFirst`: the presence comes before the held report that hears the beacon
    /// (published a window earlier: the whole suite, BrokerOutageTests' 10 s outage).
    @Test(arguments: [false, true])
    func aPresenceWhoseGatewaysHeldReportsHearTheBeaconStartsNoVisit(presenceFirst: Bool) {
        let third = BeaconRef(major: 100, minor: 3), nine = BeaconRef(major: 100, minor: 9)
        func run(outage: Bool) -> [ZoneDecision] {
            var fleet = FleetPresence(settings: .init(BrainConfig(), defaultViewTimeout: 3, step: 0.5))
            for gateway in ["door", "counter"] { _ = fleet.gatewayStatus(gateway, online: true) }
            // The brain knows both gateways from their presence only (100/1 at the door, 100/9 at the counter).
            _ = fleet.gatewayPresence(presenceReport(counter, "door", rssi: -60), retained: false, at: t(0.2))
            _ = fleet.gatewayPresence(presenceReport(nine, "counter", rssi: -62, zone: "counter"), retained: false, at: t(0.2))
            func reports(from: Double, to: Double, at wall: Double) {
                for start in stride(from: from, to: to, by: 0.5) {
                    _ = fleet.report(rssiReport("door", from: start, to: start + 0.5, [(counter, -60)]), receivedAt: w(wall))
                    let heard: [(BeaconRef, Double?)] = start < 0.5 ? [(nine, -62)] : start >= 15 ? [(third, -62)] : []
                    _ = fleet.report(rssiReport("counter", from: start, to: start + 0.5, heard), receivedAt: w(wall))
                }
            }
            if outage {
                fleet.reconnected(at: w(61), patience: 45)
                #expect(fleet.resendAfter("counter") == .epoch)
                reports(from: 0, to: presenceFirst ? 15 : 20, at: 61.1)
                var late = presenceReport(third, "counter", rssi: -62, zone: "counter")
                late.since = t(15)
                let events = fleet.gatewayPresence(late, retained: false, at: t(61.2))
                #expect(events.isEmpty, "its held reports hear 100/3, or will: they decide")
                if presenceFirst { reports(from: 15, to: 20, at: 61.3) }
                for tick in stride(from: 61.2, through: 75, by: 0.2) { _ = fleet.advance(to: w(tick)) }
            } else {
                reports(from: 0, to: 20, at: 20)
            }
            return fleet.takeDecisions().filter { $0.beacon == third }
        }
        let undisturbed = run(outage: false)
        #expect(undisturbed.map(\.kind) == [.enter], "\(undisturbed)")
        #expect(run(outage: true) == undisturbed)
    }

    /// The broker paused at the first effects: the counter's presence of 100/9 (since 0 s) had
    /// entered it before any report of it was decided; after the outage the counter's client
    /// sends at once the QoS 1 deletion it was handed meanwhile, and its reports only when the
    /// brain asks. The deletion waits for them (`resendWait`): 100/9 is one visit, ended by the
    /// reports' silence, as without the outage (it was enter, exit at 0 s, enter, exit).
    /// The same with the deletion before the counter's live `online` (a CI-like run, the
    /// pause begun before any report of the counter): the brain holds the counter's presence
    /// only, so it waits for the counter's reports from the reconnect on — unless the counter's
    /// reports are off, when the deletion is taken at once.
    @Test(arguments: [false, true])
    func aDeletionThatComesBeforeTheReportsAfterTheBrainsReconnectWaitsForThem(deletionFirst: Bool) {
        let nine = BeaconRef(major: 100, minor: 9)
        func run(outage: Bool, reportsOff: Set<String> = []) -> [ZoneDecision] {
            var settings = FleetPresence.Settings(BrainConfig(), defaultViewTimeout: 3, step: 0.5)
            settings.reportsOff = reportsOff
            var fleet = FleetPresence(settings: settings)
            for gateway in ["door", "counter"] { _ = fleet.gatewayStatus(gateway, online: true) }
            _ = fleet.gatewayPresence(presenceReport(nine, "counter", rssi: -62, zone: "counter"), retained: false, at: t(0.2))
            func reports(_ gateway: String, from: Double, to: Double, at wall: Double) {
                guard !reportsOff.contains(gateway) else { return }
                for start in stride(from: from, to: to, by: 0.5) {
                    let heard: [(BeaconRef, Double?)] = gateway == "door" ? [(counter, -60)] : (start < 0.5 ? [(nine, -62)] : [])
                    _ = fleet.report(rssiReport(gateway, from: start, to: start + 0.5, heard), receivedAt: w(wall))
                }
            }
            _ = fleet.report(rssiReport("door", from: 0, to: 0.5, [(counter, -60)]), receivedAt: w(0.5))
            if outage {
                fleet.reconnected(at: w(10), patience: 45)
                // The counter is back too (a live `online`), and its client sends the deletion.
                if deletionFirst {
                    let now = fleet.gatewayPresenceDeleted(nine, gateway: "counter")
                    #expect(now.isEmpty == reportsOff.isEmpty, "reports off: taken at once")
                    fleet.gatewayIsBack("counter")
                } else {
                    fleet.gatewayIsBack("counter")
                    _ = fleet.gatewayPresenceDeleted(nine, gateway: "counter")
                }
                reports("counter", from: 0, to: 10, at: 10.1)
                reports("door", from: 0.5, to: 10, at: 10.1)
            } else {
                reports("counter", from: 0, to: 5, at: 5)
                _ = fleet.gatewayPresenceDeleted(nine, gateway: "counter")
                reports("counter", from: 5, to: 10, at: 10)
                reports("door", from: 0.5, to: 10, at: 10)
            }
            for tick in stride(from: 10.2, through: 25, by: 0.2) { _ = fleet.advance(to: w(tick)) }
            return fleet.takeDecisions().filter { $0.beacon == nine }
        }
        let undisturbed = run(outage: false)
        #expect(undisturbed.map(\.kind) == [.enter, .exit], "\(undisturbed)")
        #expect(run(outage: true) == undisturbed)
        if deletionFirst {
            let silent = run(outage: true, reportsOff: ["counter"])
            #expect(silent.map(\.kind) == [.enter, .exit], "\(silent)")
        }
    }

    /// A hole in the gateways' live reports while the brain stays connected: the node a
    /// store's bridge was on died and the bridge moved to another (NATSNodeFaultTests: the
    /// report of 100/9's last advertisement was lost, and its exit came at 3.25 s instead of
    /// 3.5 s), or a QoS 0 report was lost on the way. The brain asks each gateway for its
    /// reports after the last it has (`takeResendRequests`), holds the live ones meanwhile,
    /// and decides as without the loss. A gateway that does not answer leaves each hole a gap
    /// after `holeWait`, and after two such waits in a row is not asked again; with
    /// `asksAgainForHoles` off (`beaconctl score`) a hole is a gap at once, as before.
    @Test(arguments: [true, false])
    func aHoleInTheLiveReportsIsAskedForAgain(gatewaysResend: Bool) {
        // 100/2 at the door 0–10 s, 100/1 at the counter throughout; three holes in the store's reports.
        let holes: [Range<Double>] = [9..<11, 20..<21, 30..<31]
        func report(_ gateway: String, _ from: Double, resent: Bool = false) -> RSSIReport {
            let heard: [(BeaconRef, Double?)] = gateway == "door" ? (from < 10 ? [(window, -60)] : []) : [(counter, -60)]
            return rssiReport(gateway, from: from, to: from + 0.5, heard, resent: resent)
        }
        func run(lossy: Bool, asking: Bool = true) -> (decisions: [ZoneDecision], gaps: [ReportGap], asked: [String]) {
            var settings = FleetPresence.Settings(BrainConfig(), defaultViewTimeout: 3, step: 0.5)
            settings.asksAgainForHoles = asking
            var fleet = FleetPresence(settings: settings)
            for gateway in ["door", "counter"] { _ = fleet.gatewayStatus(gateway, online: true) }
            var asked: [String] = []
            var answers: [(gateway: String, after: CaptureTime, at: Double)] = []
            for from in stride(from: 0.0, to: 40, by: 0.5) {
                if !(lossy && holes.contains { $0.contains(from) }) {
                    for gateway in ["door", "counter"] {
                        _ = fleet.report(report(gateway, from), receivedAt: w(from + 0.5))
                        for request in fleet.takeResendRequests() {
                            asked.append("\(request.gateway) after \(request.after.seconds(since: t(0)))")
                            // The answer comes one window later: every report after the brain's last,
                            // the live ones it holds included.
                            answers.append((request.gateway, request.after, from + 0.5))
                        }
                    }
                }
                if gatewaysResend {
                    for answer in answers where answer.at == from {
                        for resent in stride(from: answer.after.seconds(since: t(0)), through: from, by: 0.5) {
                            _ = fleet.report(report(answer.gateway, resent, resent: true), receivedAt: w(from + 0.6))
                        }
                    }
                }
                _ = fleet.advance(to: w(from + 0.5))
            }
            #expect(fleet.decidedUntil == t(40), "nothing held at the end")
            return (fleet.takeDecisions(), fleet.takeGaps(), asked)
        }
        let undisturbed = run(lossy: false)
        #expect(undisturbed.decisions.map { "\($0.beacon) \($0.kind)" } == ["100/1 enter", "100/2 enter", "100/2 exit"],
                "\(undisturbed.decisions)")
        #expect(undisturbed.asked.isEmpty)
        let lossy = run(lossy: true)
        if gatewaysResend {
            #expect(lossy.asked == ["door after 9.0", "counter after 9.0", "door after 20.0", "counter after 20.0",
                                    "door after 30.0", "counter after 30.0"])
            #expect(lossy.decisions == undisturbed.decisions)
            #expect(lossy.gaps.isEmpty)
        } else {
            // Asked twice each, then not again; each hole a gap, as where nobody asks.
            #expect(lossy.asked == ["door after 9.0", "counter after 9.0", "door after 20.0", "counter after 20.0"])
            let unasked = run(lossy: true, asking: false)
            #expect(unasked.asked.isEmpty)
            #expect(lossy.decisions == unasked.decisions)
            #expect(lossy.decisions != undisturbed.decisions)
            #expect(lossy.decisions.first { $0.beacon == window && $0.kind == .exit }.map { $0.at >= t(11) } == true,
                    "100/2's exit waits for the hole's end: \(lossy.decisions)")
            #expect(lossy.gaps.map(\.gateway).sorted() == ["counter", "door"])
        }
    }

    /// A live presence of a beacon first heard in a hole that is being asked for starts no
    /// visit: the reports sent again decide it, dated as without the loss.
    @Test func aPresenceFromInsideAHoleWaitsForTheReportsSentAgain() {
        let third = BeaconRef(major: 100, minor: 3)
        func report(_ gateway: String, _ from: Double, resent: Bool = false) -> RSSIReport {
            // 100/3 at the counter from 6 to 10 s: inside the hole, so the held reports do not hear it.
            let heard: [(BeaconRef, Double?)] = gateway == "door" ? [(counter, -60)] : (from >= 6 && from < 10 ? [(third, -62)] : [])
            return rssiReport(gateway, from: from, to: from + 0.5, heard, resent: resent)
        }
        func run(lossy: Bool) -> [ZoneDecision] {
            var settings = FleetPresence.Settings(BrainConfig(), defaultViewTimeout: 3, step: 0.5)
            settings.asksAgainForHoles = true
            var fleet = FleetPresence(settings: settings)
            for gateway in ["door", "counter"] { _ = fleet.gatewayStatus(gateway, online: true) }
            for from in stride(from: 0.0, to: 20, by: 0.5) {
                if lossy && from >= 5 && from < 11 { continue }
                for gateway in ["door", "counter"] { _ = fleet.report(report(gateway, from), receivedAt: w(from + 0.5)) }
                if lossy && from == 11 {
                    #expect(fleet.takeResendRequests().map(\.gateway) == ["door", "counter"])
                    var late = presenceReport(third, "counter", rssi: -62, zone: "counter")
                    late.since = t(6)
                    #expect(fleet.gatewayPresence(late, retained: false, at: t(11.6)).isEmpty, "the reports decide")
                    for gateway in ["door", "counter"] {
                        for resent in stride(from: 5.0, through: 11, by: 0.5) {
                            _ = fleet.report(report(gateway, resent, resent: true), receivedAt: w(11.7))
                        }
                    }
                }
                _ = fleet.advance(to: w(from + 0.5))
            }
            return fleet.takeDecisions().filter { $0.beacon == third }
        }
        let undisturbed = run(lossy: false)
        #expect(undisturbed.map(\.kind) == [.enter, .exit], "\(undisturbed)")
        #expect(run(lossy: true) == undisturbed)
    }

    /// The same through the brain's core: the request goes out on the gateway's command topic
    /// (`{"reports":{"after":…}}`, QoS 1, with a log line), and the reports sent again fill
    /// the hole: no gap on `brain/events`, the visit decided as without the loss.
    @Test func theBrainAsksTheGatewayOnItsCommandTopic() throws {
        var h = Harness(core: BrainCore(config: testConfig()), asking: true)
        func send(_ from: Double, resent: Bool = false) {
            let report = rssiReport("door", from: from, to: from + 0.5, [(window, -60)], resent: resent)
            h.publish(h.topics.rssiReports(ofGateway: "door"), report.json, at: t(from + 0.5))
        }
        for from in stride(from: 0.0, to: 2, by: 0.5) { send(from) }
        // 2–3 s lost on the way.
        send(3)
        let request = try #require(h.sent.last { $0.topic == h.topics.commands(ofGateway: "door") })
        #expect(request.text == #"{"reports":{"after":"\#(t(2).iso8601)"}}"#)
        #expect(request.qos == 1 && !request.retain)
        #expect(h.log.contains { $0.message.contains("a hole in a gateway's reports: asking it to send them again") })
        for from in stride(from: 2.0, through: 3, by: 0.5) { send(from, resent: true) }
        send(3.5)
        #expect(h.events.isEmpty, "no gap: \(h.events)")
        #expect(h.core.presence.decidedUntil.map { $0 >= t(3.5) } == true)
        #expect(h.core.presence[window] != nil)
    }

    /// A store's bridge back after the centre lost its connection without telling
    /// (NATSNodeFaultTests, the bridge's node cut off at the first effects: the bridge noticed
    /// by its keepalive only, 21 s later, and the brain had none of the store's reports yet,
    /// so it saw no hole; the store's queued deletion ended 100/9 at once). Its live `1`
    /// makes the brain wait for what the store's gateways sent meanwhile: the gateways it
    /// knows are asked for all they kept, and the queued deletion and the live reports wait
    /// for those, and so does the queued presence of a beacon first heard during the cut
    /// (100/3, at the counter from 15 s: it entered at 15.0 s from that presence, not at
    /// 15.25 s from the reports). The decisions are those of a run without the cut.
    /// `.fast`: the bridge back 0.7 s after the reports stopped (its node killed), the hole
    /// filled before the counter's deletion of 100/9 is made: the deletion is live news and
    /// is taken at once, not at the end of everyone's wait (`resendWait`: the exit came at
    /// 11.5 s instead of 3.5 s). Here 100/9 is known from the counter's presence only.
    /// `.fastWithoutHole`: the same, but the brain had the gateways' reports up to the move
    /// and their live reports go on from there, so every report sent again is one it has
    /// (stale): that answer ends the wait as well.
    /// `.replayedOnline`: the bridge back 4.6 s after the kill, before any report had reached
    /// the brain; the store's broker replays the gateways' retained `online` to the centre
    /// with it, and the reports of the seconds the centre held the reconnect come in one
    /// burst, the counter's deletion of 100/9 among them, before the request. The `online`
    /// is not a gateway back from its own outage: the live reports wait for the hole.
    /// `.answerLost`: as `.fast`, but the counter's answer never comes (the request was lost
    /// with the killed node: NATSNodeFaultTests, 1 of 6 bridge kills after 8628ccb): the
    /// counter's deletion of 100/9 waits to the end of the wait, 10 s, and is dated when the
    /// counter made it (the capture time its reports had reached when it came: 3.5 s), not
    /// at the wait's end (the exit came at 11.5 s).
    enum Move: CaseIterable { case cut, fast, fastWithoutHole, replayedOnline, answerLost }

    @Test(arguments: Move.allCases)
    func aStoreWhoseBridgeReconnectsIsAskedForWhatItsGatewaysSent(move: Move) {
        let fastMove = move != .cut
        let nineInReports = move == .cut || move == .replayedOnline
        let nine = BeaconRef(major: 100, minor: 9), third = BeaconRef(major: 100, minor: 3)
        var thirdsPresence = presenceReport(third, "counter", rssi: -62, zone: "counter")
        thirdsPresence.since = t(15)
        func run(cut: Bool) -> [ZoneDecision] {
            var settings = FleetPresence.Settings(BrainConfig(), defaultViewTimeout: 3, step: 0.5)
            settings.asksAgainForHoles = true
            var fleet = FleetPresence(settings: settings)
            for gateway in ["door", "counter"] { _ = fleet.gatewayStatus(gateway, online: true) }
            _ = fleet.gatewayPresence(presenceReport(counter, "door", rssi: -60), retained: false, at: t(0.2))
            _ = fleet.gatewayPresence(presenceReport(nine, "counter", rssi: -62, zone: "counter"), retained: false, at: t(0.2))
            func reports(from: Double, to: Double, at wall: Double?, resent: Bool = false) {
                for start in stride(from: from, to: to, by: 0.5) {
                    let at = w(wall ?? start + 0.5)
                    _ = fleet.report(rssiReport("door", from: start, to: start + 0.5, [(counter, -60)], resent: resent), receivedAt: at)
                    // (With `fastMove`, 100/9 is the counter's presence only: its deletion ends the visit.)
                    let heard: [(BeaconRef, Double?)] = start < 0.5 && nineInReports ? [(nine, -62)] : start >= 15 ? [(third, -62)] : []
                    _ = fleet.report(rssiReport("counter", from: start, to: start + 0.5, heard, resent: resent), receivedAt: at)
                }
            }
            /// Live from `start`: the counter's deletion of 100/9 made at 3.5 s, its presence of
            /// 100/3 a window before the report that hears it.
            func live(from start: Double) {
                reports(from: start, to: 3.5, at: nil)
                _ = fleet.gatewayPresenceDeleted(nine, gateway: "counter")
                reports(from: 3.5, to: 15, at: nil)
                _ = fleet.gatewayPresence(thirdsPresence, retained: false, at: t(15.1))
                reports(from: 15, to: 25, at: nil)
            }
            if cut && move == .replayedOnline {
                fleet.storeReconnected(["door", "counter"], at: w(5.6))
                for gateway in ["door", "counter"] { fleet.gatewayIsBack(gateway) }
                reports(from: 1.5, to: 3.5, at: 5.7)
                _ = fleet.gatewayPresenceDeleted(nine, gateway: "counter")
                reports(from: 3.5, to: 5.5, at: 5.7)
                #expect(fleet.takeResendRequests().map(\.gateway) == ["door", "counter"])
                reports(from: 0, to: 5.5, at: 5.8, resent: true)
                reports(from: 5.5, to: 15, at: nil)
                _ = fleet.gatewayPresence(thirdsPresence, retained: false, at: t(15.1))
                reports(from: 15, to: 25, at: nil)
            } else if cut && move == .fastWithoutHole {
                reports(from: 0, to: 1.5, at: nil)
                fleet.storeReconnected(["door", "counter"], at: w(1.7))
                reports(from: 1.5, to: 2, at: 2)
                #expect(fleet.takeResendRequests().map(\.gateway) == ["door", "counter"])
                reports(from: 0, to: 2, at: 2.1, resent: true)
                live(from: 2)
                #expect(fleet.staleReports == 8, "every report sent again was one the brain had")
            } else if cut && move == .answerLost {
                fleet.storeReconnected(["door", "counter"], at: w(1.7))
                reports(from: 1.5, to: 2, at: 2)
                #expect(fleet.takeResendRequests().map(\.gateway) == ["door", "counter"])
                for start in stride(from: 0.0, to: 2, by: 0.5) {
                    _ = fleet.report(rssiReport("door", from: start, to: start + 0.5, [(counter, -60)], resent: true), receivedAt: w(2.1))
                }
                live(from: 2)
            } else if cut && fastMove {
                // Nothing of the store's reports reached the brain before the move.
                fleet.storeReconnected(["door", "counter"], at: w(1.7))
                reports(from: 1.5, to: 2, at: 2)
                #expect(fleet.takeResendRequests().map(\.gateway) == ["door", "counter"])
                reports(from: 0, to: 2, at: 2.1, resent: true)
                live(from: 2)
            } else if cut {
                fleet.storeReconnected(["door", "counter", "elsewhere"], at: w(21))
                #expect(fleet.resendAfter("counter") == .epoch && fleet.resendAfter("door") == .epoch)
                #expect(fleet.takeResendRequests().isEmpty, "asked once their first live report comes through the bridge")
                // The store's queue first: the counter's deletion of 100/9 (at 3.5 s), then live reports.
                #expect(fleet.gatewayPresenceDeleted(nine, gateway: "counter").isEmpty, "the deletion waits for the reports")
                #expect(fleet.gatewayPresence(thirdsPresence, retained: false, at: t(21.05)).isEmpty, "so does the presence")
                reports(from: 21, to: 22, at: 21.1)
                #expect(fleet.decidedUntil == nil, "the live reports wait for those sent again")
                let asked = fleet.takeResendRequests()
                #expect(asked.map(\.gateway) == ["door", "counter"] && asked.allSatisfy { $0.after == .epoch }, "\(asked)")
                reports(from: 0, to: 21, at: 21.2, resent: true)
                reports(from: 22, to: 25, at: nil)
            } else {
                live(from: 0)
            }
            for tick in stride(from: 25.0, through: 35, by: 0.5) { _ = fleet.advance(to: w(tick)) }
            #expect(fleet.takeUnansweredResends() == (cut && move == .answerLost ? ["counter"] : []))
            return fleet.takeDecisions()
        }
        let undisturbed = run(cut: false)
        #expect(undisturbed.filter { $0.beacon == nine }.map(\.kind) == [.enter, .exit], "\(undisturbed)")
        #expect(undisturbed.filter { $0.beacon == third }.map(\.kind) == [.enter], "\(undisturbed)")
        #expect(run(cut: true) == undisturbed)
    }

    /// A gateway asked for its reports after its store's bridge came back that sends none
    /// (the request or the answer lost): its wait ends at `resendWait`, and it is named
    /// (`takeUnansweredResends`, which the brain logs as a warning), once.
    @Test func aGatewayThatDoesNotAnswerIsNamedWhenTheWaitEnds() {
        var settings = FleetPresence.Settings(BrainConfig(), defaultViewTimeout: 3, step: 0.5)
        settings.asksAgainForHoles = true
        var fleet = FleetPresence(settings: settings)
        for gateway in ["door", "counter"] { _ = fleet.gatewayStatus(gateway, online: true) }
        for start in stride(from: 0.0, to: 2, by: 0.5) {
            for gateway in ["door", "counter"] {
                _ = fleet.report(rssiReport(gateway, from: start, to: start + 0.5, [(counter, -60)]), receivedAt: w(start + 0.5))
            }
        }
        fleet.storeReconnected(["door", "counter"], at: w(2))
        for start in stride(from: 2.0, to: 14, by: 0.5) {
            for gateway in ["door", "counter"] {
                _ = fleet.report(rssiReport(gateway, from: start, to: start + 0.5, [(counter, -60)]), receivedAt: w(start + 0.5))
            }
            // The counter answers; the door's answer is lost.
            if start == 2 { _ = fleet.report(rssiReport("counter", from: 1.5, to: 2, [(counter, -60)], resent: true), receivedAt: w(2.6)) }
            _ = fleet.advance(to: w(start + 0.5))
            if start < 11.5 { #expect(fleet.takeUnansweredResends().isEmpty, "still waiting at \(start + 0.5) s") }
        }
        #expect(fleet.takeUnansweredResends() == ["door"])
        #expect(fleet.takeUnansweredResends().isEmpty)
    }
}

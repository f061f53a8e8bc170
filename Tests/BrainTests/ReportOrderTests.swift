import BeaconKit
import BrainCore
import Contract
import Config
import Testing
import Tracking

/// Issue 20 item 3: the brain's zone decisions depend on the gateways' capture-time reports
/// only, not on when or in which order they arrive (`ReportClock`, `FleetPresence.report`).
@Suite struct ReportOrderTests {
    /// The door hears `counter` from 0 to 2 s; both gateways report every 0.5 s until `end`.
    static func visit(_ fleet: inout FleetPresence, from: Double = 0, to end: Double) -> [FleetEvent] {
        feed(&fleet, gateways: ["door", "till"], from: from, to: end) { gateway, time in
            gateway == "door" && time < 2 ? -60 : nil
        }
    }

    /// A late report NOT marked resent (a store's bridge delivering its queue after the live
    /// reports, a QoS 1 duplicate) covers capture time the brain has decided: dropped and
    /// counted, the beacon that left does not come back (seen at a NATS centre when a
    /// store's bridge moved nodes).
    @Test func aLateReportNotMarkedResentIsDroppedAndCounted() throws {
        var fleet = newFleet()
        _ = Self.visit(&fleet, to: 12)
        #expect(fleet[counter] == nil, "the visit ended")
        #expect(fleet.takeDecisions().map(\.kind) == [.enter, .exit])
        // The door's window 1.0–1.5 s again, not marked resent.
        #expect(fleet.report(rssiReport("door", from: 1, to: 1.5, [(counter, -60)]), receivedAt: w(12)).isEmpty)
        let after = Self.visit(&fleet, from: 12, to: 16)
        #expect(!after.contains(.enter(counter)), "a beacon that left re-entered from a late report: \(after)")
        #expect(fleet[counter] == nil)
        #expect(fleet.takeDecisions().isEmpty)
        #expect(fleet.staleReports == 1)
    }

    /// A busy window goes out in parts: every part but the last ends where it begins, at the
    /// watermark; they are the next window's, not late.
    @Test func aBusyWindowsFirstPartsAreNotLate() throws {
        var fleet = newFleet()
        _ = Self.visit(&fleet, to: 1)
        #expect(fleet.report(rssiReport("door", from: 1, to: 1, [(window, -62)]), receivedAt: w(1.5)).isEmpty)
        _ = fleet.report(rssiReport("door", from: 1, to: 1.5, [(counter, -60)]), receivedAt: w(1.5))
        _ = fleet.report(rssiReport("till", from: 1, to: 1.5, []), receivedAt: w(1.5))
        _ = Self.visit(&fleet, from: 1.5, to: 3)
        #expect(fleet[window] != nil, "the first part's beacon was dropped")
        #expect(fleet.staleReports == 0)
    }

    /// A gateway whose connection ended (its last will, held for its grace) and came back as
    /// a new run replays from an earlier capture time: its reports are not late copies; the
    /// brain's clock waits for it to catch up. Without the end of its connection they are.
    @Test func aRestartedGatewayStartsOverAfterItsConnectionEnded() throws {
        var fleet = newFleet()
        _ = Self.visit(&fleet, to: 6)
        _ = fleet.takeDecisions()
        #expect(fleet.report(rssiReport("door", from: 0, to: 0.5, [(window, -60)]), receivedAt: w(6)).isEmpty)
        #expect(fleet.staleReports == 1, "no restart: a late copy")
        fleet.gatewayDisconnected("door")
        var events: [FleetEvent] = []
        var time = 0.0
        while time < 8 {
            events += fleet.report(rssiReport("door", from: time, to: time + 0.5, [(window, -60)]), receivedAt: w(6 + time))
            if time >= 6 { events += fleet.report(rssiReport("till", from: time, to: time + 0.5, []), receivedAt: w(6 + time)) }
            time += 0.5
        }
        #expect(fleet.staleReports == 1, "the new run's reports were dropped")
        #expect(events.contains(.enter(window)), "\(events)")
        // Once started over, a copy of its new run's reports is late again.
        _ = fleet.report(rssiReport("door", from: 1, to: 1.5, [(window, -60)]), receivedAt: w(14))
        #expect(fleet.staleReports == 2)
    }

    /// The brain itself paused (SIGSTOP, a starved process): the reports that waited unread
    /// meanwhile do not make their gateways late, and the decisions are those of a run
    /// without the pause.
    @Test func aPausedBrainLetsGoOfNoGatewayAndDecidesAsWithoutThePause() throws {
        func run(pauseAt pause: Double?) -> ([ZoneDecision], [String]) {
            var fleet = newFleet()
            var late: Set<String> = []
            var time = 0.0
            var wall = 0.5
            while time < 14 {
                let heard = { (gateway: String) -> [(BeaconRef, Double?)] in
                    switch gateway {
                    case "door": time < 4 ? [(counter, -60)] : time < 6 ? [(counter, -75)] : []
                    default: time >= 3 && time < 8 ? [(counter, -58)] : []
                    }
                }
                _ = fleet.report(rssiReport("door", from: time, to: time + 0.5, heard("door")), receivedAt: w(wall))
                if time == pause {
                    // The brain's timer sees the till late; then the brain stops for 3 s and
                    // its timer runs before it reads the till's report that waited.
                    _ = fleet.advance(to: w(wall))
                    wall += 3
                    _ = fleet.advance(to: w(wall))
                    late.formUnion(fleet.reportingGateways.late)
                }
                _ = fleet.report(rssiReport("till", from: time, to: time + 0.5, heard("till")), receivedAt: w(wall))
                tick(&fleet, from: wall, to: wall + 0.4)
                late.formUnion(fleet.reportingGateways.late)
                time += 0.5
                wall += 0.5
            }
            return (fleet.takeDecisions(), late.sorted())
        }
        let (undisturbed, noneLate) = run(pauseAt: nil)
        #expect(undisturbed.map(\.kind) == [.enter, .zone, .exit], "\(undisturbed.map(\.json))")
        #expect(noneLate.isEmpty)
        for pause in [2.5, 4.0, 6.0] {
            let (paused, late) = run(pauseAt: pause)
            #expect(late.isEmpty, "paused at \(pause) s")
            #expect(paused == undisturbed, "paused at \(pause) s: \(paused.map(\.json))")
        }
    }

    /// A gateway that stops (hung: no report arrives) is still let go after clockHold of the
    /// brain's running time; one whose reports keep coming, late, is waited for.
    @Test func onlyASilentGatewayIsLetGo() throws {
        var fleet = newFleet()
        _ = Self.visit(&fleet, to: 2)
        // The till's reports come 1.5 s after the door's, every 0.5 s: never silent for 2 s.
        var time = 2.0
        while time < 8 {
            _ = fleet.report(rssiReport("door", from: time, to: time + 0.5, []), receivedAt: w(time + 0.5))
            if time >= 3.5 {
                _ = fleet.report(rssiReport("till", from: time - 1.5, to: time - 1, []), receivedAt: w(time + 0.5))
            }
            tick(&fleet, from: time + 0.5, to: time + 0.9)
            if time >= 3.5 { #expect(fleet.reportingGateways.late.isEmpty, "let go at \(time) s though it reports") }
            time += 0.5
        }
        // Then it stops.
        while time < 11 {
            _ = fleet.report(rssiReport("door", from: time, to: time + 0.5, []), receivedAt: w(time + 0.5))
            tick(&fleet, from: time + 0.5, to: time + 0.9)
            time += 0.5
        }
        #expect(fleet.reportingGateways.late == ["till"])
    }

    /// A gateway let go that comes back further behind than its exit timeout (seen once at
    /// load: the door stopped, then starved): its beacons left at the bound, and its late
    /// reports cover capture time the brain has decided. They must not open a visit in the
    /// past, which would exit at once (enter and exit at every report, a rule firing each
    /// time); they are dropped and counted until the gateway catches up, and then its
    /// beacon enters once.
    @Test func aGatewayLetGoAndFarBehindBringsNoVisitFromThePast() throws {
        var fleet = newFleet()
        var events = feed(&fleet, gateways: ["door", "till"], from: 0, to: 10) { gateway, _ in
            gateway == "door" ? -60 : nil
        }
        // The door stops at 10 s; the till reports on and the brain ticks on.
        var time = 10.0
        while time < 40 {
            events += fleet.report(rssiReport("till", from: time, to: time + 0.5, []), receivedAt: w(time + 0.5))
            events += tick(&fleet, from: time + 0.5, to: time + 0.9)
            // From 25 s the door's reports come again, live but 15 s behind.
            if time >= 25 {
                let behind = time - 15
                events += fleet.report(rssiReport("door", from: behind, to: behind + 0.5, [(counter, -60)]),
                                       receivedAt: w(time + 0.5))
            }
            time += 0.5
        }
        let kinds = fleet.takeDecisions().map(\.kind)
        #expect(kinds == [.enter, .exit], "\(kinds)")
        #expect(!events.contains(.enter(counter)) || events.filter { $0 == .enter(counter) }.count == 1, "\(events)")
        #expect(fleet.behindReports > 0, "the late reports were dropped and counted")
        // It catches up: its reports reach the brain's time, and the beacon enters once.
        var catchUp = 25.0
        while catchUp < 42 {
            _ = fleet.report(rssiReport("door", from: catchUp, to: catchUp + 0.5, [(counter, -60)]), receivedAt: w(40.5))
            catchUp += 0.5
        }
        for late in stride(from: 40.0, to: 44.0, by: 0.5) {
            _ = fleet.report(rssiReport("till", from: late, to: late + 0.5, []), receivedAt: w(late + 0.5))
            _ = fleet.report(rssiReport("door", from: late + 2, to: late + 2.5, [(counter, -60)]), receivedAt: w(late + 0.5))
            tick(&fleet, from: late + 0.5, to: late + 0.9)
        }
        #expect(fleet.takeDecisions().map(\.kind) == [.enter], "back in step, the beacon enters once")
    }
}

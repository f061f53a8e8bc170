import BeaconKit
import Contract
import BrainCore
import Config
import Testing
import Tracking

/// The fusion on default settings (`BrainConfig()`), deciding every 0.5 s.
func newFleet(_ brain: BrainConfig = BrainConfig()) -> FleetPresence {
    FleetPresence(settings: .init(brain, defaultViewTimeout: 10, step: 0.5))
}

/// Reports of every listed gateway for the windows from `from` to `to` (0.5 s each): `rssi`
/// gives each gateway's mean RSSI of the beacon in a window (`nil`: not heard).
@discardableResult
func feed(_ fleet: inout FleetPresence, _ ref: BeaconRef = counter, gateways: [String], from: Double, to: Double,
          _ rssi: (String, Double) -> Double?) -> [FleetEvent] {
    var events: [FleetEvent] = []
    var time = from
    while time < to - 1e-9 {
        for gateway in gateways {
            let heard = rssi(gateway, time).map { [(ref, Optional($0))] } ?? []
            events += fleet.report(rssiReport(gateway, from: time, to: time + 0.5, heard), receivedAt: w(time + 0.5))
        }
        time += 0.5
    }
    return events
}

/// The brain's timer (every 0.2 s, as `BrainService` ticks) from `from` to `to`, wall-clock
/// seconds: the clock's hold counts the brain's running time, and a longer step would be the
/// brain paused (`ReportClock.longestPause`).
@discardableResult
func tick(_ fleet: inout FleetPresence, from: Double, to: Double) -> [FleetEvent] {
    var events: [FleetEvent] = []
    var time = from
    while time < to + 1e-9 {
        events += fleet.advance(to: w(time))
        time += 0.2
    }
    return events
}

func zoneChanges(_ events: [FleetEvent]) -> [String] {
    events.compactMap { if case .zoneChanged(_, _, let to) = $0 { to } else { nil } }
}

@Suite struct FleetPresenceTests {

    @Test func entryIsTheLoudestGatewayOfTheFirstWindowNotTheFirstReport() throws {
        var fleet = newFleet()
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        // The door's report arrives first; the brain waits for the till's of the same window.
        #expect(fleet.report(rssiReport("door", from: 0, to: 0.5, [(counter, -75)]), receivedAt: w(0.5)).isEmpty)
        let events = fleet.report(rssiReport("till", from: 0, to: 0.5, [(counter, -62)], .immediate), receivedAt: w(0.5))
        #expect(events.first == .enter(counter))
        #expect(events.contains(.proximity(counter, from: .unknown, to: .immediate)))
        let beacon = try #require(fleet[counter])
        #expect(beacon.zone == "till")
        #expect(beacon.uuid == storeUUID)
        #expect(beacon.views.keys.sorted() == ["door", "till"])
        // The decision carries the capture time it was made at.
        let decisions = fleet.takeDecisions()
        #expect(decisions.map(\.kind) == [.enter])
        #expect(decisions.first?.zone == "till")
        #expect(decisions.first?.at == t(0.5))
        #expect(decisions.first.map { abs($0.since.seconds(since: t(0.25))) < 0.001 } == true, "since: the first advertisement")
        #expect(try ZoneDecision(parsing: JSONValue(text: decisions[0].json), topic: counter) == decisions[0])
    }

    /// A gateway that says `online` but never reports (reports off, an older version) holds
    /// decisions back for `clockHold` wall-clock seconds, not for ever.
    @Test func aGatewayOnlineThatNeverReportsHoldsTheClockOnlyForClockHold() throws {
        var fleet = newFleet()
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        #expect(feed(&fleet, gateways: ["door"], from: 0, to: 2) { _, _ in -60 }.isEmpty, "waits for the till")
        #expect(fleet.advance(to: w(2)).isEmpty)
        #expect(tick(&fleet, from: 2, to: 3.5).isEmpty, "1.5 s held: under clockHold (2 s)")
        let events = tick(&fleet, from: 3.7, to: 4.1)
        #expect(events.first == .enter(counter))
        #expect(try #require(fleet[counter]).zone == "door")
        #expect(fleet.reportingGateways.late == ["till"])
        // The till starts reporting, from now on: it is waited for again.
        feed(&fleet, gateways: ["door", "till"], from: 2, to: 4) { gateway, _ in gateway == "door" ? -60 : -80 }
        #expect(fleet.reportingGateways.late.isEmpty)
        #expect(fleet.reportingGateways.waited == ["door", "till"])
    }

    /// A gateway whose reports stop (after it reported) holds decisions back for
    /// `clockHold`; then the brain goes on with the others.
    @Test func aGatewayWhoseReportsStopHoldsTheClockOnlyForClockHold() throws {
        var fleet = newFleet()
        feed(&fleet, gateways: ["door", "till"], from: 0, to: 1) { gateway, _ in gateway == "door" ? -60 : -80 }
        #expect(try #require(fleet[counter]).zone == "door")
        // The till falls silent; the beacon walks to it, the door loses it. Nothing decides yet.
        feed(&fleet, gateways: ["door"], from: 1, to: 10) { _, time in time < 2 ? -60 : nil }
        _ = fleet.advance(to: w(10))
        #expect(fleet[counter] != nil && fleet.reportingGateways.late.isEmpty, "held, not yet let go")
        tick(&fleet, from: 10, to: 12.5)
        #expect(fleet.reportingGateways.late == ["till"])
        #expect(fleet.reportingGateways.waited == ["door"])
        // The door's reports go on deciding (its view of the beacon ends by silence), but the
        // till heard the beacon last by its own clock: the visit waits for it while it is
        // unheard, `unheardBound` (its exitTimeout, 10 s) past its last report (1 s).
        _ = fleet.takeDecisions()
        feed(&fleet, gateways: ["door"], from: 10, to: 11) { _, _ in nil }
        #expect(fleet[counter] != nil)
        #expect(fleet.unheardBound("till") == 10)
        // Past the bound the exit goes out, dated when the beacon's silence became telling.
        let exit = try #require(fleet[counter])
        #expect(feed(&fleet, gateways: ["door"], from: 11, to: 12) { _, _ in nil } == [.exit(exit)])
        let decision = try #require(fleet.takeDecisions().last)
        #expect(decision.kind == .exit && decision.at < t(5), "\(decision.json)")
        #expect(fleet.gatewayStatus("till", online: false).isEmpty)
    }

    /// Issue 20 item 6: a gateway that stops reporting without saying so (SIGSTOP, a hung
    /// process: no last will until its keepalive runs out) is unheard for `unheardBound`
    /// seconds of capture time: the beacons it hears neither exit nor move for its silence;
    /// past the bound the exits go out (dated when their silence became telling) and the
    /// zones move, without waiting for it to resume.
    @Test func aHungGatewaysBeaconsNeitherExitNorMoveWithinTheBound() throws {
        var fleet = newFleet()
        // The counter beacon stands at the till (−60; the door hears it at −70); the window
        // beacon is heard by the till alone.
        func heard(_ gateway: String, _ ref: BeaconRef) -> Double? {
            switch (gateway, ref) {
            case ("till", _): -60
            case ("door", counter): -70
            default: nil
            }
        }
        func step(_ gateways: [String], _ time: Double) -> [FleetEvent] {
            gateways.flatMap { gateway in
                let entries = [counter, window].compactMap { ref in heard(gateway, ref).map { (ref, Optional($0)) } }
                return fleet.report(rssiReport(gateway, from: time, to: time + 0.5, entries), receivedAt: w(time + 0.5))
            }
        }
        var time = 0.0
        while time < 2 { _ = step(["door", "till"], time); time += 0.5 }
        #expect(fleet[counter]?.zone == "till" && fleet[window] != nil)
        _ = fleet.takeDecisions()
        // The till hangs at 2 s; the door goes on. After clockHold the brain goes on without it.
        var events: [FleetEvent] = []
        while time < 12 {
            events += step(["door"], time) + fleet.advance(to: w(time + 0.5))
            time += 0.5
        }
        #expect(fleet.reportingGateways.late == ["till"])
        #expect(fleet[counter]?.zone == "till", "moved for a hung gateway's silence")
        #expect(fleet[window] != nil, "left for a hung gateway's silence")
        #expect(fleet.takeDecisions().isEmpty)
        // Past the bound (2 s + 10 s): the window beacon exits, the counter beacon moves.
        while time < 13 {
            events += step(["door"], time)
            time += 0.5
        }
        #expect(fleet[window] == nil)
        #expect(fleet[counter]?.zone == "door")
        let decisions = fleet.takeDecisions()
        #expect(decisions.map(\.kind) == [.exit, .zone] || decisions.map(\.kind) == [.zone, .exit], "\(decisions.map(\.json))")
        // Heard 4 times a second from 0.25 to 1.75 s: 3.5 s of silence (the rate counts the
        // advertisements after its first step, `RateBurst`), not the 12 s of the hung bound.
        #expect(decisions.first { $0.kind == .exit }.map { $0.at <= t(5.3) } == true, "dated when its silence became telling: \(decisions.map(\.json))")
    }

    /// A visit whose exit waited (a gateway's store was cut off, or its reports were late)
    /// is decided at the capture time its silence became telling, but never before a
    /// decision already published about the same beacon: consumers line decisions up by
    /// capture time, and an exit dated before the zone change made while it waited would
    /// read as a visit that never ended.
    @Test func anExitThatWaitedIsNotDatedBeforeTheBeaconsLastDecision() throws {
        var fleet = newFleet()
        feed(&fleet, gateways: ["door", "till"], from: 0, to: 2) { gateway, _ in gateway == "door" ? -60 : -72 }
        #expect(try #require(fleet[counter]).zone == "door")
        // Both fall silent; the till's store is cut off, so its view may not end by silence.
        var time = 2.0
        while time < 20 {
            for gateway in ["door", "till"] {
                _ = fleet.report(rssiReport(gateway, from: time, to: time + 0.5, []), receivedAt: w(time + 0.5),
                                 holding: { _, held in held == "till" })
            }
            time += 0.5
        }
        #expect(fleet[counter]?.zone == "till", "the door's view ended, the till's was held")
        // The till's store is back: the exit comes now.
        feed(&fleet, gateways: ["door", "till"], from: 20, to: 21) { _, _ in nil }
        #expect(fleet[counter] == nil)
        let decisions = fleet.takeDecisions()
        #expect(decisions.map(\.kind) == [.enter, .zone, .exit])
        #expect(zip(decisions, decisions.dropFirst()).allSatisfy { $0.at <= $1.at }, "\(decisions.map(\.json))")
    }

    @Test func anEntranceGatewayKeepsANewBeaconUnlessAnotherIsClearlyLouder() {
        var settings = FleetPresence.Settings(BrainConfig(), step: 0.5)
        settings.entrances = ["door"]
        var fleet = FleetPresence(settings: settings)
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        feed(&fleet, gateways: ["door", "till"], from: 0, to: 0.5) { gateway, _ in gateway == "door" ? -70 : -68 }
        #expect(fleet[counter]?.zone == "door", "2 dB louder on one window is no proof")
        feed(&fleet, window, gateways: ["door", "till"], from: 0.5, to: 1) { gateway, _ in gateway == "door" ? -80 : -55 }
        #expect(fleet[window]?.zone == "till", "25 dB louder is")
    }

    /// Customers come in at the door, but a far gateway may catch the first advertisement the
    /// door's missed: the beacon waits (`entranceWait`) for the entrance to hear it, and
    /// enters there, not in the far zone it would have left a second later.
    @Test func aNewBeaconWaitsForTheEntranceThatMissedItsFirstAdvertisement() throws {
        var settings = FleetPresence.Settings(BrainConfig(), step: 0.5)
        settings.entrances = ["door"]
        var fleet = FleetPresence(settings: settings)
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        // Only the till hears the first window.
        var events = feed(&fleet, gateways: ["door", "till"], from: 0, to: 0.5) { gateway, _ in gateway == "door" ? nil : -80 }
        #expect(events.isEmpty, "waits for the door")
        events = feed(&fleet, gateways: ["door", "till"], from: 0.5, to: 1) { gateway, _ in gateway == "door" ? -66 : -80 }
        #expect(events.first == .enter(counter))
        #expect(try #require(fleet[counter]).zone == "door")
        #expect(fleet.takeDecisions().first.map { abs($0.since.seconds(since: t(0.25))) < 0.001 } == true,
                "the visit began at the till's first advertisement")

        // A beacon the door never hears (switched on at the till) waits no longer than
        // `entranceWait` (1 s), then enters where it is heard.
        events = feed(&fleet, window, gateways: ["door", "till"], from: 1, to: 2) { gateway, _ in gateway == "door" ? nil : -60 }
        #expect(!events.contains(.enter(window)))
        events = feed(&fleet, window, gateways: ["door", "till"], from: 2, to: 2.5) { gateway, _ in gateway == "door" ? nil : -60 }
        #expect(events.contains(.enter(window)))
        #expect(fleet[window]?.zone == "till")

        // Without an entrance nothing waits; nor in another store than the entrance's.
        var other = FleetPresence(settings: .init(BrainConfig(), step: 0.5))
        feed(&other, gateways: ["door", "till"], from: 0, to: 0.5) { gateway, _ in gateway == "door" ? nil : -80 }
        #expect(other[counter]?.zone == "till")
        settings.stores = ["door": 100, "till": 200]
        var twoStores = FleetPresence(settings: settings)
        feed(&twoStores, gateways: ["door", "till"], from: 0, to: 0.5) { gateway, _ in gateway == "door" ? nil : -80 }
        #expect(twoStores[counter]?.zone == "till", "the till's store has no entrance")
    }

    @Test func evidenceAccumulatesOneLoudWindowMovesNothing() {
        var fleet = newFleet()
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        feed(&fleet, gateways: ["door", "till"], from: 0, to: 10) { gateway, _ in gateway == "door" ? -62 : -74 }
        #expect(fleet[counter]?.zone == "door")
        // One window of the till 10 dB above its level (a reflection), then as before: no move.
        var events = feed(&fleet, gateways: ["door", "till"], from: 10, to: 10.5) { gateway, _ in gateway == "door" ? -62 : -64 }
        events += feed(&fleet, gateways: ["door", "till"], from: 10.5, to: 20) { gateway, _ in gateway == "door" ? -62 : -74 }
        #expect(zoneChanges(events).isEmpty)
        // The customer walks to the till: its level rises 2 dB/s while the door's falls. The
        // zone follows within seconds of the crossing (15 s), and only once.
        events = feed(&fleet, gateways: ["door", "till"], from: 20, to: 40) { gateway, time in
            let walked = min(20, 2 * (time - 20))
            return gateway == "door" ? -62 - walked : -74 + walked
        }
        #expect(zoneChanges(events) == ["till"])
        let moved = fleet.takeDecisions().last { $0.kind == .zone }
        #expect(moved.map { $0.at.seconds(since: t(23)) } ?? 99 <= 3, "\(String(describing: moved))")
    }

    /// A walker's levels trend (one rises as the other falls): the zone moves on the lower
    /// `zoneConfidenceWalking`, sooner than the confidence asked of a standing customer.
    @Test func aWalkerMovesOnTheWalkingConfidenceSooner() throws {
        func moveTime(_ brain: BrainConfig) throws -> Double {
            var fleet = newFleet(brain)
            for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
            var generator = SplitMix(seed: 11)
            feed(&fleet, gateways: ["door", "till"], from: 0, to: 40) { gateway, time in
                let walked = max(0, min(24, 2 * (time - 10)))     // crossing at 14.5 s
                let noise = Double(generator.next() % 5) - 2
                return (gateway == "door" ? -60 - walked : -78 + walked) + noise
            }
            let moved = try #require(fleet.takeDecisions().first { $0.kind == .zone })
            #expect(moved.zone == "till")
            return moved.at.seconds(since: t(14.5))
        }
        let walking = try moveTime(BrainConfig())
        let still = try moveTime(BrainConfig(zoneConfidenceWalking: BrainConfig().zoneConfidence))
        #expect(walking < still, "walking confidence \(walking) s after the crossing, still confidence \(still) s")
        #expect(walking <= 3)
    }

    @Test func noisyRSSIBetweenTwoGatewaysDoesNotFlap() {
        var fleet = newFleet()
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        // A customer standing between two gateways: both hear about -70 dBm, each window's
        // mean off by up to ±4 dB, so each wins single windows by more than the margin.
        var generator = SplitMix(seed: 7)
        var naiveSwitches = 0
        var naiveZone = "door"
        var latest = ["door": -70.0, "till": -70.0]
        let events = feed(&fleet, gateways: ["door", "till"], from: 0, to: 200) { gateway, _ in
            let rssi = -70 + Double(generator.next() % 9) - 4
            latest[gateway] = rssi
            let strongest = latest["till"]! > latest["door"]! ? "till" : latest["door"]! > latest["till"]! ? "door" : naiveZone
            if strongest != naiveZone { naiveSwitches += 1; naiveZone = strongest }
            return rssi
        }
        // The fusion follows a walker within seconds (see `evidenceAccumulates…`), so it does
        // not hold the zone as long as the old rule (3 wins by 4 dB); it still switches far
        // less than the strongest signal. Noise has no trend: the standing confidence (0.97)
        // holds, not the walking one (4 switches; 11 with 0.91 for both).
        #expect(naiveSwitches > 100, "the strongest signal alone would flap")
        #expect(zoneChanges(events).count <= 6, "the zone switched \(zoneChanges(events).count) times in 200 s of noise")
    }

    @Test func theZoneStaysWhenEveryViewIsStaleAtTheExit() throws {
        var fleet = newFleet()
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        feed(&fleet, gateways: ["door", "till"], from: 0, to: 10) { gateway, _ in gateway == "till" ? -58 : -80 }
        #expect(fleet[counter]?.zone == "till")
        // The customer leaves past the door: the till loses the beacon first, the door a
        // little later; then nothing. The till's view ending is no reason to move the zone
        // to the door's stale one: the beacon exits from the till.
        var events = feed(&fleet, gateways: ["door", "till"], from: 10, to: 11) { gateway, _ in gateway == "door" ? -84 : nil }
        events += fleet.gatewayPresenceDeleted(counter, gateway: "till")
        events += feed(&fleet, gateways: ["door", "till"], from: 11, to: 30) { _, _ in nil }
        #expect(zoneChanges(events).isEmpty, "\(events)")
        guard case .exit(let last)? = events.last else {
            Issue.record("expected an exit, got \(events)")
            return
        }
        #expect(last.zone == "till")
        #expect(fleet[counter] == nil)
        // Without a 10 s tail: heard 4 times a second, it is gone after a few seconds of silence.
        let exit = try #require(fleet.takeDecisions().last)
        #expect(exit.kind == .exit)
        #expect(exit.at.seconds(since: t(11)) <= 5, "exit at \(exit.at.seconds(since: t(0))) s")
    }

    @Test func aBeaconHeardRarelyIsGivenLongerBeforeItExits() throws {
        var fleet = newFleet()
        _ = fleet.gatewayStatus("door", online: true)
        // One advertisement every 2 s: silence of 5 s says little.
        feed(&fleet, gateways: ["door"], from: 0, to: 20) { _, time in
            time.truncatingRemainder(dividingBy: 2) == 0 ? -70 : nil
        }
        #expect(fleet[counter] != nil)
        feed(&fleet, gateways: ["door"], from: 20, to: 40) { _, _ in nil }
        #expect(fleet[counter] == nil)
        let exit = try #require(fleet.takeDecisions().last)
        #expect(exit.kind == .exit)
        #expect(exit.at.seconds(since: t(18.25)) >= 7, "at most the exitTimeout, and not at the first missed beat")
        #expect(exit.at.seconds(since: t(18.25)) <= 10.5)
    }

    @Test func withoutRSSIProximityClassesDecide() {
        var fleet = newFleet()
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        _ = fleet.report(rssiReport("door", from: 0, to: 0.5, [(counter, nil)], .near), receivedAt: w(0.5))
        _ = fleet.report(rssiReport("till", from: 0, to: 0.5, [(counter, nil)], .immediate), receivedAt: w(0.5))
        // Emulated controllers report no RSSI: the closest proximity class enters.
        #expect(fleet[counter]?.zone == "till")
        #expect(fleet[counter]?.proximity == .immediate)
    }

    @Test func announcedViewsWhenTheZoneGatewayLosesTheBeaconTheStrongestTakesOver() {
        var fleet = newFleet()
        _ = fleet.gatewayPresence(presenceReport(counter, "door", rssi: -60), retained: false, at: t(0))
        _ = fleet.gatewayPresence(presenceReport(counter, "till", rssi: -80, .far), retained: false, at: t(0))
        _ = fleet.gatewayPresence(presenceReport(counter, "back", rssi: -75, .far), retained: false, at: t(0))
        let events = fleet.gatewayPresenceDeleted(counter, gateway: "door")
        #expect(events == [.viewsChanged(counter), .zoneChanged(counter, from: "door", to: "back"),
                           .proximity(counter, from: .near, to: .far)])
        #expect(fleet.gatewayPresenceDeleted(counter, gateway: "back").contains(.zoneChanged(counter, from: "back", to: "till")))
        let exit = fleet.gatewayPresenceDeleted(counter, gateway: "till")
        guard case .exit(let last)? = exit.first else {
            Issue.record("expected an exit, got \(exit)")
            return
        }
        #expect(last.views.keys.sorted() == ["till"])
        #expect(fleet[counter] == nil)
    }

    @Test func gatewayOfflineDropsEverythingOnlyItSaw() {
        var fleet = newFleet()
        _ = fleet.gatewayPresence(presenceReport(counter, "door", rssi: -60), retained: false, at: t(0))
        _ = fleet.gatewayPresence(presenceReport(window, "door", rssi: -60), retained: false, at: t(0))
        _ = fleet.gatewayPresence(presenceReport(window, "till", rssi: -80), retained: false, at: t(0))
        let events = fleet.gatewayStatus("door", online: false)
        #expect(events.contains { if case .exit(let b) = $0 { b.ref == counter } else { false } })
        #expect(events.contains(.zoneChanged(window, from: "door", to: "till")))
        #expect(fleet[counter] == nil)
        #expect(fleet[window]?.views.keys.sorted() == ["till"])
        // What the dead gateway left retained is stale; a live message shows it is back.
        #expect(fleet.gatewayPresence(presenceReport(counter, "door", rssi: -60), retained: true, at: t(1)).isEmpty)
        #expect(fleet[counter] == nil)
        #expect(fleet.gatewayPresence(presenceReport(counter, "door", rssi: -60), retained: false, at: t(2)).first == .enter(counter))
    }

    @Test func aBeaconAnnouncedFirstMovesOnTheReportsEvidence() {
        var fleet = newFleet()
        _ = fleet.gatewayPresence(presenceReport(counter, "door", rssi: -70), retained: false, at: t(100))
        #expect(fleet[counter]?.zone == "door")
        let events = feed(&fleet, gateways: ["till", "door"], from: 0, to: 4) { gateway, _ in gateway == "door" ? -70 : -60 }
        #expect(zoneChanges(events) == ["till"])
    }

    @Test func viewsKeptByReportsEndAfterTheGatewaysExitTimeout() {
        var fleet = newFleet()
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        feed(&fleet, gateways: ["door", "till"], from: 0, to: 5) { gateway, _ in gateway == "door" ? -60 : -85 }
        #expect(fleet[counter]?.views.keys.sorted() == ["door", "till"])
        // The till stops hearing the beacon; the door goes on.
        feed(&fleet, gateways: ["door", "till"], from: 5, to: 14.5) { gateway, _ in gateway == "door" ? -60 : nil }
        #expect(fleet[counter]?.views.count == 2)
        feed(&fleet, gateways: ["door", "till"], from: 14.5, to: 16) { gateway, _ in gateway == "door" ? -60 : nil }
        #expect(fleet[counter]?.views.keys.sorted() == ["door"])
    }

    @Test func updatesComeOnlyFromTheZoneGatewayOnceASecond() {
        var fleet = newFleet()
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        let events = feed(&fleet, gateways: ["door", "till"], from: 0, to: 10) { gateway, _ in gateway == "door" ? -60 : -90 }
        let updates = events.filter { if case .update = $0 { true } else { false } }
        #expect((9...11).contains(updates.count), "\(updates.count) updates in 10 s")
    }

    @Test func restoreKeepsARecordedZoneAndSince() {
        var fleet = newFleet()
        _ = fleet.gatewayPresence(presenceReport(counter, "door", rssi: -60), retained: true, at: t(100))
        _ = fleet.gatewayPresence(presenceReport(counter, "till", rssi: -55), retained: true, at: t(100))
        fleet.restore(counter, since: t(5), zone: "till")
        #expect(fleet[counter]?.zone == "till")
        #expect(fleet[counter]?.since == t(5))
        fleet.restore(counter, since: nil, zone: "gone")
        #expect(fleet[counter]?.zone == "till")
    }

    @Test func presencePayloadHasTheDocumentedKeys() throws {
        var fleet = newFleet()
        _ = fleet.gatewayPresence(presenceReport(counter, "door", rssi: -61.26), retained: false, at: t(0))
        _ = fleet.report(rssiReport("till", from: 0, to: 0.5, [(counter, nil)], .unknown), receivedAt: w(0.5))
        let report = try #require(fleet[counter]?.report)
        let json = JSONValue(text: report.json)
        #expect(json.objectValue?.keys == ["uuid", "major", "minor", "zone", "zoneName", "gateways", "proximity", "since"])
        #expect(json["gateways"]?.arrayValue?.first?.objectValue?.keys
                == ["gateway", "zone", "proximity", "rssiSmoothed", "distance"])
        #expect(json["gateways"]?.arrayValue?.first?["rssiSmoothed"] == .number(-61.3))
        #expect(json["gateways"]?.arrayValue?.last?["rssiSmoothed"] == .null)
        #expect(try FleetPresenceReport(parsing: json, topic: counter).signature == report.signature)
        #expect(!report.signature.contains("rssiSmoothed"))
    }
}

/// A small deterministic generator so the noise test is the same on every run.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

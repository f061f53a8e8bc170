import BeaconKit
import BrainCore
import Testing
import Tracking

func newFleet() -> FleetPresence { FleetPresence(settings: .init(zoneMargin: 4, zoneUpdates: 3, sightingTimeout: 30)) }

@Suite struct FleetPresenceTests {

    @Test func firstGatewayHoldsTheZoneAndEnterComesWithProximity() {
        var fleet = newFleet()
        let events = fleet.sighting(sighting(counter, "door", rssi: -70, .near), zoneName: "Entrance", at: t(0))
        #expect(events == [.enter(counter), .proximity(counter, from: .unknown, to: .near), .update(counter, .near)])
        let beacon = try! #require(fleet[counter])
        #expect(beacon.zone == "door")
        #expect(beacon.since == t(0))
        #expect(beacon.uuid == storeUUID)
        #expect(beacon.report.zoneName == "Entrance")
    }

    @Test func zoneMovesOnlyAfterWinningByTheMarginOnConsecutiveUpdates() {
        var fleet = newFleet()
        _ = fleet.sighting(sighting(counter, "door", rssi: -70), zoneName: "Entrance", at: t(0))
        // "till" is stronger but only by 3 dB: under the margin, never a switch.
        for i in 1...10 {
            let events = fleet.sighting(sighting(counter, "till", rssi: -67), zoneName: "Counter", at: t(Double(i)))
            #expect(!events.contains { if case .zoneChanged = $0 { true } else { false } })
        }
        #expect(fleet[counter]?.zone == "door")
        // By 6 dB: the third consecutive sighting moves the zone.
        var changes: [FleetEvent] = []
        for i in 11...13 {
            changes += fleet.sighting(sighting(counter, "till", rssi: -64, .immediate), zoneName: "Counter", at: t(Double(i)))
            if i < 13 { #expect(fleet[counter]?.zone == "door") }
        }
        #expect(changes.contains(.zoneChanged(counter, from: "door", to: "till")))
        #expect(changes.contains(.proximity(counter, from: .near, to: .immediate)))
        #expect(fleet[counter]?.zone == "till")
        #expect(fleet[counter]?.report.zoneName == "Counter")
    }

    @Test func noisyRSSIBetweenTwoGatewaysDoesNotFlap() {
        var fleet = newFleet()
        // A customer standing between two gateways: both smoothed RSSIs hover around
        // -70 dBm with ±4 dB of noise, so each wins single samples by more than the margin.
        var generator = SplitMix(seed: 7)
        _ = fleet.sighting(sighting(counter, "door", rssi: -70), zoneName: "Entrance", at: t(0))
        var switches = 0
        var naiveSwitches = 0
        var latest = ["door": -70.0, "till": -70.0]
        var naiveZone = "door"
        for i in 1...400 {
            let gateway = i % 2 == 0 ? "door" : "till"
            let rssi = -70 + Double(generator.next() % 9) - 4
            latest[gateway] = rssi
            let strongest = latest["till"]! > latest["door"]! ? "till" : latest["door"]! > latest["till"]! ? "door" : naiveZone
            if strongest != naiveZone { naiveSwitches += 1; naiveZone = strongest }
            for event in fleet.sighting(sighting(counter, gateway, rssi: rssi), zoneName: gateway, at: t(Double(i) / 2)) {
                if case .zoneChanged = event { switches += 1 }
            }
        }
        #expect(naiveSwitches > 100, "the strongest signal alone would flap")
        #expect(switches <= 2, "the zone switched \(switches) times in 200 s of noise")
    }

    @Test func aLosingUpdateResetsTheCount() {
        var fleet = newFleet()
        _ = fleet.sighting(sighting(counter, "door", rssi: -70), zoneName: "Entrance", at: t(0))
        _ = fleet.sighting(sighting(counter, "till", rssi: -60), zoneName: "Counter", at: t(1))
        _ = fleet.sighting(sighting(counter, "till", rssi: -60), zoneName: "Counter", at: t(2))
        _ = fleet.sighting(sighting(counter, "door", rssi: -58), zoneName: "Entrance", at: t(3))
        _ = fleet.sighting(sighting(counter, "till", rssi: -60), zoneName: "Counter", at: t(4))
        #expect(fleet[counter]?.zone == "door")
        _ = fleet.sighting(sighting(counter, "door", rssi: -70), zoneName: "Entrance", at: t(5))
        _ = fleet.sighting(sighting(counter, "till", rssi: -60), zoneName: "Counter", at: t(6))
        _ = fleet.sighting(sighting(counter, "till", rssi: -60), zoneName: "Counter", at: t(7))
        #expect(fleet[counter]?.zone == "till")
    }

    @Test func withoutRSSIProximityClassesDecide() {
        var fleet = newFleet()
        _ = fleet.sighting(sighting(counter, "door", rssi: nil, .unknown), zoneName: "Entrance", at: t(0))
        // Emulated controllers report no RSSI: a strictly closer class wins like a margin.
        _ = fleet.sighting(sighting(counter, "till", rssi: nil, .unknown), zoneName: "Counter", at: t(1))
        _ = fleet.sighting(sighting(counter, "till", rssi: nil, .unknown), zoneName: "Counter", at: t(2))
        _ = fleet.sighting(sighting(counter, "till", rssi: nil, .unknown), zoneName: "Counter", at: t(3))
        #expect(fleet[counter]?.zone == "door")
        for i in 4...6 { _ = fleet.sighting(sighting(counter, "till", rssi: nil, .near), zoneName: "Counter", at: t(Double(i))) }
        #expect(fleet[counter]?.zone == "till")
        #expect(fleet[counter]?.proximity == .near)
    }

    @Test func whenTheZoneGatewayLosesTheBeaconTheStrongestTakesOverAtOnce() {
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

    @Test func viewsKnownOnlyFromSightingsExpire() {
        var fleet = newFleet()
        _ = fleet.gatewayPresence(presenceReport(counter, "door", rssi: -60), retained: false, at: t(0))
        _ = fleet.sighting(sighting(counter, "till", rssi: -90, .far), zoneName: "Counter", at: t(0))
        #expect(fleet.advance(to: t(29)).isEmpty)
        #expect(fleet[counter]?.views.count == 2)
        #expect(fleet.advance(to: t(31)) == [.viewsChanged(counter)])
        #expect(fleet[counter]?.views.keys.sorted() == ["door"])
        // The announced view stays without sightings; its gateway deletes it.
        #expect(fleet.advance(to: t(1000)).isEmpty)
        _ = fleet.sighting(sighting(window, "till", rssi: -90, .far), zoneName: "Counter", at: t(1000))
        #expect(fleet.advance(to: t(1031)).contains { if case .exit = $0 { true } else { false } })
    }

    @Test func updatesComeOnlyFromTheZoneGateway() {
        var fleet = newFleet()
        _ = fleet.sighting(sighting(counter, "door", rssi: -60, .near), zoneName: "Entrance", at: t(0))
        #expect(fleet.sighting(sighting(counter, "till", rssi: -90, .far), zoneName: "Counter", at: t(1)) == [.viewsChanged(counter)])
        #expect(fleet.sighting(sighting(counter, "till", rssi: -91, .far), zoneName: "Counter", at: t(1.5)) == [])
        #expect(fleet.sighting(sighting(counter, "door", rssi: -61, .near), zoneName: "Entrance", at: t(2))
                == [.update(counter, .near)])
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
        _ = fleet.sighting(sighting(counter, "till", rssi: nil, .unknown), zoneName: "Counter", at: t(0))
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

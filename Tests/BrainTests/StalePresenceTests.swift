import BeaconKit
import Contract
import Config
import Foundation
import Tracking
@testable import BrainCore
import Testing

/// The brain's memory of the `since` of each gateway's retained presence
/// (`StalePresence`) is bounded: gateways taken out of the fleet config and beacons the
/// brain no longer owns are forgotten, and past its capacity the oldest tracks go.
@Suite struct StalePresenceTests {
    func report(_ minor: UInt16, _ gateway: String, since: Double) -> GatewayPresenceReport {
        GatewayPresenceReport(beacon: BeaconRef(major: 100, minor: minor), gateway: gateway, zone: gateway,
                              proximity: .near, rssiSmoothed: -60, since: t(since))
    }

    @Test func pastItsCapacityTheOldestTracksAreForgottenAQuarterAtATime() {
        var memory = StalePresence(capacity: 8)
        for minor in 1...8 { memory.took(report(UInt16(minor), "door", since: Double(minor))) }
        // A later track of a known pair is no new entry.
        memory.took(report(8, "door", since: 20))
        #expect(memory.count == 8)
        #expect(memory.isStale(report(1, "door", since: 1)))
        memory.took(report(9, "door", since: 9))
        // Down to three quarters: minors 1, 2 and 3 (the oldest) are forgotten.
        #expect(memory.count == 6)
        #expect(!memory.isStale(report(1, "door", since: 1)) && !memory.isStale(report(3, "door", since: 3)))
        #expect(memory.isStale(report(4, "door", since: 4)) && memory.isStale(report(9, "door", since: 9)))
        #expect(memory.isStale(report(8, "door", since: 20)))
        for minor in 10...1_000 { memory.took(report(UInt16(minor), "till", since: Double(minor))) }
        #expect(memory.count <= 8)
        #expect(memory.isStale(report(1_000, "till", since: 1_000)))
    }

    @Test func retainKeepsOnlyTheGatewaysAndBeaconsAsked() {
        var memory = StalePresence()
        for minor: UInt16 in [1, 2] {
            for gateway in ["door", "till"] { memory.took(report(minor, gateway, since: 1)) }
        }
        memory.retain(gateway: { $0 != "till" }, beacon: { $0.minor != 2 })
        #expect(memory.count == 1)
        #expect(memory.isStale(report(1, "door", since: 1)))
        #expect(!memory.isStale(report(1, "till", since: 1)) && !memory.isStale(report(2, "door", since: 1)))
    }

    /// Through the brain: a new fleet config without the till forgets the till's tracks.
    @Test func aGatewayTakenOutOfTheFleetConfigIsForgotten() throws {
        var h = Harness(config: testConfig())
        h.publish("gateways/door/status", "online", retain: true, at: t(1))
        h.publish("gateways/till/status", "online", retain: true, at: t(1))
        h.announce(counter, by: "door", rssi: -60, at: t(1))
        h.announce(counter, by: "till", rssi: -70, at: t(1))
        h.announce(window, by: "till", rssi: -70, at: t(1))
        #expect(h.core.stalePresence.count == 3)
        let text = testConfigText().replacingOccurrences(of: #", { "id": "till", "zone": "Counter" }"#, with: "")
        #expect(!text.contains(#""till""#))
        h.apply(h.core.apply(try FleetConfig.parse(text), origin: "test", at: t(2)))
        #expect(h.core.stalePresence.count == 1)
        #expect(h.core.stalePresence.isStale(report(1, "door", since: 0)))
    }
}

import BeaconKit
import BrainCore
import Contract
import Config
import Testing

/// `brain.zoneSettle` (issue 19): once a beacon has held its zone that long, each confidence
/// asks one standard deviation more. docs/presence.md, "Settled customers".
@Suite("settled customers")
struct ZoneSettleTests {
    func settled(_ seconds: Double) -> BrainConfig {
        var brain = BrainConfig()
        brain.zoneSettle = seconds
        return brain
    }

    /// A customer standing between two gateways who turns every 8 s: his body takes 0–8 dB
    /// from each link by where he faces, and each window is off by up to ±3 dB more.
    func turningBetweenTwoGateways(_ brain: BrainConfig) -> Int {
        var fleet = newFleet(brain)
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        var generator = SplitMix(seed: 19)
        var body = ["door": 0.0, "till": 0.0]
        var turned = -1.0
        let events = feed(&fleet, gateways: ["door", "till"], from: 0, to: 400) { gateway, time in
            if time - turned >= 8 {
                turned = time
                body = ["door": -Double(generator.next() % 9), "till": -Double(generator.next() % 9)]
            }
            return -70 + body[gateway]! + Double(generator.next() % 7) - 3
        }
        return zoneChanges(events).count
    }

    @Test("a customer turning between two gateways: settled, the zone moves less often")
    func turningCustomerMovesLess() {
        let plain = turningBetweenTwoGateways(BrainConfig()), settled = turningBetweenTwoGateways(settled(5))
        #expect(plain >= 10, "without zoneSettle the zone moved \(plain) times in 400 s")
        #expect(Double(settled) <= Double(plain) * 0.6, "settled \(settled) moves, without \(plain)")
    }

    @Test("a settled customer who walks away is followed, once, within seconds of the crossing")
    func settledWalkerIsFollowed() throws {
        var fleet = newFleet(settled(5))
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        var generator = SplitMix(seed: 23)
        // 30 s at the door, then a walk to the till: 2 dB/s each way, crossing at 34.5 s.
        let events = feed(&fleet, gateways: ["door", "till"], from: 0, to: 60) { gateway, time in
            let walked = max(0, min(24, 2 * (time - 30)))
            let noise = Double(generator.next() % 5) - 2
            return (gateway == "door" ? -60 - walked : -78 + walked) + noise
        }
        #expect(zoneChanges(events) == ["till"])
        let moved = try #require(fleet.takeDecisions().first { $0.kind == .zone })
        #expect(moved.at.seconds(since: t(34.5)) <= 4, "moved \(moved.at.seconds(since: t(34.5))) s after the crossing")
    }

    /// A visit a restarted brain continues (`restore`) at the door: 10 s as before, then the
    /// till edges ahead by `lead` dB (±2 dB a window) for a minute: the zone moves only for
    /// a brain that does not count the customer as settled. Every zone it decides.
    func restoredThenEdged(_ brain: BrainConfig, lead: Double) -> [String] {
        var fleet = newFleet(brain)
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        _ = fleet.gatewayPresence(presenceReport(counter, "door", rssi: -66), retained: true, at: t(0))
        _ = fleet.gatewayPresence(presenceReport(counter, "till", rssi: -70), retained: true, at: t(0))
        fleet.restore(counter, since: t(-600), zone: "door")
        var generator = SplitMix(seed: 29)
        let events = feed(&fleet, gateways: ["door", "till"], from: 0, to: 70) { gateway, time in
            let noise = Double(generator.next() % 5) - 2
            return (gateway == "door" ? -70 : time < 10 ? -74 : -70 + lead) + noise
        }
        return zoneChanges(events)
    }

    @Test("a visit a restarted brain continues settles from when it is heard again (not only after its first move)")
    func restoredVisitSettles() {
        // The same lead moves a customer who has not settled (from 4 dB on, this run):
        // the check below means something.
        #expect(restoredThenEdged(BrainConfig(), lead: 5) == ["till"])
        #expect(restoredThenEdged(settled(5), lead: 5) == [], "a settled customer held his restored zone")
        // A clear lead still moves him (from 7 dB on, this run).
        #expect(restoredThenEdged(settled(5), lead: 8) == ["till"])
    }

    @Test("brain.zoneSettle is read from the fleet config, 0 by default, and a negative value is refused")
    func parsed() throws {
        #expect(BrainConfig().zoneSettle == 0)
        let config = try FleetConfig.parse(#"{"broker":{"url":"mqtt://127.0.0.1"},"brain":{"zoneSettle":5}}"#)
        #expect(config.brain.zoneSettle == 5)
        #expect(throws: (any Error).self) {
            try FleetConfig.parse(#"{"broker":{"url":"mqtt://127.0.0.1"},"brain":{"zoneSettle":-1}}"#)
        }
    }
}

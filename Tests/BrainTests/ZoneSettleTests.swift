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

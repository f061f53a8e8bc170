import BeaconKit
import Contract
@testable import BrainCore
import Config
import Testing

/// The zone HMM (`brain.zoneModel: "hmm"`): the belief on its own, then through the fusion.
@Suite struct ZoneModelTests {
    static let hmm: BrainConfig = {
        var brain = BrainConfig()
        brain.zoneModel = .hmm
        return brain
    }()

    static let line: [String: FloorPosition] = ["a": .init(x: 0, y: 0), "b": .init(x: 5, y: 0), "c": .init(x: 10, y: 0),
                                                "d": .init(x: 15, y: 0)]

    /// Gateways in a row: each borders its neighbours only; without positions, all border.
    @Test func adjacencyComesFromThePositions() {
        #expect(ZoneBelief.adjacent("a", "b", positions: Self.line, stores: [:]))
        #expect(!ZoneBelief.adjacent("a", "c", positions: Self.line, stores: [:]), "b stands between them")
        #expect(ZoneBelief.adjacent("a", "x", positions: Self.line, stores: [:]), "x has no position")
        #expect(!ZoneBelief.adjacent("a", "b", positions: Self.line, stores: ["a": 1, "b": 2]), "two stores")
        // The standard store's four corners: the diagonals meet at the centre.
        let square: [String: FloorPosition] = ["door": .init(x: 3.75, y: 2.5), "window": .init(x: 3.75, y: 7.5),
                                               "shelves": .init(x: 11.25, y: 7.5), "counter": .init(x: 11.25, y: 2.5)]
        #expect(ZoneBelief.adjacent("door", "shelves", positions: square, stores: [:]))
    }

    /// The dwell prior alone (evidence that favours no zone): the customer leaves his zone at
    /// 1 − exp(−dt/dwell), only into a neighbouring zone, scaled by the time since the last update.
    @Test func theDwellPriorIsTimeScaledAndFollowsAdjacency() {
        let adjacency = { (a: String, b: String) in ZoneBelief.adjacent(a, b, positions: Self.line, stores: [:]) }
        var belief = ZoneBelief(zones: ["a", "b", "c", "d"], at: t(0), concentratedOn: "a", mass: 1, adjacency: adjacency)
        let parameters = ZoneBelief.Parameters(dwell: 10, noise: 4)
        let equal: (Int) -> ZoneBelief.Observation = { _ in .fresh(-70, variance: 4) }
        let updated = belief.update(at: t(10), parameters, observe: equal)
        #expect(updated)
        #expect(abs(belief.probability(of: "a") - 0.36787944117144233) < 1e-9)
        #expect(abs(belief.probability(of: "b") - (1 - 0.36787944117144233)) < 1e-9)
        #expect(belief.probability(of: "c") == 0)
        #expect(belief.probability(of: "d") == 0)
        // A short gap moves little: 0.1 s of a 10 s dwell.
        var quick = ZoneBelief(zones: ["a", "b"], at: t(0), concentratedOn: "a", mass: 1)
        quick.update(at: t(0.1), parameters, observe: equal)
        #expect(abs(quick.probability(of: "a") - 0.9900498337491681) < 1e-9)
    }

    /// Silence is no evidence: without a fresh measurement nothing changes, however long.
    @Test func withoutAFreshMeasurementNothingChanges() {
        var belief = ZoneBelief(zones: ["a", "b"], at: t(0), concentratedOn: "a", mass: 0.9)
        let before = belief
        let silent = belief.update(at: t(30), .init(dwell: 10, noise: 4)) { _ in .known(-60, variance: 9) }
        #expect(!silent)
        #expect(belief.posterior == before.posterior)
        #expect(belief.updated == before.updated)
        // A gateway whose silence is telling is quieter than one that hears the beacon.
        let heard = belief.update(at: t(30.5), .init(dwell: 10, noise: 4)) { $0 == 0 ? .silent : .fresh(-80, variance: 9) }
        #expect(heard)
        #expect(belief.probability(of: "b") > before.probability(of: "b"))
    }

    /// One outlier (a body, a reflection: 12 dB) does not carry the belief past 0.8 by
    /// itself; steady evidence does, in a few updates.
    @Test func theTailIsHeavyOneOutlierDoesNotDecide() throws {
        let parameters = ZoneBelief.Parameters(dwell: 30, noise: 4)
        var belief = ZoneBelief(zones: ["a", "b"], at: t(0), concentratedOn: "a", mass: 0.95)
        belief.update(at: t(0.5), parameters) { $0 == 0 ? .fresh(-72, variance: 4.5) : .fresh(-60, variance: 4.5) }
        #expect(belief.probability(of: "b") < 0.8, "\(belief.posterior)")
        for k in 2...6 {
            belief.update(at: t(0.5 * Double(k)), parameters) { $0 == 0 ? .fresh(-72, variance: 4.5) : .fresh(-60, variance: 4.5) }
        }
        #expect(try #require(belief.best).zone == "b")
        #expect(belief.probability(of: "b") > 0.95)
    }

    @Test func theFleetConfigSelectsTheModel() throws {
        let config = try FleetConfig.parse("""
            {"broker":{"url":"mqtt://127.0.0.1"},"brain":{"zoneModel":"hmm","zoneDwell":20,"zoneSwitch":0.9,"zoneHold":1,"zoneNoise":5}}
            """)
        #expect(config.brain.zoneModel == .hmm)
        #expect(config.brain.zoneDwell == 20)
        #expect(config.brain.zoneSwitch == 0.9)
        #expect(config.brain.zoneHold == 1)
        #expect(config.brain.zoneNoise == 5)
        #expect(throws: (any Error).self) {
            try FleetConfig.parse(#"{"broker":{"url":"mqtt://127.0.0.1"},"brain":{"zoneModel":"kalman"}}"#)
        }
    }

    // MARK: - Through the fusion

    /// A customer standing between two gateways (both about −70 dBm, each window ±4 dB):
    /// the dwell prior holds the zone where the strongest signal would flap (over 100 times).
    /// Measured 15 moves in 200 s, against 4 for the pairwise rule: each window is taken as
    /// fresh evidence, and the HMM has no trend to tell noise from a walk (docs/presence.md).
    @Test func aStandingCustomerBetweenTwoGatewaysIsHeld() {
        var fleet = newFleet(Self.hmm)
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        var generator = SplitMix(seed: 7)
        let events = feed(&fleet, gateways: ["door", "till"], from: 0, to: 200) { _, _ in
            -70 + Double(generator.next() % 9) - 4
        }
        #expect(zoneChanges(events).count <= 20, "the zone switched \(zoneChanges(events).count) times in 200 s of noise")
    }

    /// A walker is followed: evidence accumulates, the zone moves once, within 3 s of the
    /// crossing (measured 2.5 s; the pairwise rule's walking test is quicker).
    @Test func aWalkerIsFollowedOnce() throws {
        var fleet = newFleet(Self.hmm)
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        var generator = SplitMix(seed: 11)
        let events = feed(&fleet, gateways: ["door", "till"], from: 0, to: 40) { gateway, time in
            let walked = max(0, min(24, 2 * (time - 10)))     // crossing at 14.5 s
            let noise = Double(generator.next() % 5) - 2
            return (gateway == "door" ? -60 - walked : -78 + walked) + noise
        }
        #expect(zoneChanges(events) == ["till"])
        let moved = try #require(fleet.takeDecisions().first { $0.kind == .zone })
        #expect(moved.at.seconds(since: t(14.5)) <= 3, "moved \(moved.at.seconds(since: t(14.5))) s after the crossing")
    }

    /// A fob heard every 3 s, standing nearer the door (4 dB, ±4 dB noise): the gaps between
    /// its advertisements are neither evidence, nor a reason to move or to leave.
    @Test func aSlowFobStandingIsHeld() {
        var fleet = newFleet(Self.hmm)
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        var generator = SplitMix(seed: 3)
        let events = feed(&fleet, gateways: ["door", "till"], from: 0, to: 120) { gateway, time in
            guard time.truncatingRemainder(dividingBy: 3) == 0 else { return nil }
            return (gateway == "door" ? -66 : -70) + Double(generator.next() % 9) - 4
        }
        // One visit: a beacon heard once is given the full silence until its rate shows
        // (a first burst read as 8 advertisements a second made it leave after each one).
        #expect(fleet.takeDecisions().filter { $0.kind == .enter }.count == 1)
        #expect(fleet[counter] != nil)
        #expect(fleet[counter]?.zone == "door")
        #expect(zoneChanges(events).count <= 2, "\(zoneChanges(events))")
    }

    /// Either model: a beacon heard once every 3 s is one visit, not an enter and an exit per
    /// advertisement (its first step's burst once read as its rate).
    @Test(arguments: [ZoneModelKind.pairwise, .hmm])
    func aSlowBeaconIsOneVisit(_ model: ZoneModelKind) {
        var brain = BrainConfig()
        brain.zoneModel = model
        var fleet = newFleet(brain)
        for gateway in ["door", "till"] { _ = fleet.gatewayStatus(gateway, online: true) }
        feed(&fleet, gateways: ["door", "till"], from: 0, to: 60) { gateway, time in
            time.truncatingRemainder(dividingBy: 3) == 0 ? (gateway == "door" ? -62 : -75) : nil
        }
        let decisions = fleet.takeDecisions()
        #expect(decisions.map(\.kind) == [.enter], "\(decisions.map { "\($0.kind)@\($0.at.seconds(since: t(0)))" })")
        #expect(fleet[counter]?.zone == "door")
    }
}

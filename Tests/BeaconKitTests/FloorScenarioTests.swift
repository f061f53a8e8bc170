import BeaconKit
import Simulation
import Testing
import Wire

/// The named stores of `beaconctl simulate/score --layout` (issue 19): each does what
/// docs/presence.md says it does, and the same seed gives the same store.
@Suite("floor scenarios")
struct FloorScenarioTests {
    func simulation(_ scenario: FloorScenario, seed: UInt64 = 301, customers: Int? = nil) -> FloorSimulation {
        var crowd = CrowdModel()
        var radio = RadioModel()
        scenario.apply(to: &crowd, &radio)
        if let customers { crowd.customers = customers }
        var simulation = FloorSimulation(layout: .standard, radio: radio, crowd: crowd, seed: seed)
        simulation.scenario = scenario
        return simulation
    }

    @Test("the default layout is issue 8's store: nothing of the others applies to it")
    func gatewaysUnchanged() {
        var crowd = CrowdModel(), radio = RadioModel()
        FloorScenario.gateways.apply(to: &crowd, &radio)
        #expect(crowd == CrowdModel() && radio == RadioModel())
        let visits = FloorSimulation(seed: 5).visits
        #expect(visits.allSatisfy { $0.rate == nil && $0.txOffset == 0 && $0.bodyLoss == 0 })
        // Every standing spot within 0.5 m of its gateway, as before the layouts.
        let layout = StoreLayout.standard
        for leg in visits.flatMap(\.legs) where leg.from == leg.to {
            #expect(layout.gateways.map { $0.position.distance(to: leg.to) }.min()! <= 0.5 + 1e-9)
        }
    }

    @Test("every layout: the same seed gives the same captures, another seed others", arguments: FloorScenario.allCases)
    func deterministic(_ scenario: FloorScenario) {
        let a = simulation(scenario, seed: 7, customers: 5), b = simulation(scenario, seed: 7, customers: 5)
        #expect(a.visits == b.visits)
        #expect(a.captures().mapValues(\.bytes) == b.captures().mapValues(\.bytes))
        #expect(simulation(scenario, seed: 8, customers: 5).visits != a.visits)
        // Beacons transmit ±3 dB off their advertised power on every layout but the default.
        if scenario != .gateways {
            let offsets = simulation(scenario, seed: 7).visits.map(\.txOffset)
            #expect(offsets.allSatisfy { abs($0) <= 3 } && offsets.contains { $0 > 1 } && offsets.contains { $0 < -1 })
        }
    }

    @Test("queue: joined 4-8 places back across the counter/shelves boundary, a step every 6-12 s, served at the counter")
    func queue() {
        let sim = simulation(.queue)
        let truth = sim.truth
        var startedInShelves = 0
        for (visit, true_) in zip(sim.visits, truth.visits) {
            // The queue: the standing legs facing the till, after any browsing.
            let steps = visit.legs.enumerated().filter { _, leg in
                !leg.isDwell && abs(leg.end - leg.start - 1) < 1e-9
            }
            #expect((4...8).contains(steps.count), "\(visit.legs)")
            guard let first = steps.first, let last = steps.last else { continue }
            let joined = visit.legs[first.offset - 1].to
            if sim.layout.zone(at: joined) == "shelves" { startedInShelves += 1 }
            #expect(sim.layout.zone(at: last.element.to) == "counter")
            // Between steps, 5-11 s standing: a step every 6-12 s.
            for (a, b) in zip(steps, steps.dropFirst()) {
                #expect(b.element.start - a.element.end >= 5 - 1e-9 && b.element.start - a.element.end <= 11 + 1e-9)
            }
            #expect(true_.zones.contains { $0.zone == "counter" })
        }
        #expect(startedInShelves >= sim.visits.count / 2, "most join the queue in the shelves' zone: \(startedInShelves)")
    }

    @Test("spots: customers stand 0.3-4 m from the nearest gateway (a quarter near a boundary), shuffle and turn")
    func spots() {
        let sim = simulation(.spots)
        let layout = sim.layout
        var standing = 0, nearBoundary = 0, shuffles = 0, turns = 0
        for visit in sim.visits {
            var heading: Double?
            for leg in visit.legs where leg.isDwell {
                if leg.shuffle { shuffles += 1; continue }
                let d = layout.gateways.map { $0.position.distance(to: leg.to) }.sorted()
                // A shuffle moves up to 0.4 m from the spot drawn 0.3-4 m away.
                #expect(d[0] >= 0.3 - 0.4 && d[0] <= 4 + 0.4)
                standing += 1
                if d[1] - d[0] < 1 { nearBoundary += 1 }
                if let heading, heading != leg.facing { turns += 1 }
                heading = leg.facing
            }
        }
        #expect(nearBoundary * 6 >= standing, "\(nearBoundary) of \(standing) near a boundary")
        #expect(shuffles > 20 && turns > 40)
    }

    @Test("fobs: beacons at 1 Hz and 0.1-0.5 Hz beside phones at 5-10 Hz, heard at their rates")
    func fobs() {
        let sim = simulation(.fobs)
        let rates = sim.visits.map { $0.rate ?? 0 }
        #expect(rates.contains(1) && rates.contains { (0.1...0.5).contains($0) } && rates.contains { (5...10).contains($0) })
        #expect(rates.allSatisfy { $0 == 1 || (0.1...0.5).contains($0) || (5...10).contains($0) })
    }

    @Test("crowd: a body between beacon and gateway takes 3-10 dB, the carrier's by where he faces")
    func bodies() {
        var radio = RadioModel()
        radio.bodies = .init(others: true)
        radio.fading = 0
        radio.shadowing = 0
        radio.loss = 0
        radio.rate = 1
        let gateway = StoreLayout.standard.gateways[0].position  // door, (3.75, 2.5)
        let beacon = FloorPoint(x: gateway.x + 3, y: gateway.y)
        func rssi(facing: Double, blocker: Bool) -> Int8? {
            let crowd = CrowdModel(customers: 0, duration: 10)
            var sim = FloorSimulation(layout: .standard, radio: radio, crowd: crowd, seed: 1)
            sim.bystanders = 0
            var visits = [FloorSimulation.Visit(minor: 1, address: BluetoothAddress(rawValue: 1),
                                                legs: [.init(start: 0, end: 10, from: beacon, to: beacon, facing: facing)])]
            if blocker {
                let between = FloorPoint(x: gateway.x + 1.5, y: gateway.y)
                visits.append(.init(minor: 2, address: BluetoothAddress(rawValue: 2),
                                    legs: [.init(start: 0, end: 10, from: between, to: between)], bodyLoss: 6))
            }
            return sim.heard(visits)[0].first { $0.minor == 1 }?.rssi
        }
        let front = rssi(facing: Double.pi, blocker: false)!, side = rssi(facing: Double.pi / 2, blocker: false)!
        let behind = rssi(facing: 0, blocker: false)!, blocked = rssi(facing: Double.pi, blocker: true)!
        #expect(front == side, "square to the side: the body is not in the way")
        #expect(Int(front) - Int(behind) == 10, "straight behind: 10 dB")
        #expect(Int(front) - Int(blocked) == 6, "another customer in the line of sight: his 6 dB")
    }

    /// The radio's own answer's zone and the true zone at every moment it changes.
    func answers(_ sim: FloorSimulation) -> [(visit: FloorSimulation.Visit, time: Double, answer: String, truth: String)] {
        let timelines = sim.radioAnswers().loudest
        return sim.visits.flatMap { visit in
            (timelines[PresenceScore.key(sim.store, visit.minor)]?.changes ?? []).compactMap { change in
                guard let zone = change.zone, let at = visit.position(at: change.time) else { return nil }
                return (visit, change.time, zone, sim.layout.zone(at: at))
            }
        }
    }

    @Test("the radio's own answer: without shadowing, bodies or walls, the loudest gateway is the nearest at every advertisement")
    func radioAnswerIsTheNearestWithoutShadowing() {
        var sim = simulation(.gateways, customers: 8)
        sim.radio.shadowing = 0
        let changes = answers(sim)
        #expect(changes.count >= 8 * 2, "every visit's entry and at least one zone change: \(changes.count)")
        for change in changes { #expect(change.answer == change.truth, "\(change.time) s: \(change.answer) for \(change.truth)") }
        // Fast fading and losses are not in it: the same answer with more of both.
        var noisy = sim
        noisy.radio.fading = 9
        noisy.radio.loss = 0.6
        #expect(answers(noisy).map(\.answer) == changes.map(\.answer))
    }

    @Test("the radio's own answer in the queue: facing the till, customers standing in the shelves' zone are louder at the counter")
    func radioAnswerInTheQueue() {
        var sim = simulation(.queue)
        sim.radio.shadowing = 0
        // In the queue: from the place the customer joins at (the stand before his first
        // one-second step forward) until he leaves the till.
        func queueing(_ visit: FloorSimulation.Visit, at time: Double) -> Bool {
            guard let first = visit.legs.firstIndex(where: { !$0.isDwell && abs($0.end - $0.start - 1) < 1e-9 }), first > 0,
                  let served = visit.legs.lastIndex(where: \.isDwell) else { return false }
            return time >= visit.legs[first - 1].start && time <= visit.legs[served].end
        }
        let wrongWhileStanding = answers(sim).filter { change in
            change.answer != change.truth && !change.visit.isWalking(at: change.time) && queueing(change.visit, at: change.time)
        }
        #expect(!wrongWhileStanding.isEmpty)
        // Every one the body's doing: the counter's, where the truth is the shelves'.
        for change in wrongWhileStanding {
            #expect(change.answer == "counter" && change.truth == "shelves", "\(change.time) s: \(change.answer) for \(change.truth)")
        }
        // The levels averaged over each whole stand say the same: no average undoes a body.
        let score = PresenceScore(truth: sim.truth, timelines: sim.radioAnswers().standsAveraged)
        #expect(score.dwellingWrong > 5, "\(score.dwellingWrong) % of standing time wrong")
    }
}

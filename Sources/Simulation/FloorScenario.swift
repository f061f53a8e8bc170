import RealModule
import BeaconKit

/// Named stores for the floor model (`beaconctl simulate/score --layout`), each one way in
/// which customers stand where real customers stand (issue 19). All share the 15 × 10 m
/// floor and four gateways of `StoreLayout.standard`, and take walls, offsets and the
/// radio options on top. docs/presence.md describes each.
public enum FloorScenario: String, Sendable, CaseIterable, Equatable {
    /// Issue 8's store: every customer dwells within 0.5 m of a gateway. The same seed gives
    /// the same visits and captures as before the layouts existed.
    case gateways
    /// A queue at the counter: customers join it 4–8 places back (across the
    /// counter/shelves boundary), step forward one place every 6–12 s, are served and leave.
    case queue
    /// Dwell spots anywhere on the floor 0.3–4 m from the nearest gateway, a quarter of them
    /// on the boundary between two; customers shuffle and turn while they stand.
    case spots
    /// Forty customers whose bodies attenuate: the carrier's by where he faces, every other
    /// customer in the line of sight 3–10 dB.
    case crowd
    /// Key fobs beside phones: three beacons in ten advertise once a second, two in ten
    /// every 2–10 s, the rest (phones) 5–10 times a second.
    case fobs

    /// Applies the scenario's crowd and radio; options given afterwards override them.
    public func apply(to crowd: inout CrowdModel, _ radio: inout RadioModel) {
        guard self != .gateways else { return }
        // Beacons differ: each transmits up to 3 dB above or below what it advertises.
        radio.txSpread = 3
        switch self {
        case .gateways: break
        case .queue:
            radio.bodies = .init()
        case .spots:
            // A phone in the hand or a bag: turning takes a little.
            radio.bodies = .init(own: 1...4)
        case .crowd:
            crowd.customers = 40
            crowd.spotRadius = 1.5
            radio.bodies = .init(others: true)
        case .fobs:
            break
        }
    }
}

extension FloorSimulation {
    /// Visits of every scenario but `.gateways`, from a random stream of their own.
    var scenarioVisits: [Visit] {
        var random = SplitMix64(seed: seed &* 0x9E37_79B9 ^ UInt64(scenario.hashValueStable))
        let c = crowd
        return (0..<c.customers).map { i in
            var legs: [Visit.Leg] = []
            let arrival = random.uniform(0...max(c.duration * 0.8, 0))
            let speed = random.uniform(c.speed)
            var here = layout.door
            var t = arrival
            func walk(to point: FloorPoint) {
                let seconds = here.distance(to: point) / speed
                if seconds > 0 { legs.append(.init(start: t, end: t + seconds, from: here, to: point)) }
                t += seconds
                here = point
            }
            func stand(_ seconds: Double, facing: Double, turns: Bool) {
                // Standing people turn and shuffle: every 4–12 s a new heading, and one time
                // in two a step of 0.1–0.4 m around where they stand (still standing).
                let spot = here
                let end = t + seconds
                var heading = facing
                while t < end {
                    let still = min(end - t, turns ? random.uniform(4...12) : seconds)
                    legs.append(.init(start: t, end: t + still, from: here, to: here, facing: heading))
                    t += still
                    guard turns, t < end - 1 else { continue }
                    heading = facing + random.uniform(-Double.pi...Double.pi) * 0.75
                    if random.uniform(0...1) < 0.5 {
                        let angle = random.uniform(0...(2 * Double.pi)), r = random.uniform(0.1...0.4)
                        let next = FloorPoint(x: spot.x + r * Double.cos(angle), y: spot.y + r * Double.sin(angle))
                        legs.append(.init(start: t, end: t + 1, from: here, to: next, shuffle: true, facing: heading))
                        t += 1
                        here = next
                    }
                }
                t = max(t, end)
            }
            let stops = Int(random.uniform(Double(c.stops.lowerBound)...Double(c.stops.upperBound) + 0.999))
            switch scenario {
            case .queue:
                // One customer in three browses a shelf first; then the queue.
                if random.uniform(0...1) < 0.35 {
                    let index = Int(random.uniform(0...Double(layout.gateways.count) - 0.001))
                    walk(to: layout.spot(near: index, radius: 1.5, using: &random))
                    stand(random.uniform(c.dwell), facing: random.uniform(0...(2 * Double.pi)), turns: true)
                }
                let queue = layout.queue
                var place = Int(random.uniform(4...8.999))
                func slot(_ k: Int) -> FloorPoint {
                    let p = queue.position(k)
                    return FloorPoint(x: p.x + random.uniform(-0.15...0.15), y: p.y + random.uniform(-0.1...0.1))
                }
                walk(to: slot(place))
                while place > 0 {
                    stand(random.uniform(5...11), facing: queue.facing + random.uniform(-0.5...0.5), turns: false)
                    place -= 1
                    let next = slot(place)
                    legs.append(.init(start: t, end: t + 1, from: here, to: next))
                    t += 1
                    here = next
                }
                stand(random.uniform(6...12), facing: queue.facing, turns: false)
            case .spots:
                for _ in 0..<max(1, stops) {
                    walk(to: layout.floorSpot(using: &random))
                    stand(random.uniform(c.dwell), facing: random.uniform(0...(2 * Double.pi)), turns: true)
                }
            case .crowd, .fobs, .gateways:
                var zone = layout.zone(at: here)
                for stop in 0..<max(1, stops) {
                    let index = layout.nextStop(after: zone, stop: stop, using: &random)
                    walk(to: layout.spot(near: index, radius: c.spotRadius, using: &random))
                    zone = layout.gateways[index].id
                    stand(random.uniform(c.dwell), facing: random.uniform(0...(2 * Double.pi)), turns: scenario == .crowd)
                }
            }
            walk(to: layout.door)
            var rate: Double?
            if scenario == .fobs {
                let kind = random.uniform(0...1)
                rate = kind < 0.3 ? 1 : kind < 0.5 ? random.uniform(0.1...0.5) : random.uniform(5...10)
            }
            let txOffset = radio.txSpread > 0 ? random.uniform(-radio.txSpread...radio.txSpread) : 0
            let body = radio.bodies.map { random.uniform($0.own) } ?? 0
            let address = BluetoothAddress(rawValue: 0xC0_00_00_00_00_00 | UInt64(store) << 16 | UInt64(i + 1))
            return Visit(minor: UInt16(truncatingIfNeeded: i + 1), address: address, legs: legs, rate: rate,
                         txOffset: txOffset, bodyLoss: body)
        }
    }

    /// dB the bodies in the way take from visit `v`'s advertisement at `t` towards a gateway at `gateway`.
    static func bodyLoss(_ visits: [Visit], _ v: Int, at t: Double, to gateway: FloorPoint, model: RadioModel.BodyModel?) -> Double {
        guard let model, let (position, heading) = visits[v].pose(at: t) else { return 0 }
        var loss = 0.0
        // The carrier's own body: a phone or fob is carried in front; a gateway behind him
        // (cosine below 0) is heard through him.
        let towards = Double.atan2(y: gateway.y - position.y, x: gateway.x - position.x)
        let c = Double.cos(towards - heading)
        if c < 0 { loss += model.own.lowerBound + (model.own.upperBound - model.own.lowerBound) * -c }
        if model.others {
            let dx = gateway.x - position.x, dy = gateway.y - position.y
            let length2 = dx * dx + dy * dy
            for (o, other) in visits.enumerated() where o != v {
                guard length2 > 0, let q = other.position(at: t) else { continue }
                // Within 0.3 m of the line of sight, between 0.3 m from the beacon and the gateway.
                let f = ((q.x - position.x) * dx + (q.y - position.y) * dy) / length2
                guard f > 0, f < 1, f * Double.sqrt(length2) > 0.3 else { continue }
                let px = position.x + f * dx - q.x, py = position.y + f * dy - q.y
                if px * px + py * py < 0.09 { loss += other.bodyLoss }
            }
        }
        return min(loss, model.most)
    }
}

extension FloorScenario {
    /// A number of the case that does not change between runs (unlike `hashValue`).
    var hashValueStable: Int { Self.allCases.firstIndex(of: self) ?? 0 }
}

extension StoreLayout {
    /// The counter's queue: place 0 at the till, each further place 0.8 m back.
    struct Queue {
        var front: FloorPoint
        var step: (dx: Double, dy: Double)
        /// Where people in the queue face (radians).
        var facing: Double

        func position(_ k: Int) -> FloorPoint {
            FloorPoint(x: front.x + Double(k) * step.dx, y: front.y + Double(k) * step.dy)
        }
    }

    /// The queue of the gateway named "counter" (else the last): it starts beside the
    /// gateway, 0.5 m nearer the wall, and runs towards the nearest other gateway, so its
    /// 4th–8th places stand across the boundary between the two zones.
    var queue: Queue {
        let counter = gateways.first { $0.id == "counter" } ?? gateways[gateways.count - 1]
        let other = gateways.filter { $0.id != counter.id }.min {
            $0.position.distance(to: counter.position) < $1.position.distance(to: counter.position)
        }?.position ?? FloorPoint(x: counter.position.x, y: counter.position.y + 5)
        let d = counter.position.distance(to: other)
        let ux = d > 0 ? (other.x - counter.position.x) / d : 0, uy = d > 0 ? (other.y - counter.position.y) / d : 1
        // Places 0–4 are nearer the counter, 5–8 past the half-way line.
        let spacing = (d / 2 + 0.9) / 4.5
        let front = FloorPoint(x: counter.position.x + uy * 1.0 - ux * 0.9, y: counter.position.y - ux * 1.0 - uy * 0.9)
        return Queue(front: front, step: (ux * spacing, uy * spacing), facing: Double.atan2(y: -uy, x: -ux))
    }

    /// A dwell spot anywhere on the floor, 0.3–4 m from its nearest gateway; one in four on
    /// the boundary between two neighbouring gateways' zones.
    func floorSpot(using random: inout SplitMix64) -> FloorPoint {
        func inside(_ p: FloorPoint) -> Bool { p.x >= 0.5 && p.x <= width - 0.5 && p.y >= 0.5 && p.y <= height - 0.5 }
        func nearest(_ p: FloorPoint) -> Double { gateways.map { $0.position.distance(to: p) }.min() ?? 0 }
        for _ in 0..<1000 {
            let p: FloorPoint
            if random.uniform(0...1) < 0.25, gateways.count > 1 {
                // Between two gateways: on their bisector, up to 0.4 m off it.
                let a = Int(random.uniform(0...Double(gateways.count) - 0.001))
                let others = gateways.indices.filter { $0 != a }.sorted {
                    gateways[$0].position.distance(to: gateways[a].position) < gateways[$1].position.distance(to: gateways[a].position)
                }
                let b = others[Int(random.uniform(0...min(1.999, Double(others.count) - 0.001)))]
                let ga = gateways[a].position, gb = gateways[b].position
                let d = ga.distance(to: gb)
                let along = random.uniform(-0.4...0.4), across = random.uniform(-2...2)
                let ux = (gb.x - ga.x) / d, uy = (gb.y - ga.y) / d
                p = FloorPoint(x: (ga.x + gb.x) / 2 + ux * along - uy * across, y: (ga.y + gb.y) / 2 + uy * along + ux * across)
            } else {
                p = FloorPoint(x: random.uniform(0.5...(width - 0.5)), y: random.uniform(0.5...(height - 0.5)))
            }
            let r = nearest(p)
            if inside(p), r >= 0.3, r <= 4 { return p }
        }
        return gateways.first?.position ?? door
    }
}

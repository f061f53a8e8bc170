import RealModule
public import BeaconKit

/// A point on the shop floor, metres from the store's corner.
public struct FloorPoint: Sendable, Equatable, Hashable {
    public var x: Double
    public var y: Double

    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }

    public func distance(to other: FloorPoint) -> Double {
        Double.sqrt((x - other.x) * (x - other.x) + (y - other.y) * (y - other.y))
    }
}

/// The floor: its size, the door, where the gateways hang and (optionally) walls.
public struct StoreLayout: Sendable, Equatable {
    public struct Gateway: Sendable, Equatable {
        public var id: String
        public var position: FloorPoint
        /// dB this gateway's radio reads above (+) or below (−) the truth: antennas and
        /// enclosures differ. What `rssiOffset` in the fleet config, or calibration, corrects.
        public var rssiOffset: Double

        public init(id: String, position: FloorPoint, rssiOffset: Double = 0) {
            self.id = id
            self.position = position
            self.rssiOffset = rssiOffset
        }
    }

    /// A wall between two points; a signal crossing it loses `attenuation` dB.
    public struct Wall: Sendable, Equatable {
        public var from: FloorPoint
        public var to: FloorPoint
        public var attenuation: Double

        public init(from: FloorPoint, to: FloorPoint, attenuation: Double = 6) {
            self.from = from
            self.to = to
            self.attenuation = attenuation
        }

        func crosses(_ a: FloorPoint, _ b: FloorPoint) -> Bool {
            func side(_ p: FloorPoint, _ q: FloorPoint, _ r: FloorPoint) -> Double {
                (q.x - p.x) * (r.y - p.y) - (q.y - p.y) * (r.x - p.x)
            }
            let d1 = side(from, to, a), d2 = side(from, to, b), d3 = side(a, b, from), d4 = side(a, b, to)
            return d1 * d2 < 0 && d3 * d4 < 0
        }
    }

    public var width: Double
    public var height: Double
    /// Where customers come in and go out.
    public var door: FloorPoint
    public var gateways: [Gateway]
    public var walls: [Wall]

    public init(width: Double, height: Double, door: FloorPoint, gateways: [Gateway], walls: [Wall] = []) {
        self.width = width
        self.height = height
        self.door = door
        self.gateways = gateways
        self.walls = walls
    }

    /// A 15 × 10 m shop with the door on the left wall and four gateways, one in the
    /// middle of each quarter: the store of issue 8.
    public static let standard = StoreLayout(
        width: 15, height: 10, door: FloorPoint(x: 0.3, y: 2.5),
        gateways: [Gateway(id: "door", position: FloorPoint(x: 3.75, y: 2.5)),
                   Gateway(id: "window", position: FloorPoint(x: 3.75, y: 7.5)),
                   Gateway(id: "shelves", position: FloorPoint(x: 11.25, y: 7.5)),
                   Gateway(id: "counter", position: FloorPoint(x: 11.25, y: 2.5))])

    /// The true zone at a point: the nearest gateway's (ties to the first listed).
    public func zone(at point: FloorPoint) -> String {
        var best = 0
        var bestDistance = Double.infinity
        for (i, gateway) in gateways.enumerated() {
            let d = gateway.position.distance(to: point)
            if d < bestDistance {
                best = i
                bestDistance = d
            }
        }
        return gateways.isEmpty ? "" : gateways[best].id
    }

    /// The gateway whose zone a customer in `zone` stops at next (his `stop`th stop): another
    /// zone's, except that three customers in ten stop first in the zone they came in by.
    func nextStop(after zone: String, stop: Int, using random: inout SplitMix64) -> Int {
        let others = gateways.indices.filter { gateways[$0].id != zone }
        let stayFirst = stop == 0 && random.uniform(0...1) >= 0.7
        return stayFirst || others.isEmpty
            ? gateways.firstIndex { $0.id == zone } ?? 0
            : others[Int(random.uniform(0...Double(others.count) - 0.001))]
    }

    /// A point of interest of gateway `index`'s zone: uniformly within `radius` of the
    /// gateway, inside the store (0.5 m from the walls) and inside the zone.
    func spot(near index: Int, radius: Double, using random: inout SplitMix64) -> FloorPoint {
        let centre = gateways[index].position
        for _ in 0..<1000 {
            let angle = random.uniform(0...(2 * Double.pi))
            let r = radius * Double.sqrt(random.uniform(0...1))
            let p = FloorPoint(x: centre.x + r * Double.cos(angle), y: centre.y + r * Double.sin(angle))
            if p.x >= 0.5, p.x <= width - 0.5, p.y >= 0.5, p.y <= height - 0.5, zone(at: p) == gateways[index].id {
                return p
            }
        }
        return centre
    }

    /// Zone intervals along legs, exact: along a straight leg the nearest gateway changes
    /// only where the difference of two squared distances, linear in time, is zero.
    func zones(along legs: [FloorSimulation.Visit.Leg]) -> [GroundTruth.ZoneInterval] {
        var intervals: [GroundTruth.ZoneInterval] = []
        func add(_ zone: String, _ from: Double, _ to: Double) {
            guard to > from else { return }
            if let last = intervals.last, last.zone == zone, abs(last.to - from) < 1e-9 {
                intervals[intervals.count - 1].to = to
            } else {
                intervals.append(.init(zone: zone, from: from, to: to))
            }
        }
        for leg in legs {
            var cuts: [Double] = [leg.start, leg.end]
            if !leg.isDwell {
                let dx = leg.to.x - leg.from.x, dy = leg.to.y - leg.from.y
                for i in gateways.indices {
                    for j in gateways.indices where j > i {
                        // |p(f) − g_i|² − |p(f) − g_j|² = c0 + c1·f, f in 0…1 along the leg.
                        let gi = gateways[i].position, gj = gateways[j].position
                        let c0 = (leg.from.x - gi.x) * (leg.from.x - gi.x) + (leg.from.y - gi.y) * (leg.from.y - gi.y)
                            - (leg.from.x - gj.x) * (leg.from.x - gj.x) - (leg.from.y - gj.y) * (leg.from.y - gj.y)
                        let c1 = 2 * (dx * (gj.x - gi.x) + dy * (gj.y - gi.y))
                        guard c1 != 0 else { continue }
                        let f = -c0 / c1
                        if f > 0, f < 1 { cuts.append(leg.start + f * (leg.end - leg.start)) }
                    }
                }
            }
            cuts.sort()
            for (a, b) in zip(cuts, cuts.dropFirst()) where b > a {
                add(zone(at: leg.position(at: (a + b) / 2)), a, b)
            }
        }
        return intervals
    }

    /// dB lost to walls between two points.
    func wallLoss(_ a: FloorPoint, _ b: FloorPoint) -> Double {
        walls.reduce(0) { $0 + ($1.crosses(a, b) ? $1.attenuation : 0) }
    }
}

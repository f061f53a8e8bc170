import RealModule
public import BeaconKit
public import Wire

extension SplitMix64 {
    /// Uniform in `range` (a degenerate range gives its bound).
    mutating func uniform(_ range: ClosedRange<Double>) -> Double {
        range.lowerBound == range.upperBound ? range.lowerBound : Double.random(in: range, using: &self)
    }
}

/// A simulated store floor with ground truth (`StoreSimulation` is the simpler walkway):
/// customers carrying iBeacons come in at the door, walk between points of interest,
/// linger at each and leave by the door, heard by every gateway through a radio model
/// (log-distance path loss, slow shadowing, fast fading, advertisements lost, per-gateway
/// RSSI offsets, optional walls). The output is one
/// btsnoop capture per gateway, which `beacon-gateway` replays like a real one, and the
/// ground truth (`truth`): where every customer was at every instant, and in which zone.
///
/// The model, its parameters and why they have their defaults: docs/presence.md.
public struct FloorSimulation: Sendable {
    public var uuid: BeaconUUID
    /// The store's major: every customer's beacon and the gateways' reference beacons.
    public var store: UInt16
    public var layout: StoreLayout
    public var radio: RadioModel
    public var crowd: CrowdModel
    public var seed: UInt64
    /// Capture time of the simulation's second 0.
    public var start: CaptureTime
    /// Non-beacon advertisers (phones, headphones) in range of every gateway.
    public var bystanders: Int = 3
    /// Gateways advertise an iBeacon of their own (`referenceBeacon(of:)`) once a second,
    /// heard by the other gateways: what auto-calibration learns from.
    public var gatewaysAdvertise = false
    /// How customers move (`FloorScenario`): `.gateways` is the store of issue 8, whose
    /// visits and captures stay the same for the same seed.
    public var scenario: FloorScenario = .gateways

    public init(uuid: BeaconUUID = StoreSimulation.defaultUUID, store: UInt16 = 100, layout: StoreLayout = .standard,
                radio: RadioModel = .init(), crowd: CrowdModel = .init(), seed: UInt64 = 1,
                start: CaptureTime = StoreSimulation.defaultStart) {
        self.uuid = uuid
        self.store = store
        self.layout = layout
        self.radio = radio
        self.crowd = crowd
        self.seed = seed
        self.start = start
    }

    /// A gateway's own advertisement when `gatewaysAdvertise`: minor 60000 + its index.
    public func referenceBeacon(of gatewayIndex: Int) -> IBeacon {
        IBeacon(uuid: uuid, major: store, minor: UInt16(60_000 + gatewayIndex), txPower: Int8(radio.measuredPower))
    }

    /// The customers' visits for this seed: who comes when, walks where and stays how long.
    public var visits: [Visit] {
        if scenario != .gateways { return scenarioVisits }
        var random = SplitMix64(seed: seed)
        let c = crowd
        return (0..<c.customers).map { i in
            let arrival = random.uniform(0...max(c.duration * 0.8, 0))
            let speed = random.uniform(c.speed)
            let stops = Int(random.uniform(Double(c.stops.lowerBound)...Double(c.stops.upperBound) + 0.999))
            var legs: [Visit.Leg] = []
            var here = layout.door
            var zone = layout.zone(at: here)
            var t = arrival
            for stop in 0..<max(1, stops) {
                let index = layout.nextStop(after: zone, stop: stop, using: &random)
                let spot = layout.spot(near: index, radius: c.spotRadius, using: &random)
                zone = layout.gateways[index].id
                let walk = here.distance(to: spot) / speed
                legs.append(Visit.Leg(start: t, end: t + walk, from: here, to: spot))
                t += walk
                let dwell = random.uniform(c.dwell)
                legs.append(Visit.Leg(start: t, end: t + dwell, from: spot, to: spot))
                t += dwell
                here = spot
            }
            legs.append(Visit.Leg(start: t, end: t + here.distance(to: layout.door) / speed, from: here, to: layout.door))
            let address = BluetoothAddress(rawValue: 0xC0_00_00_00_00_00 | UInt64(store) << 16 | UInt64(i + 1))
            return Visit(minor: UInt16(truncatingIfNeeded: i + 1), address: address, legs: legs)
        }
    }

    /// One customer's walk: straight legs between points, some of them standing still.
    public struct Visit: Sendable, Equatable {
        public struct Leg: Sendable, Equatable {
            /// Seconds into the simulation.
            public var start: Double
            public var end: Double
            public var from: FloorPoint
            public var to: FloorPoint
            /// A shuffle: the customer moves a few decimetres but is standing, not walking.
            public var shuffle = false
            /// Where a standing customer faces, radians (0: +x); a walker faces where he goes.
            public var facing = 0.0

            public init(start: Double, end: Double, from: FloorPoint, to: FloorPoint, shuffle: Bool = false, facing: Double = 0) {
                self.start = start
                self.end = end
                self.from = from
                self.to = to
                self.shuffle = shuffle
                self.facing = facing
            }

            public var isDwell: Bool { shuffle || from == to }

            /// Where the customer faces along this leg, radians.
            var heading: Double {
                from == to ? facing : Double.atan2(y: to.y - from.y, x: to.x - from.x)
            }

            func position(at t: Double) -> FloorPoint {
                guard end > start else { return to }
                let f = min(1, max(0, (t - start) / (end - start)))
                return FloorPoint(x: from.x + (to.x - from.x) * f, y: from.y + (to.y - from.y) * f)
            }
        }

        public var minor: UInt16
        public var address: BluetoothAddress
        public var legs: [Leg]
        /// Advertisements per second of this beacon (`nil`: the radio's `rate`).
        public var rate: Double?
        /// dB this beacon transmits above (+) or below (−) the measured power it advertises.
        public var txOffset = 0.0
        /// dB this customer's body takes from a signal crossing it (the crowd model).
        public var bodyLoss = 0.0

        public init(minor: UInt16, address: BluetoothAddress, legs: [Leg], rate: Double? = nil, txOffset: Double = 0,
                    bodyLoss: Double = 0) {
            self.minor = minor
            self.address = address
            self.legs = legs
            self.rate = rate
            self.txOffset = txOffset
            self.bodyLoss = bodyLoss
        }

        /// Seconds into the simulation when the customer comes in and goes out.
        public var arrival: Double { legs.first?.start ?? 0 }
        public var departure: Double { legs.last?.end ?? 0 }

        /// Where the customer is `t` seconds into the simulation; `nil` outside the visit.
        public func position(at t: Double) -> FloorPoint? {
            guard t >= arrival, t <= departure else { return nil }
            return (legs.first { t <= $0.end } ?? legs[legs.count - 1]).position(at: t)
        }

        /// Where the customer is and faces at `t`; `nil` outside the visit.
        func pose(at t: Double) -> (position: FloorPoint, heading: Double)? {
            guard t >= arrival, t <= departure else { return nil }
            let leg = legs.first { t <= $0.end } ?? legs[legs.count - 1]
            return (leg.position(at: t), leg.heading)
        }

        /// Whether the customer is walking (not standing) at `t`.
        public func isWalking(at t: Double) -> Bool {
            guard let leg = legs.first(where: { t >= $0.start && t <= $0.end }) else { return false }
            return !leg.isDwell
        }
    }

    /// The ground truth of this simulation.
    public var truth: GroundTruth {
        GroundTruth(start: start, visits: visits.map { visit in
            GroundTruth.Visit(major: store, minor: visit.minor, enter: visit.arrival,
                              exit: visit.departure, zones: layout.zones(along: visit.legs),
                              walking: visit.legs.filter { !$0.isDwell }.map { $0.start...$0.end })
        })
    }

    /// Captures keyed by gateway id (H4 datalink, one or two reports per event), in time order.
    public func captures() -> [String: BtsnoopWriter] {
        var random = SplitMix64(seed: seed ^ 0xA5A5_A5A5)
        let visits = self.visits
        var heard = sightings(of: visits, random: &random)
        if gatewaysAdvertise {
            // Each gateway as a fixed beacon, heard by the others once a second.
            for (index, gateway) in layout.gateways.enumerated() {
                var channel = RadioChannel(radio: radio, layout: layout, random: &random)
                let data = AdvertisingData.iBeacon(referenceBeacon(of: index))
                let address = BluetoothAddress(rawValue: 0xC1_00_00_00_00_00 | UInt64(index))
                var t = random.uniform(0...1)
                while t < crowd.duration {
                    for (other, rssi) in channel.sample(at: t, from: gateway.position, random: &random) where other != index {
                        heard[other].append((t, .init(address: address, data: data, rssi: rssi)))
                    }
                    t += 1 + random.uniform(0...0.01)
                }
            }
        }
        var writers: [String: BtsnoopWriter] = [:]
        var step = 0.0
        while step < crowd.duration, bystanders > 0 {
            for index in layout.gateways.indices {
                for i in 0..<bystanders {
                    // A phone's advertisement: flags and a random manufacturer blob, no beacon.
                    let address = BluetoothAddress(rawValue: 0x5A_00_00_00_00_00 | UInt64(i))
                    let data: [UInt8] = [0x02, 0x01, 0x1A, 0x07, 0xFF, 0x06, 0x00, 0x01, 0x09, 0x20, UInt8(truncatingIfNeeded: i)]
                    let rssi = Int8(clamping: Int(random.gaussian(mean: -80, deviation: 4).rounded()))
                    heard[index].append((step + 0.0005 * Double(i), .init(eventType: 0x00, address: address, data: data, rssi: rssi)))
                }
            }
            step += 0.5
        }
        for (index, gateway) in layout.gateways.enumerated() {
            var writer = BtsnoopWriter(datalink: .h4)
            // Stable: equal times keep their order, so the same seed gives the same bytes.
            let sorted = heard[index].enumerated().sorted { a, b in
                a.element.time != b.element.time ? a.element.time < b.element.time : a.offset < b.offset
            }.map(\.element)
            var i = 0
            while i < sorted.count {
                // Deliver in events of one or two reports, as controllers do.
                let take = min(sorted.count - i, Bool.random(using: &random) ? 2 : 1)
                writer.appendEvent(HCIEventBuilder.legacyReport(sorted[i..<(i + take)].map(\.report)),
                                   at: start + sorted[i + take - 1].time)
                i += take
            }
            writers[gateway.id] = writer
        }
        return writers
    }
    /// What each gateway hears of `visits` (by gateway index, in the order sent; no
    /// bystanders, no reference beacons): seconds into the simulation, minor and RSSI.
    public func heard(_ visits: [Visit]) -> [[(time: Double, minor: UInt16, rssi: Int8)]] {
        var random = SplitMix64(seed: seed ^ 0xA5A5_A5A5)
        let minors = Dictionary(visits.map { ($0.address, $0.minor) }, uniquingKeysWith: { a, _ in a })
        return sightings(of: visits, random: &random).map { list in
            list.map { ($0.time, minors[$0.report.address] ?? 0, $0.report.rssi ?? 127) }
        }
    }

    /// The radio's own answer (issue 19): for each customer, at every advertisement he
    /// sends, the gateway whose level is the highest once fast fading and losses are averaged
    /// away, i.e. by path loss, slow shadowing, bodies and walls alone (each gateway's
    /// `rssiOffset` left out: calibration's to correct); present exactly from arrival to
    /// departure. The same random draws as `captures()`, so the same levels the gateways heard.
    ///
    /// `standsAveraged` is the same but while the customer stands (a run of dwell legs: turns
    /// and shuffles included): there the levels are averaged over the whole stand, past and
    /// future, and its loudest gateway holds for all of it: what a decider could reach that
    /// knew exactly when a customer stands still and could wait for him to leave before
    /// deciding. Neither answer bounds every decider (one that knew how customers stand, e.g.
    /// that a queue faces the till, could do better), but no decider that only hears the
    /// advertisements is told more than these levels. Both from one pass over the levels.
    public func radioAnswers() -> (loudest: [UInt32: ZoneTimeline], standsAveraged: [UInt32: ZoneTimeline]) {
        var random = SplitMix64(seed: seed ^ 0xA5A5_A5A5)
        let visits = self.visits
        var levels = [[(time: Double, means: [Double])]](repeating: [], count: visits.count)
        _ = sightings(of: visits, random: &random) { visit, time, means in levels[visit].append((time, means)) }
        func loudest(_ means: [Double]) -> String { layout.gateways[means.indices.max { means[$0] < means[$1] } ?? 0].id }
        var each: [UInt32: ZoneTimeline] = [:], averaged: [UInt32: ZoneTimeline] = [:]
        /// Appends a visit's zones at its samples' times, then its departure.
        func append(_ zones: [String], of samples: [(time: Double, means: [Double])], departure: Double,
                    to out: inout [UInt32: ZoneTimeline], key: UInt32) {
            var timeline = ZoneTimeline()
            for (sample, zone) in zip(samples, zones) { timeline.record(zone, at: sample.time) }
            timeline.record(nil, at: departure)
            // A beacon that comes back: its visits one after another on one timeline.
            out[key] = ZoneTimeline((out[key]?.changes ?? []) + timeline.changes)
        }
        for (index, visit) in visits.enumerated() {
            let samples = levels[index]
            let key = PresenceScore.key(store, visit.minor)
            var zones = samples.map { loudest($0.means) }
            append(zones, of: samples, departure: visit.departure, to: &each, key: key)
            for stand in Self.stands(visit.legs) {
                let inside = samples.indices.filter { stand.contains(samples[$0].time) }
                guard let first = inside.first else { continue }
                var sum = samples[first].means.map { _ in 0.0 }
                for i in inside { for g in sum.indices { sum[g] += samples[i].means[g] } }
                let zone = loudest(sum)
                for i in inside { zones[i] = zone }
            }
            append(zones, of: samples, departure: visit.departure, to: &averaged, key: key)
        }
        return (each, averaged)
    }

    /// The spans of capture time a customer stands: runs of dwell legs (turns and shuffles
    /// are standing too).
    static func stands(_ legs: [Visit.Leg]) -> [ClosedRange<Double>] {
        var out: [ClosedRange<Double>] = []
        var begin: Double?, last = 0.0
        for leg in legs {
            if leg.isDwell {
                if begin == nil { begin = leg.start }
                last = leg.end
            } else if let b = begin {
                out.append(b...max(b, last))
                begin = nil
            }
        }
        if let b = begin { out.append(b...max(b, last)) }
        return out
    }

    /// Every advertisement of `visits` each gateway hears, by gateway index. `levels`, when
    /// given, is told every advertisement's level at each gateway without fast fading
    /// (`radioAnswers`); it draws no random number.
    func sightings(of visits: [Visit], random: inout SplitMix64,
                   levels: ((_ visit: Int, _ time: Double, _ means: [Double]) -> Void)? = nil)
        -> [[(time: Double, report: HCIEventBuilder.Report)]] {
        var heard: [[(time: Double, report: HCIEventBuilder.Report)]] = Array(repeating: [], count: layout.gateways.count)
        let bodies = radio.bodies
        for (v, visit) in visits.enumerated() {
            let period = 1 / (visit.rate ?? radio.rate)
            var channel = RadioChannel(radio: radio, layout: layout, random: &random)
            let beacon = IBeacon(uuid: uuid, major: store, minor: visit.minor, txPower: Int8(radio.measuredPower))
            let data = AdvertisingData.iBeacon(beacon)
            var t = visit.arrival + random.uniform(0...period)
            while t < visit.departure {
                let position = visit.position(at: t)!
                let extra = bodies == nil && visit.txOffset == 0 ? nil
                    : layout.gateways.map { visit.txOffset - Self.bodyLoss(visits, v, at: t, to: $0.position, model: bodies) }
                for (index, rssi) in channel.sample(at: t, from: position, extra: extra, random: &random) {
                    heard[index].append((t, .init(address: visit.address, data: data, rssi: rssi)))
                }
                levels?(v, t, channel.means)
                // BLE adds 0–10 ms of random delay to every advertising interval.
                t += period + random.uniform(0...0.01)
            }
        }
        return heard
    }
}

/// What really happened in a simulated store, to score the brain against.
public struct GroundTruth: Sendable, Equatable {
    public struct ZoneInterval: Sendable, Equatable {
        public var zone: String
        /// Seconds into the simulation.
        public var from: Double
        public var to: Double
    }

    public struct Visit: Sendable, Equatable {
        public var major: UInt16
        public var minor: UInt16
        /// Seconds into the simulation.
        public var enter: Double
        public var exit: Double
        /// The true zone from `enter` to `exit`, without gaps.
        public var zones: [ZoneInterval]
        /// When the customer was walking.
        public var walking: [ClosedRange<Double>]

        public func zone(at t: Double) -> String? {
            guard t >= enter, t < exit else { return nil }
            return zones.first { t < $0.to }?.zone ?? zones.last?.zone
        }
    }

    /// Capture time of second 0.
    public var start: CaptureTime
    public var visits: [Visit]

    /// `truth.json`: `{"start", "visits":[{"major","minor","enter","exit","zones":[{"zone","from","to"}],
    /// "walking":[[from,to]…]}]}`, times in seconds after `start`.
    public var json: String {
        var writer = JSONWriter()
        writer.object { o in
            o("start", start)
            o("visits", objects: visits) { v, visit in
                v("major", Int(visit.major))
                v("minor", Int(visit.minor))
                v("enter", visit.enter, places: 3)
                v("exit", visit.exit, places: 3)
                v("zones", objects: visit.zones) { z, interval in
                    z("zone", interval.zone)
                    z("from", interval.from, places: 3)
                    z("to", interval.to, places: 3)
                }
                v("walking", .array(visit.walking.map {
                    .array([.number(($0.lowerBound * 1000).rounded() / 1000), .number(($0.upperBound * 1000).rounded() / 1000)])
                }))
            }
        }
        return writer.text
    }

    public init(start: CaptureTime, visits: [Visit]) {
        self.start = start
        self.visits = visits
    }

    public init(parsing value: JSONValue) throws(GroundTruthError) {
        guard case .object(let top) = value, let startText = top["start"]?.stringValue,
              let start = CaptureTime(iso8601: startText), case .array(let list)? = top["visits"]
        else { throw GroundTruthError("expected {\"start\":…,\"visits\":[…]}") }
        var visits: [Visit] = []
        for (i, item) in list.enumerated() {
            guard let major = item["major"]?.numberValue, let minor = item["minor"]?.numberValue,
                  let enter = item["enter"]?.numberValue, let exit = item["exit"]?.numberValue,
                  case .array(let zones)? = item["zones"]
            else { throw GroundTruthError("visits[\(i)]: expected major, minor, enter, exit, zones") }
            var intervals: [ZoneInterval] = []
            for z in zones {
                guard let zone = z["zone"]?.stringValue, let from = z["from"]?.numberValue, let to = z["to"]?.numberValue
                else { throw GroundTruthError("visits[\(i)].zones: expected zone, from, to") }
                intervals.append(ZoneInterval(zone: zone, from: from, to: to))
            }
            var walking: [ClosedRange<Double>] = []
            if case .array(let spans)? = item["walking"] {
                for span in spans {
                    guard case .array(let pair) = span, pair.count == 2, let a = pair[0].numberValue,
                          let b = pair[1].numberValue, a <= b else { throw GroundTruthError("visits[\(i)].walking") }
                    walking.append(a...b)
                }
            }
            visits.append(Visit(major: UInt16(clamping: Int(major)), minor: UInt16(clamping: Int(minor)),
                                enter: enter, exit: exit, zones: intervals, walking: walking))
        }
        self.init(start: start, visits: visits)
    }
}

public struct GroundTruthError: Error, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

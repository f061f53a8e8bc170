import RealModule

/// How the radio behaves between a beacon and the gateways.
public struct RadioModel: Sendable, Equatable {
    /// RSSI at 1 m, dBm (also what the beacons advertise as measured power).
    public var measuredPower: Double = -59
    /// Path-loss exponent `n` of `rssi = P1m − 10·n·log10(d)`.
    public var pathLossExponent: Double = 2.5
    /// Standard deviation of slow shadowing, dB: a Gauss–Markov process per beacon and
    /// gateway that decorrelates over `shadowingDistance` metres walked and over
    /// `shadowingTime` seconds (the body turning, people passing).
    public var shadowing: Double = 4
    public var shadowingDistance: Double = 2
    public var shadowingTime: Double = 5
    /// Standard deviation of fast fading, dB, independent for every advertisement and gateway.
    public var fading: Double = 3
    /// Fraction of advertisements a gateway misses (collisions, scan windows).
    public var loss: Double = 0.2
    /// Weakest RSSI a gateway hears, dBm.
    public var sensitivity: Double = -95
    /// Advertisements per second per beacon (unless its visit says otherwise).
    public var rate: Double = 2
    /// Each beacon transmits up to this many dB above or below its advertised power
    /// (uniformly; 0: every beacon exactly its measured power).
    public var txSpread: Double = 0
    /// Bodies in the way (`nil`: none): the carrier's own, by where he faces, and (with
    /// `others`) every other customer standing in the line of sight.
    public var bodies: BodyModel?

    /// How much a human body takes from a 2.4 GHz signal crossing it.
    public struct BodyModel: Sendable, Equatable {
        /// dB lost through the carrier's own body: the low bound with the gateway square to
        /// the side, the high one with it straight behind; nothing while it is in front.
        public var own: ClosedRange<Double> = 3...10
        /// Whether other customers in the line of sight take their `bodyLoss` too.
        public var others = false
        /// Most dB all bodies together take.
        public var most = 20.0

        public init(own: ClosedRange<Double> = 3...10, others: Bool = false) {
            self.own = own
            self.others = others
        }
    }

    public init() {}
}

/// Who comes, when, and how they move.
public struct CrowdModel: Sendable, Equatable {
    public var customers: Int = 20
    /// Seconds of simulated time; arrivals are spread over its first 80 %.
    public var duration: Double = 900
    /// Points of interest visited per customer.
    public var stops: ClosedRange<Int> = 1...4
    /// Seconds spent at each.
    public var dwell: ClosedRange<Double> = 10...90
    /// Walking speed, m/s.
    public var speed: ClosedRange<Double> = 0.5...1.0
    /// How far from its gateway a point of interest may be, metres.
    public var spotRadius: Double = 0.5

    public init(customers: Int = 20, duration: Double = 900) {
        self.customers = customers
        self.duration = duration
    }
}

/// The radio between one transmitter and every gateway: keeps the shadowing state.
struct RadioChannel {
    let radio: RadioModel
    let layout: StoreLayout
    var shadow: [Double]
    var last: (time: Double, position: FloorPoint)?
    /// The last sample's level at each gateway without fast fading, losses or the gateway's
    /// `rssiOffset` (`FloorSimulation.radioAnswers`).
    var means: [Double] = []

    init(radio: RadioModel, layout: StoreLayout, random: inout SplitMix64) {
        self.radio = radio
        self.layout = layout
        shadow = layout.gateways.map { _ in random.gaussian(deviation: radio.shadowing) }
    }

    /// One advertisement sent at `t` from `position`: (gateway index, RSSI) for each
    /// gateway that hears it.
    mutating func sample(at t: Double, from position: FloorPoint, extra: [Double]? = nil,
                         random: inout SplitMix64) -> [(Int, Int8)] {
        if let last {
            let moved = last.position.distance(to: position)
            let rho = Double.exp(-moved / max(radio.shadowingDistance, 1e-6) - (t - last.time) / max(radio.shadowingTime, 1e-6))
            let fresh = Double.sqrt(max(0, 1 - rho * rho))
            for i in shadow.indices { shadow[i] = rho * shadow[i] + fresh * random.gaussian(deviation: radio.shadowing) }
        }
        last = (t, position)
        var out: [(Int, Int8)] = []
        means.removeAll(keepingCapacity: true)
        for (i, gateway) in layout.gateways.enumerated() {
            let distance = max(gateway.position.distance(to: position), 0.3)
            let level = radio.measuredPower - 10 * radio.pathLossExponent * Double.log10(distance) + shadow[i]
            let wall = layout.wallLoss(position, gateway.position)
            means.append(level - wall + (extra?[i] ?? 0))
            // Summed in this order since the model began: the same seed gives the same bytes.
            let rssi = level + random.gaussian(deviation: radio.fading) + gateway.rssiOffset - wall
                + (extra?[i] ?? 0)
            let lost = random.uniform(0...1) < radio.loss
            if !lost, rssi >= radio.sensitivity { out.append((i, Int8(clamping: Int(rssi.rounded())))) }
        }
        return out
    }
}

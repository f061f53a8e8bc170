import RealModule
public import BeaconKit

/// A one-dimensional Kalman filter on RSSI with time-aware process noise.
///
/// The state is the beacon's true RSSI at the gateway in dBm. Between samples the
/// variance grows by `processNoise × Δt` (a customer walking changes RSSI by a few dB a
/// second); each sample of variance `measurementNoise` pulls the estimate toward it. With
/// the defaults (4 dBm²/s, 16 dBm² ≈ σ 4 dB) a beacon advertising at 10 Hz settles to a
/// gain of about 0.15, at 1 Hz to about 0.4: one reflection 10 dB off moves the estimate
/// by 1.5–4 dB instead of 10. Because Δt comes from the sample times, a replay at any
/// speed filters identically.
public struct RSSIFilter: Sendable, Equatable {
    public struct Parameters: Sendable, Equatable {
        /// Growth of the estimate's variance per second without samples, dBm²/s.
        public var processNoise: Double
        /// Variance of one RSSI sample, dBm².
        public var measurementNoise: Double

        public init(processNoise: Double = 4, measurementNoise: Double = 16) {
            self.processNoise = processNoise
            self.measurementNoise = measurementNoise
        }
    }

    public let parameters: Parameters
    public private(set) var estimate: Double?
    public private(set) var variance: Double
    private var lastSample: CaptureTime?

    public init(parameters: Parameters = .init()) {
        self.parameters = parameters
        variance = parameters.measurementNoise
    }

    /// Folds in one sample (dBm) taken at `time`; returns the new estimate.
    @discardableResult
    public mutating func update(_ rssi: Double, at time: CaptureTime) -> Double {
        guard let previous = estimate, let last = lastSample else {
            estimate = rssi
            variance = parameters.measurementNoise
            lastSample = time
            return rssi
        }
        // Cap Δt so a beacon that comes back after a long absence starts nearly fresh
        // rather than with a variance that overflows usefulness.
        let elapsed = min(max(time.seconds(since: last), 0), 60)
        let predicted = variance + parameters.processNoise * elapsed
        let gain = predicted / (predicted + parameters.measurementNoise)
        let next = previous + gain * (rssi - previous)
        estimate = next
        variance = (1 - gain) * predicted
        lastSample = time
        return next
    }
}

/// How RSSI becomes an estimated distance.
public enum DistanceModel: String, Sendable, Equatable, CaseIterable {
    /// `d = 10 ^ ((P1m − rssi) / (10 · n))`, `n` the path-loss exponent.
    case logDistance
    /// The curve fitted to a Nexus 4 by Radius Networks: `0.89976 · r^7.7095 + 0.111`
    /// with `r = rssi / P1m` (and `r^10` below 1).
    case curveFit

    /// Estimated distance in metres from RSSI and the measured power at 1 m (both dBm).
    public func distance(rssi: Double, measuredPower: Double, exponent: Double) -> Double {
        switch self {
        case .logDistance:
            return Double.exp10((measuredPower - rssi) / (10 * exponent))
        case .curveFit:
            guard measuredPower != 0 else { return .infinity }
            let ratio = rssi / measuredPower
            return ratio < 1 ? Double.pow(ratio, 10) : 0.89976 * Double.pow(ratio, 7.7095) + 0.111
        }
    }
}

/// Distance thresholds between proximity classes, with hysteresis.
public struct ProximityThresholds: Sendable, Equatable {
    /// Upper bound of `immediate`, metres.
    public var immediate: Double
    /// Upper bound of `near`, metres.
    public var near: Double
    /// Fraction by which a boundary moves away from the current class: with 0.2 a
    /// customer at `near` becomes `far` only beyond 3.6 m and is `near` again only inside
    /// 2.4 m, so standing at 3 m does not flap.
    public var hysteresis: Double

    public init(immediate: Double = 0.5, near: Double = 3.0, hysteresis: Double = 0.2) {
        self.immediate = immediate
        self.near = near
        self.hysteresis = hysteresis
    }

    /// The class for `distance` given the class held so far.
    public func proximity(for distance: Double?, current: Proximity) -> Proximity {
        guard let distance, distance.isFinite else { return .unknown }
        func boundary(_ threshold: Double, below: Proximity) -> Double {
            // `below` is the class just inside this threshold.
            guard current != .unknown else { return threshold }
            return current <= below ? threshold * (1 + hysteresis) : threshold * (1 - hysteresis)
        }
        if distance < boundary(immediate, below: .immediate) { return .immediate }
        if distance <= boundary(near, below: .near) { return .near }
        return .far
    }
}

import BeaconKit
import Config
import RealModule

/// The zone HMM (`brain.zoneModel: "hmm"`, docs/presence.md "The zone HMM"): a hidden
/// Markov model per beacon whose states are the zones (the gateways that heard it),
/// filtered forward in capture time.
///
/// - Transitions: a customer stays; over `dt` seconds he leaves his zone with probability
///   `1 − exp(−dt / dwell)`, into one of its adjacent zones (equally). Time-scaled by the gap
///   between updates, so a fob heard every 3 s and a phone heard ten times a second are
///   treated alike.
/// - Emission: for each pair of zones, how likely it is that the first zone's gateway hears
///   the beacon louder, given both levels (a fresh measurement, or the link's smoothed level
///   and its uncertainty) and `noise` dB of shadowing on their difference; a mixture with
///   `outliers` of no information gives the heavy tail (a body or a shelf takes 3–10 dB).
///   Only pairs with a fresh measurement count (a missed advertisement is no evidence); a
///   gateway whose silence has become telling counts as quieter than any that hears.
/// - Decision (`FleetPresence`): another zone takes the zone when its posterior passes
///   `switchProbability` for `hold` seconds.
///
/// Updates allocate nothing (the arrays grow only when a new gateway hears the beacon);
/// each costs O(zones²).
struct ZoneBelief: Sendable, Equatable {
    /// What one gateway says of the beacon at an update.
    enum Observation: Sendable, Equatable {
        /// A level measured since the last update (dBm) and its variance (dB²).
        case fresh(Double, variance: Double)
        /// A level known from earlier (the link's estimate now) and its variance.
        case known(Double, variance: Double)
        /// Not heard lately: its silence is telling (or it never heard the beacon).
        case silent

        var level: (value: Double, variance: Double, fresh: Bool)? {
            switch self {
            case .fresh(let v, let variance): (v, variance, true)
            case .known(let v, let variance): (v, variance, false)
            case .silent: nil
            }
        }
    }

    struct Parameters: Sendable, Equatable {
        /// Typical seconds in a zone.
        var dwell: Double
        /// dB² added to the variance of a difference of two levels.
        var noiseVariance: Double
        /// Weight of "no information" in each pairwise comparison.
        var outliers: Double

        init(dwell: Double, noise: Double, outliers: Double = ZoneBelief.outliers) {
            self.dwell = max(dwell, 0.01)
            noiseVariance = noise * noise
            self.outliers = outliers
        }

        init(_ brain: BrainConfig) { self.init(dwell: brain.zoneDwell, noise: brain.zoneNoise) }
    }

    /// The share of each pairwise comparison that carries no information.
    static let outliers = 0.1

    /// The zones, in the order of `posterior`.
    private(set) var zones: [String]
    private(set) var posterior: [Double]
    /// Per zone, the zones it may move to (`zones.count²`, row by row).
    private var adjacent: [Bool]
    /// Per zone, how many zones it may move to.
    private var degree: [Int]
    private var scratch: [Double]
    private var observed: [Observation]
    /// Capture time of the last update.
    private(set) var updated: CaptureTime
    /// The zone above the switch threshold that is not the beacon's zone, and since when.
    var leader: String?
    var leaderSince: CaptureTime?

    /// A belief over `zones` with `mass` on `zone` and the rest shared equally.
    init(zones: [String], at time: CaptureTime, concentratedOn zone: String?, mass: Double = 0.6,
         adjacency: (String, String) -> Bool = { _, _ in true }) {
        self.zones = []
        posterior = []
        adjacent = []
        degree = []
        scratch = []
        observed = []
        updated = time
        for z in zones { add(z, adjacency: adjacency) }
        reset(on: zone, mass: mass)
    }

    /// Puts `mass` on `zone`, the rest shared equally (uniform when `zone` is not one).
    mutating func reset(on zone: String?, mass: Double) {
        let n = zones.count
        guard n > 0 else { return }
        if let zone, let i = zones.firstIndex(of: zone), n > 1 {
            for j in 0..<n { posterior[j] = (1 - mass) / Double(n - 1) }
            posterior[i] = mass
        } else {
            for j in 0..<n { posterior[j] = 1 / Double(n) }
        }
        leader = nil
        leaderSince = nil
    }

    func index(of zone: String) -> Int? { zones.firstIndex(of: zone) }

    func probability(of zone: String) -> Double { index(of: zone).map { posterior[$0] } ?? 0 }

    /// A gateway that began hearing the beacon: a zone with a small prior.
    mutating func add(_ zone: String, adjacency: (String, String) -> Bool) {
        guard !zones.contains(zone) else { return }
        let n = zones.count
        let share = n == 0 ? 1 : 0.02
        for j in 0..<n { posterior[j] *= 1 - share }
        zones.append(zone)
        posterior.append(share)
        scratch.append(0)
        observed.append(.silent)
        var grown = [Bool](repeating: false, count: (n + 1) * (n + 1))
        for i in 0..<n { for j in 0..<n { grown[i * (n + 1) + j] = adjacent[i * n + j] } }
        for i in 0..<n {
            let linked = adjacency(zones[i], zone)
            grown[i * (n + 1) + n] = linked
            grown[n * (n + 1) + i] = linked
        }
        adjacent = grown
        degree = (0...n).map { i in (0...n).filter { $0 != i && adjacent[i * (n + 1) + $0] }.count }
    }

    /// One forward step at `time`: the dwell prior over the time since the last update, then
    /// the evidence `observe(i)` gives for zone `i`. Nothing changes (not even the time) when
    /// no gateway has a fresh measurement: silence is no evidence, and the prior waits for it.
    /// Returns whether it updated.
    @discardableResult
    mutating func update(at time: CaptureTime, _ parameters: Parameters, observe: (Int) -> Observation) -> Bool {
        let n = zones.count
        guard n > 0 else { return false }
        var anyFresh = false
        for i in 0..<n {
            observed[i] = observe(i)
            if case .fresh = observed[i] { anyFresh = true }
        }
        guard anyFresh else { return false }
        // Predict: stay with exp(−dt/dwell), else move to an adjacent zone.
        let dt = max(0, time.seconds(since: updated))
        let stay = Double.exp(-dt / parameters.dwell)
        for j in 0..<n { scratch[j] = 0 }
        for i in 0..<n {
            let p = posterior[i]
            guard degree[i] > 0 else {
                scratch[i] += p
                continue
            }
            scratch[i] += p * stay
            let share = p * (1 - stay) / Double(degree[i])
            for j in 0..<n where j != i && adjacent[i * n + j] { scratch[j] += share }
        }
        // Evidence: per zone, the product over the pairs with a fresh side of how likely its
        // gateway is the louder one.
        let w = parameters.outliers
        var total = 0.0
        for z in 0..<n {
            let a = observed[z].level
            var likelihood = 1.0
            for g in 0..<n where g != z {
                let b = observed[g].level
                switch (a, b) {
                case let (a?, b?):
                    guard a.fresh || b.fresh else { continue }
                    let s = (a.variance + b.variance + parameters.noiseVariance).squareRoot()
                    likelihood *= w / 2 + (1 - w) * Self.normalCDF((a.value - b.value) / max(s, 1e-6))
                case (nil, let b?):
                    // A zone whose gateway is silent against one that hears: quieter.
                    if b.fresh { likelihood *= w / 2 }
                case (_?, nil), (nil, nil):
                    continue
                }
            }
            scratch[z] *= likelihood
            total += scratch[z]
        }
        if total > 0, total.isFinite {
            for j in 0..<n { posterior[j] = scratch[j] / total }
        } else {
            for j in 0..<n { posterior[j] = 1 / Double(n) }
        }
        updated = max(updated, time)
        return true
    }

    /// The most probable zone and its posterior (ties to the first).
    var best: (zone: String, probability: Double)? {
        guard !zones.isEmpty else { return nil }
        var i = 0
        for j in 1..<zones.count where posterior[j] > posterior[i] { i = j }
        return (zones[i], posterior[i])
    }

    static func normalCDF(_ x: Double) -> Double { 0.5 * Double.erfc(-x / 2.0.squareRoot()) }

    /// Whether two gateways' zones border each other: with both positions known (and the
    /// same store), when no third gateway is nearer the midpoint between them than they are
    /// (their areas of the floor meet there); otherwise yes.
    static func adjacent(_ a: String, _ b: String, positions: [String: FloorPosition], stores: [String: UInt16]) -> Bool {
        if let sa = stores[a], let sb = stores[b], sa != sb { return false }
        guard let pa = positions[a], let pb = positions[b] else { return true }
        let mx = (pa.x + pb.x) / 2, my = (pa.y + pb.y) / 2
        func d2(_ p: FloorPosition) -> Double { (p.x - mx) * (p.x - mx) + (p.y - my) * (p.y - my) }
        let half = d2(pa)
        for (id, p) in positions where id != a && id != b && stores[id] == stores[a] {
            if d2(p) < half - 1e-9 { return false }
        }
        return true
    }
}

import BeaconKit
import Contract
import Tracking
import RealModule

/// The brain's estimate of how loud one gateway hears one beacon: a Kalman filter on the
/// advertisements' RSSI over a level and its trend (dB/s), in capture time. The level may
/// wander by `processNoise` dB² per second and its trend by `trendNoise` dB²/s³ (a customer
/// walking towards or away from the gateway); one advertisement is off by
/// `measurementNoise` dB² (a report window's mean of `n` counts as one measurement of
/// variance `measurementNoise / n`). A new link starts with no trend, uncertain by
/// `initialSlopeDeviation` dB/s.
struct LinkEstimate: Sendable, Equatable {
    /// dBm; `nil` until an advertisement with RSSI arrives.
    var level: Double?
    /// dB/s.
    var slope = 0.0
    /// Covariance of (level, slope) at `updated`: dB², dB²/s, dB²/s².
    var variance: Double
    var covariance = 0.0
    var slopeVariance = 0.0
    var updated: CaptureTime
    /// Capture time of the latest advertisement heard (with RSSI or not).
    var lastHeard: CaptureTime
    /// The gateway could not report until then (its reports had a gap: its broker or the
    /// brain's was away): what it heard meanwhile is unknown, not silence.
    var unknownUntil: CaptureTime?

    /// Since when the gateway's silence counts.
    var quietSince: CaptureTime { max(lastHeard, unknownUntil ?? lastHeard) }

    /// Whether the gateway had stopped hearing the beacon `timeout` before `time`.
    func isStale(at time: CaptureTime, _ timeout: Double) -> Bool { time.seconds(since: quietSince) >= timeout }
    /// The gateway's own view at its latest report: what the fleet presence lists.
    var rssiSmoothed: Double?
    var distance: Double?
    var proximity: Proximity
    /// Advertisements per second this gateway hears of the beacon (an average over about
    /// 10 s), and how many arrived in the step being processed.
    var rate: Double?
    var stepCount = 0
    /// The average behind `rate`, and what bounds it (`RateBurst`).
    var average: Double?
    var burst = RateBurst()
    /// The RSSI of the advertisements in the step being processed: their sum and count; then
    /// their mean and count once the step's evidence is in (nil: none this step).
    var stepRSSISum = 0.0
    var stepRSSICount = 0
    var fresh: Fresh?

    struct Fresh: Sendable, Equatable {
        var mean: Double
        var count: Int
    }

    static let initialSlopeDeviation = 2.0


    init(at time: CaptureTime) {
        level = nil
        variance = 0
        updated = time
        lastHeard = time
        proximity = .unknown
    }

    /// Level and its variance predicted forward to `time`.
    func predicted(at time: CaptureTime, processNoise: Double, trendNoise: Double) -> (level: Double, variance: Double)? {
        guard let level else { return nil }
        let dt = max(0, time.seconds(since: updated))
        let v = variance + 2 * dt * covariance + dt * dt * slopeVariance + processNoise * dt + trendNoise * dt * dt * dt / 3
        return (level + slope * dt, v)
    }

    mutating func update(mean: Double, count: Int, at time: CaptureTime, processNoise: Double, measurementNoise: Double,
                         trendNoise: Double = 0) {
        let noise = measurementNoise / Double(max(1, count))
        guard let level else {
            self.level = mean
            variance = noise
            slope = 0
            covariance = 0
            slopeVariance = trendNoise > 0 ? Self.initialSlopeDeviation * Self.initialSlopeDeviation : 0
            updated = max(updated, time)
            return
        }
        let dt = max(0, time.seconds(since: updated))
        // Predict.
        var p00 = variance + 2 * dt * covariance + dt * dt * slopeVariance + processNoise * dt + trendNoise * dt * dt * dt / 3
        var p01 = covariance + dt * slopeVariance + trendNoise * dt * dt / 2
        var p11 = slopeVariance + trendNoise * dt
        let x0 = level + slope * dt
        // Update with the measurement of the level.
        let s = p00 + noise
        let k0 = p00 / s, k1 = p01 / s
        let innovation = mean - x0
        self.level = x0 + k0 * innovation
        slope += k1 * innovation
        let n00 = (1 - k0) * p00, n01 = (1 - k0) * p01, n11 = p11 - k1 * p01
        p00 = n00
        p01 = n01
        p11 = n11
        variance = p00
        covariance = p01
        slopeVariance = p11
        updated = max(updated, time)
    }
}

/// Everything the brain has heard of one beacon lately, from every gateway's reports.
struct Evidence: Sendable, Equatable {
    var links: GatewayMap<LinkEstimate> = [:]
    /// Capture time of the first advertisement of this visit, and of the latest.
    var firstHeard: CaptureTime
    var lastHeard: CaptureTime
    /// Advertisements per second, all gateways together (an average over about 10 s), and
    /// its value when the beacon was last heard: what the exit's silence is measured against.
    var rate: Double?
    var rateWhenLastHeard: Double?
    var burst = RateBurst()
    /// Advertisements counted in the step being processed.
    var stepCount = 0
    /// The gateway passing the zone test, and for how many steps in a row.
    var challenger: String?
    var passes = 0
    /// The beacon's UUID, from the reports.
    var uuid: BeaconUUID?
    /// The last "update" (`FleetEvent.update`), capture time.
    var lastUpdate: CaptureTime?
    /// The decision step of this visit's latest decision there (capture time): an exit is
    /// never dated before it.
    var lastDecided: CaptureTime?
    /// The zone HMM's belief (`brain.zoneModel` `hmm`), from the first decision after entry.
    var belief: ZoneBelief?
    /// Heard in the decision step being processed, and whether what its presence says of a
    /// view (proximity, zone name) or its UUID changed there (`FleetPresence.process`, which
    /// clears both as the step closes): flags where two sets of the step's beacons were,
    /// whose hashing was a tenth of a step's work.
    var heardInStep = false
    var viewsChangedInStep = false
    /// When the beacon's zone last changed (or it entered), capture time.
    var zoneSince: CaptureTime?

    init(at time: CaptureTime) {
        firstHeard = time
        lastHeard = time
    }
}

/// What bounds a rate of advertisements: those that arrived after the first decision step
/// that heard any, over the time since. A beacon heard in one step has shown no rate (0: the
/// longest silence applies); a fob heard once every 3 s is not read at its first burst.
struct RateBurst: Sendable, Equatable {
    private var firstStep: CaptureTime?
    private var later = 0

    mutating func count(_ n: Int, at end: CaptureTime) {
        if firstStep == nil {
            if n > 0 { firstStep = end }
        } else {
            later += n
        }
    }

    func bound(_ average: Double, at end: CaptureTime, step: Double) -> Double {
        guard let firstStep else { return 0 }
        return min(average, Double(later) / max(end.seconds(since: firstStep), step))
    }
}

/// One entry of a gateway's report, waiting for every gateway's report of its moment.
struct PendingSample: Sendable, Equatable {
    var time: CaptureTime
    var gateway: String
    var ref: BeaconRef
    var entry: RSSIReport.Entry
    /// Arrival order, to keep equal times in a fixed order.
    var sequence: Int
    /// The gateway's zone name (`FleetPresence.zoneNames`) when its report came, while
    /// `zoneNamesVersion` says the names have not changed since.
    var zoneName: String
    var zoneNamesVersion: Int
    /// The gateway's reports after this one had a gap until then (`LinkEstimate.unknownUntil`).
    var unknownUntil: CaptureTime? = nil
}

/// The brain's clock for zone decisions: capture time, as far as every gateway has
/// reported it. Each gateway's reports say up to when they are complete (`to`); the brain
/// decides about a moment only when every gateway it waits for has reported past it, so
/// its decisions do not depend on when messages arrive (a replay at full speed decides as
/// one in real time, a busy machine as an idle one).
///
/// Waited for: every gateway that said `online` or reported, until it says `offline`. (A
/// live gateway's capture time begins when it starts; replayed gateways share one timeline,
/// `beacon-gateway --start-at`, and say `online` before its first second plays.)
///
/// The one wall-clock rule: a gateway that has held the clock back for `hold` seconds is
/// let go (the brain goes on without it until it catches up) only when it has truly gone
/// silent: no report of it arrived for `hold` seconds while other gateways were heard (a
/// report of theirs arrived at least `hold` seconds after its last, or theirs cover `hold`
/// seconds of capture time beyond its own). When nobody is heard
/// the silence is the path's, not the gateway's (the brain's connection dead before it
/// notices, a paused broker, one store's bridge carrying every gateway): nobody is let go,
/// for a gateway let go there and taken back later left the others' reports to decide its
/// beacons past their exitTimeout meanwhile (issue 22). A gateway whose reports keep coming,
/// late (a busy machine, a starved process, replays at full speed racing each other), is
/// waited for, however far behind in capture time. Those seconds are the
/// brain's *running* time: a gap between two calls longer than `longestPause` (the brain
/// itself stopped or starved: its messages wait unread meanwhile) counts as `longestPause`.
struct ReportClock: Sendable, Equatable {
    /// Per gateway: reported complete up to this capture time.
    private(set) var watermarks: [String: CaptureTime] = [:]
    /// Gateways that said `online` (they will report) and have not said `offline`.
    private(set) var online: Set<String> = []
    /// Gateways the brain stopped waiting for (late or silent), until they catch up.
    private(set) var excluded: Set<String> = []
    /// Of the gateways waited for, how many stand at each watermark, and how many have none
    /// yet: `time` is read at every report, and a fleet has thousands of gateways. Kept by
    /// `changing`, through which every change of the three sets above goes.
    private var waitedMarks: [CaptureTime: Int] = [:]
    private var waitedWithout = 0
    /// Gateways whose connection ended (a live `offline` within its grace): the first report
    /// not marked resent after it may start over from an earlier capture time (a restarted
    /// replay or capture) instead of being taken for a late copy (`FleetPresence.report`).
    var restarted: Set<String> = []
    /// Running time (see above) since which the clock has been held back by a late gateway.
    var heldSince: Double?
    /// Until then (wall clock) late gateways are waited for however long
    /// (`FleetPresence.reconnected`).
    var patientUntil: WallTime?
    var lastTime: CaptureTime?
    /// The brain's running time, seconds, and the wall-clock time it was last counted at.
    private(set) var running = 0.0
    private var lastWall: WallTime?
    /// Per gateway: running time its last report arrived at; and of any gateway.
    private var heard: [String: Double] = [:]
    private var lastReport: Double?

    /// Longest wall-clock gap between two of the brain's calls that counts in full, s: the
    /// brain ticks every 0.2 s; a longer gap is the brain paused, not its gateways silent.
    static let longestPause = 0.5

    /// The gateways waited for.
    var waitedFor: [String] {
        Set(watermarks.keys).union(online).subtracting(excluded).sorted()
    }

    /// Capture time up to which every gateway waited for has reported (`lastTime` while one
    /// of them has not reported yet); `nil` before any report.
    var time: CaptureTime? {
        if waitedWithout > 0 { return lastTime }
        // A handful of keys: windows are aligned, so the gateways stand at a few watermarks.
        if let least = waitedMarks.keys.min() { return least }
        return watermarks.values.max()
    }

    /// Whether the brain waits for `gateway`, and at which watermark (`.some(nil)`: none yet).
    private func waited(_ gateway: String) -> CaptureTime?? {
        let mark = watermarks[gateway]
        guard mark != nil || online.contains(gateway), !excluded.contains(gateway) else { return nil }
        return .some(mark)
    }

    /// Changes what is known of one gateway, keeping the counts of `time` up to date.
    private mutating func changing(_ gateway: String, _ change: (inout ReportClock) -> Void) {
        let before = waited(gateway)
        change(&self)
        let after = waited(gateway)
        guard before != after else { return }
        switch before {
        case .some(.some(let mark)):
            if waitedMarks[mark] == 1 { waitedMarks[mark] = nil } else { waitedMarks[mark, default: 0] -= 1 }
        case .some(.none): waitedWithout -= 1
        case .none: break
        }
        switch after {
        case .some(.some(let mark)): waitedMarks[mark, default: 0] += 1
        case .some(.none): waitedWithout += 1
        case .none: break
        }
    }

    /// The gateway reported up to `mark`, or (`nil`) its reports start over.
    mutating func setWatermark(_ gateway: String, _ mark: CaptureTime?) {
        changing(gateway) { $0.watermarks[gateway] = mark }
    }

    /// The brain stops waiting for `gateway` until it catches up.
    mutating func exclude(_ gateway: String) {
        changing(gateway) { $0.excluded.insert(gateway) }
    }

    /// Counts the wall-clock time since the last call into `running`.
    mutating func pass(wall: WallTime) {
        if let last = lastWall { running += min(max(0, wall.seconds(since: last)), Self.longestPause) }
        lastWall = max(lastWall ?? wall, wall)
    }

    /// The gateway said `online`, or reported.
    mutating func isOnline(_ gateway: String) {
        guard !online.contains(gateway) else { return }
        changing(gateway) { $0.online.insert(gateway) }
    }

    /// A report up to `to` from `gateway`, arrived at `wall`.
    mutating func reported(_ gateway: String, upTo to: CaptureTime, at wall: WallTime) {
        heard(gateway, at: wall)
        setWatermark(gateway, max(watermarks[gateway] ?? to, to))
        if excluded.contains(gateway), let time, to >= time { changing(gateway) { $0.excluded.remove(gateway) } }
    }

    /// A live report of `gateway` arrived at `wall`: it is heard, not late, also when it waits
    /// (a hole in its reports asked for again: `FleetPresence`) and moves no watermark yet.
    mutating func heard(_ gateway: String, at wall: WallTime) {
        pass(wall: wall)
        heard[gateway] = running
        lastReport = running
    }

    /// Wall-clock time passes: a gateway holding the clock back for `hold` seconds while
    /// others have reported further, and silent that long while others were heard, is no
    /// longer waited for.
    /// Before any time (`time` is `nil`), a gateway that said `online` and has never
    /// reported (its reports are off, an older version) holds the
    /// clock the same way, and is let go the same way.
    mutating func check(wall: WallTime, hold: Double) {
        pass(wall: wall)
        let now = time
        defer { lastTime = now }
        guard let furthest = watermarks.values.max(), now.map({ furthest > $0 }) ?? true else {
            heldSince = nil
            return
        }
        if let now, let last = lastTime, now > last { heldSince = nil }
        guard let since = heldSince else {
            heldSince = running
            return
        }
        guard running - since >= hold, patientUntil.map({ wall >= $0 }) ?? true else { return }
        for gateway in waitedFor {
            guard let mark = watermarks[gateway] else {
                exclude(gateway)
                continue
            }
            guard let now, mark <= now else { continue }
            // Silent that long, while others were heard: in the brain's running time after its
            // last report, or in capture time beyond it (their reports, however they arrived,
            // cover `hold` seconds it does not).
            let quiet = heard[gateway] ?? since
            let othersHeard = (lastReport.map { $0 - quiet >= hold } ?? false) || furthest.seconds(since: mark) >= hold
            if running - max(quiet, since) >= hold, othersHeard { exclude(gateway) }
        }
    }

    mutating func remove(_ gateway: String) {
        changing(gateway) { clock in
            clock.watermarks[gateway] = nil
            clock.online.remove(gateway)
            clock.excluded.remove(gateway)
        }
        heard[gateway] = nil
        restarted.remove(gateway)
    }
}

/// The standard normal quantile (Acklam's rational approximation, relative error below
/// 1.2e-9): the z-score a confidence asks for.
func normalQuantile(_ p: Double) -> Double {
    let q = min(max(p, 1e-12), 1 - 1e-12)
    let a = [-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
             -3.066479806614716e+01, 2.506628277459239e+00]
    let b = [-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
             -1.328068155288572e+01]
    let c = [-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
             4.374664141464968e+00, 2.938163982698783e+00]
    let d = [7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00]
    func tail(_ x: Double) -> Double {
        let r = (-2 * Double.log(x)).squareRoot()
        return (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5])
            / ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1)
    }
    if q < 0.02425 { return tail(q) }
    if q > 1 - 0.02425 { return -tail(1 - q) }
    let x = q - 0.5, r = x * x
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * x
        / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
}

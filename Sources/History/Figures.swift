public import BeaconKit

/// What a shop manager asks of the history, for one store or a chain over a window of
/// capture time: footfall, how long people stay in each zone, how many reach the counter,
/// how long they wait, how many come back, and how full the shop was.
public struct HistoryFigures: Sendable, Equatable {
    /// Which zones mean what, and the stores' clock.
    public struct Options: Sendable, Equatable {
        /// Gateway ids or zone names that count as the counter (door-to-counter conversion).
        public var counterZones: Set<String>
        /// Gateway ids or zone names where people wait: their dwell is the queue time.
        public var queueZones: Set<String>
        /// Minutes east of UTC: hours, days and weeks begin at the store's midnight.
        public var utcOffsetMinutes: Int
        /// Seconds a visit must spend in the counter zones, in all, to count as having reached
        /// the counter, and in the queue zones to count in the queue time: a shorter time there
        /// is walking past, not being served or waiting (docs/history.md). 0: any moment counts.
        public var minimumStay: Double

        /// The minimum stay unless the config says otherwise, s: chosen on the simulator's
        /// stores, seeds 1–20 of every layout, and confirmed on seeds 301–320 (docs/history.md).
        public static let defaultMinimumStay = 10.0

        public init(counterZones: Set<String> = ["counter"], queueZones: Set<String> = [], utcOffsetMinutes: Int = 0,
                    minimumStay: Double = Options.defaultMinimumStay) {
            self.counterZones = counterZones
            self.queueZones = queueZones
            self.utcOffsetMinutes = utcOffsetMinutes
            self.minimumStay = minimumStay
        }

        /// Whether `visit` stayed at least `minimumStay` in `zones` (and was there at all).
        func stayed(_ visit: Visit, in zones: Set<String>, now: CaptureTime) -> Bool {
            visit.segments.contains { zones.contains($0.zone) || zones.contains($0.zoneName) }
                && visit.time(in: zones, now: now) >= minimumStay
        }
    }

    /// A distribution of durations, s.
    public struct Distribution: Sendable, Equatable {
        public var count: Int
        public var median: Double
        public var p90: Double
        public var mean: Double

        public static let empty = Distribution(count: 0, median: 0, p90: 0, mean: 0)

        public init(count: Int, median: Double, p90: Double, mean: Double) {
            self.count = count
            self.median = median
            self.p90 = p90
            self.mean = mean
        }

        public init(_ values: [Double]) {
            guard !values.isEmpty else {
                self = .empty
                return
            }
            let sorted = values.sorted()
            self.init(count: sorted.count, median: Self.quantile(sorted, 0.5), p90: Self.quantile(sorted, 0.9),
                      mean: sorted.reduce(0, +) / Double(sorted.count))
        }

        /// Linear interpolation between closest ranks (the usual "type 7").
        static func quantile(_ sorted: [Double], _ q: Double) -> Double {
            let position = q * Double(sorted.count - 1)
            let low = Int(position)
            let high = min(low + 1, sorted.count - 1)
            return sorted[low] + (sorted[high] - sorted[low]) * (position - Double(low))
        }
    }

    /// Visits begun in one hour, day or week (the store's clock).
    public struct Bucket: Sendable, Equatable {
        public var start: CaptureTime
        public var visits: Int
    }

    /// How long people who went into a zone stayed there (per visit, all its segments there).
    public struct ZoneDwell: Sendable, Equatable {
        public var zone: String
        public var zoneName: String
        public var dwell: Distribution
    }

    /// The most people in the store at once during a step.
    public struct Occupancy: Sendable, Equatable {
        public var start: CaptureTime
        public var peak: Int
    }

    public var from: CaptureTime
    public var to: CaptureTime
    /// Visits begun in the window.
    public var footfall: Int
    public var hourly: [Bucket]
    public var daily: [Bucket]
    public var weekly: [Bucket]
    /// Whole visits, enter to exit (closed visits only).
    public var visitDuration: Distribution
    /// Per zone, sorted by zone.
    public var zones: [ZoneDwell]
    /// Visits that spent at least `Options.minimumStay` in the counter zones.
    public var reachedCounter: Int
    /// `reachedCounter / footfall`; `nil` without visits.
    public var conversion: Double? { footfall == 0 ? nil : Double(reachedCounter) / Double(footfall) }
    /// Time in the queue zones, per closed visit that spent at least `Options.minimumStay` there.
    public var queueTime: Distribution
    /// Visits by visitors the history had seen before.
    public var returning: Int
    /// The most people in the store at once, per `occupancyStep`.
    public var occupancy: [Occupancy]
    /// Seconds per occupancy step: 15 min for a window up to 2 days, else 1 h.
    public var occupancyStep: Double

    /// The figures of `visits` begun in `[from, to)`, as of `now` (open visits count in the
    /// footfall, conversion and occupancy, not in durations).
    public init(visits: [Visit], from: CaptureTime, to: CaptureTime, now: CaptureTime, options: Options = Options()) {
        self.from = from
        self.to = to
        let begun = visits.filter { $0.since >= from && $0.since < to }
        footfall = begun.count
        let offset = Double(options.utcOffsetMinutes * 60)
        func bucketStarts(_ width: Double, shift: Double = 0) -> (CaptureTime) -> CaptureTime {
            { t in
                let local = t.seconds + offset + shift
                return CaptureTime(seconds: (local / width).rounded(.down) * width - offset - shift)
            }
        }
        // 1970-01-01 was a Thursday: shifting by 3 days makes weeks begin on Monday.
        let hour = bucketStarts(3600), day = bucketStarts(86_400), week = bucketStarts(604_800, shift: 3 * 86_400)
        func buckets(_ start: (CaptureTime) -> CaptureTime, _ width: Double) -> [Bucket] {
            var counts: [CaptureTime: Int] = [:]
            for visit in begun { counts[start(visit.since), default: 0] += 1 }
            var out: [Bucket] = []
            var t = start(from)
            while t < to {
                out.append(Bucket(start: t, visits: counts[t] ?? 0))
                t = t + width
            }
            return out
        }
        hourly = buckets(hour, 3600)
        daily = buckets(day, 86_400)
        weekly = buckets(week, 604_800)

        let closed = begun.filter { $0.ended != nil }
        visitDuration = Distribution(closed.map { $0.duration(now: now) })
        var perZone: [String: (name: String, times: [Double])] = [:]
        for visit in closed {
            var times: [String: Double] = [:]
            for segment in visit.segments {
                times[segment.zone, default: 0] += segment.duration(now: now)
                if perZone[segment.zone] == nil { perZone[segment.zone] = (segment.zoneName, []) }
            }
            for (zone, time) in times { perZone[zone]!.times.append(time) }
        }
        zones = perZone.keys.sorted().map { ZoneDwell(zone: $0, zoneName: perZone[$0]!.name, dwell: Distribution(perZone[$0]!.times)) }
        reachedCounter = begun.count { options.stayed($0, in: options.counterZones, now: now) }
        queueTime = Distribution(closed.compactMap { visit in
            options.stayed(visit, in: options.queueZones, now: now) ? visit.time(in: options.queueZones, now: now) : nil
        })
        returning = begun.count(where: \.returning)

        // Occupancy: every visit present in the window, swept in time order.
        occupancyStep = to.seconds(since: from) <= 2 * 86_400 ? 900 : 3600
        var changes: [(CaptureTime, Int)] = []
        for visit in visits where visit.since < to && (visit.ended ?? now) > from {
            changes.append((visit.since, 1))
            changes.append((visit.ended ?? max(now, visit.since), -1))
        }
        changes.sort { ($0.0, $0.1) < ($1.0, $1.1) }
        var steps: [Occupancy] = []
        var present = 0, index = 0
        var t = from
        while t < to {
            let end = min(to, t + occupancyStep)
            while index < changes.count, changes[index].0 <= t {
                present += changes[index].1
                index += 1
            }
            var peak = present
            while index < changes.count, changes[index].0 < end {
                present += changes[index].1
                peak = max(peak, present)
                index += 1
            }
            steps.append(Occupancy(start: t, peak: peak))
            t = end
        }
        occupancy = steps
    }

    /// The chain's figures and each store's (sorted by store), from the visits of every store
    /// that overlap `[from, to)`: what the chain's page shows, grouped in one pass.
    public static func chain(visits: [Visit], from: CaptureTime, to: CaptureTime, now: CaptureTime,
                             options: Options = Options()) -> (chain: HistoryFigures, stores: [(store: UInt16, figures: HistoryFigures)]) {
        var byStore: [UInt16: [Visit]] = [:]
        for visit in visits { byStore[visit.store, default: []].append(visit) }
        let stores = byStore.keys.sorted().map { store in
            (store: store, figures: HistoryFigures(visits: byStore[store]!, from: from, to: to, now: now, options: options))
        }
        return (HistoryFigures(visits: visits, from: from, to: to, now: now, options: options), stores)
    }

    /// People in the store at `now`: visits begun and not ended.
    public static func occupancy(of visits: [Visit], at now: CaptureTime) -> Int { visits.count { $0.isPresent(at: now) } }
}

/// A presence decider's zone for one beacon over time: a change list, each entry holding
/// until the next. `nil` means "not present".
public struct ZoneTimeline: Sendable, Equatable {
    public struct Change: Sendable, Equatable {
        /// Seconds into the simulation.
        public var time: Double
        public var zone: String?

        public init(time: Double, zone: String?) {
            self.time = time
            self.zone = zone
        }
    }

    public private(set) var changes: [Change] = []

    public init(_ changes: [Change] = []) {
        for change in changes.sorted(by: { $0.time < $1.time }) { record(change.zone, at: change.time) }
    }

    /// Appends a decision; one that repeats the current zone changes nothing, and of two
    /// at the same instant the later one wins.
    public mutating func record(_ zone: String?, at time: Double) {
        if let last = changes.last {
            guard last.zone != zone else { return }
            if time <= last.time {
                changes.removeLast()
                record(zone, at: time)
                return
            }
        } else if zone == nil {
            return
        }
        changes.append(Change(time: time, zone: zone))
    }

    public func zone(at time: Double) -> String? {
        var zone: String?
        for change in changes {
            if change.time > time { break }
            zone = change.zone
        }
        return zone
    }

    /// The spans during which the beacon was present.
    var presence: [(from: Double, to: Double)] {
        var spans: [(Double, Double)] = []
        var begin: Double?
        for change in changes {
            if change.zone != nil, begin == nil { begin = change.time }
            if change.zone == nil, let b = begin {
                spans.append((b, change.time))
                begin = nil
            }
        }
        if let begin { spans.append((begin, .infinity)) }
        return spans
    }
}

/// How well a presence decider's zones match the ground truth of a simulated store.
///
/// - `zoneRight`: % of in-store time (from each customer's true entry to true exit) at
///   which the decided zone is the true one; not yet present counts as wrong.
/// - `walkingWrong` / `dwellingWrong`: % of walking and of standing time that is wrong.
/// - `flapsPerVisit`: zone changes that no true change explains (a change into zone Z is
///   explained by an unused true change into Z from 15 s before to 3 s after it).
/// - `changesPerVisit` / `trueChangesPerVisit`: zone changes decided and real.
/// - `entryDelay`, `exitDelay`: medians, s; the exit is the end of the presence that
///   covers the true exit (negative: it ended early).
/// - `falsePresence`: s per visit present while the customer was not in the store.
/// - `ghostMovesPerVisit`: zone changes decided more than `ghostGrace` (1 s) after the true
///   exit: later than the last advertisements before it can explain (the brain decides a
///   report window after the evidence).
/// - `missed`: visits never detected.
/// - `followDelay`: median s until the decided zone follows a true change made walking.
public struct PresenceScore: Sendable, Equatable {
    public var visits = 0
    public var zoneRight = 0.0
    public var walkingWrong = 0.0
    public var dwellingWrong = 0.0
    public var flapsPerVisit = 0.0
    public var changesPerVisit = 0.0
    public var trueChangesPerVisit = 0.0
    public var entryDelay = 0.0
    public var exitDelay = 0.0
    public var falsePresence = 0.0
    public var ghostMovesPerVisit = 0.0
    public var missed = 0
    /// Flaps in the first 5 s of a visit, while walking, while standing (diagnostics).
    public var flapsAtEntry = 0.0
    public var flapsWalking = 0.0
    public var flapsStanding = 0.0
    /// Median s from a true zone change while walking (into a zone the customer then stays
    /// in for at least 3 s) until the decided zone is the new one; a change never followed within
    /// that stay counts its whole length.
    public var followDelay = 0.0

    /// Seconds between samples of the zone comparison.
    static let step = 0.05
    /// The window within which a true change explains a decided one: [−15 s, +3 s].
    static let explainedBefore = 15.0
    static let explainedAfter = 3.0
    static let ghostGrace = 1.0

    public init() {}

    /// Scores `timelines` (by major and minor) against `truth`.
    public init(truth: GroundTruth, timelines: [UInt32: ZoneTimeline]) {
        let visits = truth.visits
        self.visits = visits.count
        guard !visits.isEmpty else { return }
        var right = 0.0, total = 0.0, walkRight = 0.0, walkTotal = 0.0, dwellRight = 0.0, dwellTotal = 0.0
        var flaps = 0, changes = 0, trueChanges = 0, ghosts = 0
        var entryFlaps = 0, walkFlaps = 0, standFlaps = 0
        var entries: [Double] = [], exits: [Double] = [], follows: [Double] = []
        var falsePresence = 0.0
        var visitsByBeacon: [UInt32: [GroundTruth.Visit]] = [:]
        for visit in visits { visitsByBeacon[Self.key(visit.major, visit.minor), default: []].append(visit) }

        for visit in visits {
            let timeline = timelines[Self.key(visit.major, visit.minor)] ?? ZoneTimeline()
            // Zone right, walking and dwelling.
            var t = visit.enter
            var walkIndex = 0
            while t < visit.exit {
                let ok = timeline.zone(at: t) == visit.zone(at: t)
                while walkIndex < visit.walking.count, visit.walking[walkIndex].upperBound < t { walkIndex += 1 }
                let walking = walkIndex < visit.walking.count && visit.walking[walkIndex].contains(t)
                total += 1
                if ok { right += 1 }
                if walking {
                    walkTotal += 1
                    if ok { walkRight += 1 }
                } else {
                    dwellTotal += 1
                    if ok { dwellRight += 1 }
                }
                t += Self.step
            }
            // How soon the decided zone follows each true change.
            for interval in visit.zones.dropFirst()
            where interval.to - interval.from >= 3 && visit.walking.contains(where: { $0.contains(interval.from) }) {
                var t = interval.from
                while t < interval.to, timeline.zone(at: t) != interval.zone { t += Self.step }
                follows.append(min(t, interval.to) - interval.from)
            }
            // The presence covering this visit.
            let spans = timeline.presence.filter { $0.from < visit.exit && $0.to > visit.enter - 30 }
            guard let first = spans.first, let last = spans.last else {
                missed += 1
                continue
            }
            entries.append(first.from - visit.enter)
            exits.append((last.to.isFinite ? last.to : visit.exit + 3600) - visit.exit)
            // Decided changes within the visit and up to the decided exit.
            let trueList = zip(visit.zones, visit.zones.dropFirst()).map { ($0.1.from, $0.1.zone) }
            trueChanges += trueList.count
            var used = Set<Int>()
            var previous: String?
            for change in timeline.changes where change.time >= first.from && change.time <= last.to {
                defer { if change.zone != nil { previous = change.zone } }
                guard let zone = change.zone, let before = previous, before != zone else { continue }
                if change.time >= visit.exit {
                    if change.time > visit.exit + Self.ghostGrace { ghosts += 1 }
                    continue
                }
                changes += 1
                let match = trueList.indices.first { i in
                    !used.contains(i) && trueList[i].1 == zone
                        && trueList[i].0 >= change.time - Self.explainedBefore && trueList[i].0 <= change.time + Self.explainedAfter
                }
                if let match { used.insert(match) } else {
                    flaps += 1
                    if change.time < visit.enter + 5 { entryFlaps += 1 } else if visit.walking.contains(where: { $0.contains(change.time) }) {
                        walkFlaps += 1
                    } else { standFlaps += 1 }
                }
            }
        }
        // Presence while nobody was in: per beacon, every present span minus its visits.
        for (key, timeline) in timelines {
            let truthSpans = (visitsByBeacon[key] ?? []).map { ($0.enter, $0.exit) }
            for span in timeline.presence {
                let end = span.to.isFinite ? span.to : (truthSpans.map(\.1).max() ?? span.from) + 3600
                var outside = end - span.from
                for (a, b) in truthSpans { outside -= max(0, min(end, b) - max(span.from, a)) }
                falsePresence += max(0, outside)
            }
        }
        let n = Double(visits.count)
        zoneRight = 100 * right / max(total, 1)
        walkingWrong = walkTotal > 0 ? 100 - 100 * walkRight / walkTotal : 0
        dwellingWrong = dwellTotal > 0 ? 100 - 100 * dwellRight / dwellTotal : 0
        flapsPerVisit = Double(flaps) / n
        changesPerVisit = Double(changes) / n
        trueChangesPerVisit = Double(trueChanges) / n
        entryDelay = Summary(entries).median
        exitDelay = Summary(exits).median
        self.falsePresence = falsePresence / n
        ghostMovesPerVisit = Double(ghosts) / n
        flapsAtEntry = Double(entryFlaps) / n
        flapsWalking = Double(walkFlaps) / n
        flapsStanding = Double(standFlaps) / n
        followDelay = Summary(follows).median
    }

    public static func key(_ major: UInt16, _ minor: UInt16) -> UInt32 { UInt32(major) << 16 | UInt32(minor) }
}

/// Nearest-rank order statistics of a list of values.
public struct Summary: Sendable, Equatable {
    public var count: Int
    public var min: Double
    public var p10: Double
    public var median: Double
    public var max: Double

    public init(_ values: [Double]) {
        let sorted = values.filter { !$0.isNaN }.sorted()
        count = sorted.count
        func rank(_ q: Double) -> Double {
            sorted.isEmpty ? .nan : sorted[Swift.min(sorted.count - 1, Int((Double(sorted.count - 1) * q).rounded()))]
        }
        min = sorted.first ?? .nan
        p10 = rank(0.1)
        median = rank(0.5)
        max = sorted.last ?? .nan
    }
}

/// The two deciders the brain's fusion is measured against, computed from what the
/// gateways publish (one sighting per beacon and gateway per second, with the gateway's
/// smoothed RSSI), so they see exactly what the brain saw in the same run.
public enum ZoneBaseline {
    /// One gateway sighting.
    public struct Sighting: Sendable, Equatable {
        /// Seconds into the simulation.
        public var time: Double
        public var major: UInt16
        public var minor: UInt16
        public var gateway: String
        public var rssiSmoothed: Double

        public init(time: Double, major: UInt16, minor: UInt16, gateway: String, rssiSmoothed: Double) {
            self.time = time
            self.major = major
            self.minor = minor
            self.gateway = gateway
            self.rssiSmoothed = rssiSmoothed
        }
    }

    /// "The strongest smoothed gateway, each second": every whole second, the gateway with
    /// the highest latest smoothed RSSI among those that sighted the beacon within
    /// `exitTimeout`; absent when none did.
    public static func strongestEachSecond(_ sightings: [Sighting], exitTimeout: Double = 10) -> [UInt32: ZoneTimeline] {
        var out: [UInt32: ZoneTimeline] = [:]
        for (key, list) in grouped(sightings) {
            var timeline = ZoneTimeline()
            var latest: [String: (time: Double, rssi: Double)] = [:]
            var i = 0
            var t = (list[0].time).rounded(.down) + 1
            let end = list[list.count - 1].time + exitTimeout + 1
            while t <= end {
                while i < list.count, list[i].time <= t {
                    latest[list[i].gateway] = (list[i].time, list[i].rssiSmoothed)
                    i += 1
                }
                let live = latest.filter { t - $0.value.time <= exitTimeout }
                let best = live.max { a, b in a.value.rssi != b.value.rssi ? a.value.rssi < b.value.rssi : a.key > b.key }
                timeline.record(best?.key, at: t)
                t += 1
            }
            out[key] = timeline
        }
        return out
    }

    /// BeaconBridge's zone rule before issue 8: the first gateway to sight a beacon holds
    /// the zone; another takes it after beating the zone's smoothed RSSI by `margin` dB on
    /// `updates` consecutive sightings of its own; when the zone gateway's view ends
    /// (`exitTimeout` without a sighting) the strongest remaining view takes it at once.
    public static func previousRule(_ sightings: [Sighting], margin: Double = 4, updates: Int = 3,
                                    exitTimeout: Double = 10) -> [UInt32: ZoneTimeline] {
        var out: [UInt32: ZoneTimeline] = [:]
        for (key, list) in grouped(sightings) {
            var timeline = ZoneTimeline()
            var views: [String: (time: Double, rssi: Double)] = [:]
            var zone: String?
            var challenger: String?
            var wins = 0
            func strongest() -> String? {
                views.max { a, b in a.value.rssi != b.value.rssi ? a.value.rssi < b.value.rssi : a.key > b.key }?.key
            }
            func expire(until t: Double) {
                while let (gateway, view) = views.min(by: { $0.value.time < $1.value.time }), view.time + exitTimeout <= t {
                    views[gateway] = nil
                    if zone == gateway {
                        zone = strongest()
                        timeline.record(zone, at: view.time + exitTimeout)
                        challenger = nil
                        wins = 0
                    }
                }
            }
            for s in list {
                expire(until: s.time)
                views[s.gateway] = (s.time, s.rssiSmoothed)
                guard let current = zone, let zoneView = views[current] else {
                    zone = s.gateway
                    timeline.record(zone, at: s.time)
                    continue
                }
                let best = views.filter { $0.key != current }
                    .max { a, b in a.value.rssi != b.value.rssi ? a.value.rssi < b.value.rssi : a.key > b.key }
                guard let best, best.value.rssi > zoneView.rssi + margin else {
                    challenger = nil
                    wins = 0
                    continue
                }
                if challenger == best.key {
                    if s.gateway == best.key { wins += 1 }
                } else {
                    challenger = best.key
                    wins = 1
                }
                if wins >= updates {
                    zone = best.key
                    timeline.record(zone, at: s.time)
                    challenger = nil
                    wins = 0
                }
            }
            expire(until: .infinity)
            out[key] = timeline
        }
        return out
    }

    static func grouped(_ sightings: [Sighting]) -> [UInt32: [Sighting]] {
        var groups: [UInt32: [Sighting]] = [:]
        for s in sightings { groups[PresenceScore.key(s.major, s.minor), default: []].append(s) }
        return groups.mapValues { $0.sorted { $0.time < $1.time } }
    }
}

public import BeaconKit

/// How a gateway turns sightings into tracks; one gateway's settings from the fleet config.
public struct TrackerSettings: Sendable, Equatable {
    /// Seconds without a sighting after which a beacon exits (iOS waits about 30 s).
    public var exitTimeout: Double
    /// Seconds without a sighting after which proximity becomes `unknown`.
    public var staleAfter: Double
    /// Minimum seconds between two sightings published for one beacon.
    public var publishInterval: Double
    /// Publish every advertisement instead of rate-limiting.
    public var raw: Bool
    /// Path-loss exponent `n`: 2.0 open space … 3.5 cluttered store.
    public var pathLossExponent: Double
    /// Added to every RSSI sample before filtering, dB: corrects a gateway's antenna.
    public var rssiOffset: Double
    public var distanceModel: DistanceModel
    public var thresholds: ProximityThresholds
    public var filter: RSSIFilter.Parameters

    public init(exitTimeout: Double = 10, staleAfter: Double? = nil, publishInterval: Double = 1,
                raw: Bool = false, pathLossExponent: Double = 2.0, rssiOffset: Double = 0,
                distanceModel: DistanceModel = .logDistance, thresholds: ProximityThresholds = .init(),
                filter: RSSIFilter.Parameters = .init()) {
        self.exitTimeout = exitTimeout
        self.staleAfter = staleAfter ?? min(5, exitTimeout / 2)
        self.publishInterval = publishInterval
        self.raw = raw
        self.pathLossExponent = pathLossExponent
        self.rssiOffset = rssiOffset
        self.distanceModel = distanceModel
        self.thresholds = thresholds
        self.filter = filter
    }
}

/// One beacon as seen by one gateway.
public struct Track: Sendable, Equatable {
    public let id: BeaconID
    public var address: BluetoothAddress
    /// The last RSSI sample in dBm after the gateway's offset; `nil` when not available.
    public var rssi: Int?
    /// Kalman-smoothed RSSI in dBm.
    public var rssiSmoothed: Double? { filter.estimate }
    /// Measured power at 1 m in dBm (the registry's calibration wins over the advert's).
    public var measuredPower: Int?
    /// The advertised TX power field as received, dBm.
    public var txPower: Int?
    /// Estimated distance in metres; `nil` without RSSI or measured power.
    public var distance: Double?
    public var proximity: Proximity
    /// When this visit began (the enter event).
    public var since: CaptureTime
    public var lastSeen: CaptureTime
    /// Sightings published for this beacon by this gateway; gaps mean dropped ones.
    public var sequence: UInt64
    var lastPublished: CaptureTime?
    var filter: RSSIFilter
}

/// What one sighting changed.
public struct TrackUpdate: Sendable, Equatable {
    public var track: Track
    /// The beacon was not in range before this sighting.
    public var entered: Bool
    /// The proximity class before, when this sighting changed it.
    public var proximityChangedFrom: Proximity?
    /// A sighting message is due (rate limit passed, raw mode, enter or proximity change).
    public var publish: Bool
    /// Timeouts of any beacon that fell due up to this sighting's time, in deadline order:
    /// they happened before it, so handle them first. `observe` applies the passage of time
    /// itself, which is what keeps the events independent of how often `advance` runs.
    public var timeouts: [TrackTimeout] = []
}

/// Events that happen with time alone: a beacon going quiet.
public enum TrackTimeout: Sendable, Equatable {
    /// No sighting for `staleAfter`: proximity is now unknown.
    case stale(Track, from: Proximity)
    /// No sighting for `exitTimeout`: the beacon left; `at` is the deadline itself.
    case exit(Track, at: CaptureTime)
}

/// Tracks every beacon one gateway hears.
///
/// A value owned by one task. Time is always passed in; nothing here reads a clock, so
/// the same sightings at the same capture times give the same events at any replay
/// speed. Exits carry their deadline, not the time the check ran.
public struct Tracker: Sendable {
    public var settings: TrackerSettings {
        didSet { quietUntil = CaptureTime(nanoseconds: .min) }
    }
    /// Calibrated measured power at 1 m per beacon, from the registry.
    public var calibration: [BeaconID: Int]
    /// Calibrated measured power per proximity UUID (the registry's UUID-only entries), for
    /// beacons without their own calibration.
    public var uuidCalibration: [BeaconUUID: Int] = [:]
    public private(set) var tracks: [BeaconID: Track] = [:]
    /// No timeout falls due before this instant (a lower bound), so `observe` can skip
    /// `advance` without looking at every track.
    private var quietUntil = CaptureTime(nanoseconds: .min)

    public init(settings: TrackerSettings = .init(), calibration: [BeaconID: Int] = [:]) {
        self.settings = settings
        self.calibration = calibration
    }

    public var count: Int { tracks.count }

    /// Folds one sighting in, after applying the passage of time up to `time` (see
    /// `TrackUpdate.timeouts`): a beacon quiet for `exitTimeout` exits and enters anew.
    ///
    /// - Parameters:
    ///   - rssi: dBm as received, `nil` when the controller reports 127 (not available).
    ///   - measuredPower: the advert's 1 m reference in dBm, if it has one.
    public mutating func observe(_ id: BeaconID, address: BluetoothAddress, rssi: Int8?,
                                 measuredPower: Int8?, txPower: Int8?, at time: CaptureTime) -> TrackUpdate {
        let timeouts = time >= quietUntil ? advance(to: time) : []
        let settings = self.settings
        let power = calibration[id] ?? (uuidCalibration.isEmpty ? nil : id.uuid.flatMap { uuidCalibration[$0] })
            ?? measuredPower.map(Int.init)
        var entered = false
        let index: Dictionary<BeaconID, Track>.Index
        if let existing = tracks.index(forKey: id) {
            index = existing
        } else {
            entered = true
            tracks[id] = Track(id: id, address: address, rssi: nil, measuredPower: power,
                               txPower: txPower.map(Int.init), distance: nil, proximity: .unknown,
                               since: time, lastSeen: time, sequence: 0, lastPublished: nil,
                               filter: RSSIFilter(parameters: settings.filter))
            index = tracks.index(forKey: id)!
        }
        var update = tracks.values.withUpdate(at: index) { track in
            let before = track.proximity
            track.address = address
            track.lastSeen = max(track.lastSeen, time)
            track.measuredPower = power
            track.txPower = txPower.map(Int.init)
            if let rssi {
                let corrected = Double(rssi) + settings.rssiOffset
                track.rssi = Int(corrected.rounded())
                let smoothed = track.filter.update(corrected, at: time)
                track.distance = power.map {
                    settings.distanceModel.distance(rssi: smoothed, measuredPower: Double($0),
                                                    exponent: settings.pathLossExponent)
                }
            } else {
                track.rssi = nil
                track.distance = nil
            }
            track.proximity = settings.thresholds.proximity(for: track.distance, current: before)
            let changed = !entered && track.proximity != before
            var publish = settings.raw || entered || changed
            if !publish, let last = track.lastPublished {
                publish = time.seconds(since: last) >= settings.publishInterval
            }
            if publish {
                track.lastPublished = time
                track.sequence += 1
            }
            return TrackUpdate(track: track, entered: entered,
                               proximityChangedFrom: changed ? before : nil, publish: publish)
        }
        update.timeouts = timeouts
        quietUntil = min(quietUntil, deadline(of: update.track))
        return update
    }

    /// When `track` next times out (stale, or exit when it has no proximity to lose).
    private func deadline(of track: Track) -> CaptureTime {
        track.proximity == .unknown
            ? track.lastSeen + settings.exitTimeout
            : track.lastSeen + min(settings.staleAfter, settings.exitTimeout)
    }

    /// Applies the passage of time up to `now`: stale tracks lose their proximity, quiet
    /// ones exit. Events come in deadline order (ties by beacon id), so the order never
    /// depends on how often this is called: a track that went stale and then exited since
    /// the last call reports both, as it would have with a call at each deadline.
    public mutating func advance(to now: CaptureTime) -> [TrackTimeout] {
        var events: [(CaptureTime, TrackTimeout)] = []
        for (id, track) in tracks {
            let exitAt = track.lastSeen + settings.exitTimeout
            let staleAt = track.lastSeen + settings.staleAfter
            var current = track
            if track.proximity != .unknown, staleAt <= now, staleAt < exitAt {
                current.proximity = .unknown
                current.distance = nil
                events.append((staleAt, .stale(current, from: track.proximity)))
            }
            if exitAt <= now {
                tracks[id] = nil
                events.append((exitAt, .exit(current, at: exitAt)))
            } else if current.proximity != track.proximity {
                tracks[id] = current
            }
        }
        quietUntil = nextDeadline ?? CaptureTime(nanoseconds: .max)
        guard events.count > 1 else { return events.map(\.1) }
        return events.sorted { a, b in
            a.0 != b.0 ? a.0 < b.0 : a.1.track.id < b.1.track.id
        }.map(\.1)
    }

    /// Whether `advance(to: now)` might report something: a cheap check against a cached
    /// lower bound, for callers that tick often.
    public func mayTimeOut(by now: CaptureTime) -> Bool { now >= quietUntil }

    /// The earliest instant at which `advance(to:)` would report something.
    public var nextDeadline: CaptureTime? {
        tracks.values.lazy.map { self.deadline(of: $0) }.min()
    }

    /// Forgets every track (a source that restarts from scratch).
    public mutating func removeAll() {
        tracks.removeAll()
        quietUntil = CaptureTime(nanoseconds: .max)
    }
}

extension TrackTimeout {
    public var track: Track {
        switch self {
        case .stale(let track, _), .exit(let track, _): track
        }
    }
}

extension Dictionary.Values {
    /// Mutates one value in place and returns what `body` returns.
    mutating func withUpdate<R>(at index: Dictionary.Index, _ body: (inout Value) -> R) -> R {
        body(&self[index])
    }
}

extension Tracker {
    /// Puts tracks back (after new settings are applied live); their filters keep going.
    public mutating func restore(_ kept: some Sequence<Track>) {
        for track in kept { tracks[track.id] = track }
    }
}

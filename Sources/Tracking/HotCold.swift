public import BeaconKit
public import Wire

/// The words of a hide-and-seek game for one beacon: how close it is and whether the
/// seeker is closing in (`beaconctl range`).
public enum Warmth: String, Sendable, Equatable, CaseIterable {
    /// Right there: proximity `immediate`.
    case hot = "HOT!"
    /// Closing in, or standing `near` without moving away.
    case warmer = "Warmer"
    /// `far`, or moving away.
    case cold = "Cold"
    /// Far beyond: at least `HotColdRules.freezingBeyond` metres and not closing in.
    case freezing = "Freezing"
    /// No distance: the controller reports no signal strength, or the beacon went quiet.
    case unknown = "?"
}

/// How distance and its trend become a `Warmth`.
public struct HotColdRules: Sendable, Equatable {
    /// Metres from which a beacon that is not coming closer is `freezing`.
    public var freezingBeyond: Double
    /// The smallest change of estimated distance that counts as moving: this fraction of
    /// the previous distance, but at least `minimumStep` metres (so jitter of a few
    /// centimetres around a steady position is no trend).
    public var relativeStep: Double
    public var minimumStep: Double

    public init(freezingBeyond: Double = 10, relativeStep: Double = 0.05, minimumStep: Double = 0.1) {
        self.freezingBeyond = freezingBeyond
        self.relativeStep = relativeStep
        self.minimumStep = minimumStep
    }

    /// The word for a beacon at `distance` (metres, from the smoothed RSSI) in class
    /// `proximity`, which was at `previous` metres one report earlier.
    public func warmth(proximity: Proximity, distance: Double?, previous: Double?) -> Warmth {
        guard let distance, distance.isFinite, proximity != .unknown else { return .unknown }
        if proximity == .immediate { return .hot }
        var trend = 0  // -1 closer, +1 further
        if let previous, previous.isFinite {
            let step = Swift.max(minimumStep, previous * relativeStep)
            if distance <= previous - step { trend = -1 } else if distance >= previous + step { trend = 1 }
        }
        if trend < 0 { return .warmer }
        if distance >= freezingBeyond { return .freezing }
        if proximity == .near && trend == 0 { return .warmer }
        return .cold
    }
}

/// One beacon in one report of `RangeMonitor`.
public struct RangeLine: Sendable, Equatable {
    public var id: BeaconID
    public var address: BluetoothAddress
    /// The last sample in dBm; `nil` when the controller reports none (RSSI 127).
    public var rssi: Int?
    /// Kalman-smoothed RSSI in dBm.
    public var rssiSmoothed: Double?
    /// Estimated distance in metres from the smoothed RSSI.
    public var distance: Double?
    public var proximity: Proximity
    public var warmth: Warmth
    /// The beacon was not heard for the exit timeout: this is its last line.
    public var gone: Bool
    /// Seconds since it was last heard.
    public var quietFor: Double

    /// The plain line: fixed fields in a fixed order, for people and for scripts.
    ///
    ///     E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1 minor 2  rssi -63 dBm  smoothed -61.2 dBm  ~1.80 m  near  Warmer
    public var plainText: String { text(words: .game) }

    /// The plain line with the word from `words`; the original's words come with its
    /// signal line instead of the RSSI field:
    ///
    ///     E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1 minor 2  -63dB  smoothed -61.2 dBm  ~1.80 m  near  HOT!
    public func text(words: HotColdWords) -> String {
        var fields = ["\(idText)"]
        if gone {
            fields.append("gone (not heard for \(Self.format(quietFor, decimals: 0)) s)")
            return fields.joined(separator: "  ")
        }
        if words == .original {
            // The original app's signal line ("%ddB"), then the same fields as the game's.
            fields.append(HotColdWords.originalSignal(rssi))
        }
        if let rssi {
            if words == .game { fields.append("rssi \(rssi) dBm") }
            fields.append("smoothed \(rssiSmoothed.map { Self.format($0, decimals: 1) } ?? "n/a") dBm")
            fields.append(distance.map { "~\(Self.format($0, decimals: 2)) m" } ?? "distance n/a")
        } else {
            fields.append("rssi n/a (the controller reports no signal strength)")
            fields.append("distance n/a")
        }
        fields.append(proximity.rawValue)
        fields.append(words.word(for: self))
        return fields.joined(separator: "  ")
    }

    var idText: String {
        switch id {
        case .ibeacon(let uuid, let major, let minor): "\(uuid) major \(major) minor \(minor)"
        case .eddystone: "\(id)"
        }
    }

    /// Fixed-point text without Foundation: `format(1.8, decimals: 2)` is "1.80".
    public static func format(_ value: Double, decimals: Int) -> String {
        guard value.isFinite else { return "\(value)" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        guard scaled < 1e15 else { return "\(value)" }
        let whole = Int64(scaled)
        let unit = Int64(scale)
        let sign = value < 0 && whole != 0 ? "-" : ""
        guard decimals > 0 else { return sign + "\(whole)" }
        let fraction = String(whole % unit).leftPadded(to: decimals)
        return sign + "\(whole / unit).\(fraction)"
    }
}

/// The core of `beaconctl range`: iBeacons (optionally of one UUID) through the same
/// `Tracker` the gateway uses, reported once a second with a hot/cold word.
///
/// A value owned by one task; time is passed in (live time or a replay's), so a replay
/// of a capture gives the same lines at any speed.
public struct RangeMonitor: Sendable {
    public private(set) var tracker: Tracker
    public var uuid: BeaconUUID?
    public var rules: HotColdRules
    private var decoder = AdvertisementDecoder()
    /// Distance in each beacon's previous line, for the trend.
    private var previous: [BeaconID: Double] = [:]
    private var gone: [RangeLine] = []

    public init(settings: TrackerSettings = TrackerSettings(), uuid: BeaconUUID? = nil, rules: HotColdRules = HotColdRules()) {
        tracker = Tracker(settings: settings)
        self.uuid = uuid
        self.rules = rules
    }

    /// Advertising reports seen so far that were dropped as malformed, and so on.
    public var counters: DecodeCounters { decoder.counters }

    /// Folds in one HCI event (starting at the event code) received at `time`.
    public mutating func observe(event: UnsafeRawBufferPointer, at time: CaptureTime) {
        var decoder = self.decoder
        decoder.decodeBeacons(event: event) { report, beacon in
            guard case .iBeacon(let ibeacon) = beacon, uuid == nil || ibeacon.uuid == uuid, let id = beacon.id else { return }
            let update = tracker.observe(id, address: report.address, rssi: report.rssi,
                                         measuredPower: beacon.measuredPower, txPower: beacon.txPower, at: time)
            collect(update.timeouts)
        }
        self.decoder = decoder
    }

    /// The lines for `now`: beacons that left since the last report (once each), then
    /// every beacon in range, nearest first (those without a distance last, by id).
    public mutating func report(at now: CaptureTime) -> [RangeLine] {
        collect(tracker.advance(to: now))
        var lines = gone
        gone.removeAll()
        let tracks = tracker.tracks.values.sorted { a, b in
            switch (a.distance, b.distance) {
            case let (x?, y?) where x != y: x < y
            case (_?, nil): true
            case (nil, _?): false
            default: a.id < b.id
            }
        }
        for track in tracks {
            let warmth = rules.warmth(proximity: track.proximity, distance: track.distance, previous: previous[track.id])
            previous[track.id] = track.distance
            lines.append(RangeLine(id: track.id, address: track.address, rssi: track.rssi,
                                   rssiSmoothed: track.rssiSmoothed, distance: track.distance,
                                   proximity: track.proximity, warmth: warmth, gone: false,
                                   quietFor: Swift.max(0, now.seconds(since: track.lastSeen))))
        }
        return lines
    }

    private mutating func collect(_ timeouts: [TrackTimeout]) {
        for case .exit(let track, let at) in timeouts {
            previous[track.id] = nil
            gone.append(RangeLine(id: track.id, address: track.address, rssi: nil, rssiSmoothed: nil, distance: nil,
                                  proximity: .unknown, warmth: .unknown, gone: true,
                                  quietFor: at.seconds(since: track.lastSeen)))
        }
    }
}

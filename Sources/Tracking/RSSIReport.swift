public import BeaconKit
public import Contract

/// What one gateway heard in one report window, for the brain's zone fusion: every beacon,
/// how many advertisements, their mean RSSI and when, plus the gateway's track (smoothed
/// RSSI, distance, proximity) at the end of the window.
///
/// Published on `gateways/<gateway>/rssi` (QoS 1, not retained): the gateway is a topic
/// level, so a broker ACL pins it to the gateway's own user, and the brain checks that the
/// payload names the same gateway. `from` is the start of the window (capture time), `to`
/// the time up to which the gateway has reported everything it heard: the brain waits for
/// every gateway's `to` before it decides, which makes its decisions depend on capture time
/// only, not on when messages arrive. A window with nothing heard still goes out (an empty
/// `beacons`): it moves `to` on. Windows are aligned to multiples of the interval since
/// the Unix epoch, so every gateway's windows coincide.
public struct RSSIReport: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public var beacon: BeaconRef
        /// The iBeacon's proximity UUID (topics carry none); `nil` for Eddystone.
        public var uuid: BeaconUUID?
        /// Advertisements heard in the window.
        public var count: Int
        /// Their mean RSSI, dBm (after the gateway's `rssiOffset`); `nil` without RSSI.
        public var rssi: Double?
        /// Their mean time, seconds after the window's start.
        public var at: Double
        /// The gateway's track at the end of the window.
        public var rssiSmoothed: Double?
        public var distance: Double?
        public var proximity: Proximity

        public init(beacon: BeaconRef, uuid: BeaconUUID? = nil, count: Int, rssi: Double?, at: Double,
                    rssiSmoothed: Double? = nil, distance: Double? = nil, proximity: Proximity = .unknown) {
            self.beacon = beacon
            self.uuid = uuid
            self.count = count
            self.rssi = rssi
            self.at = at
            self.rssiSmoothed = rssiSmoothed
            self.distance = distance
            self.proximity = proximity
        }
    }

    public var gateway: String
    public var from: Instant
    public var to: Instant
    public var entries: [Entry]
    /// Sent again after a disconnect (`"resent":true`): the first sending may have been lost
    /// in flight, or not; the brain skips one whose window it already has.
    public var resent = false

    public init(gateway: String, from: Instant, to: Instant, entries: [Entry]) {
        self.gateway = gateway
        self.from = from
        self.to = to
        self.entries = entries
    }

    /// `{"gateway","from","to","beacons":[{"major","minor"|"namespace","instance","uuid"?,"n","rssi","at",
    /// "rssiSmoothed","distance","proximity"}…]}`.
    public var json: String {
        var writer = JSONWriter(capacity: 96 + 160 * entries.count)
        writer.object { o in
            o("gateway", gateway)
            o("from", from)
            o("to", to)
            o("beacons", objects: entries) { e, entry in
                entry.beacon.write(into: &e)
                if let uuid = entry.uuid { e("uuid", uuid.description) }
                e("n", entry.count)
                e("rssi", entry.rssi, places: 1)
                e("at", entry.at, places: 3)
                e("rssiSmoothed", entry.rssiSmoothed, places: 1)
                e("distance", entry.distance, places: 2)
                e("proximity", entry.proximity.rawValue)
            }
        }
        return writer.text
    }

    /// Most entries in one message; a busier window goes out in several, the last one
    /// carrying the window's `to` (the others repeat `from`: they do not move time on).
    public static let entriesPerMessage = 200
}

/// Collects a gateway's advertisements into report windows. A value owned by the gateway's
/// engine; time is passed in.
public struct RSSIReporter: Sendable {
    /// Window length, seconds; 0 turns reports off.
    public var interval: Double {
        didSet { windowEnd = windowStart.map { $0 + interval } }
    }
    /// Start and end of the window being filled; `nil` before the first input.
    private var windowStart: Instant?
    private var windowEnd: Instant?
    private var samples: [BeaconID: Sums] = [:]

    private struct Sums {
        var count = 0
        var rssiSum = 0.0
        var rssiCount = 0
        var timeSum = 0.0
    }

    public init(interval: Double) { self.interval = interval }

    public var isEnabled: Bool { interval > 0 }

    /// Whether `now` closes the open window (or opens the first): cheap, for every frame.
    public func isDue(at now: Instant) -> Bool {
        guard isEnabled else { return false }
        guard let windowEnd else { return true }
        return now >= windowEnd
    }

    /// The window containing `time`.
    public func window(containing time: Instant) -> Instant {
        let step = Int64((interval * 1e9).rounded())
        guard step > 0 else { return time }
        let n = time.nanoseconds
        return Instant(nanoseconds: (n >= 0 ? n / step : (n - step + 1) / step) * step)
    }

    /// One advertisement heard at `time` (after any windows it closes were taken with
    /// `close(upTo:)`). A late one counts in the open window, at its start.
    public mutating func add(_ id: BeaconID, rssi: Double?, at time: Instant) {
        guard isEnabled else { return }
        if windowStart == nil { open(window(containing: time)) }
        let offset = max(0, time.seconds(since: windowStart!))
        var s = samples[id] ?? Sums()
        s.count += 1
        s.timeSum += offset
        if let rssi {
            s.rssiSum += rssi
            s.rssiCount += 1
        }
        samples[id] = s
    }

    /// The report of the open window once `now` is past its end: its samples, with `to` the
    /// latest window boundary at or before `now` (time may have jumped several windows, with
    /// nothing heard in between). `track` gives the gateway's state of a beacon.
    public mutating func close(upTo now: Instant, gateway: String, track: (BeaconID) -> Track?) -> [RSSIReport] {
        guard isEnabled else { return [] }
        guard let start = windowStart else {
            open(window(containing: now))
            return []
        }
        let boundary = window(containing: now)
        guard boundary > start else { return [] }
        var entries: [RSSIReport.Entry] = []
        for (id, s) in samples.sorted(by: { $0.key < $1.key }) {
            let t = track(id)
            entries.append(.init(beacon: id.ref, uuid: id.uuid, count: s.count,
                                 rssi: s.rssiCount > 0 ? s.rssiSum / Double(s.rssiCount) : nil,
                                 at: s.timeSum / Double(s.count),
                                 rssiSmoothed: t?.rssi == nil ? nil : t?.rssiSmoothed, distance: t?.distance,
                                 proximity: t?.proximity ?? .unknown))
        }
        samples.removeAll(keepingCapacity: true)
        open(boundary)
        var reports: [RSSIReport] = []
        var chunks = stride(from: 0, to: entries.count, by: RSSIReport.entriesPerMessage).map {
            Array(entries[$0..<min(entries.count, $0 + RSSIReport.entriesPerMessage)])
        }
        if chunks.isEmpty { chunks = [[]] }
        for (i, chunk) in chunks.enumerated() {
            let last = i == chunks.count - 1
            reports.append(RSSIReport(gateway: gateway, from: start, to: last ? boundary : start, entries: chunk))
        }
        return reports
    }

    private mutating func open(_ start: Instant) {
        windowStart = start
        windowEnd = start + interval
    }
}

public import BeaconKit
public import Contract

/// Collects a gateway's advertisements into report windows. A value owned by the gateway's
/// engine; time is passed in.
public struct RSSIReporter: Sendable {
    /// Window length, seconds; 0 turns reports off.
    public var interval: Double {
        didSet { windowEnd = windowStart.map { $0 + interval } }
    }
    /// Start and end of the window being filled; `nil` before the first input.
    private var windowStart: CaptureTime?
    private var windowEnd: CaptureTime?
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
    public func isDue(at now: CaptureTime) -> Bool {
        guard isEnabled else { return false }
        guard let windowEnd else { return true }
        return now >= windowEnd
    }

    /// The window containing `time`.
    public func window(containing time: CaptureTime) -> CaptureTime {
        let step = Int64((interval * 1e9).rounded())
        guard step > 0 else { return time }
        let n = time.nanoseconds
        return CaptureTime(nanoseconds: (n >= 0 ? n / step : (n - step + 1) / step) * step)
    }

    /// One advertisement heard at `time` (after any windows it closes were taken with
    /// `close(upTo:)`). A late one counts in the open window, at its start.
    public mutating func add(_ id: BeaconID, rssi: Double?, at time: CaptureTime) {
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
    public mutating func close(upTo now: CaptureTime, gateway: String, track: (BeaconID) -> Track?) -> [RSSIReport] {
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

    private mutating func open(_ start: CaptureTime) {
        windowStart = start
        windowEnd = start + interval
    }
}

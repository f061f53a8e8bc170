import BeaconKit
import Wire
import Tracking
import Testing

/// The hide-and-seek words and `RangeMonitor`, the core of `beaconctl range`.
@Suite("Hot/cold: words from distance and trend, range reports")
struct HotColdTests {
    static let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
    static let start = CaptureTime(iso8601: "2026-11-21T10:00:00.000Z")!

    @Test("the words", arguments: [
        // (proximity, distance, previous) -> word
        (Proximity.immediate, 0.3 as Double?, 0.3 as Double?, Warmth.hot),
        (.immediate, 0.4, 2.0, .hot),
        (.near, 1.5, 2.0, .warmer),          // closing in
        (.near, 2.0, 2.0, .warmer),          // near, standing still
        (.near, 2.5, 2.0, .cold),            // moving away
        (.far, 5.0, 5.0, .cold),
        (.far, 4.0, 5.0, .warmer),           // far but closing in
        (.far, 12.0, 12.0, .freezing),
        (.far, 15.0, 12.0, .freezing),
        (.far, 11.0, 13.0, .warmer),
        (.near, 2.02, 2.0, .warmer),         // 2 cm is jitter, not a trend
        (.unknown, nil, 2.0, .unknown),      // no signal strength
        (.far, nil, nil, .unknown),
    ])
    func words(proximity: Proximity, distance: Double?, previous: Double?, expected: Warmth) {
        #expect(HotColdRules().warmth(proximity: proximity, distance: distance, previous: previous) == expected)
    }

    @Test("the words as printed")
    func spelling() {
        #expect(Warmth.allCases.map(\.rawValue) == ["HOT!", "Warmer", "Cold", "Freezing", "?"])
    }

    /// An LE Advertising Report event with one iBeacon (measured power -59 dBm).
    static func event(minor: UInt16, rssi: Int8?) -> [UInt8] {
        HCIEventBuilder.legacyReport([.init(address: BluetoothAddress(rawValue: 0xC0FFEE000000 | UInt64(minor)),
                                            data: AdvertisingData.iBeacon(IBeacon(uuid: uuid, major: 7, minor: minor,
                                                                                  txPower: -59)),
                                            rssi: rssi)])
    }

    @Test("a beacon walking up: one line a second, distance falling, the words warming, then gone")
    func walkUp() {
        var monitor = RangeMonitor(settings: TrackerSettings(exitTimeout: 3))
        // RSSI -79 dBm (10 m with n = 2 and P1m -59 dBm) up to -40 dBm (0.1 m), four
        // samples a second.
        let steps: [Int8] = [-79, -79, -79, -79, -75, -75, -75, -75, -70, -70, -70, -70, -62, -62, -62, -62,
                             -40, -40, -40, -40, -40, -40, -40, -40]
        var lines: [[RangeLine]] = []
        for (i, rssi) in steps.enumerated() {
            let time = Self.start + Double(i) * 0.25
            if i > 0, i % 4 == 0 { lines.append(monitor.report(at: time)) }
            Self.event(minor: 1, rssi: rssi).withUnsafeBytes { monitor.observe(event: $0, at: time) }
        }
        lines.append(monitor.report(at: Self.start + 6))
        let words = lines.map { $0.first?.warmth }
        #expect(words == [.freezing, .warmer, .warmer, .warmer, .hot, .hot], "\(lines.map { $0.map(\.plainText) })")
        let distances = lines.compactMap { $0.first?.distance }
        #expect(distances == distances.sorted(by: >), "\(distances)")
        #expect(lines.allSatisfy { $0.count == 1 })
        // Three seconds later (the exit timeout) it is gone: one last line, then none.
        let gone = monitor.report(at: Self.start + 9.5)
        #expect(gone.map(\.gone) == [true])
        #expect(gone.first?.plainText == "\(Self.uuid) major 7 minor 1  gone (not heard for 3 s)")
        #expect(monitor.report(at: Self.start + 10.5).isEmpty)
    }

    @Test("the plain line: fixed fields, and 'n/a' without signal strength")
    func plainLines() {
        var monitor = RangeMonitor()
        Self.event(minor: 2, rssi: -59).withUnsafeBytes { monitor.observe(event: $0, at: Self.start) }
        Self.event(minor: 3, rssi: nil).withUnsafeBytes { monitor.observe(event: $0, at: Self.start) }
        let lines = monitor.report(at: Self.start + 0.5).map(\.plainText)
        #expect(lines == [
            "\(Self.uuid) major 7 minor 2  rssi -59 dBm  smoothed -59.0 dBm  ~1.00 m  near  Warmer",
            "\(Self.uuid) major 7 minor 3  rssi n/a (the controller reports no signal strength)  distance n/a  unknown  ?",
        ])
    }

    @Test("--uuid keeps only that UUID; other beacons and non-beacons are ignored")
    func uuidFilter() {
        var monitor = RangeMonitor(uuid: BeaconUUID("B9407F30-F5F8-466E-AFF9-25556B57FE6D")!)
        Self.event(minor: 4, rssi: -60).withUnsafeBytes { monitor.observe(event: $0, at: Self.start) }
        #expect(monitor.report(at: Self.start + 1).isEmpty)
        var all = RangeMonitor()
        Self.event(minor: 4, rssi: -60).withUnsafeBytes { all.observe(event: $0, at: Self.start) }
        // A truncated event: skipped, never a crash.
        Array(Self.event(minor: 5, rssi: -60).prefix(12)).withUnsafeBytes { all.observe(event: $0, at: Self.start) }
        #expect(all.report(at: Self.start + 1).map(\.id.minor) == [4])
    }
}

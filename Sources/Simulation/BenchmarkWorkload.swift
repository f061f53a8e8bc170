public import BeaconKit
public import Wire

/// The fixed advertisements every BeaconBridge benchmark measures: the micro-benchmarks
/// (`Benchmarks/`), the side-by-side run with other decoders (`scripts/bench-peers`) and
/// `beaconctl bench` all replay the same bytes for the same parameters.
///
/// `count` HCI LE Advertising Report events (legacy, one report each) from `beacons`
/// distinct iBeacons taking turns: advertisement `k` is beacon `k % beacons`, so beacon
/// `b`'s `n`-th advertisement (from 1) is number `(n - 1) · beacons + b`. Beacon `b` has
/// major `major + b / 10_000`, minor `b % 10_000 + 1` and a fixed random address; its RSSI
/// stays within ±3 dB of a level of its own between −45 and −85 dBm (a customer standing
/// still), from a seeded generator.
public struct BenchmarkWorkload: Sendable, Equatable {
    public var count: Int
    public var beacons: Int
    public var uuid: BeaconUUID
    public var major: UInt16
    public var seed: UInt64

    public init(count: Int, beacons: Int, uuid: BeaconUUID = StoreSimulation.defaultUUID, major: UInt16 = 100,
                seed: UInt64 = 42) {
        self.count = max(0, count)
        self.beacons = max(1, beacons)
        self.uuid = uuid
        self.major = major
        self.seed = seed
    }

    /// The beacon that sends advertisement `index`.
    public func beacon(at index: Int) -> IBeacon {
        let b = index % beacons
        return IBeacon(uuid: uuid, major: major &+ UInt16(truncatingIfNeeded: b / 10_000),
                       minor: UInt16(b % 10_000 + 1), txPower: -59)
    }

    /// The address beacon number `b` advertises from (a static random address).
    public func address(ofBeacon b: Int) -> BluetoothAddress {
        BluetoothAddress(rawValue: 0xC0_00_00_00_00_00 | UInt64(truncatingIfNeeded: b) &* 0x9E37_79B9 & 0x3F_FFFF_FFFF)
    }

    /// The events, in order.
    public func events() -> [[UInt8]] {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { index in
            let b = index % beacons
            let rssi = Int8(-45 - b % 41 + Int(random.next() % 7) - 3)
            let report = HCIEventBuilder.Report(address: address(ofBeacon: b),
                                                data: AdvertisingData.iBeacon(beacon(at: index)), rssi: rssi)
            return HCIEventBuilder.legacyReport([report])
        }
    }

    /// The events as a btsnoop capture (H4), `interval` seconds apart from `start`.
    public func capture(start: CaptureTime, interval: Double) -> BtsnoopWriter {
        var writer = BtsnoopWriter(datalink: .h4)
        for (index, event) in events().enumerated() {
            writer.appendEvent(event, at: start + Double(index) * interval)
        }
        return writer
    }
}

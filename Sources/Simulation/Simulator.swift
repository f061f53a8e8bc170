import RealModule
public import BeaconKit
public import Wire

/// A small deterministic PRNG (SplitMix64) so a simulated store is the same for a seed.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A normally distributed sample (Box–Muller).
    public mutating func gaussian(mean: Double = 0, deviation: Double = 1) -> Double {
        let u1 = max(Double.random(in: 0..<1, using: &self), 1e-12)
        let u2 = Double.random(in: 0..<1, using: &self)
        return mean + deviation * Double.sqrt(-2 * Double.log(u1)) * Double.cos(2 * Double.pi * u2)
    }
}

/// A synthetic store: customers carrying iBeacons walk from the door to the counter,
/// linger and leave, heard by gateways along the way with log-distance path loss and
/// Gaussian noise. The output is one btsnoop capture per gateway, which the gateway
/// replays like a real capture.
public struct StoreSimulation: Sendable {
    public struct Gateway: Sendable, Equatable {
        public var id: String
        /// Position along the store's walkway, metres from the door.
        public var position: Double

        public init(id: String, position: Double) {
            self.id = id
            self.position = position
        }
    }

    public var uuid: BeaconUUID
    public var store: UInt16
    public var customers: Int
    /// Length of the simulated time, seconds.
    public var duration: Double
    /// Advertisements per second per beacon.
    public var rate: Double
    public var gateways: [Gateway]
    public var seed: UInt64
    public var start: CaptureTime
    /// Transmit power at 1 m (dBm) and the path-loss exponent of the simulated air.
    public var measuredPower: Double = -59
    public var pathLossExponent: Double = 2.2
    /// RSSI noise, dB (standard deviation).
    public var noise: Double = 3
    /// Below this RSSI (dBm) a gateway hears nothing.
    public var sensitivity: Double = -95
    /// Non-beacon advertisers (phones, headphones) in range of every gateway.
    public var bystanders: Int = 3

    public static let defaultUUID = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
    /// When a simulation begins unless told otherwise: a fixed morning, so that a seed
    /// gives the same captures on every run.
    public static let defaultStart = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!

    public init(uuid: BeaconUUID = StoreSimulation.defaultUUID, store: UInt16 = 100, customers: Int = 5,
                duration: Double = 120, rate: Double = 2,
                gateways: [Gateway] = [Gateway(id: "door", position: 0), Gateway(id: "counter", position: 12)],
                seed: UInt64 = 1, start: CaptureTime = StoreSimulation.defaultStart) {
        self.uuid = uuid
        self.store = store
        self.customers = customers
        self.duration = duration
        self.rate = rate
        self.gateways = gateways
        self.seed = seed
        self.start = start
    }

    /// One customer's walk: in at the door, to a spot, a pause, out again.
    public struct Visit: Sendable, Equatable {
        public var minor: UInt16
        public var address: BluetoothAddress
        public var arrival: Double
        public var spot: Double
        public var dwell: Double
        static let speed = 1.0 // m/s

        public var departure: Double { arrival + 2 * spot / Self.speed + dwell }

        /// Position along the walkway at `t` seconds into the simulation, or `nil` outside.
        public func position(at t: Double) -> Double? {
            guard t >= arrival, t <= departure else { return nil }
            let walk = spot / Self.speed
            let elapsed = t - arrival
            if elapsed < walk { return elapsed * Self.speed }
            if elapsed < walk + dwell { return spot }
            return spot - (elapsed - walk - dwell) * Self.speed
        }
    }

    /// The visits for this seed.
    public var visits: [Visit] {
        var random = SplitMix64(seed: seed)
        let far = gateways.map(\.position).max() ?? 10
        return (0..<customers).map { i in
            let arrival = Double.random(in: 0...max(duration * 0.5, 1), using: &random)
            // Most customers go to the counter; some browse half way.
            let spot = Bool.random(using: &random) || i == 0 ? far - 0.3 : far * Double.random(in: 0.3...0.7, using: &random)
            let dwell = Double.random(in: 10...max(duration * 0.3, 11), using: &random)
            let address = BluetoothAddress(rawValue: 0xC0_00_00_00_00_00 | UInt64(store) << 16 | UInt64(i + 1))
            return Visit(minor: UInt16(i + 1), address: address, arrival: arrival, spot: spot, dwell: dwell)
        }
    }

    /// Captures keyed by gateway id (H4 datalink, one or two reports per event).
    ///
    /// Every capture begins at `start` with its controller's reset completing, as a capture
    /// of a gateway starting up does, so the captures of one store share their first instant.
    /// Each gateway then hears at its own phase of the advertising interval (gateway `k` of
    /// `n` `k/n` of an interval later), as scanners that are not in step do. Replayed side by
    /// side (`beacon-gateway --start-at`: first frames at the same wall-clock time), two
    /// gateways never report at the same instant, so their messages reach the brain in the
    /// same order on every run.
    public func captures() -> [String: BtsnoopWriter] {
        var random = SplitMix64(seed: seed ^ 0xA5A5_A5A5)
        let visits = self.visits
        var writers = Dictionary(uniqueKeysWithValues: gateways.map { gateway in
            var writer = BtsnoopWriter(datalink: .h4)
            writer.appendEvent(HCIEventBuilder.commandComplete(HCIOpcode.reset.rawValue), at: start)
            return (gateway.id, writer)
        })
        let step = 1 / rate
        var t = 0.0
        while t < duration {
            for (order, gateway) in gateways.enumerated() {
                let phase = step * Double(order) / Double(gateways.count)
                var reports: [HCIEventBuilder.Report] = []
                for visit in visits {
                    guard let x = visit.position(at: t) else { continue }
                    let distance = max((x - gateway.position).magnitude, 0.1)
                    let rssi = measuredPower - 10 * pathLossExponent * Double.log10(distance)
                        + random.gaussian(deviation: noise)
                    guard rssi >= sensitivity else { continue }
                    let beacon = IBeacon(uuid: uuid, major: store, minor: visit.minor, txPower: Int8(measuredPower))
                    reports.append(.init(address: visit.address, data: AdvertisingData.iBeacon(beacon),
                                         rssi: Int8(clamping: Int(rssi.rounded()))))
                }
                for i in 0..<bystanders {
                    // A phone's advertisement: flags and a random manufacturer blob, no beacon.
                    let address = BluetoothAddress(rawValue: 0x5A_00_00_00_00_00 | UInt64(i))
                    let data: [UInt8] = [0x02, 0x01, 0x1A, 0x07, 0xFF, 0x06, 0x00, 0x01, 0x09, 0x20, UInt8(i)]
                    reports.append(.init(eventType: 0x00, address: address, data: data,
                                         rssi: Int8(clamping: Int(random.gaussian(mean: -80, deviation: 4).rounded()))))
                }
                // Deliver in events of one or two reports, as controllers do.
                var index = 0
                var offset = phase
                while index < reports.count {
                    let take = min(reports.count - index, Bool.random(using: &random) ? 2 : 1)
                    writers[gateway.id]!.appendEvent(HCIEventBuilder.legacyReport(Array(reports[index..<(index + take)])),
                                                     at: start + (t + offset))
                    index += take
                    offset += 0.001
                }
            }
            t += step
        }
        return writers
    }
}

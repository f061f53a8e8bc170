import BeaconKit
import Wire
import Tracking
import Config
import GatewayCore
import Simulation

/// HCI events packed into one buffer, as a source hands them over one at a time.
struct PackedEvents {
    var bytes: [UInt8] = []
    var ranges: [Range<Int>] = []

    init(_ events: [[UInt8]]) {
        for event in events {
            ranges.append(bytes.count..<(bytes.count + event.count))
            bytes += event
        }
    }

    /// The advertising data of every report, packed the same way.
    var payloads: PackedEvents {
        var out: [[UInt8]] = []
        bytes.withUnsafeBytes { all in
            for range in ranges {
                HCIEvent.forEachAdvertisingReport(in: UnsafeRawBufferPointer(rebasing: all[range])) { report in
                    out.append(Array(report.data))
                }
            }
        }
        return PackedEvents(out)
    }
}

enum Workloads {
    /// HCI events to beacons through `AdvertisementDecoder`, as the gateway calls it.
    static func decodeEvents(_ events: PackedEvents, passes: Int, runs: Int, name: String = "decode/hci-events",
                             reportsPerPass: Int? = nil) -> Measurement {
        let reports = (reportsPerPass ?? events.ranges.count) * passes
        return events.bytes.withUnsafeBytes { all in
            measure(name, unit: "reports", operations: reports, runs: runs) {
                var decoder = AdvertisementDecoder()
                var checksum = 0
                for _ in 0..<passes {
                    for range in events.ranges {
                        decoder.decodeBeacons(event: UnsafeRawBufferPointer(rebasing: all[range])) { report, beacon in
                            if case .iBeacon(let b) = beacon { checksum &+= Int(b.minor) &+ Int(report.rssi ?? 0) }
                        }
                    }
                }
                return checksum &+ decoder.counters.beacons
            }
        }
    }

    /// Advertising data alone (the AD structures of one report) to a beacon: the layer at
    /// which the Python decoders work.
    static func decodePayloads(_ payloads: PackedEvents, passes: Int, runs: Int, name: String = "decode/ad-payloads") -> Measurement {
        let count = payloads.ranges.count * passes
        return payloads.bytes.withUnsafeBytes { all in
            measure(name, unit: "payloads", operations: count, runs: runs) {
                var checksum = 0
                for _ in 0..<passes {
                    for range in payloads.ranges {
                        if case .beacon(.iBeacon(let b)) = AdvertisingData.decodeBeacon(UnsafeRawBufferPointer(rebasing: all[range])) {
                            checksum &+= Int(b.minor)
                        }
                    }
                }
                return checksum
            }
        }
    }

    /// Tracker updates with `beacons` tracks live, each beacon heard once a second.
    static func track(beacons: Int, updates: Int, runs: Int) -> Measurement {
        let workload = BenchmarkWorkload(count: beacons, beacons: beacons)
        let ids = (0..<beacons).map { b -> BeaconID in
            let beacon = workload.beacon(at: b)
            return BeaconID(uuid: beacon.uuid, major: beacon.major, minor: beacon.minor)
        }
        let addresses = (0..<beacons).map { workload.address(ofBeacon: $0) }
        let step = 1.0 / Double(beacons)
        var tracker = Tracker()
        var time = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
        // Everyone in range before the clock starts.
        for b in 0..<beacons {
            _ = tracker.observe(ids[b], address: addresses[b], rssi: -60, measuredPower: -59, txPower: -59, at: time)
            time = time + step
        }
        var next = 0
        return measure("track/\(beacons / 1000)k-live", unit: "updates", operations: updates, runs: runs) {
            var checksum = 0
            for i in 0..<updates {
                let b = next
                next = next + 1 == beacons ? 0 : next + 1
                let rssi = Int8(-50 - (i & 31))
                let update = tracker.observe(ids[b], address: addresses[b], rssi: rssi, measuredPower: -59,
                                             txPower: -59, at: time)
                time = time + step
                checksum &+= update.publish ? 1 : 0
                checksum &+= update.timeouts.count
            }
            precondition(tracker.count == beacons, "a beacon exited during the tracking benchmark")
            return checksum
        }
    }

    /// One sighting payload (JSON), with a registry name, as the gateway publishes it.
    static func sightingJSON(count: Int, runs: Int) -> Measurement {
        var tracker = Tracker()
        let uuid = StoreSimulation.defaultUUID
        let id = BeaconID(uuid: uuid, major: 100, minor: 7)
        var time = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
        var update = tracker.observe(id, address: BluetoothAddress(rawValue: 0xC0FFEE_000007), rssi: -63,
                                     measuredPower: -59, txPower: -59, at: time)
        time = time + 0.25
        update = tracker.observe(id, address: BluetoothAddress(rawValue: 0xC0FFEE_000007), rssi: -61,
                                 measuredPower: -59, txPower: -59, at: time)
        let track = update.track
        let entry = BeaconEntry(id: id, name: "customer-7")
        return measure("json/sighting", unit: "sightings", operations: count, runs: runs) {
            var checksum = 0
            for i in 0..<count {
                let text = Payloads.sighting(track, gateway: "door", entry: entry, at: time + Double(i & 1023) * 0.001)
                checksum &+= text.utf8.count
            }
            return checksum
        }
    }

    /// A fleet config with `gateways` gateways and `beacons` registry entries.
    static func fleetConfigText(gateways: Int, beacons: Int) -> String {
        let uuid = StoreSimulation.defaultUUID.description
        var gatewayList: [JSONValue] = []
        for g in 0..<gateways {
            gatewayList.append(.object(["id": .string("gw-\(g)"), "source": .string("hci:0"), "zone": .string("Zone \(g)"),
                                        "pathLossExponent": .number(2.5 + Double(g % 5) / 10)]))
        }
        var beaconList: [JSONValue] = []
        for b in 0..<beacons {
            beaconList.append(.object(["uuid": .string(uuid), "major": .number(100), "minor": .number(Double(b + 1)),
                                       "name": .string("customer-\(b + 1)"), "measuredPower": .number(-59),
                                       "latitude": .number(52.52 + Double(b) * 1e-5), "longitude": .number(13.40)]))
        }
        let document: JSONValue = .object([
            "broker": .object(["url": .string("mqtt://127.0.0.1:1883"), "keepalive": .number(30)]),
            "uuids": .array([.string(uuid)]),
            "defaults": .object(["exitTimeout": .number(10), "publishInterval": .number(1),
                                 "thresholds": .object(["immediate": .number(0.5), "near": .number(3),
                                                        "hysteresis": .number(0.2)])]),
            "gateways": .array(gatewayList),
            "beacons": .array(beaconList),
            "stores": .array([.object(["major": .number(100), "name": .string("Main Street"),
                                       "ad": .object(["title": .string("Deal of the day"),
                                                      "text": .string("Two coffees for the price of one")])])]),
            "rules": .array([
                .object(["name": .string("greet"), "when": .string("join"), "stores": .array([.number(100)]),
                         "then": .array([.object(["do": .string("greeting"), "text": .string("Hello {customer}!")])])]),
                .object(["name": .string("deal"), "when": .string("proximity:immediate"),
                         "then": .array([.object(["do": .string("ad")])]), "once": .bool(true)]),
            ]),
        ])
        return document.jsonText
    }

    /// Parsing and validating a whole fleet config.
    static func configLoad(gateways: Int, beacons: Int, count: Int, runs: Int) -> (Measurement, bytes: Int) {
        let text = fleetConfigText(gateways: gateways, beacons: beacons)
        do {
            _ = try FleetConfig.parse(text)
        } catch {
            fatalError("the benchmark's fleet config is invalid: \(error)")
        }
        let result = measure("config/\(gateways)gw-\(beacons)beacons", unit: "configs", operations: count, runs: runs) {
            var checksum = 0
            for _ in 0..<count {
                if let config = try? FleetConfig.parse(text) { checksum &+= config.beacons.count }
            }
            return checksum
        }
        return (result, text.utf8.count)
    }
}

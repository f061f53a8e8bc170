import BeaconKit
import Contract
import Wire
import Tracking
import Config
import GatewayCore
import Simulation
import Testing

/// The paths the benchmarks measure (decode, track, sighting JSON), pinned byte for byte so
/// that a speed-up cannot change what they produce. Fixtures are built with
/// `HCIEventBuilder` and `BenchmarkWorkload`, the generators the benchmarks use.
@Suite struct HotPathTests {
    static let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
    static let t0 = CaptureTime(iso8601: "2026-11-21T09:30:00.125Z")!

    // MARK: JSONWriter

    @Test(arguments: [
        ("plain", #""plain""#),
        ("quote \" and backslash \\", #""quote \" and backslash \\""#),
        ("line\nreturn\rtab\t", #""line\nreturn\rtab\t""#),
        ("\u{01}\u{1F}", #""\u0001\u001F""#),
        ("café ☕️ 🍩", "\"café ☕️ 🍩\""),
        ("", #""""#),
    ])
    func stringsEscapeWhatJSONRequires(input: String, expected: String) {
        var writer = JSONWriter()
        writer.writeString(input)
        #expect(writer.text == expected)
        #expect(writer.bytes == Array(expected.utf8))
    }

    @Test func numbersAndFixedPoint() {
        var writer = JSONWriter(capacity: 1)
        writer.object { o in
            o("int", 0)
            o("negative", -61)
            o("min", Int(Int64.min))
            o("max", Int(Int64.max))
            o("fixed", -61.25, places: 1)
            o("small", 0.004, places: 2)
            o("negativeZero", -0.001, places: 2)
            o("padded", 1.05, places: 2)
            o("whole", 3.0, places: 2)
            o("nil", nil as Double?, places: 2)
            o("huge", 1e300, places: 2)
            o("number", JSONValue.number(2.5))
            o("integral", JSONValue.number(-7))
        }
        #expect(writer.text == #"{"int":0,"negative":-61,"min":-9223372036854775808,"max":9223372036854775807,"#
                + #""fixed":-61.3,"small":0,"negativeZero":0,"padded":1.05,"whole":3,"nil":null,"huge":1e+300,"#
                + #""number":2.5,"integral":-7}"#)
    }

    @Test func copiesOfAWriterAreIndependent() {
        var first = JSONWriter(capacity: 4)
        first.writeString("shared")
        var second = first
        second.writeString("second")
        first.writeString("first")
        #expect(first.text == #""shared""first""#)
        #expect(second.text == #""shared""second""#)
    }

    @Test func identitiesAndTimes() {
        #expect(Self.uuid.description == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
        #expect(BeaconUUID(high: 0, low: 0x0A).description == "00000000-0000-0000-0000-00000000000A")
        #expect(BluetoothAddress(rawValue: 0xC0FF_EE01_02AB).description == "C0:FF:EE:01:02:AB")
        #expect(Self.t0.iso8601 == "2026-11-21T09:30:00.125Z")
        #expect(CaptureTime.epoch.iso8601 == "1970-01-01T00:00:00.000Z")
        #expect(CaptureTime(nanoseconds: -1).iso8601 == "1969-12-31T23:59:59.999Z")
        var text = "at "
        Self.t0.appendISO8601(to: &text)
        #expect(text == "at 2026-11-21T09:30:00.125Z")
    }

    // MARK: Parsing what the brain reads

    /// The parser's shortcut for short decimals must give exactly what `Double(String)` gives.
    @Test func shortDecimalsParseExactlyAsDoubleDoes() throws {
        var random = SplitMix64(seed: 7)
        var texts = ["0", "-0", "1", "-1", "0.5", "-62.4", "1.58", "999999999999999", "0.000000000000001",
                     "123456789.012345", "9007199254740993", "1234567890123456", "-0.0", "3.14159265358979"]
        for _ in 0..<2_000 {
            let whole = random.next() % 1_000_000
            let fraction = random.next() % 1_000_000
            let places = Int(random.next() % 7)
            let sign = random.next() % 2 == 0 ? "" : "-"
            let padded = String(repeating: "0", count: 6 - String(fraction).count) + String(fraction)
            let digits = padded.prefix(places)
            texts.append(places == 0 ? "\(sign)\(whole)" : "\(sign)\(whole).\(digits)")
        }
        for text in texts {
            let parsed = try JSONParser().parse(text)
            let expected = Double(text)!
            #expect(parsed.numberValue?.bitPattern == expected.bitPattern, "\(text)")
        }
    }

    @Test func stringsKeepTheirValidation() throws {
        #expect(try JSONParser().parse(#""plain ascii""#) == .string("plain ascii"))
        #expect(try JSONParser().parse(#""café ☕️""#) == .string("café ☕️"))
        #expect(throws: JSONParseError.self) { try JSONParser().parse([0x22, 0x61, 0xC3, 0x28, 0x22] as [UInt8]) }
        #expect(throws: JSONParseError.self) { try JSONParser().parse([0x22, 0xFF, 0x22] as [UInt8]) }
    }

    @Test(arguments: [
        ("beacons/100/7", Topics.Kind.beacon(BeaconRef(major: 100, minor: 7), .sighting)),
        ("beacons/0/65535", .beacon(BeaconRef(major: 0, minor: 65535), .sighting)),
        ("beacons/65536/1", nil), ("beacons/007/1", nil), ("beacons/+1/1", nil), ("beacons/-1/1", nil),
        ("beacons/1 /1", nil), ("beacons//1", nil), ("beacons/123456/1", nil), ("beacons/١/1", nil),
    ] as [(String, Topics.Kind?)])
    func topicNumbersHaveOneSpelling(topic: String, expected: Topics.Kind?) {
        #expect(Topics().parse(topic) == expected)
    }

    // MARK: The sighting payload

    @Test func sightingIsByteForByteStable() {
        var tracker = Tracker()
        let id = BeaconID(uuid: Self.uuid, major: 100, minor: 7)
        let address = BluetoothAddress(rawValue: 0xC0FF_EE00_0007)
        _ = tracker.observe(id, address: address, rssi: -63, measuredPower: -59, txPower: -59, at: Self.t0)
        let update = tracker.observe(id, address: address, rssi: -61, measuredPower: -59, txPower: -59,
                                     at: Self.t0 + 1.5)
        let entry = BeaconEntry(id: id, name: "Ada \"the\" customer",
                                location: Location(latitude: 52.52, longitude: 13.405, heading: 90, floor: 1))
        let text = Payloads.sighting(update.track, gateway: "door", entry: entry, at: Self.t0 + 1.5)
        let smoothed = update.track.rssiSmoothed!
        let distance = update.track.distance!
        #expect(text == #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":7,"gateway":"door","#
                + #""address":"C0:FF:EE:00:00:07","rssi":-61,"rssiSmoothed":\#(fixed(smoothed, 1)),"txPower":-59,"#
                + #""distance":\#(fixed(distance, 2)),"proximity":"\#(update.track.proximity.rawValue)","#
                + #""ts":"2026-11-21T09:30:01.625Z","seq":2,"name":"Ada \"the\" customer","#
                + #""location":{"lat":52.52,"lon":13.405,"heading":90,"floor":1}}"#)
        // The same text parses back to the same values.
        let parsed = try? JSONParser().parse(text)
        #expect(parsed?["rssi"] == .number(-61))
        #expect(parsed?["name"] == .string("Ada \"the\" customer"))
    }

    /// Independent of JSONWriter: rounds through `Double.description`.
    func fixed(_ value: Double, _ places: Int) -> String {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }

    // MARK: Decoding the benchmark's advertisements

    @Test func benchmarkWorkloadDecodesToItsBeacons() {
        let workload = BenchmarkWorkload(count: 2_500, beacons: 1_000)
        var decoder = AdvertisementDecoder()
        var index = 0
        for event in workload.events() {
            decoder.decode(event: event) { report, result in
                #expect(result == .beacon(.iBeacon(workload.beacon(at: index))))
                #expect(report.address == workload.address(ofBeacon: index % workload.beacons))
                #expect(report.rssi.map { (-88 ... -42).contains($0) } == true)
                index += 1
            }
        }
        #expect(index == 2_500)
        #expect(decoder.counters.beacons == 2_500)
        #expect(decoder.counters.malformed == 0)
        #expect(Set((0..<2_500).map { workload.address(ofBeacon: $0 % 1_000) }).count == 1_000)
    }

    static let iBeaconData = AdvertisingData.iBeacon(IBeacon(uuid: uuid, major: 100, minor: 7, txPower: -59))

    /// The one-walk decoder still checks the framing after the beacon it found.
    @Test(arguments: [
        (iBeaconData, AdvertisingDataResult.beacon(.iBeacon(IBeacon(uuid: uuid, major: 100, minor: 7, txPower: -59)))),
        (iBeaconData + [0, 0, 0], .beacon(.iBeacon(IBeacon(uuid: uuid, major: 100, minor: 7, txPower: -59)))),
        (iBeaconData + [0x05, 0x09, 0x41], .malformed),
        (iBeaconData + [0x00, 0x01], .malformed),
        ([0x02, 0x01, 0x06], .noBeacon),
        ([0x02, 0x01, 0x06, 0x00, 0x00], .noBeacon),
        ([0x02, 0x01, 0x06, 0x00, 0x07], .malformed),
        ([0x1B, 0x01, 0x06] + Array(iBeaconData.dropFirst(3)), .malformed),
        ([], .noBeacon),
        ([0x00], .noBeacon),
    ] as [([UInt8], AdvertisingDataResult)])
    func framingIsCheckedAroundTheBeacon(data: [UInt8], expected: AdvertisingDataResult) {
        data.withUnsafeBytes { bytes in
            #expect(AdvertisingData.decodeBeacon(bytes) == expected)
            #expect(AdvertisingData.isWellFormed(bytes) == (expected != .malformed))
        }
    }

    @Test func reportsInOneEventDecodeInOrder() {
        let beacons = (1...3).map { IBeacon(uuid: Self.uuid, major: 1, minor: UInt16($0), txPower: -59) }
        let reports = beacons.enumerated().map { i, beacon in
            HCIEventBuilder.Report(address: BluetoothAddress(rawValue: UInt64(i)), data: AdvertisingData.iBeacon(beacon),
                                   rssi: i == 1 ? nil : -50)
        }
        for event in [HCIEventBuilder.legacyReport(reports), HCIEventBuilder.extendedReport(reports, txPower: 4)] {
            var seen: [Beacon] = []
            var rssi: [Int8?] = []
            var decoder = AdvertisementDecoder()
            event.withUnsafeBytes { bytes in
                decoder.decodeBeacons(event: bytes) { report, beacon in
                    seen.append(beacon)
                    rssi.append(report.rssi)
                }
            }
            #expect(seen == beacons.map(Beacon.iBeacon))
            #expect(rssi == [-50, nil, -50])
        }
    }
}

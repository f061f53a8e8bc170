import BeaconKit
import Wire
import Testing

@Suite("HCI events")
struct HCIEventTests {
    /// Whole events as real scanners delivered them, from custom-components/ble_monitor's tests
    /// (`test_ibeacon_parser.py`, `test_altbeacon_parser.py`, `test_eddystone_tlm_parser.py`),
    /// without the leading H4 byte 0x04.
    static let iBeaconEvent = bytes("3E2A02010001433EA2C96B6A1E02011A1AFF4C000215E2C56DB5DFFB48D2B060D0F5A71096E000640000C5B3")
    static let altBeaconEvent = bytes("3E280201020105988527406D1C1BFFFFFFBEACD3162F5AF3EE494799DB09756062D0FC005A0005C400D4")
    static let tlmEvent = bytes("3E2502010301494BEFBEADDE190201060303AAFE1116AAFE20000C6F1E000002006D41DB9AB6D7")
    /// An event with two reports, record 12 of `btsnoop-decoder_hci.log` (ADV_IND and its
    /// SCAN_RSP from 5C:31:3E:4C:7A:A4, named "BeeWi BBD100").
    static let twoReports = bytes("3E3502020000A47A4C3E315C0E0201060AFF0D0007065009040B00C9"
                                  + "0400A47A4C3E315C110D09426565576920424244313030020A00C9")
    /// Record 163 of `btsnoop-rs_hci_android.log`: a legacy ADV_IND (event type 0x0013) in an
    /// LE Extended Advertising Report, TX power 127 = not available, RSSI -68.
    static let extendedEvent = bytes("3E210D01130001103F2A43AB4D0100FF7FBC000000000000000000070201020303F3FE")

    @Test func legacyReportWithAnIBeacon() {
        var decoder = AdvertisementDecoder()
        let reports = decoder.reports(in: Self.iBeaconEvent)
        #expect(reports == [CopiedReport(
            kind: .legacy, eventType: 0x00, addressType: 0x01, address: BluetoothAddress("6A:6B:C9:A2:3E:43")!,
            rssi: -77, txPower: nil, data: AdvertisingDataTests.bleMonitorIBeacon,
            result: .beacon(.iBeacon(IBeacon(uuid: airLocate, major: 100, minor: 0, txPower: -59))))])
        #expect(decoder.counters == .expect(events: 1, advertisingEvents: 1, reports: 1, beacons: 1))
    }

    @Test func legacyReportsOfOtherBeacons() {
        var decoder = AdvertisementDecoder()
        let alt = decoder.reports(in: Self.altBeaconEvent)
        let tlm = decoder.reports(in: Self.tlmEvent)
        #expect(alt.map(\.address) == [BluetoothAddress("6D:40:27:85:98:05")!])
        #expect(alt.map(\.rssi) == [-44])
        #expect(alt.map(\.eventType) == [0x02])
        #expect(tlm.map(\.address) == [BluetoothAddress("DE:AD:BE:EF:4B:49")!])
        #expect(tlm.map(\.rssi) == [-41])
        guard case .beacon(.altBeacon) = alt.first?.result, case .beacon(.eddystoneTLM) = tlm.first?.result else {
            Issue.record("expected an AltBeacon and an Eddystone-TLM")
            return
        }
        #expect(decoder.counters == .expect(events: 2, advertisingEvents: 2, reports: 2, beacons: 2))
    }

    @Test func twoReportsInOneEvent() {
        var decoder = AdvertisementDecoder()
        let reports = decoder.reports(in: Self.twoReports)
        #expect(reports.map(\.eventType) == [0x00, 0x04])
        #expect(reports.map(\.address) == Array(repeating: BluetoothAddress("5C:31:3E:4C:7A:A4")!, count: 2))
        #expect(reports.map(\.rssi) == [-55, -55])
        #expect(reports.map(\.data) == [bytes("0201060AFF0D0007065009040B00"), bytes("0D09426565576920424244313030020A00")])
        #expect(reports.map(\.result) == [.noBeacon, .noBeacon])
        #expect(decoder.counters == .expect(events: 1, advertisingEvents: 1, reports: 2, notBeacons: 2))
    }

    @Test func builderMakesWhatControllersSend() {
        let address = BluetoothAddress("5C:31:3E:4C:7A:A4")!
        let built = HCIEventBuilder.legacyReport([
            .init(eventType: 0x00, addressType: 0x00, address: address, data: bytes("0201060AFF0D0007065009040B00"), rssi: -55),
            .init(eventType: 0x04, addressType: 0x00, address: address, data: bytes("0D09426565576920424244313030020A00"), rssi: -55),
        ])
        #expect(built == Self.twoReports)
        let extended = HCIEventBuilder.extendedReport(
            [.init(address: BluetoothAddress("4D:AB:43:2A:3F:1A")!, data: bytes("0201020303F3FE"), rssi: -68)])
        #expect(classify(extended) == .advertisingReports(count: 1))
    }

    @Test func manyLegacyReports() {
        let beacons = (0..<3).map { IBeacon(uuid: airLocate, major: 1, minor: UInt16($0), txPower: -59) }
        let event = HCIEventBuilder.legacyReport(beacons.enumerated().map { i, beacon in
            .init(address: BluetoothAddress(rawValue: UInt64(i)), data: AdvertisingData.iBeacon(beacon), rssi: Int8(-60 - i))
        })
        #expect(event.count == 2 + 2 + 3 * (10 + 30))
        var decoder = AdvertisementDecoder()
        let reports = decoder.reports(in: event)
        #expect(reports.map(\.result) == beacons.map { .beacon(.iBeacon($0)) })
        #expect(reports.map(\.rssi) == [-60, -61, -62])
        #expect(decoder.counters == .expect(events: 1, advertisingEvents: 1, reports: 3, beacons: 3))
    }

    @Test func legacyRSSI127IsNotAvailable() {
        let event = HCIEventBuilder.legacyReport([.init(address: BluetoothAddress(rawValue: 1),
                                                        data: bytes("020106"), rssi: nil)])
        #expect(event.last == 0x7F)
        var decoder = AdvertisementDecoder()
        #expect(decoder.reports(in: event).map(\.rssi) == [nil])
    }

    // MARK: Extended reports

    @Test func extendedReportFromAndroid() {
        var decoder = AdvertisementDecoder()
        let reports = decoder.reports(in: Self.extendedEvent)
        #expect(reports == [CopiedReport(
            kind: .extended, eventType: 0x0013, addressType: 0x01, address: BluetoothAddress("4D:AB:43:2A:3F:10")!,
            rssi: -68, txPower: nil, data: bytes("0201020303F3FE"), result: .noBeacon)])
        #expect(decoder.counters == .expect(events: 1, advertisingEvents: 1, reports: 1, notBeacons: 1))
    }

    /// Builds one extended report by hand (Core spec Vol 4 Part E §7.7.65.13).
    static func extendedReport(eventType: UInt16, txPower: UInt8 = 0x7F, rssi: UInt8, data: [UInt8]) -> [UInt8] {
        [UInt8(eventType & 0xFF), UInt8(eventType >> 8), 0x01, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
         0x01, 0x00, 0xFF, txPower, rssi, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, UInt8(data.count)] + data
    }

    static func extendedEvent(_ reports: [[UInt8]]) -> [UInt8] {
        let params: [UInt8] = [0x0D, UInt8(reports.count)] + reports.joined()
        return [0x3E, UInt8(params.count)] + params
    }

    @Test func extendedReportsWithAFragment() {
        let beacon = AdvertisingData.iBeacon(IBeacon(uuid: airLocate, major: 7, minor: 8, txPower: -59))
        let event = Self.extendedEvent([
            Self.extendedReport(eventType: 0x0010, txPower: 0xF6, rssi: 0xC4, data: beacon),     // complete, TX -10
            Self.extendedReport(eventType: 0x0020, rssi: 0xC4, data: Array(beacon.prefix(20))),  // more to come
            Self.extendedReport(eventType: 0x0040, rssi: 0x7F, data: Array(beacon.prefix(20))),  // truncated
            Self.extendedReport(eventType: 0x0000, txPower: 0x7F, rssi: 0x7F, data: bytes("020106")),
        ])
        var decoder = AdvertisementDecoder()
        let reports = decoder.reports(in: event)
        #expect(reports.count == 2)
        #expect(reports.map(\.rssi) == [-60, nil])
        #expect(reports.map(\.txPower) == [-10, nil])
        #expect(reports.map(\.eventType) == [0x0010, 0x0000])
        #expect(reports.first?.result == .beacon(.iBeacon(IBeacon(uuid: airLocate, major: 7, minor: 8, txPower: -59))))
        #expect(decoder.counters == .expect(events: 1, advertisingEvents: 1, reports: 2, fragments: 2,
                                            notBeacons: 1, beacons: 1))
    }

    @Test func extendedReportsMayCarryMoreThan31Bytes() {
        let data = Array(repeating: UInt8(0), count: 200)
        let event = Self.extendedEvent([Self.extendedReport(eventType: 0x0000, rssi: 0xB0, data: data)])
        var decoder = AdvertisementDecoder()
        #expect(decoder.reports(in: event).map(\.result) == [.noBeacon])
        #expect(decoder.counters.malformedEvents == 0)
    }

    // MARK: Other events

    @Test(arguments: [
        "0E0401030C00",                 // Command Complete for Reset (record 1 of the Android capture)
        "0F0400010C20",                 // Command Status
        "3E0A01000000010203040506",     // LE Connection Complete (truncated for the test, but not ours)
        "3E0112",                       // an LE subevent we do not read
        "3E00",                         // an LE meta event without a subevent
        "0500",                         // any event without parameters
    ])
    func otherEvents(_ hex: String) {
        var decoder = AdvertisementDecoder()
        #expect(decoder.reports(in: bytes(hex)).isEmpty)
        #expect(decoder.counters == .expect(events: 1, otherEvents: 1))
    }

    // MARK: Malformed events

    @Test(arguments: [
        ("", HCIEventProblem.truncatedHeader),
        ("3E", .truncatedHeader),
        ("3E0102", .truncatedHeader),                                 // subevent but no report count
        ("3E0302", .lengthMismatch),                                  // says 3, has 1
        ("3E0102FF", .lengthMismatch),                                // says 1, has 2
        ("0E05010320", .lengthMismatch),                              // not ours, but still broken framing
        ("3E020200", .badReportCount),                                // legacy, zero reports
        ("3E02021A", .badReportCount),                                // legacy, 26 reports (max 25)
        ("3E020D00", .badReportCount),                                // extended, zero reports
        ("3E020D0B", .badReportCount),                                // extended, 11 reports (max 10)
        ("3E09020100015C31A47A4C", .truncatedReport),                 // report header cut short
        ("3E0E02010001A47A4C3E315C05020106", .truncatedReport),     // data length past the end
        ("3E0D02010001A47A4C3E315C00C9FF", .trailingBytes),         // a byte after the RSSI
        ("3E0C02020001A47A4C3E315C00C9", .truncatedReport),         // count 2, one report
        ("3E0C020100015C31A47A4C3E5C0000000000", .lengthMismatch),
    ])
    func malformedEvents(_ hex: String, _ problem: HCIEventProblem) {
        let event = bytes(hex)
        #expect(classify(event) == .malformed(problem))
        var decoder = AdvertisementDecoder()
        #expect(decoder.reports(in: event).isEmpty)
        #expect(decoder.counters == .expect(events: 1, malformedEvents: 1))
    }

    @Test func legacyDataLongerThan31() {
        var event = HCIEventBuilder.legacyReport([.init(address: BluetoothAddress(rawValue: 1),
                                                        data: Array(repeating: 0, count: 32), rssi: -50)])
        #expect(classify(event) == .malformed(.dataTooLong))
        event = HCIEventBuilder.legacyReport([.init(address: BluetoothAddress(rawValue: 1),
                                                    data: Array(repeating: 0, count: 31), rssi: -50)])
        #expect(classify(event) == .advertisingReports(count: 1))
    }

    @Test func extendedMalformed() {
        let report = Self.extendedReport(eventType: 0, rssi: 0xC0, data: bytes("020106"))
        #expect(classify(Self.extendedEvent([report])) == .advertisingReports(count: 1))
        var short = Self.extendedEvent([Array(report.dropLast())])
        short[3] = 1
        #expect(classify(short) == .malformed(.truncatedReport))
        var trailing = Self.extendedEvent([report + [0]])
        trailing[3] = 1
        #expect(classify(trailing) == .malformed(.trailingBytes))
        var lying = Self.extendedEvent([report, report])
        lying[3] = 3
        #expect(classify(lying) == .malformed(.truncatedReport))
    }

    @Test func aGoodReportIsNotDeliveredFromAnEventBrokenFurtherOn() {
        var event = Self.iBeaconEvent + Self.iBeaconEvent.dropFirst(4)   // two reports' bytes
        event[1] = UInt8(event.count - 2)
        event[3] = 3                                                        // but claims three
        var decoder = AdvertisementDecoder()
        #expect(decoder.reports(in: event).isEmpty)
        #expect(decoder.counters == .expect(events: 1, malformedEvents: 1))
    }

    @Test func malformedAdvertisingDataIsCountedPerReport() {
        let event = HCIEventBuilder.legacyReport([
            .init(address: BluetoothAddress(rawValue: 1), data: bytes("0201060501"), rssi: -50),   // runs past the end
            .init(address: BluetoothAddress(rawValue: 2), data: bytes("020106"), rssi: -50),
        ])
        var decoder = AdvertisementDecoder()
        #expect(decoder.reports(in: event).map(\.result) == [.malformed, .noBeacon])
        #expect(decoder.counters == .expect(events: 1, advertisingEvents: 1, reports: 2, malformedData: 1, notBeacons: 1))
        #expect(decoder.counters.malformed == 1)
    }

    /// Every input in exactly one counter, over a mixture of everything above.
    @Test func countersAddUpOverAMixture() {
        var decoder = AdvertisementDecoder()
        let events = [Self.iBeaconEvent, Self.altBeaconEvent, Self.tlmEvent, Self.twoReports, Self.extendedEvent,
                      bytes("0E0401030C00"), bytes("3E020200"), bytes("3E"), [], bytes("3E0112")]
        for event in events { _ = decoder.reports(in: event) }
        #expect(decoder.counters == .expect(events: 10, advertisingEvents: 5, otherEvents: 2, malformedEvents: 3,
                                            reports: 6, notBeacons: 3, beacons: 3))
        #expect(decoder.counters.addsUp)
    }

    @Test func decodeBeaconsDeliversOnlyBeacons() {
        var decoder = AdvertisementDecoder()
        var seen: [Beacon] = []
        for event in [Self.iBeaconEvent, Self.twoReports, Self.altBeaconEvent] {
            event.withUnsafeBytes { raw in decoder.decodeBeacons(event: raw) { _, beacon in seen.append(beacon) } }
        }
        #expect(seen.map(\.format) == ["ibeacon", "altbeacon"])
        #expect(decoder.counters.notBeacons == 2)
    }

    // MARK: Commands

    @Test func commandPackets() throws {
        #expect(HCICommand.leSetScanEnable(true).h4Packet == bytes("010C20020100"))
        #expect(HCICommand.leSetScanParameters(active: false).h4Packet == bytes("010B2007 00 6000 6000 00 00"))
        #expect(HCICommand.leSetEventMask.parameters == bytes("0210000000000000"))
        let data = AdvertisingData.iBeacon(IBeacon(uuid: airLocate, major: 1, minor: 2, txPower: -59))
        let command = try #require(HCICommand.leSetAdvertisingData(data))
        #expect(command.parameters.count == 32)
        #expect(command.parameters.first == 30)
        #expect(HCICommand.leSetAdvertisingData(Array(repeating: 0, count: 32)) == nil)
        #expect(HCICommand.leSetAdvertisingParameters(interval: 1).parameters.prefix(4) == [0xA0, 0x00, 0xA0, 0x00])
    }

    @Test func commandResponses() {
        let complete = bytes("0E0401030C00")   // Reset complete, record 1 of btsnoop-rs_hci_android.log
        let response = complete.withUnsafeBytes { HCICommandResponse(event: $0) }
        #expect(response?.opcode == 0x0C03)
        #expect(response?.status == 0)
        #expect(response?.returnParameters == [])
        // Read Local Version Information complete, record 9 of the same capture: status then return parameters.
        let version = bytes("0E0C010110000BCB200B0F000962").withUnsafeBytes { HCICommandResponse(event: $0) }
        #expect(version?.opcode == 0x1001)
        #expect(version?.returnParameters == bytes("0BCB200B0F000962"))
        let status = bytes("0F040C010C20").withUnsafeBytes { HCICommandResponse(event: $0) }
        #expect(status?.opcode == 0x200C)
        #expect(status?.status == 0x0C)
        #expect(HCIStatus.describe(0x0C) == "command disallowed")
        #expect(HCIStatus.describe(0x42) == "status 0x42")
        #expect(bytes("0E0501032000").withUnsafeBytes { HCICommandResponse(event: $0) } == nil)
        #expect(bytes("3E0112").withUnsafeBytes { HCICommandResponse(event: $0) } == nil)
    }
}

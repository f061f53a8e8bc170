import BeaconKit
import Wire
import Simulation
import Testing

/// The three real captures in `Tests/Fixtures/captures` (origins in its README.md), read with
/// our btsnoop reader and advertising decoder. The numbers were established by reading the
/// files record by record; each is asserted exactly.
@Suite("Real captures")
struct CaptureTests {
    @Test(arguments: Fixture.allCases)
    func parsesCleanly(_ fixture: Fixture) throws {
        let summary = try CaptureSummary(fixture.bytes)
        #expect(!summary.truncatedTail)
        #expect(summary.counters.malformedEvents == 0)
        #expect(summary.counters.malformedData == 0)
        #expect(summary.counters.malformed == 0)
        #expect(summary.counters.beacons == 0)
        #expect(summary.counters.addsUp)
    }

    /// bertrandmartel/btsnoop-decoder `snoop-files/btsnoop_hci.log`: an Android H4 log of LE
    /// scanning (2015). 69 records: 22 commands (LE Set Scan Parameters / Enable) and 47 events,
    /// 15 Command Complete and 32 LE Advertising Reports (subevent 0x02) carrying 59 reports,
    /// 27 events with two (ADV_IND + SCAN_RSP) and 5 with one, from 11 addresses: BeeWi
    /// sensors (manufacturer data of company 0x000D), two "Flower power" plant sensors, an
    /// Apple handoff advert (company 0x004C, type 0x0C) and a HID device (service 0x1812);
    /// no iBeacon. Its last 13 records share one timestamp, three months after the others.
    @Test func decoderHCICapture() throws {
        let summary = try CaptureSummary(Fixture.decoderHCI.bytes)
        #expect(summary.datalink == .h4)
        #expect(summary.records == 69)
        #expect(summary.counters == .expect(events: 47, advertisingEvents: 32, otherEvents: 15,
                                            reports: 59, notBeacons: 59))
        #expect(summary.reports.allSatisfy { $0.kind == .legacy && $0.txPower == nil && $0.rssi != nil })
        #expect(Set(summary.reports.map(\.eventType)) == [0x00, 0x04])
        #expect(summary.reports.filter { $0.eventType == 0x04 }.count == 27)
        #expect(Set(summary.reports.map(\.address)).count == 11)
        #expect(summary.reports.map(\.rssi!).min() == -93)
        #expect(summary.reports.map(\.rssi!).max() == -53)
        #expect(summary.reports.first?.address == BluetoothAddress("5C:31:3E:4C:7A:A4"))
        #expect(summary.reports.first?.data == bytes("0201060AFF0D0007065009040B00"))
        // The Apple advert is manufacturer data of company 0x004C, type 0x0C: not an iBeacon.
        #expect(summary.reports.contains { $0.data == bytes("02011A13FF4C000C0E00F60FA7EC74A0C3225578F5B49A") })
        #expect(summary.first == CaptureTime(iso8601: "2015-10-14T07:59:27.890Z")! + 0.000118)
        #expect(summary.last == CaptureTime(iso8601: "2016-01-21T19:37:38.738Z")! + 0.000833)
    }

    /// mauricelam/btsnoop-rs `src/testdata/btsnoop_hci_android.log`: an Android H4 log (2023)
    /// of a controller set up for extended scanning. 222 records: 105 commands, 105 Command
    /// Complete events and 12 LE Extended Advertising Reports (subevent 0x0D), one report each,
    /// all complete (no fragments), all from 4D:AB:43:2A:3F:10: 6 legacy ADV_IND (event type
    /// 0x0013, flags + service UUID 0xFEF3) and 6 legacy SCAN_RSP (0x001B, 0xFEF3 service
    /// data), TX power 127 (not available) in every one.
    @Test func androidExtendedCapture() throws {
        let summary = try CaptureSummary(Fixture.androidHCI.bytes)
        #expect(summary.datalink == .h4)
        #expect(summary.records == 222)
        #expect(summary.counters == .expect(events: 117, advertisingEvents: 12, otherEvents: 105,
                                            reports: 12, notBeacons: 12))
        #expect(summary.reports.allSatisfy { $0.kind == .extended && $0.txPower == nil })
        #expect(summary.reports.map(\.eventType) == Array(repeating: [0x0013, 0x001B], count: 6).flatMap { $0 })
        #expect(Set(summary.reports.map(\.address)) == [BluetoothAddress("4D:AB:43:2A:3F:10")!])
        #expect(summary.reports.map(\.rssi) == [-68, -67, -66, -67, -62, -62, -62, -61, -66, -66, -66, -66])
        #expect(summary.reports.first?.data == bytes("0201020303F3FE"))
        #expect(summary.first == CaptureTime(iso8601: "2023-01-28T02:48:36.395Z")! + 0.000644)
        #expect(summary.last == CaptureTime(iso8601: "2023-01-28T02:48:46.974Z")! + 0.000644)
    }

    /// mauricelam/btsnoop-rs `src/testdata/btsnoop_btmon.log`: `btmon -w` output (datalink 2001,
    /// 2023). 554 records: 350 user-logging and 2 system notes, 3 control open / 1 close,
    /// 36 control commands and 45 control events (mgmt), 1 new index, 2 open index, 2 index
    /// info, 1 close index, 55 HCI commands and 56 HCI events (55 Command Complete and one
    /// LE Advertising Set Terminated, subevent 0x12). No advertising reports at all.
    @Test func btmonCapture() throws {
        let capture = try Fixture.btmon.bytes
        let summary = try CaptureSummary(capture)
        #expect(summary.datalink == .monitor)
        #expect(summary.records == 554)
        #expect(summary.counters == .expect(events: 56, otherEvents: 56))
        #expect(summary.reports.isEmpty)
        #expect(summary.first == CaptureTime(iso8601: "2023-10-02T00:32:01.350Z")! + 0.000268)

        var opcodes: [UInt16: Int] = [:]
        var indexes: [UInt16: Int] = [:]
        try capture.withUnsafeBytes { raw in
            var reader = try BtsnoopReader(bytes: raw)
            while let record = reader.next() {
                opcodes[UInt16(truncatingIfNeeded: record.flags), default: 0] += 1
                indexes[record.controllerIndex(datalink: .monitor), default: 0] += 1
                #expect(record.originalLength == record.data.count)
                #expect(record.drops == 0)
            }
        }
        typealias Op = Btsnoop.MonitorOpcode
        #expect(opcodes == [Op.userLogging.rawValue: 350, Op.systemNote.rawValue: 2, Op.ctrlOpen.rawValue: 3,
                            Op.ctrlClose.rawValue: 1, Op.ctrlCommand.rawValue: 36, Op.ctrlEvent.rawValue: 45,
                            Op.newIndex.rawValue: 1, Op.openIndex.rawValue: 2, Op.indexInfo.rawValue: 2,
                            Op.closeIndex.rawValue: 1, Op.commandPacket.rawValue: 55, Op.eventPacket.rawValue: 56])
        #expect(indexes == [0: 196, 0xFFFF: 358])   // hci0, and "no controller" for notes and mgmt
    }

    // MARK: Reader edge cases

    @Test(arguments: [
        ([UInt8](), "0 bytes is shorter than the 16-byte header"),
        (Array("btsnoop\0".utf8) + [0, 0, 0, 1, 0, 0, 3], "15 bytes is shorter than the 16-byte header"),
        (Array("btsnoo\0\0".utf8) + [0, 0, 0, 1, 0, 0, 3, 0xEA], "missing the \"btsnoop\" magic"),
        (Array("btsnoop\0".utf8) + [0, 0, 0, 2, 0, 0, 3, 0xEA], "version 2, only version 1 exists"),
        (Array("btsnoop\0".utf8) + [0, 0, 0, 1, 0, 0, 3, 0xE8], "datalink 1000 is not one of 1001, 1002, 2001"),
    ] as [([UInt8], String)])
    func unreadableHeaders(_ file: [UInt8], _ reason: String) {
        let result = file.withUnsafeBytes { raw in
            Result { () throws(BtsnoopError) in _ = try BtsnoopReader(bytes: raw) }
        }
        guard case .failure(let error) = result else {
            Issue.record("accepted a bad header")
            return
        }
        #expect(error.reason == reason)
        #expect(error.description == "not a readable btsnoop file: " + reason)
    }

    @Test func truncatedTail() throws {
        var capture = try Fixture.decoderHCI.bytes
        capture.removeLast(3)   // cut into the last record's data
        let summary = try CaptureSummary(capture)
        #expect(summary.truncatedTail)
        #expect(summary.records == 68)

        var headerOnly = try Fixture.decoderHCI.bytes
        headerOnly.removeLast(headerOnly.count - 16 - 10)   // 10 bytes of the first record header
        let empty = try CaptureSummary(headerOnly)
        #expect(empty.truncatedTail)
        #expect(empty.records == 0)

        let exact = try CaptureSummary(Array(Fixture.decoderHCI.bytes.prefix(16)))
        #expect(!exact.truncatedTail)
        #expect(exact.records == 0)
    }

    // MARK: Writer

    @Test(arguments: [Btsnoop.Datalink.h4, .hci, .monitor])
    func writerRoundTrip(_ datalink: Btsnoop.Datalink) throws {
        let events = [HCIEventTests.iBeaconEvent, HCIEventTests.twoReports, HCIEventTests.extendedEvent,
                      bytes("0E0401030C00")]
        let times = [CaptureTime(iso8601: "2026-11-21T09:30:00.125Z")!, CaptureTime(nanoseconds: 0),
                     CaptureTime(iso8601: "1999-12-31T23:59:59.999Z")! + 0.000999, CaptureTime(nanoseconds: 1_800_000_000_000_001_000)]
        var writer = BtsnoopWriter(datalink: datalink)
        for (event, time) in zip(events, times) { writer.appendEvent(event, at: time) }
        writer.append([0x01, 0x03, 0x0C, 0x00], flags: datalink == .monitor ? 2 : 0x2, at: times[0])

        var read: [([UInt8], CaptureTime, UInt32)] = []
        var readDatalink: Btsnoop.Datalink?
        var tail = true
        try writer.bytes.withUnsafeBytes { raw in
            var reader = try BtsnoopReader(bytes: raw)
            readDatalink = reader.datalink
            while let record = reader.next() {
                #expect(record.originalLength == record.data.count)
                if let event = record.hciEvent(datalink: reader.datalink) {
                    read.append((Array(event), record.timestamp, record.flags))
                }
            }
            tail = reader.truncatedTail
        }
        #expect(readDatalink == datalink)
        #expect(!tail)
        #expect(read.map(\.0) == events)              // the command record is not an event
        #expect(read.map(\.1) == times)               // microsecond timestamps survive exactly
        #expect(Array(writer.bytes.prefix(16)) == Array("btsnoop\0".utf8) + [0, 0, 0, 1]
                    + [0, 0, UInt8(datalink.rawValue >> 8), UInt8(datalink.rawValue & 0xFF)])
    }

    @Test func writerRecordLayout() {
        var writer = BtsnoopWriter(datalink: .h4)
        writer.appendEvent([0x0E, 0x01, 0x00], at: CaptureTime(nanoseconds: 1_500_000))
        // original length 4, included length 4, flags 3 (received event), drops 0,
        // timestamp 0x00DCDDB30F2F8000 + 1500 µs, then the H4 type and the event.
        #expect(Array(writer.bytes.dropFirst(16)) == bytes("00000004 00000004 00000003 00000000 00DCDDB30F2F85DC 04 0E0100"))
    }

    @Test func simulatorCapturesReadBack() throws {
        let simulation = StoreSimulation(customers: 3, duration: 30, seed: 11)
        let captures = simulation.captures()
        #expect(Set(captures.keys) == ["door", "counter"])
        for (_, writer) in captures {
            let summary = try CaptureSummary(writer.bytes)
            #expect(summary.datalink == .h4)
            #expect(!summary.truncatedTail)
            #expect(summary.counters.malformed == 0)
            #expect(summary.counters.beacons > 0)
            #expect(summary.counters.notBeacons > 0)    // the bystanders' phones
            #expect(summary.counters.addsUp)
            #expect(summary.first.map { $0 >= simulation.start } == true)
        }
    }
}

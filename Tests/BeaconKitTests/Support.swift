import BeaconKit
import Wire
import Foundation

/// Bytes from a hex string written as in the sources we quote (spaces allowed).
func bytes(_ hex: String) -> [UInt8] {
    guard let decoded = Hex.decode(hex) else { fatalError("bad hex in a test: \(hex)") }
    return decoded
}

/// One report copied out of the borrowed `AdvertisingReport`, for assertions.
struct CopiedReport: Equatable {
    var kind: AdvertisingReport.Kind
    var eventType: UInt16
    var addressType: UInt8
    var address: BluetoothAddress
    var rssi: Int8?
    var txPower: Int8?
    var data: [UInt8]
    var result: AdvertisingDataResult
}

extension AdvertisementDecoder {
    /// Decodes one event and returns its reports as values.
    mutating func reports(in event: [UInt8]) -> [CopiedReport] {
        var out: [CopiedReport] = []
        decode(event: event) { report, result in
            out.append(CopiedReport(kind: report.kind, eventType: report.eventType, addressType: report.addressType,
                                    address: report.address, rssi: report.rssi, txPower: report.txPower,
                                    data: Array(report.data), result: result))
        }
        return out
    }
}

func decodeBeacon(_ data: [UInt8]) -> AdvertisingDataResult {
    data.withUnsafeBytes { AdvertisingData.decodeBeacon($0) }
}

func classify(_ event: [UInt8]) -> HCIEventKind {
    event.withUnsafeBytes { HCIEvent.classify($0) }
}

/// The real captures in `Tests/Fixtures/captures` (origin in its README.md).
enum Fixture: String, CaseIterable, CustomStringConvertible {
    case decoderHCI = "btsnoop-decoder_hci.log"
    case androidHCI = "btsnoop-rs_hci_android.log"
    case btmon = "btsnoop-rs_btmon.log"

    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/captures")

    var bytes: [UInt8] {
        get throws { try [UInt8](Data(contentsOf: Self.directory.appendingPathComponent(rawValue))) }
    }

    var description: String { rawValue }
}

/// What a capture holds, as counted by our reader and decoder.
struct CaptureSummary: Equatable {
    var datalink: Btsnoop.Datalink
    var records = 0
    var truncatedTail = false
    var counters = DecodeCounters()
    var reports: [CopiedReport] = []
    var first: CaptureTime?
    var last: CaptureTime?

    init(_ capture: [UInt8]) throws {
        var (datalink, records, truncated, first, last) = (Btsnoop.Datalink.h4, 0, false, CaptureTime?.none, CaptureTime?.none)
        var decoder = AdvertisementDecoder()
        var reports: [CopiedReport] = []
        try capture.withUnsafeBytes { raw in
            var reader = try BtsnoopReader(bytes: raw)
            datalink = reader.datalink
            while let record = reader.next() {
                first = first ?? record.timestamp
                last = record.timestamp
                guard let event = record.hciEvent(datalink: reader.datalink) else { continue }
                decoder.decode(event: event) { report, result in
                    reports.append(CopiedReport(kind: report.kind, eventType: report.eventType,
                                                addressType: report.addressType, address: report.address,
                                                rssi: report.rssi, txPower: report.txPower,
                                                data: Array(report.data), result: result))
                }
            }
            records = reader.recordsRead
            truncated = reader.truncatedTail
        }
        self.datalink = datalink
        self.records = records
        self.truncatedTail = truncated
        self.counters = decoder.counters
        self.reports = reports
        self.first = first
        self.last = last
    }
}

extension DecodeCounters {
    /// Builds expected counters with named values (the rest zero).
    static func expect(events: Int = 0, advertisingEvents: Int = 0, otherEvents: Int = 0, malformedEvents: Int = 0,
                       reports: Int = 0, fragments: Int = 0, malformedData: Int = 0, notBeacons: Int = 0,
                       beacons: Int = 0) -> DecodeCounters {
        var c = DecodeCounters()
        c.events = events
        c.advertisingEvents = advertisingEvents
        c.otherEvents = otherEvents
        c.malformedEvents = malformedEvents
        c.reports = reports
        c.fragments = fragments
        c.malformedData = malformedData
        c.notBeacons = notBeacons
        c.beacons = beacons
        return c
    }

    /// Every event in exactly one class, every report in exactly one class.
    var addsUp: Bool {
        events == advertisingEvents + otherEvents + malformedEvents
            && reports == beacons + notBeacons + malformedData
    }
}

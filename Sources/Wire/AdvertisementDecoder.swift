public import BeaconKit

/// Counts of what the decoder saw; every skipped input lands in exactly one counter.
public struct DecodeCounters: Sendable, Equatable {
    /// HCI events handed to the decoder.
    public var events = 0
    /// Events that were LE advertising reports and well formed.
    public var advertisingEvents = 0
    /// Events of other kinds (command complete, connection events, …): not errors.
    public var otherEvents = 0
    /// Events skipped for their framing (bad count, truncation, trailing bytes).
    public var malformedEvents = 0
    /// Reports delivered from well-formed events.
    public var reports = 0
    /// Extended-report fragments skipped (a beacon never needs reassembly).
    public var fragments = 0
    /// Reports whose advertising data had broken AD structures.
    public var malformedData = 0
    /// Reports with well-formed data but no beacon.
    public var notBeacons = 0
    /// Reports that carried a beacon.
    public var beacons = 0

    public init() {}

    /// Inputs skipped as malformed, the number a health message reports as "dropped".
    public var malformed: Int { malformedEvents + malformedData }
}

/// Turns HCI events into beacons, counting everything it skips.
///
/// A value type owned by its caller; it allocates nothing per event.
public struct AdvertisementDecoder: Sendable {
    public private(set) var counters = DecodeCounters()

    public init() {}

    /// Decodes every report in `event`, calling `body` for each with what its data holds.
    public mutating func decode(
        event: UnsafeRawBufferPointer,
        _ body: (borrowing AdvertisingReport, AdvertisingDataResult) -> Void
    ) {
        counters.events += 1
        var delivered = 0
        let kind = HCIEvent.forEachAdvertisingReport(in: event) { report in
            delivered += 1
            let result = AdvertisingData.decodeBeacon(report.data)
            switch result {
            case .beacon: counters.beacons += 1
            case .noBeacon: counters.notBeacons += 1
            case .malformed: counters.malformedData += 1
            }
            body(report, result)
        }
        switch kind {
        case .advertisingReports(let count):
            counters.advertisingEvents += 1
            counters.reports += delivered
            counters.fragments += count - delivered
        case .otherEvent:
            counters.otherEvents += 1
        case .malformed:
            counters.malformedEvents += 1
        }
    }

    /// Decodes `event`, calling `body` only for reports that carry a beacon.
    public mutating func decodeBeacons(
        event: UnsafeRawBufferPointer,
        _ body: (borrowing AdvertisingReport, Beacon) -> Void
    ) {
        decode(event: event) { report, result in
            if case .beacon(let beacon) = result { body(report, beacon) }
        }
    }

    /// Convenience for arrays (tests, the command line).
    public mutating func decode(
        event: [UInt8],
        _ body: (borrowing AdvertisingReport, AdvertisingDataResult) -> Void
    ) {
        event.withUnsafeBytes { decode(event: $0, body) }
    }
}

public import BeaconKit

/// One advertising report inside an HCI LE Advertising Report event, borrowed from the
/// event's bytes: valid only inside the closure that receives it.
public struct AdvertisingReport {
    public enum Kind: Sendable, Equatable {
        /// LE Advertising Report (subevent 0x02).
        case legacy
        /// LE Extended Advertising Report (subevent 0x0D).
        case extended
    }

    public var kind: Kind
    /// The legacy PDU type (0–4), or the extended event-type bit field.
    public var eventType: UInt16
    public var addressType: UInt8
    public var address: BluetoothAddress
    /// Received signal strength in dBm; `nil` where the controller says 127, "not available".
    public var rssi: Int8?
    /// The advertiser's TX power from an extended report, in dBm; `nil` when absent.
    public var txPower: Int8?
    /// The advertising data: AD structures.
    public var data: UnsafeRawBufferPointer
}

/// Why an HCI event was not turned into reports.
public enum HCIEventProblem: String, Sendable, Equatable, CustomStringConvertible {
    case truncatedHeader = "event shorter than its header"
    case lengthMismatch = "parameter length does not match the bytes"
    case badReportCount = "report count out of range"
    case truncatedReport = "report runs past the end of the event"
    case trailingBytes = "bytes left after the last report"
    case dataTooLong = "legacy advertising data longer than 31 bytes"

    public var description: String { rawValue }
}

/// The shape of an HCI event as far as advertising is concerned.
public enum HCIEventKind: Sendable, Equatable {
    case advertisingReports(count: Int)
    case otherEvent
    case malformed(HCIEventProblem)
}

/// Parses HCI events (starting at the event code, without the H4 packet-type byte).
public enum HCIEvent {
    public static let leMetaEvent: UInt8 = 0x3E
    public static let commandComplete: UInt8 = 0x0E
    public static let commandStatus: UInt8 = 0x0F
    public static let leAdvertisingReport: UInt8 = 0x02
    public static let leExtendedAdvertisingReport: UInt8 = 0x0D
    /// RSSI and TX power value meaning "not available".
    public static let notAvailable: Int8 = 127

    static let legacyReportHeader = 9   // type, address type, address, data length
    static let extendedReportHeader = 24

    /// Validates an event completely, then calls `body` once per complete report.
    ///
    /// Validation runs first so a report is never delivered from an event whose framing
    /// is wrong further on. Extended reports that are fragments of a longer
    /// advertisement (data status ≠ complete) are skipped: a beacon always fits in one.
    @discardableResult
    public static func forEachAdvertisingReport(
        in event: UnsafeRawBufferPointer,
        _ body: (borrowing AdvertisingReport) -> Void
    ) -> HCIEventKind {
        let kind = classify(event)
        guard case .advertisingReports(let count) = kind else { return kind }
        var offset = 4
        if event[2] == leAdvertisingReport {
            for _ in 0..<count {
                let length = Int(event[offset + 8])
                let raw = Int8(bitPattern: event[offset + 9 + length])
                body(AdvertisingReport(
                    kind: .legacy,
                    eventType: UInt16(event[offset]),
                    addressType: event[offset + 1],
                    address: BluetoothAddress(littleEndian: event, at: offset + 2),
                    rssi: raw == notAvailable ? nil : raw,
                    txPower: nil,
                    data: UnsafeRawBufferPointer(rebasing: event[(offset + 9)..<(offset + 9 + length)])))
                offset += legacyReportHeader + length + 1
            }
        } else {
            for _ in 0..<count {
                let eventType = UInt16(event[offset]) | UInt16(event[offset + 1]) << 8
                let length = Int(event[offset + 23])
                let dataStart = offset + extendedReportHeader
                if (eventType >> 5) & 0x3 == 0 {
                    let tx = Int8(bitPattern: event[offset + 12])
                    let raw = Int8(bitPattern: event[offset + 13])
                    body(AdvertisingReport(
                        kind: .extended,
                        eventType: eventType,
                        addressType: event[offset + 2],
                        address: BluetoothAddress(littleEndian: event, at: offset + 3),
                        rssi: raw == notAvailable ? nil : raw,
                        txPower: tx == notAvailable ? nil : tx,
                        data: UnsafeRawBufferPointer(rebasing: event[dataStart..<(dataStart + length)])))
                }
                offset = dataStart + length
            }
        }
        return kind
    }

    /// Whether `event` (starting at the event code) is an LE Meta event carrying legacy or
    /// extended advertising reports, judged by its header alone: cheap enough for every
    /// event a live source reads.
    public static func isAdvertisingReport(_ event: [UInt8]) -> Bool {
        event.count >= 3 && event[0] == leMetaEvent
            && (event[2] == leAdvertisingReport || event[2] == leExtendedAdvertisingReport)
    }

    /// Checks header, lengths and report count without delivering anything.
    public static func classify(_ event: UnsafeRawBufferPointer) -> HCIEventKind {
        guard event.count >= 2 else { return .malformed(.truncatedHeader) }
        guard Int(event[1]) == event.count - 2 else { return .malformed(.lengthMismatch) }
        guard event[0] == leMetaEvent, event.count >= 3 else { return .otherEvent }
        let subevent = event[2]
        guard subevent == leAdvertisingReport || subevent == leExtendedAdvertisingReport else {
            return .otherEvent
        }
        guard event.count >= 4 else { return .malformed(.truncatedHeader) }
        let count = Int(event[3])
        var offset = 4
        if subevent == leAdvertisingReport {
            guard (1...25).contains(count) else { return .malformed(.badReportCount) }
            for _ in 0..<count {
                guard offset + legacyReportHeader <= event.count else { return .malformed(.truncatedReport) }
                let length = Int(event[offset + 8])
                guard length <= 31 else { return .malformed(.dataTooLong) }
                offset += legacyReportHeader + length + 1
                guard offset <= event.count else { return .malformed(.truncatedReport) }
            }
        } else {
            guard (1...10).contains(count) else { return .malformed(.badReportCount) }
            for _ in 0..<count {
                guard offset + extendedReportHeader <= event.count else { return .malformed(.truncatedReport) }
                offset += extendedReportHeader + Int(event[offset + 23])
                guard offset <= event.count else { return .malformed(.truncatedReport) }
            }
        }
        guard offset == event.count else { return .malformed(.trailingBytes) }
        return .advertisingReports(count: count)
    }
}

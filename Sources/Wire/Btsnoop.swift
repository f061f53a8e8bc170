public import BeaconKit

/// The btsnoop capture format (RFC 1761 style), as written by `btmon -w`, Android's HCI
/// snoop log and our own simulator.
public enum Btsnoop {
    public static let magic: [UInt8] = Array("btsnoop\0".utf8)
    public static let headerLength = 16
    public static let recordHeaderLength = 24
    /// Microseconds from 0000-01-01 (the format's epoch) to 1970-01-01.
    public static let unixEpochMicroseconds: Int64 = 0x00DC_DDB3_0F2F_8000

    public enum Datalink: UInt32, Sendable, CustomStringConvertible {
        /// Unencapsulated HCI: the flags say whether a packet is a command or event.
        case hci = 1001
        /// H4: every packet starts with its H4 type byte.
        case h4 = 1002
        /// BlueZ monitor (`btmon -w`): the flags carry controller index and opcode.
        case monitor = 2001

        public var description: String {
            switch self {
            case .hci: "1001 (unencapsulated HCI)"
            case .h4: "1002 (H4)"
            case .monitor: "2001 (BlueZ monitor)"
            }
        }
    }

    /// BlueZ monitor opcodes (the low 16 bits of a 2001 record's flags).
    public enum MonitorOpcode: UInt16, Sendable {
        case newIndex = 0, deleteIndex = 1, commandPacket = 2, eventPacket = 3
        case aclTx = 4, aclRx = 5, scoTx = 6, scoRx = 7, openIndex = 8, closeIndex = 9
        case indexInfo = 10, vendorDiag = 11, systemNote = 12, userLogging = 13
        case ctrlOpen = 14, ctrlClose = 15, ctrlCommand = 16, ctrlEvent = 17
        case isoTx = 18, isoRx = 19
    }
}

public struct BtsnoopError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "not a readable btsnoop file: \(reason)" }
}

/// One record of a capture, borrowed from the file's bytes.
public struct BtsnoopRecord {
    public var originalLength: Int
    public var flags: UInt32
    public var drops: UInt32
    public var timestamp: CaptureTime
    public var data: UnsafeRawBufferPointer

    /// The HCI event in this record (starting at the event code), if it is one.
    public func hciEvent(datalink: Btsnoop.Datalink) -> UnsafeRawBufferPointer? {
        switch datalink {
        case .h4:
            guard data.count >= 1, data[0] == H4PacketType.event.rawValue else { return nil }
            return UnsafeRawBufferPointer(rebasing: data[1...])
        case .hci:
            return flags & 0x3 == 0x3 ? data : nil
        case .monitor:
            return flags & 0xFFFF == UInt32(Btsnoop.MonitorOpcode.eventPacket.rawValue) ? data : nil
        }
    }

    /// The controller index of a monitor record (0 for the other formats).
    public func controllerIndex(datalink: Btsnoop.Datalink) -> UInt16 {
        datalink == .monitor ? UInt16(truncatingIfNeeded: flags >> 16) : 0
    }
}

/// Reads records from a whole capture held in memory.
public struct BtsnoopReader {
    public let datalink: Btsnoop.Datalink
    private let bytes: UnsafeRawBufferPointer
    private var offset = Btsnoop.headerLength
    /// Set when the file ends inside a record (a capture cut off while being written).
    public private(set) var truncatedTail = false
    public private(set) var recordsRead = 0

    /// Checks the header; the bytes must outlive the reader.
    public init(bytes: UnsafeRawBufferPointer) throws(BtsnoopError) {
        guard bytes.count >= Btsnoop.headerLength else {
            throw BtsnoopError("\(bytes.count) bytes is shorter than the 16-byte header")
        }
        guard bytes.prefix(8).elementsEqual(Btsnoop.magic) else {
            throw BtsnoopError("missing the \"btsnoop\" magic")
        }
        var cursor = ByteCursor(bytes, offset: 8)
        let version = cursor.u32be()!
        guard version == 1 else { throw BtsnoopError("version \(version), only version 1 exists") }
        let rawDatalink = cursor.u32be()!
        guard let datalink = Btsnoop.Datalink(rawValue: rawDatalink) else {
            throw BtsnoopError("datalink \(rawDatalink) is not one of 1001, 1002, 2001")
        }
        self.bytes = bytes
        self.datalink = datalink
    }

    /// The next record, or `nil` at the end (check `truncatedTail`).
    public mutating func next() -> BtsnoopRecord? {
        var cursor = ByteCursor(bytes, offset: offset)
        guard !cursor.isAtEnd else { return nil }
        guard let original = cursor.u32be(), let included = cursor.u32be(), let flags = cursor.u32be(),
              let drops = cursor.u32be(), let time = cursor.u64be(),
              let data = cursor.slice(Int(included))
        else {
            truncatedTail = true
            offset = bytes.count
            return nil
        }
        offset = cursor.offset
        recordsRead += 1
        let micros = Int64(bitPattern: time) &- Btsnoop.unixEpochMicroseconds
        return BtsnoopRecord(originalLength: Int(original), flags: flags, drops: drops,
                             timestamp: CaptureTime(nanoseconds: micros &* 1000), data: data)
    }
}

/// Writes a capture into memory; `bytes` is a complete file at any moment.
public struct BtsnoopWriter: Sendable {
    public private(set) var bytes: [UInt8]
    public let datalink: Btsnoop.Datalink

    public init(datalink: Btsnoop.Datalink = .h4) {
        self.datalink = datalink
        bytes = Btsnoop.magic + bigEndian(1, 4) + bigEndian(UInt64(datalink.rawValue), 4)
    }

    /// Appends a record as it is; flags as the format defines them.
    public mutating func append(_ data: [UInt8], flags: UInt32, at time: CaptureTime) {
        let micros = time.nanoseconds / 1000 + Btsnoop.unixEpochMicroseconds
        bytes += bigEndian(UInt64(data.count), 4) + bigEndian(UInt64(data.count), 4)
            + bigEndian(UInt64(flags), 4) + bigEndian(0, 4) + bigEndian(UInt64(bitPattern: micros), 8)
        bytes += data
    }

    /// Appends an HCI event (starting at the event code) received from the controller.
    public mutating func appendEvent(_ event: [UInt8], at time: CaptureTime) {
        switch datalink {
        case .h4: append([H4PacketType.event.rawValue] + event, flags: 0x3, at: time)
        case .hci: append(event, flags: 0x3, at: time)
        case .monitor: append(event, flags: UInt32(Btsnoop.MonitorOpcode.eventPacket.rawValue), at: time)
        }
    }
}

func bigEndian(_ value: UInt64, _ count: Int) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(count - 1 - $0))) }
}

/// H4 (UART) packet types: the byte before every HCI packet on a byte stream.
public enum H4PacketType: UInt8, Sendable {
    case command = 0x01
    case acl = 0x02
    case sco = 0x03
    case event = 0x04
    case iso = 0x05

    /// Header length after the type byte, and where the payload length sits in it.
    var header: (length: Int, lengthOffset: Int, lengthBytes: Int) {
        switch self {
        case .command: (3, 2, 1)
        case .acl: (4, 2, 2)
        case .sco: (3, 2, 1)
        case .event: (2, 1, 1)
        case .iso: (4, 2, 2)
        }
    }
}

/// Splits an H4 byte stream into packets.
///
/// Bytes arrive in arbitrary chunks; complete packets are handed out as borrowed slices
/// of an internal buffer that is reused. A byte that is not a packet type is skipped and
/// counted so that the stream resynchronises after line noise; so is a type byte whose
/// ACL or ISO header announces more than `maxDataLength` bytes, which no controller sends
/// and which would otherwise swallow up to 64 KiB of good packets.
public struct H4Framer: Sendable {
    /// The longest ACL or ISO payload accepted, bytes: Linux's H4 receiver refuses longer
    /// ones too (`HCI_MAX_FRAME_SIZE`, that is `HCI_MAX_ACL_SIZE` 1024 plus the header).
    public static let maxDataLength = 1024

    private var buffer: [UInt8] = []
    private var start = 0
    /// Bytes skipped because they could not start a packet.
    public private(set) var skippedBytes = 0
    /// Complete packets delivered.
    public private(set) var packets = 0

    public init() {
        buffer.reserveCapacity(4096)
    }

    /// Bytes received but not yet a complete packet.
    public var pendingBytes: Int { buffer.count - start }

    /// Appends `bytes` and delivers every packet now complete: `body(type, packet)` where
    /// `packet` starts after the type byte (at the event code for events).
    public mutating func feed(
        _ bytes: UnsafeRawBufferPointer,
        _ body: (H4PacketType, UnsafeRawBufferPointer) -> Void
    ) {
        buffer.append(contentsOf: bytes)
        var skipped = 0
        var delivered = 0
        var cursor = start
        buffer.withUnsafeBytes { all in
            while cursor < all.count {
                guard let type = H4PacketType(rawValue: all[cursor]) else {
                    cursor += 1
                    skipped += 1
                    continue
                }
                let header = type.header
                let headerEnd = cursor + 1 + header.length
                guard headerEnd <= all.count else { break }
                var length = Int(all[cursor + 1 + header.lengthOffset])
                if header.lengthBytes == 2 {
                    length |= Int(all[cursor + 2 + header.lengthOffset]) << 8
                    if type == .iso { length &= 0x3FFF }
                    guard length <= Self.maxDataLength else {
                        cursor += 1
                        skipped += 1
                        continue
                    }
                }
                let end = headerEnd + length
                guard end <= all.count else { break }
                body(type, UnsafeRawBufferPointer(rebasing: all[(cursor + 1)..<end]))
                delivered += 1
                cursor = end
            }
        }
        start = cursor
        skippedBytes += skipped
        packets += delivered
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 4096 {
            buffer.removeSubrange(0..<start)
            start = 0
        }
    }
}

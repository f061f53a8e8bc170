/// A bounds-checked reader over borrowed bytes.
///
/// Every read returns `nil` instead of reading past the end, which is how the parsers
/// turn truncated or lying length fields into a counted skip rather than an over-read.
/// It never copies and never allocates.
public struct ByteCursor {
    public let bytes: UnsafeRawBufferPointer
    public private(set) var offset: Int

    public init(_ bytes: UnsafeRawBufferPointer, offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    /// Bytes left to read.
    public var remaining: Int { bytes.count - offset }

    public var isAtEnd: Bool { offset >= bytes.count }

    public mutating func u8() -> UInt8? {
        guard offset < bytes.count else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func i8() -> Int8? {
        u8().map { Int8(bitPattern: $0) }
    }

    public mutating func u16le() -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { offset += 2 }
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    public mutating func u16be() -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    public mutating func u32be() -> UInt32? {
        guard remaining >= 4 else { return nil }
        var value: UInt32 = 0
        for i in 0..<4 { value = value << 8 | UInt32(bytes[offset + i]) }
        offset += 4
        return value
    }

    public mutating func u32le() -> UInt32? {
        guard remaining >= 4 else { return nil }
        var value: UInt32 = 0
        for i in (0..<4).reversed() { value = value << 8 | UInt32(bytes[offset + i]) }
        offset += 4
        return value
    }

    public mutating func u64be() -> UInt64? {
        guard remaining >= 8 else { return nil }
        var value: UInt64 = 0
        for i in 0..<8 { value = value << 8 | UInt64(bytes[offset + i]) }
        offset += 8
        return value
    }

    /// A borrowed slice of `count` bytes, or `nil` when fewer remain.
    public mutating func slice(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
    }

    public mutating func skip(_ count: Int) -> Bool {
        guard count >= 0, remaining >= count else { return false }
        offset += count
        return true
    }
}

extension UnsafeRawBufferPointer {
    /// Big-endian unsigned integer from `count` (≤ 8) bytes starting at `offset`; the caller
    /// has checked the bounds.
    func bigEndianValue(at offset: Int, count: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<count { value = value << 8 | UInt64(self[offset + i]) }
        return value
    }
}

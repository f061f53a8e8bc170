/// A 128-bit proximity UUID as carried by iBeacon and AltBeacon, stored as two words so
/// that decoding, hashing and comparing never allocate.
public struct BeaconUUID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Reads 16 big-endian bytes; the caller guarantees they exist.
    package init(bytes: UnsafeRawBufferPointer, at offset: Int) {
        precondition(offset >= 0 && offset + 16 <= bytes.count, "a UUID needs 16 bytes")
        high = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self).bigEndian
        low = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self).bigEndian
    }

    /// Parses the canonical `8-4-4-4-12` form or 32 bare hex digits, either case.
    public init?(_ text: some StringProtocol) {
        var nibbles: [UInt8] = []
        nibbles.reserveCapacity(32)
        var index = 0
        for scalar in text.unicodeScalars {
            if scalar == "-" {
                guard [8, 13, 18, 23].contains(index) else { return nil }
            } else {
                guard let nibble = hexNibble(scalar) else { return nil }
                nibbles.append(nibble)
            }
            index += 1
        }
        let dashed = index == 36 && nibbles.count == 32
        let bare = index == 32 && nibbles.count == 32
        guard dashed || bare else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        for i in 0..<16 { high = high << 4 | UInt64(nibbles[i]) }
        for i in 16..<32 { low = low << 4 | UInt64(nibbles[i]) }
        self.init(high: high, low: low)
    }

    /// The 16 bytes in network (big-endian) order.
    public var bytes: [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64($0))) }
            + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64($0))) }
    }

    /// Upper-case canonical form, as iOS prints a proximity UUID.
    public var description: String {
        var writer = JSONWriter(capacity: 36)
        appendCanonical(to: &writer)
        return writer.text
    }

    /// Writes the canonical form without building the 16 bytes first.
    package func appendCanonical(to out: inout JSONWriter) {
        let words = (hexDigits(UInt32(truncatingIfNeeded: high >> 32)), hexDigits(UInt32(truncatingIfNeeded: high)),
                     hexDigits(UInt32(truncatingIfNeeded: low >> 32)), hexDigits(UInt32(truncatingIfNeeded: low)))
        out.reserve(36) { p in
            // 8-4-4-4-12: a word of eight digits holds its first four in its low half (in memory).
            let raw = UnsafeMutableRawPointer(p)
            raw.storeBytes(of: words.0, toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: UInt32(truncatingIfNeeded: words.1), toByteOffset: 9, as: UInt32.self)
            raw.storeBytes(of: UInt32(truncatingIfNeeded: words.1 >> 32), toByteOffset: 14, as: UInt32.self)
            raw.storeBytes(of: UInt32(truncatingIfNeeded: words.2), toByteOffset: 19, as: UInt32.self)
            raw.storeBytes(of: UInt32(truncatingIfNeeded: words.2 >> 32), toByteOffset: 24, as: UInt32.self)
            raw.storeBytes(of: words.3, toByteOffset: 28, as: UInt64.self)
            (p[8], p[13], p[18], p[23]) = (0x2D, 0x2D, 0x2D, 0x2D)  // "-"
        }
    }

    public static func < (lhs: BeaconUUID, rhs: BeaconUUID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }
}

func hexNibble(_ scalar: Unicode.Scalar) -> UInt8? {
    switch scalar.value {
    case 0x30...0x39: return UInt8(scalar.value - 0x30)
    case 0x41...0x46: return UInt8(scalar.value - 0x41 + 10)
    case 0x61...0x66: return UInt8(scalar.value - 0x61 + 10)
    default: return nil
    }
}

let upperHexDigits: [Character] = Array("0123456789ABCDEF")

/// The upper-case hex digit of a nibble, as ASCII.
@inline(__always)
func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 &+ nibble : 0x37 &+ nibble }

/// The eight upper-case hex digits of `value`, most significant first in memory: one
/// digit per byte, without a branch per digit.
@inline(__always)
func hexDigits(_ value: UInt32) -> UInt64 {
    var v = UInt64(value)
    v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF
    v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF
    v = (v | (v << 4)) & 0x0F0F_0F0F_0F0F_0F0F
    // 1 in every byte whose digit is 10 or more: those become letters, 7 past '9' + 1.
    let letters = ((v &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
    return (v &+ 0x3030_3030_3030_3030 &+ letters &* 7).bigEndian
}

func appendHex(_ byte: UInt8, to out: inout String) {
    out.append(upperHexDigits[Int(byte >> 4)])
    out.append(upperHexDigits[Int(byte & 0x0F)])
}

/// Hex helpers shared by the command line, the tests and the payloads.
public enum Hex {
    /// Upper-case hex without separators.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out = ""
        for byte in bytes { appendHex(byte, to: &out) }
        return out
    }

    /// Decodes hex digits, ignoring spaces, colons and tabs between byte pairs;
    /// `nil` for an odd count or a non-hex character.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count / 2)
        var pending: UInt8?
        for scalar in text.unicodeScalars {
            if scalar == " " || scalar == ":" || scalar == "\t" || scalar == "\r" {
                guard pending == nil else { return nil }
                continue
            }
            guard let nibble = hexNibble(scalar) else { return nil }
            if let high = pending {
                out.append(high << 4 | nibble)
                pending = nil
            } else {
                pending = nibble
            }
        }
        return pending == nil ? out : nil
    }
}

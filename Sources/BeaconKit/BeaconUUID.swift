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
    func appendCanonical(to out: inout JSONWriter) {
        let (high, low) = (high, low)
        out.reserve(36) { p in
            var at = 0
            for i in 0..<16 {
                if i == 4 || i == 6 || i == 8 || i == 10 {
                    p[at] = UInt8(ascii: "-")
                    at += 1
                }
                let byte = UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> (56 - 8 * UInt64(i & 7)))
                p[at] = hexDigit(byte >> 4)
                p[at + 1] = hexDigit(byte & 0x0F)
                at += 2
            }
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

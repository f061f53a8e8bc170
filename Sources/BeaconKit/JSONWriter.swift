/// Writes JSON text as UTF-8 bytes; used for every payload so that output is compact and
/// identical byte for byte across runs. Bytes written through a pointer into an array of
/// its own rather than `String` appends: a sighting is written about ten times faster and
/// with one allocation (Benchmarks/, `json/sighting`).
public struct JSONWriter {
    /// Always initialised; the first `length` bytes are the text.
    private var storage: [UInt8]
    private var length = 0

    public init(capacity: Int = 256) {
        storage = [UInt8](repeating: 0, count: max(16, capacity))
    }

    /// The UTF-8 text written so far.
    public var bytes: [UInt8] { Array(storage[..<length]) }

    /// The UTF-8 text, without a copy; the writer is empty afterwards.
    public mutating func takeBytes() -> [UInt8] {
        storage.removeSubrange(length...)
        let text = storage
        storage = []
        length = 0
        return text
    }

    /// The text written so far.
    public var text: String { String(decoding: storage[..<length], as: UTF8.self) }

    /// Bytes written so far.
    public var count: Int { length }

    /// The UTF-8 text written so far, borrowed (to write it out without a copy).
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[..<length])) }
    }

    /// Empties the writer and keeps its storage for the next text.
    public mutating func removeAll() { length = 0 }

    /// Ends a line of JSON lines.
    public mutating func newline() { append(0x0A) }

    /// Hands `body` room for `count` more bytes.
    @inline(__always)
    mutating func reserve(_ count: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Void) {
        if length + count > storage.count {
            storage.append(contentsOf: repeatElement(0, count: max(storage.count, length + count - storage.count)))
        }
        let start = length
        storage.withUnsafeMutableBufferPointer { body($0.baseAddress! + start) }
        length += count
    }

    @inline(__always)
    package mutating func append(_ byte: UInt8) {
        reserve(1) { $0.pointee = byte }
    }

    @inline(__always)
    package mutating func append(_ literal: StaticString) {
        let count = literal.utf8CodeUnitCount
        reserve(count) { $0.update(from: literal.utf8Start, count: count) }
    }

    @inline(__always)
    package mutating func append(_ raw: UnsafeRawBufferPointer) {
        guard let base = raw.baseAddress, raw.count > 0 else { return }
        reserve(raw.count) { $0.update(from: base.assumingMemoryBound(to: UInt8.self), count: raw.count) }
    }

    /// Two upper-case hex digits.
    @inline(__always)
    mutating func appendHex(_ byte: UInt8) {
        reserve(2) { out in
            out[0] = hexDigit(byte >> 4)
            out[1] = hexDigit(byte & 0x0F)
        }
    }

    /// `value` in decimal, zero-padded to at least `width` (≤ 20) digits.
    package mutating func appendDecimal(_ value: UInt64, width: Int = 1) {
        var count = 1
        var v = value / 10
        while v > 0 { count += 1; v /= 10 }
        count = max(count, min(width, 20))
        reserve(count) { out in
            var v = value
            for i in stride(from: count - 1, through: 0, by: -1) {
                out[i] = UInt8(truncatingIfNeeded: v % 10) &+ 0x30
                v /= 10
            }
        }
    }

    public mutating func write(_ value: JSONValue) {
        switch value {
        case .null: append("null")
        case .bool(let b): append(b ? "true" : "false")
        case .number(let n): writeNumber(n)
        case .string(let s): writeString(s)
        case .array(let elements):
            append("[")
            for (i, element) in elements.enumerated() {
                if i > 0 { append(",") }
                write(element)
            }
            append("]")
        case .object(let object):
            append("{")
            for (i, member) in object.members.enumerated() {
                if i > 0 { append(",") }
                writeString(member.key)
                append(":")
                write(member.value)
            }
            append("}")
        }
    }

    /// Integers print without a fraction; non-finite numbers print as `null`.
    public mutating func writeNumber(_ n: Double) {
        if !n.isFinite {
            append("null")
        } else if n == n.rounded(), abs(n) < 1e15 {
            writeInteger(Int64(n))
        } else {
            var description = String(n)
            description.withUTF8 { append(UnsafeRawBufferPointer($0)) }
        }
    }

    /// Decimal digits, with a minus sign when negative.
    public mutating func writeInteger(_ value: Int64) {
        if value < 0 {
            append("-")
            // Int64.min has no positive counterpart: write its magnitude as unsigned.
            appendDecimal(UInt64(bitPattern: 0 &- value))
        } else {
            appendDecimal(UInt64(value))
        }
    }

    public mutating func writeString(_ s: String) {
        append("\"")
        let written: Void? = s.utf8.withContiguousStorageIfAvailable { utf8 in
            escape(UnsafeRawBufferPointer(utf8))
        }
        if written == nil {
            var copy = s
            copy.withUTF8 { escape(UnsafeRawBufferPointer($0)) }
        }
        append("\"")
    }

    /// Appends `utf8` with the characters JSON requires escaped, in runs between them.
    private mutating func escape(_ utf8: UnsafeRawBufferPointer) {
        var pending = 0
        for (index, c) in utf8.enumerated() where c == 0x22 || c == 0x5C || c < 0x20 {
            append(UnsafeRawBufferPointer(rebasing: utf8[pending..<index]))
            switch c {
            case 0x22: append("\\\"")
            case 0x5C: append("\\\\")
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            default:
                append("\\u00")
                appendHex(c)
            }
            pending = index + 1
        }
        append(UnsafeRawBufferPointer(rebasing: utf8[pending...]))
    }

    /// Writes an object member by member without building a `JSONValue` first.
    public mutating func object(_ body: (inout ObjectWriter) -> Void) {
        var members = ObjectWriter(writer: self)
        // Let go of the buffer so that `members` owns it alone and appends without copying.
        storage = []
        length = 0
        members.writer.append("{")
        body(&members)
        members.writer.append("}")
        self = members.writer
    }

    public struct ObjectWriter {
        var writer: JSONWriter
        var first = true

        /// Bytes written so far, the whole text's (a caller that marks parts of it to leave out
        /// of a second text: `FleetPresenceReport.encoded`).
        package var count: Int { writer.count }

        /// The key, quoted, and the colon (escaped: a key built at run time may hold anything).
        mutating func key(_ key: String) {
            if !first { writer.append(",") }
            first = false
            writer.writeString(key)
            writer.append(":")
        }

        /// A key written in code: copied as it is, so it must need no escaping.
        @inline(__always)
        mutating func key(_ key: StaticString) {
            let count = key.utf8CodeUnitCount
            let comma = first ? 0 : 1
            first = false
            writer.reserve(count + 3 + comma) { out in
                if comma == 1 { out[0] = UInt8(ascii: ",") }
                out[comma] = UInt8(ascii: "\"")
                (out + comma + 1).update(from: key.utf8Start, count: count)
                out[comma + 1 + count] = UInt8(ascii: "\"")
                out[comma + 2 + count] = UInt8(ascii: ":")
            }
        }

        public mutating func callAsFunction(_ key: StaticString, _ value: String?) {
            self.key(key)
            if let value { writer.writeString(value) } else { writer.append("null") }
        }

        public mutating func callAsFunction(_ key: StaticString, _ value: Int?) {
            self.key(key)
            if let value { writer.writeInteger(Int64(value)) } else { writer.append("null") }
        }

        public mutating func callAsFunction(_ key: StaticString, _ value: Bool) {
            self.key(key)
            writer.append(value ? "true" : "false")
        }

        /// A number rounded to `places` decimals (distances, smoothed RSSI).
        public mutating func callAsFunction(_ key: StaticString, _ value: Double?, places: Int) {
            self.key(key)
            guard let value, value.isFinite else {
                writer.append("null")
                return
            }
            writer.writeFixed(value, places: places)
        }

        public mutating func callAsFunction(_ key: StaticString, _ value: JSONValue) {
            self.key(key)
            writer.write(value)
        }

        /// An array of objects, one per element, each written by `body` straight into the
        /// text (no `JSONValue` built first).
        public mutating func callAsFunction<Elements: Sequence>(
            _ key: StaticString, objects elements: Elements, _ body: (inout ObjectWriter, Elements.Element) -> Void
        ) {
            self.key(key)
            writer.append("[")
            var first = true
            for element in elements {
                if !first { writer.append(",") }
                first = false
                writer.object { body(&$0, element) }
            }
            writer.append("]")
        }

        /// A member whose key is only known at run time.
        public mutating func callAsFunction(_ key: String, _ value: JSONValue) {
            self.key(key)
            writer.write(value)
        }

        public mutating func callAsFunction(_ key: StaticString, _ time: TimePoint<some TimeKind>) {
            self.key(key)
            writer.append("\"")
            time.appendISO8601(to: &writer)
            writer.append("\"")
        }

        /// The canonical upper-case form, as `BeaconUUID.description`.
        public mutating func callAsFunction(_ key: StaticString, _ uuid: BeaconUUID) {
            self.key(key)
            writer.append("\"")
            uuid.appendCanonical(to: &writer)
            writer.append("\"")
        }

        /// `AA:BB:CC:DD:EE:FF`, as `BluetoothAddress.description`.
        public mutating func callAsFunction(_ key: StaticString, _ address: BluetoothAddress) {
            self.key(key)
            writer.append("\"")
            address.appendCanonical(to: &writer)
            writer.append("\"")
        }
    }

    /// Fixed-point output without going through `Double.description` (no exponent, no
    /// `-0`): `-61.25`, `1.3`, `0`.
    package mutating func writeFixed(_ value: Double, places: Int) {
        var scale: Int64 = 1
        for _ in 0..<places { scale *= 10 }
        // Beyond 2^63 the fixed-point conversion would trap; such a number has no
        // meaningful decimals anyway.
        guard abs(value) * Double(scale) < 9.2e18 else {
            writeNumber(value.rounded())
            return
        }
        var scaled = Int64((abs(value) * Double(scale)).rounded())
        if scaled == 0 {
            append("0")
            return
        }
        if value < 0 { append("-") }
        let whole = scaled / scale
        scaled %= scale
        appendDecimal(UInt64(whole))
        guard scaled != 0 else { return }
        append(".")
        var digits = places
        while scaled % 10 == 0 { scaled /= 10; digits -= 1 }
        appendDecimal(UInt64(scaled), width: digits)
    }
}

extension JSONValue {
    /// Compact JSON text.
    public var jsonText: String {
        var writer = JSONWriter()
        writer.write(self)
        return writer.text
    }
}

/// `value` rounded to `places` decimals, for a `JSONValue.number` (0 when not finite).
public func rounded(_ value: Double, _ places: Int) -> Double {
    guard value.isFinite else { return 0 }
    var scale = 1.0
    for _ in 0..<places { scale *= 10 }
    return (value * scale).rounded() / scale
}

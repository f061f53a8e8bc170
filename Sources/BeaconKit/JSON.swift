/// A JSON document as values, keeping object key order (for stable output and for
/// error messages that point at the first offending key).
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// A short name of the type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var numberValue: Double? {
        if case .number(let n) = self { return n }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
}

/// An ordered JSON object.
public struct JSONObject: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    public var members: [(key: String, value: JSONValue)]

    public init(_ members: [(key: String, value: JSONValue)] = []) { self.members = members }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        members = elements.map { (key: $0.0, value: $0.1) }
    }

    public subscript(key: String) -> JSONValue? {
        get { members.first { $0.key == key }?.value }
        set {
            if let i = members.firstIndex(where: { $0.key == key }) {
                if let newValue { members[i].value = newValue } else { members.remove(at: i) }
            } else if let newValue {
                members.append((key: key, value: newValue))
            }
        }
    }

    public var keys: [String] { members.map(\.key) }
    public var isEmpty: Bool { members.isEmpty }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.members.count == rhs.members.count
            && zip(lhs.members, rhs.members).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }
}

/// Why a JSON text was rejected, with where.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public var line: Int
    public var column: Int

    public var description: String { "invalid JSON at line \(line), column \(column): \(reason)" }
}

/// A strict RFC 8259 parser with limits for untrusted input: nesting depth, and
/// duplicate keys rejected (a config where the second `"uuids"` silently wins is a trap).
public struct JSONParser {
    public var maxDepth: Int

    public init(maxDepth: Int = 64) { self.maxDepth = maxDepth }

    public func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        var copy = text
        return try copy.withUTF8 { bytes in
            Result { () throws(JSONParseError) in try parse(UnsafeRawBufferPointer(bytes)) }
        }.get()
    }

    public func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBytes { raw in
            Result { () throws(JSONParseError) in try parse(raw) }
        }.get()
    }

    public func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONParseError) -> JSONValue {
        var state = State(bytes: bytes, maxDepth: maxDepth)
        state.skipWhitespace()
        let value = try state.value(depth: 0)
        state.skipWhitespace()
        guard state.offset == bytes.count else { throw state.error("unexpected content after the document") }
        return value
    }

    struct State {
        let bytes: UnsafeRawBufferPointer
        let maxDepth: Int
        var offset = 0

        init(bytes: UnsafeRawBufferPointer, maxDepth: Int) {
            self.bytes = bytes
            self.maxDepth = maxDepth
        }

        func error(_ reason: String) -> JSONParseError {
            var line = 1
            var column = 1
            for i in 0..<min(offset, bytes.count) {
                if bytes[i] == 0x0A { line += 1; column = 1 } else { column += 1 }
            }
            return JSONParseError(reason: reason, line: line, column: column)
        }

        var peek: UInt8? { offset < bytes.count ? bytes[offset] : nil }

        mutating func skipWhitespace() {
            while let c = peek, c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { offset += 1 }
        }

        mutating func expect(_ literal: StaticString, _ value: JSONValue) throws(JSONParseError) -> JSONValue {
            let count = literal.utf8CodeUnitCount
            guard offset + count <= bytes.count else { throw error("unexpected end of input") }
            for i in 0..<count where bytes[offset + i] != literal.utf8Start[i] {
                throw error("unexpected character")
            }
            offset += count
            return value
        }

        mutating func value(depth: Int) throws(JSONParseError) -> JSONValue {
            guard let c = peek else { throw error("unexpected end of input") }
            switch c {
            case UInt8(ascii: "{"): return try object(depth: depth + 1)
            case UInt8(ascii: "["): return try array(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try expect("true", .bool(true))
            case UInt8(ascii: "f"): return try expect("false", .bool(false))
            case UInt8(ascii: "n"): return try expect("null", .null)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw error("unexpected character")
            }
        }

        mutating func object(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth <= maxDepth else { throw error("nested deeper than \(maxDepth) levels") }
            offset += 1
            var object = JSONObject()
            skipWhitespace()
            if peek == UInt8(ascii: "}") {
                offset += 1
                return .object(object)
            }
            while true {
                skipWhitespace()
                guard peek == UInt8(ascii: "\"") else { throw error("expected a string key") }
                let keyStart = offset
                let key = try string()
                if object[key] != nil {
                    offset = keyStart
                    throw error("duplicate key \"\(key)\"")
                }
                skipWhitespace()
                guard peek == UInt8(ascii: ":") else { throw error("expected ':' after a key") }
                offset += 1
                skipWhitespace()
                object.members.append((key: key, value: try value(depth: depth)))
                skipWhitespace()
                switch peek {
                case UInt8(ascii: ","): offset += 1
                case UInt8(ascii: "}"): offset += 1; return .object(object)
                default: throw error("expected ',' or '}' in an object")
                }
            }
        }

        mutating func array(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth <= maxDepth else { throw error("nested deeper than \(maxDepth) levels") }
            offset += 1
            var elements: [JSONValue] = []
            skipWhitespace()
            if peek == UInt8(ascii: "]") {
                offset += 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                elements.append(try value(depth: depth))
                skipWhitespace()
                switch peek {
                case UInt8(ascii: ","): offset += 1
                case UInt8(ascii: "]"): offset += 1; return .array(elements)
                default: throw error("expected ',' or ']' in an array")
                }
            }
        }

        mutating func number() throws(JSONParseError) -> Double {
            let start = offset
            if peek == UInt8(ascii: "-") { offset += 1 }
            guard let first = peek, first >= 0x30 && first <= 0x39 else { throw error("invalid number") }
            offset += 1
            if first != 0x30 { while let c = peek, c >= 0x30 && c <= 0x39 { offset += 1 } }
            if peek == UInt8(ascii: ".") {
                offset += 1
                guard let c = peek, c >= 0x30 && c <= 0x39 else { throw error("invalid number") }
                while let c = peek, c >= 0x30 && c <= 0x39 { offset += 1 }
            }
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                offset += 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { offset += 1 }
                guard let c = peek, c >= 0x30 && c <= 0x39 else { throw error("invalid number") }
                while let c = peek, c >= 0x30 && c <= 0x39 { offset += 1 }
            }
            if let value = Self.exactDecimal(UnsafeRawBufferPointer(rebasing: bytes[start..<offset])) { return value }
            let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<offset]), as: UTF8.self)
            guard let value = Double(text), value.isFinite else {
                offset = start
                throw error("number out of range")
            }
            return value
        }

        /// `-?digits(.digits)?` with at most 15 digits in all, without building a string: the
        /// digits as an integer are exact in a Double, and so is 10^k for k ≤ 22, so the one
        /// division is correctly rounded, the same value `Double(String)` gives. `nil` for
        /// anything else (exponents, long numbers), which takes the general path.
        static func exactDecimal(_ text: UnsafeRawBufferPointer) -> Double? {
            var index = 0
            let negative = text.first == UInt8(ascii: "-")
            if negative { index = 1 }
            var mantissa: Int64 = 0
            var digits = 0
            var fraction = -1
            while index < text.count {
                let c = text[index]
                if c == UInt8(ascii: ".") {
                    guard fraction < 0 else { return nil }
                    fraction = 0
                } else if c >= 0x30 && c <= 0x39 {
                    mantissa = mantissa * 10 + Int64(c - 0x30)
                    digits += 1
                    if fraction >= 0 { fraction += 1 }
                    if digits > 15 { return nil }
                } else {
                    return nil
                }
                index += 1
            }
            guard digits > 0 else { return nil }
            var value = Double(mantissa)
            if fraction > 0 { value /= powersOfTen[fraction] }
            return negative ? -value : value
        }

        static let powersOfTen: [Double] = (0...22).map { exponent in
            var value = 1.0
            for _ in 0..<exponent { value *= 10 }
            return value
        }

        mutating func hex4() throws(JSONParseError) -> UInt32 {
            guard offset + 4 <= bytes.count else { throw error("truncated \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let nibble = hexNibble(Unicode.Scalar(bytes[offset])) else { throw error("invalid \\u escape") }
                value = value << 4 | UInt32(nibble)
                offset += 1
            }
            return value
        }

        mutating func string() throws(JSONParseError) -> String {
            offset += 1
            let start = offset
            // Fast path: no escapes.
            var ascii = true
            while let c = peek, c != UInt8(ascii: "\""), c != UInt8(ascii: "\\"), c >= 0x20 {
                ascii = ascii && c < 0x80
                offset += 1
            }
            if peek == UInt8(ascii: "\"") {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<offset])
                offset += 1
                // ASCII is valid UTF-8 as it stands: no need for the (much slower) validation.
                if ascii { return String(decoding: slice, as: UTF8.self) }
                guard let text = String(validating: slice, as: UTF8.self) else {
                    offset = start
                    throw error("string is not valid UTF-8")
                }
                return text
            }
            var out: [UInt8] = Array(bytes[start..<offset])
            while true {
                guard let c = peek else { throw error("unterminated string") }
                offset += 1
                switch c {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: out, as: UTF8.self) else {
                        throw error("string is not valid UTF-8")
                    }
                    return text
                case UInt8(ascii: "\\"):
                    guard let e = peek else { throw error("unterminated string") }
                    offset += 1
                    switch e {
                    case UInt8(ascii: "\""): out.append(0x22)
                    case UInt8(ascii: "\\"): out.append(0x5C)
                    case UInt8(ascii: "/"): out.append(0x2F)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard peek == UInt8(ascii: "\\"), offset + 1 < bytes.count,
                                  bytes[offset + 1] == UInt8(ascii: "u") else { throw error("unpaired surrogate") }
                            offset += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        } else if (0xDC00..<0xE000).contains(scalar) {
                            throw error("unpaired surrogate")
                        }
                        out.append(contentsOf: String(Unicode.Scalar(scalar)!).utf8)
                    default:
                        offset -= 1   // point at the character after the backslash
                        throw error("invalid escape")
                    }
                default:
                    guard c >= 0x20 else {
                        offset -= 1   // point at it, not after it (after a raw newline is the next line)
                        throw error("control character in a string")
                    }
                    out.append(c)
                }
            }
        }
    }
}

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

        public mutating func callAsFunction(_ key: StaticString, _ time: Instant) {
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

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

        /// A number, lexed once: the digits are gathered as they are checked, and a plain
        /// `-?digits(.digits)?` of at most 15 digits in all is made from them without a string.
        /// The digits as an integer are exact in a Double, and so is 10^k for k ≤ 22, so the
        /// one division is correctly rounded, the same value `Double(String)` gives. Anything
        /// else (an exponent, more digits) takes the general path.
        mutating func number() throws(JSONParseError) -> Double {
            let start = offset
            let negative = peek == UInt8(ascii: "-")
            if negative { offset += 1 }
            guard let first = peek, first >= 0x30 && first <= 0x39 else { throw error("invalid number") }
            offset += 1
            var mantissa = Int64(first &- 0x30)
            var digits = 1
            var fraction = 0
            if first != 0x30 {
                while let c = peek, c >= 0x30 && c <= 0x39 {
                    mantissa = mantissa &* 10 &+ Int64(c &- 0x30)
                    digits += 1
                    offset += 1
                }
            }
            if peek == UInt8(ascii: ".") {
                offset += 1
                guard let c = peek, c >= 0x30 && c <= 0x39 else { throw error("invalid number") }
                while let c = peek, c >= 0x30 && c <= 0x39 {
                    mantissa = mantissa &* 10 &+ Int64(c &- 0x30)
                    digits += 1
                    fraction += 1
                    offset += 1
                }
            }
            var plain = digits <= 15
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                plain = false
                offset += 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { offset += 1 }
                guard let c = peek, c >= 0x30 && c <= 0x39 else { throw error("invalid number") }
                while let c = peek, c >= 0x30 && c <= 0x39 { offset += 1 }
            }
            if plain {
                var value = Double(mantissa)
                if fraction > 0 { value /= Self.powersOfTen[fraction] }
                return negative ? -value : value
            }
            let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<offset]), as: UTF8.self)
            guard let value = Double(text), value.isFinite else {
                offset = start
                throw error("number out of range")
            }
            return value
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

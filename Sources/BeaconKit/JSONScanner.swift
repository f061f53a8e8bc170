/// Reads one JSON text token by token, for a payload type that decodes itself without
/// building a `JSONValue` tree first (the brain's RSSI reports: `RSSIReport(decoding:…)`).
/// It lexes exactly as `JSONParser` does (the same number and string code), and answers
/// `nil`/`false` where the text is not what the caller expects or not JSON at all; the caller
/// then parses the payload the general way, which gives the reason.
package struct JSONScanner {
    private var state: JSONParser.State

    package init(_ bytes: UnsafeRawBufferPointer) {
        state = JSONParser.State(bytes: bytes, maxDepth: .max)
    }

    /// Where the scanner is: a caller that tries the exact form it expects first (`exactly`)
    /// comes back here to read the text the general way.
    package var offset: Int {
        get { state.offset }
        set { state.offset = newValue }
    }

    /// Takes `text` if the bytes that come next are exactly it (no whitespace skipped): the
    /// punctuation and keys of a payload in the form its writer gives it, in one comparison.
    package mutating func exactly(_ text: StaticString) -> Bool {
        let count = text.utf8CodeUnitCount, start = state.offset
        guard start + count <= state.bytes.count,
              Self.same(UnsafeRawBufferPointer(rebasing: state.bytes[start..<start + count]),
                        UnsafeRawBufferPointer(start: text.utf8Start, count: count)) else { return false }
        state.offset = start + count
        return true
    }

    /// Takes `byte` (after whitespace) if it comes next.
    package mutating func take(_ byte: UInt8) -> Bool {
        state.skipWhitespace()
        guard state.peek == byte else { return false }
        state.offset += 1
        return true
    }

    /// Whether the next token (after whitespace) starts with `byte`.
    package mutating func next(is byte: UInt8) -> Bool {
        state.skipWhitespace()
        return state.peek == byte
    }

    /// Nothing but whitespace is left.
    package mutating func atEnd() -> Bool {
        state.skipWhitespace()
        return state.peek == nil
    }

    /// An object's key and its colon, as raw bytes: `nil` unless it is plain ASCII without
    /// escapes (the keys of our payloads), which the caller compares with `key(_:is:)`.
    package mutating func key() -> UnsafeRawBufferPointer? {
        guard let raw = plainString(), take(UInt8(ascii: ":")) else { return nil }
        return raw
    }

    /// A string without escapes, printable ASCII, as raw bytes (no `String` made).
    package mutating func plainString() -> UnsafeRawBufferPointer? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let bytes = state.bytes, start = state.offset
        var end = start
        while end < bytes.count {
            let c = bytes[end]
            if c == UInt8(ascii: "\"") {
                state.offset = end + 1
                return UnsafeRawBufferPointer(rebasing: bytes[start..<end])
            }
            guard c >= 0x20, c < 0x80, c != UInt8(ascii: "\\") else { return nil }
            end += 1
        }
        return nil
    }

    /// A string value, escapes and all.
    package mutating func string() -> String? {
        guard next(is: UInt8(ascii: "\"")) else { return nil }
        return try? state.string()
    }

    /// A number value.
    package mutating func number() -> Double? {
        state.skipWhitespace()
        guard let c = state.peek, c == UInt8(ascii: "-") || (c >= 0x30 && c <= 0x39) else { return nil }
        return try? state.number()
    }

    /// `null`, taken if it comes next.
    package mutating func null() -> Bool { literal("null") }

    /// `true` or `false`.
    package mutating func bool() -> Bool? {
        if literal("true") { return true }
        if literal("false") { return false }
        return nil
    }

    private mutating func literal(_ text: StaticString) -> Bool {
        state.skipWhitespace()
        let count = text.utf8CodeUnitCount
        guard state.offset + count <= state.bytes.count else { return false }
        for i in 0..<count where state.bytes[state.offset + i] != text.utf8Start[i] { return false }
        state.offset += count
        return true
    }

    /// Whether raw bytes (a `key()` or `plainString()`) are `text`.
    package static func key(_ raw: UnsafeRawBufferPointer, is text: StaticString) -> Bool {
        raw.count == text.utf8CodeUnitCount
            && same(raw, UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Whether two runs of bytes are the same, compared a word at a time (a UUID is 36 bytes).
    package static func same(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        var i = 0
        while i + 8 <= a.count {
            guard a.loadUnaligned(fromByteOffset: i, as: UInt64.self) == b.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            else { return false }
            i += 8
        }
        while i < a.count {
            guard a[i] == b[i] else { return false }
            i += 1
        }
        return true
    }
}

import BeaconKit
import Testing

@Suite("JSON")
struct JSONTests {
    static func parse(_ text: String) throws(JSONParseError) -> JSONValue { try JSONParser().parse(text) }

    /// The error for `text`, as `line:column reason`.
    static func failure(_ text: String) -> String? {
        do {
            _ = try JSONParser().parse(text)
            return nil
        } catch {
            return "\(error.line):\(error.column) \(error.reason)"
        }
    }

    static func failure(bytes: [UInt8]) -> String? {
        do {
            _ = try JSONParser().parse(bytes)
            return nil
        } catch {
            return "\(error.line):\(error.column) \(error.reason)"
        }
    }

    @Test func values() throws {
        #expect(try Self.parse("null") == .null)
        #expect(try Self.parse(" true ") == .bool(true))
        #expect(try Self.parse("false") == .bool(false))
        #expect(try Self.parse("\t\r\n42\n") == .number(42))
        #expect(try Self.parse(#""x""#) == .string("x"))
        #expect(try Self.parse("[]") == .array([]))
        #expect(try Self.parse("{}") == .object([:]))
        let object = try Self.parse(#"{"b": [1, {"c": null}], "a": "z"}"#)
        #expect(object == .object(["b": .array([.number(1), .object(["c": .null])]), "a": .string("z")]))
        #expect(object.objectValue?.keys == ["b", "a"])           // document order is kept
        #expect(object["a"]?.stringValue == "z")
        #expect(object["b"]?.arrayValue?.count == 2)
        #expect(object["missing"] == nil)
        #expect(JSONValue.number(1).typeName == "a number")
    }

    /// RFC 8259 §6: numbers.
    @Test(arguments: [
        ("0", 0.0), ("-0", -0.0), ("1", 1), ("-1", -1), ("1.5", 1.5), ("-0.25", -0.25), ("1e3", 1000), ("1E+3", 1000),
        ("1e-3", 0.001), ("2.5E-1", 0.25), ("123456789012345678", 1.2345678901234568e17), ("1.7976931348623157e308", .greatestFiniteMagnitude),
        ("5e-324", .leastNonzeroMagnitude), ("1e-400", 0),
    ])
    func numbers(_ text: String, _ value: Double) throws {
        #expect(try Self.parse(text) == .number(value))
    }

    /// A number is lexed once, its digits gathered as they are checked; a plain decimal of at
    /// most 15 digits is made from them without a string, anything else (more digits, an
    /// exponent) by `Double(String)`. Either way the value is the one `Double(String)` gives:
    /// random decimals of 1 to 17 digits, signs, leading zeros and exponents, across the
    /// 15-digit boundary, and the RSSI-like numbers gateways write.
    @Test func numbersReadAsDoubleReadsThem() throws {
        var texts = ["-0.0", "0.000000000000001", "0.0000000000000001", "999999999999999", "9999999999999999",
                     "-60.5", "-100.0", "123456789.012345", "1234567890.123456", "0.1e1", "-6.05e1", "12.5E-0"]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        for _ in 0..<5_000 {
            var text = next(3) == 0 ? "-" : ""
            let whole = 1 + next(9)
            text += next(4) == 0 ? "0" : String(1 + next(9)) + String((1..<whole).map { _ in Character(String(next(10))) })
            let fraction = next(10)
            if fraction > 0 { text += "." + String((0..<fraction).map { _ in Character(String(next(10))) }) }
            if next(8) == 0 { text += ["e", "E"][next(2)] + ["", "+", "-"][next(3)] + String(next(30)) }
            texts.append(text)
        }
        for text in texts {
            let expected = try #require(Double(text), "\(text)")
            let read = try Self.parse(text)
            #expect(read == .number(expected), "\(text)")
            if case .number(let value) = read { #expect(value.sign == expected.sign, "\(text)") }
        }
    }

    @Test(arguments: [
        ("01", "1:2 unexpected content after the document"),
        ("-", "1:2 invalid number"),
        ("1.", "1:3 invalid number"),
        (".5", "1:1 unexpected character"),
        ("+1", "1:1 unexpected character"),
        ("1e", "1:3 invalid number"),
        ("1e+", "1:4 invalid number"),
        ("-a", "1:2 invalid number"),
        ("1e400", "1:1 number out of range"),
        ("-1e400", "1:1 number out of range"),
        ("NaN", "1:1 unexpected character"),
        ("Infinity", "1:1 unexpected character"),
        ("0x10", "1:2 unexpected content after the document"),
        ("[1,]", "1:4 unexpected character"),
        ("[1 2]", "1:4 expected ',' or ']' in an array"),
    ])
    func badNumbers(_ text: String, _ error: String) {
        #expect(Self.failure(text) == error)
    }

    /// RFC 8259 §7: strings, escapes and surrogate pairs.
    @Test(arguments: [
        (#""a\"b""#, "a\"b"), (#""\\""#, "\\"), (#""\/""#, "/"), (#""\b\f\n\r\t""#, "\u{8}\u{C}\n\r\t"),
        (#""\u0041""#, "A"), (#""\u00e9""#, "é"), (#""\u00E9""#, "é"), (#""\u20AC""#, "€"),
        (#""\uD83D\uDE00""#, "😀"), (#""\ud834\udd1e""#, "𝄞"), (#""\u0000""#, "\u{0}"),
        (#""café ☕ 😀""#, "café ☕ 😀"), (#""\u2028""#, "\u{2028}"), ("\"\u{7F}\"", "\u{7F}"),
        (#""mixed é then \n escape""#, "mixed é then \n escape"),
    ])
    func strings(_ text: String, _ value: String) throws {
        #expect(try Self.parse(text) == .string(value))
    }

    @Test(arguments: [
        (#""\x""#, "1:3 invalid escape"),
        (#""\u12""#, #"1:4 truncated \u escape"#),
        (#""\u12G4""#, #"1:6 invalid \u escape"#),
        (#""\uD83D""#, "1:8 unpaired surrogate"),
        (#""\uD83Dx""#, "1:8 unpaired surrogate"),
        (#""\uD83D\u0041""#, "1:14 unpaired surrogate"),
        (#""\uDE00""#, "1:8 unpaired surrogate"),
        (#""abc"#, "1:5 unterminated string"),
        (#""abc\"#, "1:6 unterminated string"),
        ("\"a\u{1}b\"", "1:3 control character in a string"),
        ("\"tab\there\"", "1:5 control character in a string"),
        ("\"line\nbreak\"", "1:6 control character in a string"),   // the raw newline itself, on line 1
        ("\"a\\nb\u{1}\"", "1:6 control character in a string"),    // after an escape (the slow path)
    ])
    func badStrings(_ text: String, _ error: String) {
        #expect(Self.failure(text) == error)
    }

    @Test func invalidUTF8() {
        #expect(Self.failure(bytes: [0x22, 0xC3, 0x28, 0x22]) == "1:2 string is not valid UTF-8")          // bad continuation
        #expect(Self.failure(bytes: [0x22, 0xED, 0xA0, 0x80, 0x22]) == "1:2 string is not valid UTF-8")    // encoded surrogate
        #expect(Self.failure(bytes: [0x22, 0xC0, 0xAF, 0x22]) == "1:2 string is not valid UTF-8")          // overlong '/'
        #expect(Self.failure(bytes: [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22]) == "1:2 string is not valid UTF-8")  // > U+10FFFF
        #expect(Self.failure(bytes: [0x22, 0x5C, 0x6E, 0xFF, 0x22]) == "1:6 string is not valid UTF-8")    // after an escape
        #expect(Self.failure(bytes: [0xEF, 0xBB, 0xBF, 0x7B, 0x7D]) == "1:1 unexpected character")         // a BOM is not JSON
    }

    @Test(arguments: [
        ("", "1:1 unexpected end of input"),
        ("   ", "1:4 unexpected end of input"),
        ("{", "1:2 expected a string key"),
        (#"{"a""#, "1:5 expected ':' after a key"),
        (#"{"a":"#, "1:6 unexpected end of input"),
        (#"{"a":1"#, "1:7 expected ',' or '}' in an object"),
        (#"{"a":1,}"#, "1:8 expected a string key"),
        (#"{a:1}"#, "1:2 expected a string key"),
        (#"{'a':1}"#, "1:2 expected a string key"),
        (#"{"a" 1}"#, "1:6 expected ':' after a key"),
        ("[", "1:2 unexpected end of input"),
        ("[1", "1:3 expected ',' or ']' in an array"),
        ("tru", "1:1 unexpected end of input"),
        ("trUe", "1:1 unexpected character"),
        ("nul", "1:1 unexpected end of input"),
        ("{} {}", "1:4 unexpected content after the document"),
        ("[] x", "1:4 unexpected content after the document"),
        ("1 // comment", "1:3 unexpected content after the document"),
        ("{\n  \"a\": 1,\n  \"b\": 2,\n  \"a\": 3\n}", "4:3 duplicate key \"a\""),
        ("{\"k\": {\"x\": 1, \"x\": 2}}", "1:16 duplicate key \"x\""),
        ("[\n\n   @]", "3:4 unexpected character"),
    ])
    func structure(_ text: String, _ error: String) {
        #expect(Self.failure(text) == error)
    }

    @Test func depthLimit() throws {
        let deepest = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try Self.parse(deepest) }
        let tooDeep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(Self.failure(tooDeep) == "1:65 nested deeper than 64 levels")
        let objects = String(repeating: #"{"a":"#, count: 65) + "1" + String(repeating: "}", count: 65)
        #expect(Self.failure(objects)?.hasSuffix("nested deeper than 64 levels") == true)
        #expect(throws: Never.self) { try JSONParser(maxDepth: 200).parse(tooDeep) }
        #expect(throws: JSONParseError.self) { try JSONParser(maxDepth: 2).parse("[[[1]]]") }
    }

    @Test func errorDescription() {
        do {
            _ = try Self.parse("{\n  \"a\": tru\n}")
            Issue.record("parsed")
        } catch {
            #expect(error.description == "invalid JSON at line 2, column 8: unexpected character")
        }
    }

    // MARK: Writer

    @Test(arguments: [
        ("plain", #""plain""#), ("q\"uote", #""q\"uote""#), ("back\\slash", #""back\\slash""#),
        ("nl\ncr\rtab\t", #""nl\ncr\rtab\t""#), ("\u{0}\u{8}\u{C}\u{1F}", #""\u0000\u0008\u000C\u001F""#),
        ("/", #""/""#), ("café ☕ 😀", "\"café ☕ 😀\""), ("\u{7F}", "\"\u{7F}\""), ("", #""""#),
        // A quote or backslash followed by a combining mark is one Character in Swift.
        ("\"\u{301}", "\"\\\"\u{301}\""), ("a\\\u{308}b", "\"a\\\\\u{308}b\""), ("\r\n", #""\r\n""#),
    ])
    func writerEscapes(_ value: String, _ json: String) throws {
        var writer = JSONWriter()
        writer.writeString(value)
        #expect(writer.text == json)
        #expect(try Self.parse(writer.text) == .string(value))
    }

    @Test(arguments: [
        (0.0, "0"), (-0.0, "0"), (1, "1"), (-42, "-42"), (1.5, "1.5"), (0.1, "0.1"), (-61.25, "-61.25"),
        (1e15, "1000000000000000.0"), (123456789012345, "123456789012345"), (1e-7, "1e-07"), (.infinity, "null"), (.nan, "null"),
        (2.5e20, "2.5e+20"),
    ])
    func writerNumbers(_ value: Double, _ json: String) throws {
        var writer = JSONWriter()
        writer.writeNumber(value)
        #expect(writer.text == json)
        if value.isFinite { #expect(try Self.parse(json) == .number(value)) }
    }

    @Test func roundTrip() throws {
        let document = try Self.parse(FleetConfigTests.full)
        let text = document.jsonText
        #expect(!text.contains("\n") && !text.contains(": "))
        #expect(try Self.parse(text) == document)
        #expect(try Self.parse(text).jsonText == text)
        let value = JSONValue.object(["s": .string("\"\\\n\u{1}é😀"), "n": .array([.number(-0.5), .number(3), .null, .bool(false)]),
                                      "o": .object([:]), "a": .array([])])
        #expect(value.jsonText == #"{"s":"\"\\\n\u0001é😀","n":[-0.5,3,null,false],"o":{},"a":[]}"#)
        #expect(try Self.parse(value.jsonText) == value)
    }

    @Test func objectMembers() {
        var object: JSONObject = ["a": .number(1)]
        object["b"] = .bool(true)
        object["a"] = .string("x")
        #expect(object.keys == ["a", "b"])
        object["a"] = nil
        #expect(object.keys == ["b"])
        #expect(!object.isEmpty)
        #expect(JSONObject(["b": .bool(true)].map { (key: $0.key, value: $0.value) }) == object)
    }
}

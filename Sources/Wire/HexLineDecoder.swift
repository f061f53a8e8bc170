public import BeaconKit

/// `beaconctl decode` on bytes: hex lines in (advertising data, or a whole HCI event with
/// its H4 type byte, starting 04 3E; spaces, tabs, carriage returns and colons allowed
/// between bytes), one JSON object a line out for each advertising report, and
/// `{"error":…}` for a line or report that holds no beacon.
///
/// It reads borrowed blocks of input and appends to the caller's `JSONWriter`, so a block
/// of thousands of lines is decoded without allocating per line: the process's speed is the
/// decoder's, not the cost of strings (docs/PERFORMANCE.md).
public struct HexLineDecoder: Sendable {
    /// The decoder of HCI events, with its counters.
    public private(set) var decoder = AdvertisementDecoder()
    /// The current line's bytes, reused from line to line.
    private var scratch = [UInt8](repeating: 0, count: 256)
    /// Each byte's value as a hex digit, 255 for anything else.
    private let digits: [UInt8] = (0...255).map { c in
        switch UInt8(c) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(c) - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt8(c) - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt8(c) - UInt8(ascii: "a") + 10
        default: 255
        }
    }

    public init() {}

    /// Decodes every line of `input` that ends with a newline and, when `isFinal` (the end
    /// of the input), a last line without one. Returns how many bytes were consumed: the
    /// caller passes the rest again, followed by more input.
    public mutating func decode(_ input: UnsafeRawBufferPointer, isFinal: Bool, into output: inout JSONWriter) -> Int {
        var start = 0
        while start < input.count {
            guard let end = decodeLine(input, from: start, isFinal: isFinal, into: &output) else { break }
            start = end
        }
        return start
    }

    /// Decodes the line starting at `start`; returns where the next line starts, or `nil`
    /// when the line has no newline yet and more input may follow.
    private mutating func decodeLine(_ input: UnsafeRawBufferPointer, from start: Int, isFinal: Bool,
                                     into output: inout JSONWriter) -> Int? {
        var line: ScannedLine
        repeat {
            line = digits.withUnsafeBufferPointer { digits in
                scratch.withUnsafeMutableBytes { Self.scan(input, from: start, into: $0, digits: digits) }
            }
            // A line longer than any before: grow the scratch and read it again.
            if line.outcome == .overflow { scratch = [UInt8](repeating: 0, count: scratch.count * 2) }
        } while line.outcome == .overflow
        guard line.newline != nil || isFinal else { return nil }
        switch line.outcome {
        case .blank:
            Self.error("empty line", to: &output)
        case .notHex, .overflow:
            Self.error("not a hex string", to: &output)
        case .bytes:
            scratch.withUnsafeBytes { raw in
                let bytes = UnsafeRawBufferPointer(rebasing: raw[..<line.count])
                if line.count >= 2, bytes[0] == H4PacketType.event.rawValue, bytes[1] == HCIEvent.leMetaEvent {
                    decodeEvent(UnsafeRawBufferPointer(rebasing: bytes[1...]), time: nil, into: &output)
                } else {
                    DecodedLine.write(AdvertisingData.decodeBeacon(bytes), report: nil, to: &output)
                    output.newline()
                }
            }
        }
        return line.newline.map { $0 + 1 } ?? input.count
    }

    struct ScannedLine {
        enum Outcome { case blank, notHex, bytes, overflow }
        /// Where the line's newline is; `nil` when the input ends first.
        var newline: Int?
        var outcome: Outcome
        /// Bytes decoded into the scratch buffer.
        var count: Int
    }

    /// Reads one line's hex digits into `bytes` as `Hex.decode` and `trimmingBlanks` read a
    /// `String`: blanks (space, tab, CR) trimmed at either end, blanks and colons allowed
    /// between bytes, anything else (or an odd digit count) not hex.
    @inline(__always)
    static func scan(_ input: UnsafeRawBufferPointer, from start: Int, into bytes: UnsafeMutableRawBufferPointer,
                     digits: UnsafeBufferPointer<UInt8>) -> ScannedLine {
        let base = input.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let out = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let end = input.count, capacity = bytes.count
        var index = start, count = 0
        var high: UInt8 = 0, pending = false, blank = true
        while index < end {
            // Two hex digits, the usual case, without a branch per digit.
            if !pending, index + 1 < end {
                let first = digits[Int(base[index])], second = digits[Int(base[index + 1])]
                if first | second < 16 {
                    guard count < capacity else { return ScannedLine(newline: nil, outcome: .overflow, count: 0) }
                    out[count] = first << 4 | second
                    count += 1
                    blank = false
                    index += 2
                    continue
                }
            }
            let c = base[index]
            if c == 0x0A { break }
            index += 1
            if let nibble = Self.nibble(c) {
                blank = false
                if pending {
                    guard count < capacity else { return ScannedLine(newline: nil, outcome: .overflow, count: 0) }
                    out[count] = high << 4 | nibble
                    count += 1
                } else {
                    high = nibble
                }
                pending.toggle()
            } else if c == 0x20 || c == 0x09 || c == 0x0D || c == 0x3A {
                // Blanks are trimmed at either end; blanks and colons separate bytes.
                if c == 0x3A { blank = false }
                if pending { return skip(input, from: index) }
            } else {
                return skip(input, from: index)
            }
        }
        let newline = index < end ? index : nil
        if blank { return ScannedLine(newline: newline, outcome: .blank, count: 0) }
        return ScannedLine(newline: newline, outcome: pending ? .notHex : .bytes, count: count)
    }

    /// The rest of a line that is not hex: only its end matters.
    private static func skip(_ input: UnsafeRawBufferPointer, from start: Int) -> ScannedLine {
        let base = input.baseAddress!.assumingMemoryBound(to: UInt8.self)
        var index = start
        while index < input.count, base[index] != 0x0A { index += 1 }
        return ScannedLine(newline: index < input.count ? index : nil, outcome: .notHex, count: 0)
    }

    /// One JSON line per advertising report of an HCI event (without the H4 type byte).
    /// A malformed event gets an error line first. Without a `time` (a line of hex rather
    /// than a capture's record), an event that is no advertising report gets an error line.
    public mutating func decodeEvent(_ event: UnsafeRawBufferPointer, time: CaptureTime?, into output: inout JSONWriter) {
        let kind = HCIEvent.classify(event)
        if case .malformed(let problem) = kind {
            Self.error("malformed HCI event\(time.map { " at \($0.iso8601)" } ?? ""): \(problem)", to: &output)
        }
        decoder.decode(event: event) { report, result in
            DecodedLine.write(result, report: (report.address, report.rssi, time), to: &output)
            output.newline()
        }
        if case .otherEvent = kind, time == nil {
            Self.error("not an LE advertising report event", to: &output)
        }
    }

    private static func error(_ message: String, to output: inout JSONWriter) {
        output.object { o in o("error", message) }
        output.newline()
    }

    @inline(__always)
    private static func nibble(_ c: UInt8) -> UInt8? {
        let digit = c &- 0x30
        if digit < 10 { return digit }
        let letter = (c | 0x20) &- 0x61
        if letter < 6 { return letter &+ 10 }
        return nil
    }
}

import BeaconKit
import Wire
import Foundation
import Testing

/// `beaconctl decode`'s line protocol on blocks of bytes (`HexLineDecoder`), against what the
/// line-at-a-time decode printed (Tests/Fixtures/decode/README.md).
@Suite("hex line decoder")
struct HexLineDecoderTests {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/decode")

    /// Feeds `input` in blocks of the given sizes (cycled), carrying the unconsumed rest of
    /// each block over to the next as `beaconctl decode` does.
    func decode(_ input: [UInt8], blocks: [Int]) -> [UInt8] {
        var lines = HexLineDecoder()
        var output = JSONWriter()
        var pending: [UInt8] = []
        var offset = 0
        var block = 0
        var printed: [UInt8] = []
        while true {
            let take = min(blocks[block % blocks.count], input.count - offset)
            block += 1
            pending += input[offset..<(offset + take)]
            offset += take
            let isFinal = offset == input.count
            let consumed = pending.withUnsafeBytes { lines.decode($0, isFinal: isFinal, into: &output) }
            pending.removeFirst(consumed)
            output.withUnsafeBytes { printed += $0 }
            output.removeAll()
            if isFinal { break }
        }
        #expect(pending.isEmpty)
        return printed
    }

    @Test("the same lines, byte for byte, however the input is cut into blocks",
          arguments: [[1 << 20], [1], [7, 1, 93, 2], [4096], [61, 8191, 3]])
    func blocks(_ sizes: [Int]) throws {
        let input = try [UInt8](Data(contentsOf: Self.directory.appendingPathComponent("lines.hex")))
        let expected = try [UInt8](Data(contentsOf: Self.directory.appendingPathComponent("lines.jsonl")))
        let printed = decode(input, blocks: sizes)
        #expect(printed == expected, "\(String(decoding: printed.prefix(400), as: UTF8.self))")
    }

    @Test("a last line without a newline waits for more input unless the input has ended")
    func lastLine() {
        var lines = HexLineDecoder()
        var output = JSONWriter()
        let line = Array("0201061AFF4C000215E2C56DB5DFFB48D2B060D0F5A71096E000010002C5".utf8)
        #expect(line.withUnsafeBytes { lines.decode($0, isFinal: false, into: &output) } == 0)
        #expect(output.count == 0)
        #expect(line.withUnsafeBytes { lines.decode($0, isFinal: true, into: &output) } == line.count)
        #expect(output.text == #"{"format":"ibeacon","uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":1,"minor":2,"txPower":-59}"#
                + "\n")
    }

    @Test("lines of every length decode like short ones (the scratch buffer grows)")
    func longLines() {
        var lines = HexLineDecoder()
        var output = JSONWriter()
        let input = Array((String(repeating: "00", count: 5000) + "\n" + String(repeating: "0", count: 9999) + "\n").utf8)
        #expect(input.withUnsafeBytes { lines.decode($0, isFinal: true, into: &output) } == input.count)
        #expect(output.text == #"{"error":"no beacon in the advertising data"}"# + "\n" + #"{"error":"not a hex string"}"# + "\n")
    }
}

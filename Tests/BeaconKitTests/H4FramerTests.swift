import BeaconKit
import Wire
import Testing

/// A real H4 byte stream: the records of `btsnoop-decoder_hci.log` (datalink 1002, every
/// record starts with its H4 type byte) laid end to end, as the controller's UART carried them.
func realH4Stream() throws -> (stream: [UInt8], packets: [[UInt8]]) {
    var packets: [[UInt8]] = []
    try Fixture.decoderHCI.bytes.withUnsafeBytes { raw in
        var reader = try BtsnoopReader(bytes: raw)
        while let record = reader.next() { packets.append(Array(record.data)) }
    }
    return (packets.flatMap { $0 }, packets)
}

/// Feeds `stream` in the given chunk sizes and collects (type byte + packet) as delivered.
func frame(_ stream: [UInt8], chunks: some Sequence<Int>, into framer: inout H4Framer) -> [[UInt8]] {
    var out: [[UInt8]] = []
    var offset = 0
    var sizes = chunks.makeIterator()
    while offset < stream.count {
        let size = min(max(sizes.next() ?? stream.count, 0), stream.count - offset)
        stream[offset..<(offset + size)].withUnsafeBytes { chunk in
            framer.feed(chunk) { type, packet in out.append([type.rawValue] + Array(packet)) }
        }
        offset += size
    }
    return out
}

@Suite("H4 framer")
struct H4FramerTests {
    @Test func aRealStreamAtOnce() throws {
        let (stream, packets) = try realH4Stream()
        var framer = H4Framer()
        #expect(frame(stream, chunks: [stream.count], into: &framer) == packets)
        #expect(framer.packets == 69)
        #expect(framer.skippedBytes == 0)
        #expect(framer.pendingBytes == 0)
    }

    @Test(arguments: [1, 2, 3, 7, 64, 1000])
    func aRealStreamInFixedChunks(size: Int) throws {
        let (stream, packets) = try realH4Stream()
        var framer = H4Framer()
        #expect(frame(stream, chunks: repeatElement(size, count: .max), into: &framer) == packets)
        #expect(framer.pendingBytes == 0)
    }

    @Test func partialPacketsWait() {
        var framer = H4Framer()
        var delivered: [[UInt8]] = []
        for byte in bytes("04 0E 04 01 03 0C") {
            [byte].withUnsafeBytes { framer.feed($0) { _, packet in delivered.append(Array(packet)) } }
        }
        #expect(delivered.isEmpty)
        #expect(framer.pendingBytes == 6)
        [UInt8(0x00)].withUnsafeBytes { framer.feed($0) { _, packet in delivered.append(Array(packet)) } }
        #expect(delivered == [bytes("0E 04 01 03 0C 00")])
        #expect(framer.pendingBytes == 0)
    }

    @Test func everyPacketType() {
        let stream = bytes("01 030C 00")                  // command: Reset
            + bytes("02 0120 0300 AABBCC")                // ACL: handle 0x2001, 3 bytes (16-bit length)
            + bytes("03 0100 02 DDEE")                    // SCO: 2 bytes
            + bytes("04 0E 04 01030C00")                  // event
            + bytes("05 0100 0240 1122")                  // ISO: length 0x4002 & 0x3FFF = 2
        var framer = H4Framer()
        let packets = frame(stream, chunks: [stream.count], into: &framer)
        #expect(packets == [bytes("01 030C 00"), bytes("02 0120 0300 AABBCC"), bytes("03 0100 02 DDEE"),
                            bytes("04 0E 04 01030C00"), bytes("05 0100 0240 1122")])
    }

    /// An ACL or ISO header announcing more than 1024 bytes is noise, not a packet (Linux's
    /// `drivers/bluetooth/hci_uart.h` refuses such frames too); the packet after it survives.
    @Test func implausibleLengthsAreNoise() {
        let event = bytes("04 0E 04 01030C00")
        let biggest = bytes("02 0120 0004") + Array(repeating: 0xAB, count: 1024)
        let stream = bytes("02 EEEE FFF0") + event               // ACL claiming 0xF0FF bytes
            + bytes("05 EEEE FF7F") + event                         // ISO claiming 0x3FFF bytes
            + biggest + event
        var framer = H4Framer()
        let packets = frame(stream, chunks: repeatElement(3, count: .max), into: &framer)
        #expect(packets == [event, event, biggest, event])
        #expect(framer.skippedBytes == 5 + 5)   // each bogus header, byte by byte
        #expect(H4Framer.maxDataLength == 1024)
    }

    @Test func lineNoiseIsSkippedAndCounted() throws {
        let (stream, packets) = try realH4Stream()
        // Bytes that cannot start a packet, between every packet.
        var noisy: [UInt8] = []
        var noise = 0
        for (i, packet) in packets.enumerated() {
            let junk = Array(repeating: UInt8([0x00, 0x06, 0xFF, 0x7E][i % 4]), count: i % 5)
            noisy += junk + packet
            noise += junk.count
        }
        var framer = H4Framer()
        #expect(frame(noisy, chunks: repeatElement(5, count: .max), into: &framer) == packets)
        #expect(framer.skippedBytes == noise)
        #expect(framer.packets == packets.count)
        #expect(stream.count + noise == noisy.count)
    }

    /// More than the 4096 bytes after which the framer compacts its buffer, with packets
    /// straddling every chunk boundary.
    @Test func longStreamsCompact() {
        var packets: [[UInt8]] = []
        for i in 0..<2000 {
            let event = HCIEventBuilder.legacyReport([.init(
                address: BluetoothAddress(rawValue: UInt64(i)),
                data: AdvertisingData.iBeacon(IBeacon(uuid: airLocate, major: 1, minor: UInt16(i), txPower: -59)),
                rssi: -60)])
            packets.append([0x04] + event)
        }
        let stream = packets.flatMap { $0 }
        var framer = H4Framer()
        #expect(frame(stream, chunks: repeatElement(4099, count: .max), into: &framer) == packets)
        #expect(framer.pendingBytes == 0)
    }
}

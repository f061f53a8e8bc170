import ArgumentParser
import BeaconKit
import Wire
import GatewayCore
import CommandLineSupport
import SystemCalls

struct Decode: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decode advertising data or HCI events to JSON lines.",
        discussion: """
        Reads one hex string a line from stdin: either an advertising-data payload (AD structures)
        or a whole HCI event with its H4 type byte, starting 04 3E. Spaces and colons between bytes
        are allowed. Writes one JSON object per advertising report:
          {"format":"ibeacon","uuid":"…","major":1,"minor":2,"txPower":-59}
        (altbeacon, eddystone-uid, eddystone-url and eddystone-tlm likewise), with "address" and "rssi"
        for HCI events, or {"error":"…"} for a line or report that holds no beacon. It never stops early.

        With --btsnoop FILE it prints every advertising report of a capture (btmon -w, Android HCI
        snoop logs) with its timestamp, and a summary on stderr.

        Examples:
          echo 0201061AFF4C000215E2C56DB5DFFB48D2B060D0F5A71096E000010002C5 \\
            | beaconctl decode
          beaconctl decode --btsnoop capture.log | grep ibeacon
        """)

    @Option(name: .long, help: ArgumentHelp("Decode a btsnoop capture instead of stdin.", valueName: "FILE"))
    var btsnoop: String?

    func run() throws {
        if let btsnoop {
            try decodeCapture(btsnoop)
        } else {
            try decodeStandardInput()
        }
    }

    /// Reads stdin in large blocks and answers each block with one write: a pipe that
    /// delivers a line at a time still gets each answer at once.
    func decodeStandardInput() throws {
        let input = FileDescriptor(rawValue: 0)
        var lines = HexLineDecoder()
        var output = JSONWriter(capacity: Self.blockSize * 2)
        var buffer = [UInt8](repeating: 0, count: Self.blockSize)
        var filled = 0
        while true {
            if filled == buffer.count {
                // One line longer than the buffer: make room for the rest of it.
                buffer.append(contentsOf: repeatElement(0, count: buffer.count))
            }
            let read = try buffer.withUnsafeMutableBytes { raw in
                do {
                    return try input.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[filled...]))
                } catch {
                    throw CommandFailure("cannot read stdin: \(error)", status: .failure)
                }
            }
            filled += read
            let consumed = buffer.withUnsafeBytes { raw in
                lines.decode(UnsafeRawBufferPointer(rebasing: raw[..<filled]), isFinal: read == 0, into: &output)
            }
            try flush(&output)
            if consumed > 0 {
                buffer.withUnsafeMutableBytes { raw in
                    raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[consumed..<filled]))
                }
                filled -= consumed
            }
            if read == 0 { return }
        }
    }

    static let blockSize = 1 << 20

    func flush(_ output: inout JSONWriter) throws {
        guard output.count > 0 else { return }
        try output.withUnsafeBytes { bytes in
            do {
                try FileDescriptor(rawValue: 1).writeAll(bytes)
            } catch {
                throw CommandFailure("cannot write stdout: \(error)", status: .failure)
            }
        }
        output.removeAll()
    }

    func decodeCapture(_ path: String) throws {
        let bytes: [UInt8]
        do { bytes = try FileSystem.read(path) } catch { throw CommandFailure("cannot read \(path): \(error)") }
        var lines = HexLineDecoder()
        var output = JSONWriter(capacity: Self.blockSize * 2)
        let summary: String = try bytes.withUnsafeBytes { raw in
            var reader: BtsnoopReader
            do { reader = try BtsnoopReader(bytes: raw) } catch { throw CommandFailure("\(path): \(error)") }
            var events = 0
            while let record = reader.next() {
                guard let event = record.hciEvent(datalink: reader.datalink) else { continue }
                events += 1
                lines.decodeEvent(event, time: record.timestamp, into: &output)
                if output.count >= Self.blockSize { try flush(&output) }
            }
            try flush(&output)
            let c = lines.decoder.counters
            return "\(path): datalink \(reader.datalink), \(reader.recordsRead) records, \(events) events, "
                + "\(c.reports) advertising reports, \(c.beacons) beacons, \(c.malformed) malformed"
                + (reader.truncatedTail ? ", truncated last record" : "")
        }
        writeStandardError(summary + "\n")
    }
}

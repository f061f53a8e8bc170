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
          echo 0201061AFF4C000215E2C56DB5DFFB48D2B060D0F5A71096E000010002C5 | beaconctl decode
          beaconctl decode --btsnoop capture.log | grep ibeacon
        """)

    @Option(name: .long, help: ArgumentHelp("Decode a btsnoop capture instead of stdin.", valueName: "FILE"))
    var btsnoop: String?

    func run() throws {
        if let btsnoop {
            try decodeCapture(btsnoop)
        } else {
            var decoder = AdvertisementDecoder()
            while let line = readLine(strippingNewline: true) {
                for output in decodeLine(line, decoder: &decoder) { printLine(output) }
            }
        }
    }

    func decodeLine(_ line: String, decoder: inout AdvertisementDecoder) -> [String] {
        let trimmed = line.trimmingBlanks
        guard !trimmed.isEmpty else { return [Payloads.error("empty line")] }
        guard let bytes = Hex.decode(trimmed) else { return [Payloads.error("not a hex string")] }
        if bytes.count >= 2, bytes[0] == H4PacketType.event.rawValue, bytes[1] == HCIEvent.leMetaEvent {
            return decodeEvent(Array(bytes.dropFirst()), time: nil, decoder: &decoder)
        }
        return bytes.withUnsafeBytes { raw in
            [Self.line(for: AdvertisingData.decodeBeacon(raw), report: nil)]
        }
    }

    func decodeEvent(_ event: [UInt8], time: Instant?, decoder: inout AdvertisementDecoder) -> [String] {
        var lines: [String] = []
        event.withUnsafeBytes { raw in
            let kind = HCIEvent.classify(raw)
            if case .malformed(let problem) = kind {
                lines.append(Payloads.error("malformed HCI event: \(problem)"))
            }
            decoder.decode(event: raw) { report, result in
                lines.append(Self.line(for: result, report: (report.address, report.rssi, time)))
            }
            if case .otherEvent = kind, time == nil {
                lines.append(Payloads.error("not an LE advertising report event"))
            }
        }
        return lines
    }

    static func line(for result: AdvertisingDataResult,
                     report: (address: BluetoothAddress, rssi: Int8?, ts: Instant?)?) -> String {
        switch result {
        case .beacon(let beacon):
            return Payloads.decoded(beacon, report: report)
        case .noBeacon, .malformed:
            var writer = JSONWriter()
            writer.object { o in
                o("error", result == .noBeacon ? "no beacon in the advertising data"
                                               : "malformed advertising data: an AD structure runs past the end")
                if let report {
                    o("address", report.address.description)
                    o("rssi", report.rssi.map(Int.init))
                    if let ts = report.ts { o("ts", ts) }
                }
            }
            return writer.text
        }
    }

    func decodeCapture(_ path: String) throws {
        let bytes: [UInt8]
        do { bytes = try FileSystem.read(path) } catch { throw CommandFailure("cannot read \(path): \(error)") }
        var decoder = AdvertisementDecoder()
        let summary: String = try bytes.withUnsafeBytes { raw in
            var reader: BtsnoopReader
            do { reader = try BtsnoopReader(bytes: raw) } catch { throw CommandFailure("\(path): \(error)") }
            var events = 0
            while let record = reader.next() {
                guard let event = record.hciEvent(datalink: reader.datalink) else { continue }
                events += 1
                let kind = HCIEvent.classify(event)
                if case .malformed(let problem) = kind {
                    printLine(Payloads.error("malformed HCI event at \(record.timestamp.iso8601): \(problem)"))
                }
                decoder.decode(event: event) { report, result in
                    printLine(Self.line(for: result, report: (report.address, report.rssi, record.timestamp)))
                }
            }
            let c = decoder.counters
            return "\(path): datalink \(reader.datalink), \(reader.recordsRead) records, \(events) events, "
                + "\(c.reports) advertising reports, \(c.beacons) beacons, \(c.malformed) malformed"
                + (reader.truncatedTail ? ", truncated last record" : "")
        }
        writeStandardError(summary + "\n")
    }
}

import BeaconKit
import Wire
import Config
import Simulation
import Testing

/// Deterministic fuzzing of every parser that reads untrusted bytes: 178,060 inputs (40,000
/// random and 80,000 mutated events, 45,000 advertising data, 60 H4 streams, 5,000 btsnoop
/// files, 8,000 JSON texts), random and mutated from real ones, with fixed seeds so that a
/// failure reproduces. Sized to run in seconds in a debug build beside the other tests.
///
/// Besides "never crashes", each test checks what can be checked from inside: reports and
/// records point into the input (no over-read), and counters add up. Run once under
/// `swift test -Xswiftc -sanitize=address --filter Fuzz` to catch reads past a buffer that
/// these checks cannot see.
// Serialized: the fuzz tests are CPU-bound and synchronous; run side by side they take
// every thread of the cooperative pool (two on a two-core machine) for seconds, and the
// timers of the end-to-end tests running meanwhile stop firing.
@Suite("Fuzz", .serialized)
struct FuzzTests {
    /// Valid events to mutate: real ones from ble_monitor and the captures, and built ones.
    static var seeds: [[UInt8]] {
        var seeds = [HCIEventTests.iBeaconEvent, HCIEventTests.altBeaconEvent, HCIEventTests.tlmEvent,
                     HCIEventTests.twoReports, HCIEventTests.extendedEvent, bytes("0E0401030C00")]
        let beacon = AdvertisingData.iBeacon(IBeacon(uuid: airLocate, major: 1, minor: 2, txPower: -59))
        let uid = AdvertisingData.eddystoneUID(EddystoneUID(
            txPower: -20, namespace: EddystoneNamespace(high: 1, low: 2), instance: EddystoneInstance(rawValue: 3)))
        let reports = (0..<3).map { HCIEventBuilder.Report(address: BluetoothAddress(rawValue: UInt64($0)),
                                                            data: $0 == 1 ? uid : beacon, rssi: -50) }
        seeds.append(HCIEventBuilder.legacyReport(reports))
        seeds.append(HCIEventBuilder.extendedReport(reports, txPower: 4))
        seeds.append(HCIEventTests.extendedEvent([
            HCIEventTests.extendedReport(eventType: 0x0020, rssi: 0xC0, data: beacon),
            HCIEventTests.extendedReport(eventType: 0x0000, rssi: 0xC0, data: uid),
        ]))
        return seeds
    }

    /// One random mutation of the kinds a broken link or a hostile advertiser produces.
    static func mutate(_ input: [UInt8], using random: inout SplitMix64) -> [UInt8] {
        var bytes = input
        for _ in 0...Int.random(in: 0...2, using: &random) {
            switch Int.random(in: 0..<8, using: &random) {
            case 0 where !bytes.isEmpty:   // bit flip
                let i = Int.random(in: 0..<bytes.count, using: &random)
                bytes[i] ^= 1 << UInt8.random(in: 0..<8, using: &random)
            case 1 where !bytes.isEmpty:   // truncation
                bytes.removeLast(Int.random(in: 1...bytes.count, using: &random))
            case 2:                        // inserted bytes
                let at = Int.random(in: 0...bytes.count, using: &random)
                bytes.insert(contentsOf: (0..<Int.random(in: 1...4, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) },
                             at: at)
            case 3 where !bytes.isEmpty:   // deleted bytes
                let at = Int.random(in: 0..<bytes.count, using: &random)
                bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...4, using: &random)))
            case 4 where bytes.count > 3:  // the length or count bytes of the event
                let i = [1, 3][Int.random(in: 0...1, using: &random)]
                let choices: [UInt8] = [0, 1, 0xFF, bytes[i] &+ 1, bytes[i] &- 1, .random(in: 0...255, using: &random)]
                bytes[i] = choices[Int.random(in: 0..<choices.count, using: &random)]
            case 5 where !bytes.isEmpty:   // any byte to a boundary value (a length field, usually)
                let i = Int.random(in: 0..<bytes.count, using: &random)
                bytes[i] = [0x00, 0x01, 0x1F, 0x20, 0x7F, 0x80, 0xFE, 0xFF][Int.random(in: 0..<8, using: &random)]
            case 6:                        // keep the framing right after other damage
                if bytes.count >= 2 { bytes[1] = UInt8(truncatingIfNeeded: bytes.count - 2) }
            default:                       // a random byte somewhere
                if !bytes.isEmpty { bytes[Int.random(in: 0..<bytes.count, using: &random)] = .random(in: 0...255, using: &random) }
            }
        }
        return bytes
    }

    static func randomBytes(maxCount: Int, using random: inout SplitMix64) -> [UInt8] {
        (0..<Int.random(in: 0...maxCount, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
    }

    /// Decodes one event and checks every invariant that does not need a sanitizer.
    static func decodeChecked(_ event: [UInt8], with decoder: inout AdvertisementDecoder, _ v: inout Invariants) {
        let before = decoder.counters
        var delivered = 0
        event.withUnsafeBytes { raw in
            let start = raw.baseAddress.map { UInt(bitPattern: $0) } ?? 0
            let end = start + UInt(raw.count)
            decoder.decode(event: raw) { report, result in
                delivered += 1
                let dataStart = report.data.baseAddress.map { UInt(bitPattern: $0) } ?? start
                v.check(dataStart >= start && dataStart + UInt(report.data.count) <= end, "report data outside the event")
                v.check(report.data.count <= 229, "extended data over 229 bytes")
                if report.kind == .legacy { v.check(report.data.count <= 31, "legacy data over 31 bytes") }
                v.check(report.rssi != 127 && report.txPower != 127, "127 must read as not available")
                let again = AdvertisingData.decodeBeacon(report.data)
                v.check(again == result, "decoding the same data twice differs")
            }
        }
        let after = decoder.counters
        let classes = [after.advertisingEvents - before.advertisingEvents, after.otherEvents - before.otherEvents,
                       after.malformedEvents - before.malformedEvents]
        v.check(classes.sorted() == [0, 0, 1], "an event must land in exactly one class")
        v.check(after.reports - before.reports == delivered, "reports counted differ from reports delivered")
        v.check(after.events - before.events == 1, "one event counted once")
        if after.advertisingEvents == before.advertisingEvents {
            v.check(delivered == 0, "reports from an event that is not a well-formed advertising report")
        }
        v.check(after.addsUp, "counters add up")
    }

    @Test func randomEvents() {
        var random = SplitMix64(seed: 0xBEAC0001)
        var decoder = AdvertisementDecoder()
        var invariants = Invariants()
        for i in 0..<40_000 {
            var event = Self.randomBytes(maxCount: 260, using: &random)
            // Half of them look like advertising reports at first glance, so the decoder goes deep.
            if i % 2 == 0, event.count >= 4 {
                event[0] = 0x3E
                event[1] = UInt8(truncatingIfNeeded: event.count - 2)
                event[2] = Bool.random(using: &random) ? 0x02 : 0x0D
                event[3] = UInt8.random(in: 0...3, using: &random)
            }
            Self.decodeChecked(event, with: &decoder, &invariants)
        }
        #expect(invariants.violations.isEmpty, "\(invariants)")
        #expect(decoder.counters.events == 40_000)
        #expect(decoder.counters.addsUp)
        #expect(decoder.counters.advertisingEvents > 0)
        #expect(decoder.counters.malformedEvents > 0)
    }

    @Test func mutatedEvents() {
        var random = SplitMix64(seed: 0xBEAC0002)
        var decoder = AdvertisementDecoder()
        let seeds = Self.seeds
        var invariants = Invariants()
        for _ in 0..<80_000 {
            let seed = seeds[Int.random(in: 0..<seeds.count, using: &random)]
            Self.decodeChecked(Self.mutate(seed, using: &random), with: &decoder, &invariants)
        }
        #expect(invariants.violations.isEmpty, "\(invariants)")
        let c = decoder.counters
        #expect(c.events == 80_000)
        #expect(c.advertisingEvents + c.otherEvents + c.malformedEvents == 80_000)
        #expect(c.reports == c.beacons + c.notBeacons + c.malformedData)
        // The mutations reach every outcome.
        #expect(c.beacons > 0 && c.notBeacons > 0 && c.malformedData > 0 && c.fragments > 0)
        #expect(c.advertisingEvents > 0 && c.otherEvents > 0 && c.malformedEvents > 0)
    }

    @Test func advertisingData() {
        var random = SplitMix64(seed: 0xBEAC0003)
        let seeds = [AdvertisingDataTests.bleMonitorIBeacon,
                     bytes("0201060303AAFE1116AAFE20000C6F1E000002006D41DB9AB6"),
                     bytes("1BFFFFFFBEACD3162F5AF3EE494799DB09756062D0FC005A0005C400"),
                     bytes("0201060303AAFE 1316AAFE 10 EB 03 676F6F2E676C2F 53367A543650"),
                     AdvertisingData.eddystoneUID(EddystoneUID(txPower: -20, namespace: EddystoneNamespace(high: 1, low: 2),
                                                               instance: EddystoneInstance(rawValue: 3)))]
        var outcomes: [String: Int] = [:]
        var invariants = Invariants()
        for i in 0..<45_000 {
            let data = i % 4 == 0 ? Self.randomBytes(maxCount: 40, using: &random)
                : Self.mutate(seeds[Int.random(in: 0..<seeds.count, using: &random)], using: &random)
            let result = data.withUnsafeBytes { AdvertisingData.decodeBeacon($0) }
            let wellFormed = data.withUnsafeBytes { AdvertisingData.isWellFormed($0) }
            invariants.check((result == .malformed) == !wellFormed, "malformed exactly when not well formed")
            switch result {
            case .beacon(let beacon):
                outcomes[beacon.format, default: 0] += 1
                if case .eddystoneURL(let url) = beacon { invariants.check(!url.url.isEmpty, "an Eddystone URL expands") }
            case .noBeacon: outcomes["none", default: 0] += 1
            case .malformed: outcomes["malformed", default: 0] += 1
            }
        }
        #expect(invariants.violations.isEmpty, "\(invariants)")
        #expect(Set(outcomes.keys) == ["ibeacon", "altbeacon", "eddystone-uid", "eddystone-url", "eddystone-tlm",
                                       "none", "malformed"])
    }

    /// A valid stream with garbage between packets, fed in random chunks.
    ///
    /// Garbage that starts with a packet-type byte (0x01–0x05) is taken for a packet header
    /// and may swallow valid bytes: H4 has no sync marker. What must hold: the framer never
    /// crashes, its output does not depend on the chunking, valid packets come out in order
    /// and unchanged, and after the garbage it finds the packet boundaries again, after which
    /// every valid packet is delivered.
    @Test func h4Framer() throws {
        var random = SplitMix64(seed: 0xBEAC0004)
        let (_, real) = try realH4Stream()
        // A tail long enough that even a bogus 64 KiB ACL header cannot swallow all of it.
        let tail: [[UInt8]] = (0..<1800).map { i in
            [0x04] + HCIEventBuilder.legacyReport([.init(
                address: BluetoothAddress(rawValue: 0xA0_0000 + UInt64(i)),
                data: AdvertisingData.iBeacon(IBeacon(uuid: airLocate, major: 9, minor: UInt16(i), txPower: -59)),
                rssi: -70)])
        }
        let tailStream = tail.flatMap { $0 }
        let tailIndex = Dictionary(uniqueKeysWithValues: tail.enumerated().map { ($1, $0) })
        var lost: [Int] = []
        for trial in 0..<60 {
            let head = Array(real.prefix(Int.random(in: 1...real.count, using: &random)))
            let garbage = trial % 3 == 0
                ? Self.randomBytes(maxCount: 64, using: &random).map { [0x01, 0x02, 0x03, 0x04, 0x05].contains($0) ? 0xEE : $0 }
                : Self.randomBytes(maxCount: 64, using: &random)
            let stream = head.flatMap { $0 } + garbage + tailStream

            var once = H4Framer()
            let reference = frame(stream, chunks: [stream.count], into: &once)
            var chunked = H4Framer()
            var sizes: [Int] = []
            for _ in 0..<4000 { sizes.append(Int.random(in: 0...300, using: &random)) }
            let delivered = frame(stream, chunks: sizes + repeatElement(300, count: 100_000), into: &chunked)
            #expect(delivered == reference, "framing depends on chunking (trial \(trial))")
            #expect(chunked.skippedBytes == once.skippedBytes)

            // The head arrives intact, before any garbage.
            #expect(Array(delivered.prefix(head.count)) == head)
            // After the garbage: a contiguous run of the tail up to its very end.
            let fromTail = delivered.dropFirst(head.count).compactMap { tailIndex[$0] }
            guard let k = fromTail.first else {
                Issue.record("never resynchronised (trial \(trial))")
                continue
            }
            #expect(fromTail == Array(k..<tail.count), "valid packets lost after resynchronising (trial \(trial))")
            lost.append(k)
            if garbage.allSatisfy({ !(0x01...0x05).contains($0) }) {
                #expect(k == 0, "garbage without packet-type bytes must not cost a packet")
                #expect(chunked.skippedBytes == garbage.count)
            }
        }
        #expect(lost.count == 60)
    }

    /// Real captures with damage: bit flips, cut files, lying length fields.
    @Test func btsnoopReader() throws {
        var random = SplitMix64(seed: 0xBEAC0005)
        let captures = try Fixture.allCases.map { try $0.bytes }
        var invariants = Invariants()
        for i in 0..<3_000 {
            var file = captures[i % captures.count]
            switch i % 4 {
            case 0:   // flips anywhere, the header included
                for _ in 0..<Int.random(in: 1...8, using: &random) {
                    let at = Int.random(in: 0..<file.count, using: &random)
                    file[at] ^= 1 << UInt8.random(in: 0..<8, using: &random)
                }
            case 1:   // cut anywhere
                file.removeLast(Int.random(in: 0...file.count, using: &random))
            case 2:   // an included-length field of the first records set to something big
                let at = 16 + 4
                let value = [UInt32.max, UInt32(file.count), 0x8000_0000, UInt32(file.count - 40)][Int.random(in: 0..<4, using: &random)]
                for k in 0..<4 { file[at + k] = UInt8(truncatingIfNeeded: value >> (24 - 8 * UInt32(k))) }
            default:  // random bytes after a valid header
                file = Array(file.prefix(16)) + Self.randomBytes(maxCount: 400, using: &random)
            }
            Self.readChecked(file, &invariants)
        }
        for _ in 0..<2_000 { Self.readChecked(Self.randomBytes(maxCount: 64, using: &random), &invariants) }
        #expect(invariants.violations.isEmpty, "\(invariants)")
    }

    static func readChecked(_ file: [UInt8], _ v: inout Invariants) {
        file.withUnsafeBytes { raw in
            guard var reader = try? BtsnoopReader(bytes: raw) else { return }
            let start = UInt(bitPattern: raw.baseAddress!)
            let end = start + UInt(raw.count)
            var decoder = AdvertisementDecoder()
            var records = 0
            while let record = reader.next() {
                records += 1
                let dataStart = record.data.baseAddress.map { UInt(bitPattern: $0) } ?? start
                v.check(dataStart >= start && dataStart + UInt(record.data.count) <= end, "record data outside the file")
                if let event = record.hciEvent(datalink: reader.datalink) {
                    decoder.decode(event: event) { _, _ in }
                }
                _ = record.timestamp.iso8601
            }
            v.check(records == reader.recordsRead, "records counted")
            v.check(records <= (raw.count - 16) / 24, "more records than the file can hold")
            v.check(decoder.counters.addsUp, "counters add up")
            v.check(reader.next() == nil, "a finished reader stays finished")
        }
    }

    /// JSON: random text, and mutations of a real fleet config. Whatever parses must write
    /// back to text that parses to the same value.
    @Test func jsonParser() {
        var random = SplitMix64(seed: 0xBEAC0006)
        let document = Array(FleetConfigTests.full.utf8)
        let alphabet = Array("{}[]\":,.-+eE0123456789 \n\t\\/ubfnrtl\u{7F}".utf8) + [0x00, 0x1F, 0xC3, 0xA9, 0xED, 0xA0, 0x80, 0xF4, 0x90, 0xFF]
        var parsed = 0
        var invariants = Invariants()
        for i in 0..<8_000 {
            var text: [UInt8]
            if i % 3 == 0 {
                text = (0..<Int.random(in: 0...80, using: &random)).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &random)] }
            } else {
                text = document
                for _ in 0...Int.random(in: 0...3, using: &random) {
                    let at = Int.random(in: 0..<text.count, using: &random)
                    switch Int.random(in: 0..<4, using: &random) {
                    case 0: text[at] = alphabet[Int.random(in: 0..<alphabet.count, using: &random)]
                    case 1: text.remove(at: at)
                    case 2: text.insert(alphabet[Int.random(in: 0..<alphabet.count, using: &random)], at: at)
                    default: text.removeLast(Int.random(in: 0...(text.count - at), using: &random))
                    }
                    if text.isEmpty { break }
                }
            }
            do {
                let value = try JSONParser().parse(text)
                parsed += 1
                invariants.check((try? JSONParser().parse(value.jsonText)) == value, "write and parse again round-trips")
                _ = try? FleetConfig.parse(value)
            } catch {
                invariants.check(error.line >= 1 && error.column >= 1 && !error.reason.isEmpty, "errors say where and why")
            }
        }
        #expect(invariants.violations.isEmpty, "\(invariants)")
        #expect(parsed > 100)
    }

    /// Nesting far past the limit fails cleanly instead of exhausting the stack.
    @Test func deepNesting() {
        for open in ["[", "{\"a\":"] {
            let text = String(repeating: open, count: 100_000)
            #expect(throws: JSONParseError.self) { try JSONParser().parse(text) }
        }
    }
}

/// Invariants checked per fuzz input without the cost of an expectation each time: the
/// first violations are kept with their count and reported by one `#expect` per test.
struct Invariants: CustomStringConvertible {
    private(set) var violations: [String] = []
    private(set) var count = 0

    mutating func check(_ condition: Bool, _ message: @autoclosure () -> String) {
        guard !condition else { return }
        count += 1
        if violations.count < 10 { violations.append(message()) }
    }

    var description: String { "\(count) violations, first: \(violations)" }
}

import BeaconKit
import Contract
import Config
import GatewayCore
import Simulation
import Foundation
import Testing
import Wire

/// `RSSIReport(decoding:topic:)`, the brain's way to read a report without the JSON tree,
/// must take what the general parse (`init(parsing:topic:)`) takes and give the same value,
/// or answer `nil` and leave the payload to the general parse: it never takes what that
/// refuses, nor reads a payload differently.
@Suite("RSSI reports read from their bytes")
struct RSSIReportDecodingTests {
    /// The general way: the JSON tree, then the type; `nil` where either refuses.
    static func parsed(_ bytes: [UInt8], topic: String) -> RSSIReport? {
        guard let json = try? JSONParser().parse(bytes) else { return nil }
        return try? RSSIReport(parsing: json, topic: topic)
    }

    static func decoded(_ bytes: [UInt8], topic: String) -> RSSIReport? {
        bytes.withUnsafeBytes { RSSIReport(decoding: $0, topic: topic) }
    }

    /// Every report real gateway engines write for a simulated store (four gateways, 20
    /// customers, a minute) is read from its bytes, to the value the general parse gives.
    @Test func takesEveryReportGatewaysWrite() throws {
        let names = ["door", "aisle", "shelf", "till"]
        let text = #"{"broker":{"url":"mqtt://127.0.0.1:1883"},"stores":[{"major":100,"name":"Main"}],"gateways":["#
            + names.map { #"{"id":"\#($0)","store":100,"source":"hci:0"}"# }.joined(separator: ",") + "]}"
        let config = try FleetConfig.parse(text)
        let simulation = StoreSimulation(store: 100, customers: 20, duration: 60, rate: 2,
                                         gateways: names.enumerated().map { .init(id: $1, position: 4 * Double($0)) })
        var reports = 0, entries = 0
        for (id, capture) in simulation.captures() {
            let gateway = try #require(config.gateways.first { $0.id == id })
            for (_, message) in try GatewayEngine.decisions(config: config, gateway: gateway, capture: capture.bytes,
                                                             start: simulation.start, duration: 60)
            where message.topic == "gateways/\(id)/rssi" {
                let general = try #require(Self.parsed(message.payload, topic: id))
                #expect(Self.decoded(message.payload, topic: id) == general, "\(String(decoding: message.payload, as: UTF8.self))")
                reports += 1
                entries += general.entries.count
            }
        }
        #expect(reports > 400)
        #expect(entries > 1_000)
    }

    /// The gateway marks a report it sends again by its bytes: the mark is what the report
    /// writes with `resent` set, and taking it off gives the bytes first sent.
    @Test func aResentMarkIsTheReportWrittenWithResent() throws {
        var report = try #require(Self.parsed(Array(Self.plain.utf8), topic: "door"))
        let sent = Array(report.json.utf8)
        report.resent = true
        #expect(RSSIReport.markedResent(sent) == Array(report.json.utf8))
        #expect(Self.parsed(RSSIReport.markedResent(sent), topic: "door")?.resent == true)
        #expect(RSSIReport.unmarked(RSSIReport.markedResent(sent)) == sent)
        #expect(RSSIReport.unmarked(sent) == sent)
    }

    static let plain = #"{"gateway":"door","from":"2026-11-21T09:00:00.000Z","to":"2026-11-21T09:00:00.500Z","beacons":[{"major":100,"minor":1,"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","n":3,"rssi":-60.5,"at":0.125,"rssiSmoothed":-61.2,"distance":1.5,"proximity":"near"},{"major":100,"minor":2,"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","n":1,"rssi":null,"at":0,"rssiSmoothed":null,"distance":null,"proximity":"unknown"}]}"#

    /// Variants of a report: each is read the same both ways, or left to the general parse;
    /// those the general parse refuses are never taken.
    static let variants: [(String, Bool)] = {
        var list: [(String, Bool)] = []
        func variant(replacing old: String, with new: String, _ accepted: Bool) {
            list.append((RSSIReportDecodingTests.plain.replacingOccurrences(of: old, with: new), accepted))
        }
        variant(replacing: ",", with: " ,\n\t", true)
        variant(replacing: #""to":"2026-11-21T09:00:00.500Z","#, with: "", false)
        variant(replacing: "}]}", with: #"}],"resent":true}"#, true)
        variant(replacing: "}]}", with: #"}],"resent":1}"#, true)
        variant(replacing: #""gateway":"door""#, with: #""gateway":"till""#, false)
        variant(replacing: #""gateway":"door""#, with: #""gateway":"do\u006fr""#, true)
        variant(replacing: #""gateway":"door","#, with: #""gateway":"door","gateway":"door","#, false)
        variant(replacing: #""n":3"#, with: #""n":0"#, false)
        variant(replacing: #""n":3"#, with: #""n":1.5"#, false)
        variant(replacing: #""n":3"#, with: #""n":3e0"#, true)
        variant(replacing: #""at":0.125"#, with: #""at":-1"#, false)
        variant(replacing: #""at":0.125"#, with: #""at":3601"#, false)
        variant(replacing: #""rssi":-60.5"#, with: #""rssi":"-60.5""#, false)
        variant(replacing: #""rssi":-60.5"#, with: #""rssi":-6.05e1"#, true)
        variant(replacing: #""rssi":-60.5,"#, with: "", true)
        variant(replacing: #""proximity":"near""#, with: #""proximity":"close""#, false)
        variant(replacing: #""proximity":"near""#, with: #""proximity":"ne\u0061r""#, true)
        variant(replacing: #","proximity":"near""#, with: "", false)
        variant(replacing: #""major":100,"minor":1"#, with: #""major":70000,"minor":1"#, false)
        variant(replacing: #""major":100,"minor":1"#, with: #""minor":1,"major":100"#, true)
        variant(replacing: #""major":100,"minor":1,"#, with: #""major":100,"minor":1,"colour":"red","#, true)
        variant(replacing: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", with: "E2C56DB5", false)
        variant(replacing: #""uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","n":1"#, with: #""uuid":null,"n":1"#, true)
        variant(replacing: #""minor":2,"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0""#,
                with: #""minor":2,"uuid":"00000000-0000-0000-0000-000000000001""#, true)
        variant(replacing: "]}", with: "]", false)
        // The exact form gateways write is read in one pass; these leave it part way through an
        // entry, and the entry is read again key by key from where it began.
        variant(replacing: #""proximity":"near"}"#, with: #""proximity":"near","colour":"red"}"#, true)
        variant(replacing: #""proximity":"near"}"#, with: #""proximity":"near" }"#, true)
        variant(replacing: #""proximity":"near"}"#, with: #""proximity":"nearly"}"#, false)
        variant(replacing: #""at":0.125,"#, with: #""at":0.125e0,"#, true)
        variant(replacing: #""at":0.125,"rssiSmoothed":-61.2"#, with: #""rssiSmoothed":-61.2,"at":0.125"#, true)
        variant(replacing: #""n":3,"rssi":-60.5"#, with: #""n":3,"rssi":-60.5,"rssi":-60.5"#, false)
        variant(replacing: #""minor":2,"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","n":1"#,
                with: #""minor":2,"uuid":"00000000-0000-0000-0000-000000000001","n":1,"x":0"#, true)
        variant(replacing: #"{"major":100,"minor":2"#, with: #"{"major":100, "minor":2"#, true)
        let plain = RSSIReportDecodingTests.plain
        list += [(plain, true), (plain + " ", true), (plain + "x", false)]
        list.append((#"{"gateway":"door","from":"2026-11-21T09:00:00.000Z","to":"2026-11-21T09:00:00.500Z","beacons":[]}"#, true))
        list.append((#"{"gateway":"door","from":"2026-11-21T09:00:01.000Z","to":"2026-11-21T09:00:00.500Z","beacons":[]}"#, false))
        list.append((#"{"gateway":"door","from":"2026-11-21T09:00:00.000Z","to":"2026-11-21T09:00:00.500Z","beacons":[{"namespace":"00112233445566778899","instance":"aabbccddeeff","n":1,"rssi":null,"at":0,"rssiSmoothed":null,"distance":null,"proximity":"unknown"}]}"#, true))
        list += [("[]", false), ("{}", false), ("", false)]
        return list
    }()

    @Test(arguments: variants)
    func variantsReadTheSameOrNot(text: String, accepted: Bool) {
        let bytes = Array(text.utf8)
        let general = Self.parsed(bytes, topic: "door")
        #expect((general != nil) == accepted)
        if let fast = Self.decoded(bytes, topic: "door") { #expect(fast == general) }
        if general == nil { #expect(Self.decoded(bytes, topic: "door") == nil) }
    }

    /// Reports with bytes changed, dropped or repeated at random: whatever the bytes read
    /// from them is what the general parse reads, and nothing it refuses.
    @Test func mangledReportsNeverReadDifferently() {
        let base = Array(Self.plain.utf8)
        var random = SplitMix64(seed: 20261128)
        let alphabet = Array(#"{}[]:,"\ -.0123456789eE+nultrfasz"#.utf8)
        var taken = 0
        for _ in 0..<5_000 {
            let bytes = mangled(base, alphabet: alphabet, using: &random)
            let general = Self.parsed(bytes, topic: "door")
            let fast = Self.decoded(bytes, topic: "door")
            if fast != nil { taken += 1 }
            #expect(fast == nil || fast == general, "\(String(decoding: bytes, as: UTF8.self))")
        }
        // Some survive (a digit changed, a space added): the comparison above was made.
        #expect(taken > 100)
    }
}

import BeaconKit
import Contract
import Config
import GatewayCore
import Simulation
import Foundation
import Testing
import Wire

/// `GatewayPresenceReport(decoding:topic:gateway:)`, the brain's way to read a gateway's
/// presence without the JSON tree, must take what the general parse
/// (`init(parsing:topic:gateway:)`) takes and give the same value, or answer `nil` and leave
/// the payload to the general parse: it never takes what that refuses, nor reads a payload
/// differently. `Inbound.decode` must give the same message either way.
@Suite("Gateway presence read from its bytes")
struct GatewayPresenceDecodingTests {
    static let beacon = BeaconRef(major: 100, minor: 1)

    /// The general way: the JSON tree, then the type; `nil` where either refuses.
    static func parsed(_ bytes: [UInt8], beacon: BeaconRef = beacon, gateway: String = "door") -> GatewayPresenceReport? {
        guard let json = try? JSONParser().parse(bytes) else { return nil }
        return try? GatewayPresenceReport(parsing: json, topic: beacon, gateway: gateway)
    }

    static func decoded(_ bytes: [UInt8], beacon: BeaconRef = beacon, gateway: String = "door") -> GatewayPresenceReport? {
        bytes.withUnsafeBytes { GatewayPresenceReport(decoding: $0, topic: beacon, gateway: gateway) }
    }

    /// Every presence real gateway engines write for a simulated store (four gateways, 20
    /// customers, a minute) is read from its bytes, to the value the general parse gives.
    @Test func takesEveryPresenceGatewaysWrite() throws {
        let names = ["door", "aisle", "shelf", "till"]
        let text = #"{"broker":{"url":"mqtt://127.0.0.1:1883"},"stores":[{"major":100,"name":"Main"}],"gateways":["#
            + names.map { #"{"id":"\#($0)","store":100,"source":"hci:0"}"# }.joined(separator: ",") + "]}"
        let config = try FleetConfig.parse(text)
        let simulation = StoreSimulation(store: 100, customers: 20, duration: 60, rate: 2,
                                         gateways: names.enumerated().map { .init(id: $1, position: 4 * Double($0)) })
        var views = 0
        for (id, capture) in simulation.captures() {
            let gateway = try #require(config.gateways.first { $0.id == id })
            for (_, message) in try GatewayEngine.decisions(config: config, gateway: gateway, capture: capture.bytes,
                                                             start: simulation.start, duration: 60)
            where !message.payload.isEmpty {
                guard case .beacon(let ref, .gatewayPresence(let named))? = Topics().parse(message.topic) else { continue }
                let general = try #require(Self.parsed(message.payload, beacon: ref, gateway: named))
                #expect(Self.decoded(message.payload, beacon: ref, gateway: named) == general,
                        "\(String(decoding: message.payload, as: UTF8.self))")
                let inbound = Inbound.decode(topic: message.topic, payload: message.payload, retained: true)
                #expect(inbound.message == .gatewayPresence(ref, gateway: named, .value(general)))
                views += 1
            }
        }
        #expect(views > 50)
    }

    static let plain = #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":1,"gateway":"door","zone":"Entrance","proximity":"near","rssiSmoothed":-61.2,"distance":1.53,"since":"2026-11-21T09:00:00.000Z"}"#

    /// Variants of a presence: each is read the same both ways, or left to the general parse;
    /// those the general parse refuses are never taken.
    static let variants: [(String, Bool)] = {
        var list: [(String, Bool)] = []
        func variant(replacing old: String, with new: String, _ accepted: Bool) {
            list.append((GatewayPresenceDecodingTests.plain.replacingOccurrences(of: old, with: new), accepted))
        }
        variant(replacing: ",", with: " ,\n\t", true)
        variant(replacing: #"":"#, with: #"" : "#, true)
        variant(replacing: #""gateway":"door""#, with: #""gateway":"till""#, false)
        variant(replacing: #""gateway":"door""#, with: #""gateway":"do\u006fr""#, true)
        variant(replacing: #""gateway":"door""#, with: #""gateway":"do/or""#, false)
        variant(replacing: #""gateway":"door","#, with: "", false)
        variant(replacing: #""gateway":"door","#, with: #""gateway":"door","gateway":"door","#, false)
        variant(replacing: #""zone":"Entrance""#, with: #""zone":"Entr\u00e9e \"A\"""#, true)
        variant(replacing: #""zone":"Entrance""#, with: #""zone":"Entrée""#, true)
        variant(replacing: #""zone":"Entrance""#, with: #""zone":"""#, true)
        variant(replacing: #""zone":"Entrance""#, with: #""zone":"\#(String(repeating: "z", count: 129))""#, false)
        variant(replacing: #""zone":"Entrance","#, with: "", false)
        variant(replacing: #""zone":"Entrance""#, with: #""zone":7"#, false)
        variant(replacing: #""rssiSmoothed":-61.2"#, with: #""rssiSmoothed":-6.12e1"#, true)
        variant(replacing: #""rssiSmoothed":-61.2"#, with: #""rssiSmoothed":-201"#, false)
        variant(replacing: #""rssiSmoothed":-61.2"#, with: #""rssiSmoothed":51"#, false)
        variant(replacing: #""rssiSmoothed":-61.2"#, with: #""rssiSmoothed":null"#, true)
        variant(replacing: #""rssiSmoothed":-61.2"#, with: #""rssiSmoothed":"-61.2""#, false)
        variant(replacing: #""rssiSmoothed":-61.2,"#, with: "", true)
        variant(replacing: #""distance":1.53"#, with: #""distance":-0.5"#, false)
        variant(replacing: #""distance":1.53"#, with: #""distance":-0"#, true)
        variant(replacing: #""distance":1.53"#, with: #""distance":1530e-3"#, true)
        variant(replacing: #""distance":1.53"#, with: #""distance":null"#, true)
        variant(replacing: #""distance":1.53,"#, with: "", true)
        variant(replacing: #""proximity":"near""#, with: #""proximity":"close""#, false)
        variant(replacing: #""proximity":"near""#, with: #""proximity":"ne\u0061r""#, true)
        variant(replacing: #""proximity":"near","#, with: "", false)
        variant(replacing: #""since":"2026-11-21T09:00:00.000Z""#, with: #""since":null"#, true)
        variant(replacing: #""since":"2026-11-21T09:00:00.000Z""#, with: #""since":"yesterday""#, false)
        variant(replacing: #","since":"2026-11-21T09:00:00.000Z""#, with: "", true)
        variant(replacing: #""major":100,"minor":1"#, with: #""minor":1,"major":100"#, true)
        variant(replacing: #""major":100,"minor":1"#, with: #""major":100,"minor":2"#, false)
        variant(replacing: #""major":100,"minor":1"#, with: #""major":100.0,"minor":1e0"#, true)
        variant(replacing: #""major":100,"minor":1"#, with: #""major":70000,"minor":1"#, false)
        variant(replacing: #""major":100,"minor":1"#, with: #""major":100,"minor":1.5"#, false)
        variant(replacing: #""major":100,"#, with: "", false)
        variant(replacing: #""major":100,"minor":1,"#, with: #""major":100,"minor":1,"colour":"red","#, true)
        variant(replacing: #""major":100,"minor":1,"#, with: #""major":100,"minor":1,"namespace":"00112233445566778899","#, false)
        variant(replacing: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", with: "E2C56DB5", false)
        variant(replacing: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", with: "e2c56db5-dffb-48d2-b060-d0f5a71096e0", true)
        variant(replacing: #""uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0""#, with: #""uuid":null"#, true)
        variant(replacing: #""uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","#, with: "", true)
        let plain = GatewayPresenceDecodingTests.plain
        list += [(plain, true), (" " + plain + "\n", true), (plain + "x", false), (plain + "{}", false)]
        list += [("[]", false), ("{}", false), ("", false), ("null", false), (String(plain.dropLast()), false)]
        return list
    }()

    @Test(arguments: variants)
    func variantsReadTheSameOrNot(text: String, accepted: Bool) {
        let bytes = Array(text.utf8)
        let general = Self.parsed(bytes)
        #expect((general != nil) == accepted)
        if let fast = Self.decoded(bytes) { #expect(fast == general) }
        if general == nil { #expect(Self.decoded(bytes) == nil) }
        // What the brain gets: the same message, or the general parse's reason.
        let inbound = Inbound.decode(topic: "beacons/100/1/presence/door", payload: bytes, retained: false)
        if let general {
            #expect(inbound.message == .gatewayPresence(Self.beacon, gateway: "door", .value(general)))
        } else if !bytes.isEmpty {
            guard case .gatewayPresence(_, _, .invalid) = inbound.message else {
                Issue.record("\(text) read as \(inbound.message)")
                return
            }
        }
    }

    /// An Eddystone beacon's presence is left to the general parse, and read by it.
    @Test func eddystoneTakesTheGeneralParse() throws {
        let ref = try BeaconRef(json: .object(["namespace": .string("00112233445566778899"), "instance": .string("aabbccddeeff")]),
                                at: "")
        let text = #"{"namespace":"00112233445566778899","instance":"aabbccddeeff","gateway":"door","zone":"Entrance","proximity":"far","rssiSmoothed":-80,"distance":9.5,"since":null}"#
        let bytes = Array(text.utf8)
        #expect(Self.decoded(bytes, beacon: ref) == nil)
        #expect(Self.parsed(bytes, beacon: ref) != nil)
    }

    /// Presences with bytes changed, dropped or repeated at random: whatever the bytes read
    /// from them is what the general parse reads, and nothing it refuses.
    @Test func mangledPresencesNeverReadDifferently() {
        let base = Array(Self.plain.utf8)
        var random = SplitMix64(seed: 20261128)
        let alphabet = Array(#"{}[]:,"\ -.0123456789eE+nultrfasz/"#.utf8)
        var taken = 0
        for _ in 0..<5_000 {
            let bytes = mangled(base, alphabet: alphabet, using: &random)
            let general = Self.parsed(bytes)
            let fast = Self.decoded(bytes)
            if fast != nil { taken += 1 }
            #expect(fast == nil || fast == general, "\(String(decoding: bytes, as: UTF8.self))")
        }
        #expect(taken > 100)
    }
}

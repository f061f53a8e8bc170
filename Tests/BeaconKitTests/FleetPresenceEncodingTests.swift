import BeaconKit
import Contract
import Testing

/// `FleetPresenceReport`'s payload and signature are written key by key into the writer
/// (docs/PERFORMANCE.md §11): byte for byte what the encoding through `JSONWriter.object`
/// and a closure per view wrote, which `reference` keeps.
@Suite("Fleet presence encoding")
struct FleetPresenceEncodingTests {
    /// The encoding before the direct one (a9343e1), as it was.
    static func reference(_ r: FleetPresenceReport, volatile: Bool) -> String {
        var writer = JSONWriter(capacity: 256)
        writer.object { o in
            if r.beacon.eddystone == nil { o("uuid", r.uuid?.description) }
            r.beacon.write(into: &o)
            o("zone", r.zone)
            o("zoneName", r.zoneName)
            o("gateways", objects: r.gateways) { g, view in
                g("gateway", view.gateway)
                g("zone", view.zone)
                g("proximity", view.proximity.rawValue)
                if volatile {
                    g("rssiSmoothed", view.rssiSmoothed, places: 1)
                    g("distance", view.distance, places: 2)
                }
            }
            o("proximity", r.proximity.rawValue)
            o("since", r.since)
        }
        return writer.text
    }

    static let names = ["door", "s12-till", "", "Ça va", "quote\"d", "back\\slash", "tab\there", "nl\n", "\u{1}",
                        "😀 fruit", String(repeating: "long-", count: 30)]
    static let numbers: [Double?] = [nil, 0, -0.0, -61.25, -61.35, 1.005, 0.004, 0.005, -0.04, 12345.678, .nan, .infinity,
                                     -.infinity, 1e17, -1e19, 9.2e17, 3.0]

    static func random(_ rng: inout some RandomNumberGenerator) -> FleetPresenceReport {
        let ref = Bool.random(using: &rng)
            ? BeaconRef(major: .random(in: 0...UInt16.max, using: &rng), minor: .random(in: 0...UInt16.max, using: &rng))
            : BeaconRef(namespace: EddystoneNamespace(hex: "00112233445566778899")!, instance: EddystoneInstance(hex: "aabbccddeeff")!)
        let views = (0..<Int.random(in: 0...6, using: &rng)).map { _ in
            FleetPresenceReport.View(gateway: names.randomElement(using: &rng)!, zone: names.randomElement(using: &rng)!,
                                     proximity: Proximity.allCases.randomElement(using: &rng)!,
                                     rssiSmoothed: numbers.randomElement(using: &rng)!.map { $0 * .random(in: 0.5...2, using: &rng) },
                                     distance: numbers.randomElement(using: &rng)!)
        }
        return FleetPresenceReport(
            beacon: ref, uuid: Bool.random(using: &rng) ? nil : BeaconUUID(high: .random(in: 0...UInt64.max, using: &rng),
                                                                           low: .random(in: 0...UInt64.max, using: &rng)),
            zone: names.randomElement(using: &rng)!, zoneName: names.randomElement(using: &rng)!, gateways: views,
            proximity: Proximity.allCases.randomElement(using: &rng)!,
            since: CaptureTime(nanoseconds: .random(in: -4_000_000_000_000_000_000...4_000_000_000_000_000_000, using: &rng)))
    }

    @Test func theSameBytesAsTheEncodingThroughClosures() {
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let report = Self.random(&rng)
            let expected = Self.reference(report, volatile: true)
            #expect(report.json == expected)
            #expect(report.signature == Self.reference(report, volatile: false))
            let both = report.payloadAndSignature
            #expect(both.json == expected)
            #expect(both.signature == report.signature)
        }
    }
}

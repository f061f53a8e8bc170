import BeaconKit
import Foundation
import TestSupport
import Testing

/// The floor under the brain's presence figures (issue 8): `beaconctl score` on simulated
/// stores with ground truth. docs/PERFORMANCE.md has the benchmark over 20 seeds; this guards
/// a looser floor so a regression of the zone fusion fails CI. Both are deterministic per
/// seed (the in-process run exactly; the real programs decide in capture time).
@Suite("presence score")
struct PresenceScoreTests {
    func score(_ arguments: [String]) async throws -> JSONValue {
        let dir = try TemporaryDirectory("presence-score")
        let process = try ChildProcess(Programs.built("beaconctl"), ["score", "--json"] + arguments, in: dir)
        let status = await process.waitForExit(timeout: 600)
        #expect(status == 0, "\(process.diagnostics)")
        return try JSONParser().parse(Array(process.stdout.utf8))
    }

    @Test("the fusion beats the strongest-gateway baseline on σ 4 dB / 20 % loss, with no ghost moves (in process, 3 seeds)")
    func inProcessFloor() async throws {
        let result = try await score(["--in-process", "--seeds", "1-3"])
        let seeds = try #require(result["seeds"]?.arrayValue)
        #expect(seeds.count == 3)
        for seed in seeds {
            let brain = seed["brain"], strongest = seed["strongest"]
            let label = "seed \(seed["seed"]?.numberValue ?? 0): \(brain.map { "\($0)" } ?? "nil")"
            let right = try #require(brain?["zoneRight"]?.numberValue)
            // Measured 95.3-95.5 % and 0.8-0.95 flaps per visit (docs/PERFORMANCE.md section 7).
            #expect(right >= 94.5, "\(label)")
            #expect(right > (strongest?["zoneRight"]?.numberValue ?? 100), "\(label)")
            #expect((brain?["flapsPerVisit"]?.numberValue ?? 99) <= 1.2, "\(label)")
            // Visits begin at the entrance (`entranceWait`): 0-0.1 flaps in the first 5 s; 0.2-0.3 without.
            #expect((brain?["flapsAtEntry"]?.numberValue ?? 99) <= 0.15, "\(label)")
            #expect((brain?["exitDelay"]?.numberValue ?? 99) <= 5, "\(label)")
            #expect((brain?["entryDelay"]?.numberValue ?? 99) <= 2, "\(label)")
            #expect(brain?["ghostMovesPerVisit"]?.numberValue == 0, "\(label)")
            #expect(brain?["missed"]?.numberValue == 0, "\(label)")
        }
    }

    @Test("--layout all scores every named store, each with the strongest-gateway rule beside it (in process, small)")
    func layouts() async throws {
        let result = try await score(["--in-process", "--seeds", "1", "--customers", "6", "--duration", "240", "--layout", "all"])
        let layouts = try #require(result["layouts"]?.arrayValue)
        #expect(layouts.compactMap { $0["layout"]?.stringValue } == ["gateways", "queue", "spots", "crowd", "fobs"])
        for layout in layouts {
            let seed = try #require(layout["seeds"]?.arrayValue?.first)
            let right = try #require(seed["brain"]?["zoneRight"]?.numberValue)
            #expect(right > 50 && right <= 100, "\(layout)")
            #expect(seed["strongest"]?["zoneRight"]?.numberValue != nil, "\(layout)")
            #expect(seed["brain"]?["missed"]?.numberValue == 0, "\(layout)")
        }
    }

    @Test("calibration: with gateways reading ±6 dB off, the brain that calibrates from their own beacons keeps its zone figure (in process, seed 1)")
    func calibrationFloor() async throws {
        // Customers stand anywhere within 2.5 m of a gateway, where offsets move zones; measured
        // 91.7 % calibrated, 84.9 % not, 91.7 % without offsets (docs/PERFORMANCE.md).
        let store = ["--in-process", "--seeds", "1", "--spot-radius", "2.5", "--gateways-advertise",
                     "--offsets", "door:+6,window:-6,shelves:+3,counter:-3"]
        let calibrated = try await score(store)
        let uncalibrated = try await score(store + ["--brain", #"{"calibration":{"enabled":false}}"#])
        let on = try #require(calibrated["seeds"]?.arrayValue?.first?["brain"]?["zoneRight"]?.numberValue)
        let off = try #require(uncalibrated["seeds"]?.arrayValue?.first?["brain"]?["zoneRight"]?.numberValue)
        #expect(on >= 88, "calibrated: \(calibrated)")
        #expect(on >= off + 3, "calibration must win back what the offsets cost: \(on) % against \(off) %")
    }

    @Test("through real gateways, brain and broker: a small store scores above the floor")
    func realProgramsFloor() async throws {
        // At 10× capture speed, not as fast as possible: on a loaded machine (a CI run with the
        // package building beside it) the gateways' replays drift apart by more than the
        // brain's clock hold and it decides without the late ones (85.7 % once, against
        // 95.2 % unloaded); paced, 96.5 % here in 42 s.
        let result = try await score(["--seeds", "1", "--customers", "6", "--duration", "120", "--replay-speed", "10"])
        let seed = try #require(result["seeds"]?.arrayValue?.first)
        let brain = seed["brain"], previous = seed["previous"]
        let label = "\(seed)"
        let right = try #require(brain?["zoneRight"]?.numberValue)
        #expect(right >= 88, "\(label)")
        #expect(right > (previous?["zoneRight"]?.numberValue ?? 100), "\(label)")
        #expect((brain?["exitDelay"]?.numberValue ?? 99) <= 5, "\(label)")
        #expect((brain?["ghostMovesPerVisit"]?.numberValue ?? 99) == 0, "\(label)")
        #expect(brain?["missed"]?.numberValue == 0, "\(label)")
    }
}

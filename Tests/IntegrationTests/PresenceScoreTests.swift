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

    /// Per layout (issue 19): measured on seed 1 in process, 20 customers over 900 s, with
    /// today's defaults (docs/presence.md, "Layouts"; fobs since a slow beacon's rate is no
    /// longer read at its first burst: 77.8 % before): zone right, flaps per visit, and the
    /// brain's zone right minus the strongest-gateway rule's in the same run. The floors sit
    /// just under, so a regression of the fusion or of a layout fails here.
    static let layoutFloors: [(layout: String, measured: (right: Double, flaps: Double, gain: Double))] = [
        ("queue", (86.8, 3.5, -2.1)), ("spots", (74.2, 9.4, -0.7)), ("crowd", (92.0, 3.2, -0.9)), ("fobs", (89.9, 1.65, 1.5)),
    ]

    @Test("every layout keeps its figures: zone right, flaps and the gap to the strongest-gateway rule (in process, seed 1)")
    func layoutFloors() async throws {
        let result = try await score(["--in-process", "--seeds", "1", "--layout", Self.layoutFloors.map(\.layout).joined(separator: ",")])
        let layouts = try #require(result["layouts"]?.arrayValue)
        #expect(layouts.compactMap { $0["layout"]?.stringValue } == Self.layoutFloors.map(\.layout))
        for (layout, floor) in zip(layouts, Self.layoutFloors) {
            let seed = try #require(layout["seeds"]?.arrayValue?.first)
            let brain = seed["brain"]
            let label = "\(floor.layout): \(brain.map { "\($0)" } ?? "nil")"
            let right = try #require(brain?["zoneRight"]?.numberValue)
            let strongest = try #require(seed["strongest"]?["zoneRight"]?.numberValue)
            #expect(right >= floor.measured.right - 1, "\(label)")
            #expect((brain?["flapsPerVisit"]?.numberValue ?? 99) <= floor.measured.flaps + 0.75, "\(label)")
            #expect(right - strongest >= floor.measured.gain - 1, "\(label); strongest \(strongest)")
            #expect((brain?["exitDelay"]?.numberValue ?? 99) <= 5, "\(label)")
            #expect((brain?["ghostMovesPerVisit"]?.numberValue ?? 99) <= 0.15, "\(label)")
            #expect(brain?["missed"]?.numberValue == 0, "\(label)")
        }
    }

    /// The zone HMM (`brain.zoneModel: "hmm"`), selectable: measured on seed 1 in process
    /// (docs/presence.md, "The zone HMM"); floors just under, as above.
    static let hmmFloors: [(layout: String, measured: (right: Double, flaps: Double))] = [
        ("gateways", (94.6, 0.6)), ("queue", (89.2, 2.7)), ("spots", (76.0, 8.3)), ("crowd", (93.0, 2.25)), ("fobs", (88.8, 1.25)),
    ]

    @Test("the zone HMM keeps its figures on every layout (in process, seed 1)")
    func hmmFloors() async throws {
        try await holdsItsFloors(Self.hmmFloors, brain: #"{"zoneModel":"hmm"}"#)
    }

    /// Settled customers (`brain.zoneSettle` 5 s), selectable: measured on seed 1 in process
    /// (docs/presence.md, "Settled customers"); floors just under, as above.
    static let settleFloors: [(layout: String, measured: (right: Double, flaps: Double))] = [
        ("gateways", (94.2, 0.6)), ("queue", (90.2, 2.0)), ("spots", (78.2, 4.15)), ("crowd", (94.0, 1.75)), ("fobs", (88.7, 1.5)),
    ]

    @Test("settled customers keep their figures on every layout (in process, seed 1)")
    func settleFloors() async throws {
        try await holdsItsFloors(Self.settleFloors, brain: #"{"zoneSettle":5}"#)
    }

    /// A selectable estimator on seed 1 of each layout, in process: zone right at most 1
    /// point under what was measured, flaps at most 0.75 over, exits within 5 s, no visit missed.
    func holdsItsFloors(_ floors: [(layout: String, measured: (right: Double, flaps: Double))], brain settings: String) async throws {
        let result = try await score(["--in-process", "--seeds", "1", "--layout", floors.map(\.layout).joined(separator: ","),
                                      "--brain", settings])
        let layouts = try #require(result["layouts"]?.arrayValue)
        #expect(layouts.compactMap { $0["layout"]?.stringValue } == floors.map(\.layout))
        for (layout, floor) in zip(layouts, floors) {
            let brain = try #require(layout["seeds"]?.arrayValue?.first)["brain"]
            let label = "\(floor.layout): \(brain.map { "\($0)" } ?? "nil")"
            #expect(try #require(brain?["zoneRight"]?.numberValue) >= floor.measured.right - 1, "\(label)")
            #expect((brain?["flapsPerVisit"]?.numberValue ?? 99) <= floor.measured.flaps + 0.75, "\(label)")
            #expect((brain?["exitDelay"]?.numberValue ?? 99) <= 5, "\(label)")
            #expect(brain?["missed"]?.numberValue == 0, "\(label)")
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

    @Test("through real gateways, brain and broker: the counter queue keeps its floor")
    func realProgramsQueue() async throws {
        // Measured 89.1 % zone right, 3.17 flaps per visit (in process 89.0 %, the same
        // decisions); the strongest-gateway rule 92.1 % in the same run.
        let result = try await score(["--layout", "queue", "--seeds", "1", "--customers", "6", "--duration", "240",
                                      "--replay-speed", "10"])
        #expect(result["layout"]?.stringValue == "queue")
        let seed = try #require(result["seeds"]?.arrayValue?.first)
        let brain = seed["brain"]
        let label = "\(seed)"
        #expect(try #require(brain?["zoneRight"]?.numberValue) >= 87.5, "\(label)")
        #expect((brain?["flapsPerVisit"]?.numberValue ?? 99) <= 4, "\(label)")
        #expect((brain?["exitDelay"]?.numberValue ?? 99) <= 5, "\(label)")
        #expect((brain?["ghostMovesPerVisit"]?.numberValue ?? 99) == 0, "\(label)")
        #expect(brain?["missed"]?.numberValue == 0, "\(label)")
    }
}

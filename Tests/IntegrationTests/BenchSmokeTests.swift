import BeaconKit
import Foundation
import TestSupport
import Testing

/// `beaconctl bench --quick` in CI: every phase still runs against a broker of its own and
/// produces numbers. The numbers of a debug build on a CI machine mean nothing; that they
/// exist does (the figures come from release builds, docs/PERFORMANCE.md).
@Suite("beaconctl bench")
struct BenchSmokeTests {
    @Test("--quick runs every phase and reports every figure")
    func quick() async throws {
        let dir = try TemporaryDirectory("bench")
        // At the lowest priority (inherited by the broker and programs it starts): its bursts
        // must not slow the timing-sensitive tests running beside it.
        let process = try ChildProcess("/usr/bin/nice", ["-n", "19", Programs.built("beaconctl"), "bench", "--quick", "--json"],
                                       in: dir)
        let status = await process.waitForExit(timeout: 300)
        if status == nil { await process.stop() }
        #expect(status == 0, "\(process.stderr)")
        let report = try JSONParser().parse(process.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        func number(_ path: String...) -> Double? {
            var value: JSONValue? = report
            for key in path { value = value?[key] }
            return value?.numberValue
        }
        #expect((number("cBaseline", "medianMessagesPerSecond") ?? 0) > 0)
        #expect(number("gatewayRaw", "received") == number("gatewayRaw", "adverts"))
        #expect((number("gatewayRaw", "messagesPerSecondEndToEnd") ?? 0) > 0)
        #expect((number("gatewayRaw", "cpuMsPer1000Adverts") ?? 0) > 0)
        #expect((number("gatewayLatency", "latency", "count") ?? 0) > 0)
        #expect((number("gatewayRateLimited", "received") ?? 0) > 0)
        let memory = report["gatewayMemory"]?.arrayValue ?? []
        #expect(memory.map { $0["beacons"]?.numberValue } == [0, 1000])
        #expect(memory.allSatisfy { ($0["residentBytes"]?.numberValue ?? 0) > 1_000_000 })
        #expect(number("brainJoins", "joinToReply", "count") == 100)
        #expect(number("brainJoins", "replies") == 100)
        #expect((number("brainReports", "handled") ?? 0) > 0)
        #expect(number("brainFlood", "replies") == 300)
        #expect(number("brainFlood", "legitimateDuringFlood", "count") == 50)
        #expect((number("brainFlood", "storesBytesPerJoinOrLeave") ?? 0) > 0)
        #expect((number("brainFlood", "residentMiBPeak") ?? 0) > 1)
        #expect(report["brainFlood"]?["access"] == .string("owned-or-near"))
        #expect(number("brainFloodOpen", "replies") == 300)
        #expect(number("brainFloodOpen", "legitimateDuringFlood", "count") == 50)
        #expect((number("brainFloodOpen", "storesBytesPerJoinOrLeave") ?? 0) > 0)
    }

    @Test("--only fleet --quick: two store brokers bridged to a centre, the brain, every figure",
          arguments: ["mosquitto", "nats"])
    func fleet(centre: String) async throws {
        let dir = try TemporaryDirectory("bench-fleet-\(centre)")
        // At a NATS centre as a chain runs it: brains in shards (`--fleet-brains`, a store each),
        // each its own connection for its retained state (docs/fleet.md).
        let brains = centre == "nats" ? 2 : 1
        let process = try ChildProcess("/usr/bin/nice", ["-n", "19", Programs.built("beaconctl"), "bench", "--only", "fleet",
                                                         "--quick", "--json", "--fleet-centre", centre,
                                                         "--fleet-brains", String(brains)], in: dir)
        let status = await process.waitForExit(timeout: 300)
        if status == nil { await process.stop() }
        #expect(status == 0, "\(process.stderr)")
        let report = try JSONParser().parse(process.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        let rows = report["fleet"]?.arrayValue ?? []
        #expect(rows.count == 1)
        guard let row = rows.first else { return }
        func number(_ path: String...) -> Double {
            var value: JSONValue? = row
            for key in path { value = value?[key] }
            return value?.numberValue ?? 0
        }
        #expect(row["centre"] == .string(centre))
        #expect(number("stores") == 2)
        #expect(number("gateways") == 8)
        #expect(number("brains") == Double(brains))
        #expect(number("sightings") > 0)
        // The C subscriber of everything at the centre. At a NATS centre it sometimes receives
        // only the retained messages it is given on subscribing (4) and none of the live
        // traffic, while the brain beside it on the same node decides every customer: 1 quick
        // run in 3 on the quiet machine and the CI rehearsal of 2026-11-28 (main af838f3); the
        // cause is not found (docs/PERFORMANCE.md section 6). Known, intermittent, there only.
        let subscriberChecks = {
            #expect(number("centralReceived") >= number("sightings"), "every sighting crossed a bridge to the centre")
            #expect(number("subscriberCpuMsPer1000Messages") > 0)
        }
        if centre == "nats" {
            withKnownIssue("at a NATS centre the C subscriber sometimes gets only the retained messages", isIntermittent: true) {
                subscriberChecks()
            }
        } else {
            subscriberChecks()
        }
        #expect(number("centralMessagesPerSecond") > 0)
        #expect(number("centreCpuMsPer1000Messages") > 0)
        #expect(number("brainCpuMsPer1000Sightings") > 0)
        #expect(number("sightingToZone", "count") > 0, "the brain gave customers a zone")
        #expect(number("decision", "count") >= number("sightingToZone", "count"),
                "every zone came with a decision on beacons/+/+/events, timed from its capture time")
        #expect(number("decision", "medianMs") > 0)
        #expect(number("bridgeLatency", "count") > 0)
        #expect(number("brainResidentBytes") > 1_000_000)
        #expect(number("storeBrokerResidentBytes") > 100_000)
        // Each of the centre's processes measured: one Mosquitto, or the cluster's three nodes.
        let nodes = row["centreNodes"]?.arrayValue ?? []
        #expect(nodes.count == (centre == "nats" ? 3 : 1))
        for node in nodes {
            #expect((node["cpuMsPer1000Messages"]?.numberValue ?? 0) > 0, "\(node)")
            #expect((node["residentBytes"]?.numberValue ?? 0) > 1_000_000, "\(node)")
        }
        if centre == "nats" {
            #expect(nodes.map { $0["name"]?.stringValue } == ["n1", "n2", "n3"])
        }
    }
}

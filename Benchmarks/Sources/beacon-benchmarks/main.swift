import BeaconKit
import Wire
import Config
import Simulation
#if canImport(Glibc)
import Glibc
#endif

// beacon-benchmarks: BeaconBridge's micro-benchmarks (docs/PERFORMANCE.md).
//
//   beacon-benchmarks [all|decode|track|json|config|pipeline|brain|brain-fleet|brain-flood] [--runs N] [--json]
//   beacon-benchmarks generate [--count N] [--beacons B] > ads.hex
//   beacon-benchmarks decode-file [--runs N] < ads.hex
//
// Every benchmark runs on one thread; rates are per second of that thread's CPU time
// (the median of --runs runs, after one warm-up run), allocations are counted over a run.

let usage = """
usage: beacon-benchmarks [all|decode|track|json|config|pipeline|brain|brain-fleet|brain-flood] [--runs N] [--json]
       beacon-benchmarks brain-fleet [--stores S] [--customers C] [--duration D]   (one brain core, S stores in-process)
       beacon-benchmarks brain-flood [--runs N]                   (bench --only flood's joins, in process)
       beacon-benchmarks generate [--count N] [--beacons B]      (hex HCI events, one a line)
       beacon-benchmarks decode-file [--runs N]                   (reads those lines on stdin)
"""

var arguments = Array(CommandLine.arguments.dropFirst())
@MainActor func option(_ name: String, default value: Int) -> Int {
    guard let i = arguments.firstIndex(of: name) else { return value }
    guard i + 1 < arguments.count, let parsed = Int(arguments[i + 1]), parsed > 0 else {
        print("\(name) needs a positive number\n\(usage)")
        exit(2)
    }
    arguments.removeSubrange(i...(i + 1))
    return parsed
}
@MainActor func flag(_ name: String) -> Bool {
    guard let i = arguments.firstIndex(of: name) else { return false }
    arguments.remove(at: i)
    return true
}

let runs = option("--runs", default: 7)
let asJSON = flag("--json")
let count = option("--count", default: 100_000)
let beaconCount = option("--beacons", default: 10_000)
let command = arguments.first ?? "all"
if flag("--help") || flag("-h") {
    print(usage)
    exit(0)
}

@MainActor func report(_ results: [Measurement]) {
    if asJSON {
        for r in results { print(r.json) }
    } else {
        printTable(results)
    }
}

switch command {
case "all", "decode", "track", "json", "config", "pipeline", "brain":
    var results: [Measurement] = []
    if command == "all" || command == "decode" {
        // 10,000 distinct iBeacons, one report per event; 20 passes = 200,000 reports a run.
        let events = PackedEvents(BenchmarkWorkload(count: 10_000, beacons: 10_000).events())
        results.append(Workloads.decodeEvents(events, passes: 100, runs: runs))
        results.append(Workloads.decodePayloads(events.payloads, passes: 100, runs: runs))
        // A real capture's mix (simulated store: 1–2 reports an event, phones among the beacons).
        let store = StoreSimulation(customers: 50, duration: 120, rate: 5).captures()
        var mixed: [[UInt8]] = []
        for (_, writer) in store.sorted(by: { $0.key < $1.key }) {
            writer.bytes.withUnsafeBytes { raw in
                guard var reader = try? BtsnoopReader(bytes: raw) else { return }
                while let record = reader.next() {
                    if let event = record.hciEvent(datalink: reader.datalink) { mixed.append(Array(event)) }
                }
            }
        }
        let packed = PackedEvents(mixed)
        var decoder = AdvertisementDecoder()
        packed.bytes.withUnsafeBytes { all in
            for range in packed.ranges { decoder.decode(event: UnsafeRawBufferPointer(rebasing: all[range])) { _, _ in } }
        }
        let reports = decoder.counters.reports
        results.append(Workloads.decodeEvents(packed, passes: 20, runs: runs, name: "decode/simulated-store",
                                              reportsPerPass: reports))
    }
    if command == "all" || command == "track" {
        results.append(Workloads.track(beacons: 10_000, updates: 1_000_000, runs: runs))
    }
    if command == "all" || command == "json" {
        results.append(Workloads.sightingJSON(count: 200_000, runs: runs))
    }
    if command == "all" || command == "pipeline" {
        results.append(Workloads.pipeline(beacons: 1_000, adverts: 100_000, raw: true, runs: runs))
        results.append(Workloads.pipeline(beacons: 100, adverts: 100_000, raw: false, runs: runs))
    }
    if command == "all" || command == "brain" {
        results.append(Workloads.brainSightings(beacons: 1_000, count: 50_000, runs: runs))
    }
    if command == "all" || command == "config" {
        let (result, bytes) = Workloads.configLoad(gateways: 20, beacons: 1_000, count: 20, runs: runs)
        results.append(result)
        if !asJSON {
            report(results)
            print("config: \(bytes) bytes of JSON, \(format(median(result.cpuSeconds) / Double(result.operations) * 1000, 2)) ms a load")
            exit(0)
        }
    }
    report(results)

case "brain-fleet":
    // Not in "all": generating the stores' traffic takes a while.
    let stores = option("--stores", default: 20)
    let customers = option("--customers", default: 50)
    let duration = option("--duration", default: 60)
    let (result, sightings, digest) = Workloads.brainFleet(stores: stores, customers: customers, duration: Double(duration), runs: runs)
    report([result])
    if !asJSON {
        let perMessage = median(result.cpuSeconds) / Double(result.operations)
        print("brain-fleet: \(stores) stores, \(result.operations) messages to the brain (\(sightings) sightings beside them); "
              + "\(format(perMessage * 1e6, 1)) ms per 1,000 messages, "
              + "\(format(median(result.cpuSeconds) / Double(sightings) * 1e6, 1)) ms per 1,000 sightings; "
              + "what it published: digest \(String(digest, radix: 16))")
    }

case "brain-flood":
    // beaconctl bench --only flood's joins, in process (BrainFlood.swift).
    report([Workloads.brainFlood(joins: 10_000, access: "owned-or-near", runs: runs),
            Workloads.brainFlood(joins: 10_000, access: "open", runs: runs)])

case "generate":
    for event in BenchmarkWorkload(count: count, beacons: beaconCount).events() {
        print(Hex.encode(event))
    }

case "decode-file":
    var events: [[UInt8]] = []
    while let line = readLine() {
        guard !line.isEmpty else { continue }
        guard let bytes = Hex.decode(line) else {
            print("not a hex line: \(line.prefix(80))")
            exit(2)
        }
        events.append(bytes)
    }
    guard !events.isEmpty else {
        print("no events on stdin\n\(usage)")
        exit(2)
    }
    let packed = PackedEvents(events)
    // About two million reports a run, whatever the file's size.
    let passes = max(1, 2_000_000 / events.count)
    let results = [Workloads.decodeEvents(packed, passes: passes, runs: runs),
                   Workloads.decodePayloads(packed.payloads, passes: passes, runs: runs)]
    report(results)

default:
    print(usage)
    exit(2)
}

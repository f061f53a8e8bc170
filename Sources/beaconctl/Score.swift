import ArgumentParser
import BeaconKit
import BrainCore
import CommandLineSupport
import Config
import Contract
import Logging
import Simulation
import SystemCalls

#if canImport(Glibc)
import Glibc
#endif

struct Score: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replay simulated stores through the real gateways and brain and score the brain's zones against the truth.",
        discussion: """
        For each seed: simulates a store (the same options as `beaconctl simulate`), starts a
        Mosquitto of its own on a free 127.0.0.1 port, one `beacon-gateway` per gateway replaying its
        capture (all sharing one time origin) and `beacon-brain`, waits until the brain has decided
        everything, and stops exactly the processes it started. The brain's decisions (with their
        capture times, from beacons/+/+/events) are scored against the ground truth; two baselines
        are computed from the gateways' sightings of the same run: "strongest" (the gateway with the
        strongest smoothed RSSI, each second) and "previous" (BeaconBridge's rule before issue 8:
        the first gateway holds the zone, another takes it after beating it by 4 dB on 3 sightings).

        Figures (per run, then min / p10 / median / max over the seeds):
          zone right      % of in-store time the zone is the true one (absent counts as wrong)
          walk / dwell    % of walking and of standing time that is wrong
          flaps/visit     zone changes no true change explains (the true one 15 s before to 3 s after)
          changes/visit   zone changes decided (and true ones, in the header)
          follow delay    median s from a true zone change to the brain's zone following it
          entry, exit     median delay, s (exit: end of the presence covering the true exit)
          false presence  s per visit present while the customer was not in the store
          ghosts/visit    zone changes after the customer left

        --in-process runs the gateways' trackers and the brain's fusion in this process, without
        processes or a broker (the same per-frame logic): for trying settings on many seeds quickly.

        --history also keeps each run's decisions in a history (a real beacon-history on a
        Mosquitto of its own; in this process with --in-process) and compares its figures
        with the same figures of the truth and of the decisions it was given: footfall,
        visit and queue time (the counter counts as the queue), per-zone dwell (median,
        p90), door-to-counter conversion (docs/history.md).

        Examples:
          beaconctl score --seeds 1-20                       # the benchmark in docs/PERFORMANCE.md
          beaconctl score --seeds 1-20 --shadowing 6 --loss 0.4
          beaconctl score --seeds 1-20 --in-process --layout all   # every named store, then one line each
          beaconctl score --seeds 301-320 --in-process --layout queue,spots
          beaconctl score --seeds 1-20 --offsets door:+6,counter:-6
          beaconctl score --seeds 1,2 --customers 8 --duration 300 --json
        """)

    @OptionGroup var store: StoreOptions

    @Option(name: .long, help: ArgumentHelp("Seeds: 1-20, or 3,5,8.", valueName: "LIST"))
    var seeds = "1"

    @Option(name: .customLong("replay-speed"),
            help: "Replay speed (0: as fast as possible; the brain decides in capture time either way).")
    var replaySpeed = 0.0

    @Option(name: .long, help: ArgumentHelp("Brain settings to try, as the fleet config's brain object.", valueName: "JSON"))
    var brain: String?

    @Option(name: .long, help: "Seconds per gateway report window (the gateways' reportInterval).")
    var reportInterval = GatewayConfig(id: "").reportInterval

    @Flag(name: .long, help: "Run the gateways' trackers and the brain's fusion in this process (no broker, no processes).")
    var inProcess = false

    @Flag(name: .long, help: "Print one JSON object instead of the table.")
    var json = false

    @Flag(name: .long, help: "Also keep the brain's decisions in a history (through beacon-history, or in this process with --in-process) and compare its figures with the truth.")
    var history = false

    @Option(name: .long, help: "Longest a seed's replay may take, wall-clock seconds.")
    var timeout = 600.0

    @Option(name: .long, help: ArgumentHelp("Keep each run's files (captures, config, truth, logs) under DIR.", valueName: "DIR"))
    var keep: String?

    @OptionGroup(title: "Floor model (as beaconctl simulate --model floor)") var floor: FloorOptions

    func validate() throws {
        _ = try seedList()
        _ = try store.floor(floor, seed: 1)
        if history, try floor.scenarios().count > 1 { throw ValidationError("--history: one --layout at a time") }
        guard replaySpeed >= 0, replaySpeed <= 1000 else { throw ValidationError("--replay-speed must be 0…1000") }
        if let brain { _ = try brainObject(brain) }
    }

    func seedList() throws -> [UInt64] {
        var out: [UInt64] = []
        for part in seeds.split(separator: ",") {
            let bounds = part.split(separator: "-")
            guard (1...2).contains(bounds.count), let a = UInt64(bounds[0]), let b = UInt64(bounds[bounds.count - 1]), a <= b,
                  b - a < 10_000 else { throw ValidationError("--seeds: \"\(part)\" is not a seed or a range like 1-20") }
            out += Array(a...b)
        }
        guard !out.isEmpty else { throw ValidationError("--seeds: none given") }
        return out
    }

    func brainObject(_ text: String) throws -> JSONValue {
        guard let value = try? JSONParser().parse(text), case .object = value else {
            throw ValidationError("--brain: expected a JSON object like {\"zoneConfidence\":0.95}")
        }
        var probe: JSONValue = .object(["brain": value])
        if case .object(var o) = probe { o["broker"] = .object(["url": .string("mqtt://127.0.0.1")]); probe = .object(o) }
        do { _ = try FleetConfig.parse(probe) } catch { throw ValidationError("--brain: \(error)") }
        return value
    }

    /// The fleet config of a simulated store, with `--brain` merged in.
    func config(for simulation: FloorSimulation, directory: String, broker: String) throws -> (text: String, config: FleetConfig) {
        var text = floorFleet(simulation, directory: directory, broker: broker, loop: false, speed: replaySpeed,
                              defaults: ["reportInterval": .number(reportInterval)])
        if let brain {
            guard case .object(var o)? = try? JSONParser().parse(text) else { throw CommandFailure("internal: fleet config") }
            o["brain"] = try brainObject(brain)
            text = JSONValue.object(o).jsonText + "\n"
        }
        return (text, try FleetConfig.parse(text))
    }

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .error
            return handler
        }
        let seeds = try seedList()
        let layouts = try floor.scenarios()
        let temporary = try FileSystem.temporaryDirectory(prefix: "beaconctl-score")
        defer { if keep == nil { try? FileSystem.removeTree(temporary) } }
        var reports: [(layout: FloorScenario, results: [SeedResult])] = []
        var histories: [(seed: UInt64, accuracy: HistoryAccuracy)] = []
        for layout in layouts {
            let name = layouts.count > 1 ? "\(layout.rawValue) " : ""
            let base = layouts.count > 1 ? temporary + "/\(layout.rawValue)" : temporary
            let kept = keep.map { layouts.count > 1 ? "\($0)/\(layout.rawValue)" : $0 }
            var results: [SeedResult] = []
            for (index, seed) in seeds.enumerated() {
                let simulation = try store.floor(floor, seed: seed, scenario: layout)
                let label = "\(name)seed \(seed) (\(index + 1) of \(seeds.count))"
                if !json { progress("\(label): simulating") }
                let run: StoreRun
                if inProcess {
                    run = try InProcessStore.run(simulation, config: try config(for: simulation, directory: "/dev/null",
                                                                                  broker: "mqtt://127.0.0.1").config)
                } else {
                    let directory = kept.map { "\($0)/seed-\(seed)" } ?? base + "/seed-\(seed)"
                    let store = ProcessStore(simulation: simulation, directory: directory,
                                             configText: { broker in try config(for: simulation, directory: directory, broker: broker).text },
                                             progress: { text in if !json { progress("\(label): \(text)") } },
                                             timeout: timeout)
                    run = try await store.run()
                    if keep == nil { try? FileSystem.removeTree(directory) }
                }
                let truth = simulation.truth, radio = simulation.radioAnswers()
                let result = SeedResult(
                    seed: seed,
                    fused: PresenceScore(truth: truth, timelines: run.timelines(start: simulation.start)),
                    strongest: PresenceScore(truth: truth, timelines: ZoneBaseline.strongestEachSecond(run.sightings)),
                    previous: PresenceScore(truth: truth, timelines: ZoneBaseline.previousRule(run.sightings)),
                    radio: PresenceScore(truth: truth, timelines: radio.loudest),
                    radioStands: PresenceScore(truth: truth, timelines: radio.standsAveraged),
                    calibration: run.calibration)
                results.append(result)
                if history {
                    if !json { progress("seed \(seed): keeping the decisions in a history") }
                    let directory = (kept.map { "\($0)/seed-\(seed)" } ?? base + "/seed-\(seed)") + "/history"
                    let configured = try config(for: simulation, directory: directory, broker: "mqtt://127.0.0.1")
                    histories.append((seed, try await HistoryAccuracy(simulation: simulation, decisions: run.decisions,
                                                                      config: configured.config, configText: configured.text,
                                                                      directory: directory, process: !inProcess)))
                    if keep == nil { try? FileSystem.removeTree(directory) }
                }
                if !json { progress("\(label): zone right \(decimal(result.fused.zoneRight, places: 1)) % (strongest "
                                    + "\(decimal(result.strongest.zoneRight, places: 1)) %)") }
            }
            reports.append((layout, results))
        }
        if !json { progress(nil) }
        if json {
            if reports.count == 1 {
                var report = ScoreReport(reports[0].results).json
                if case .object(var o) = report {
                    o["layout"] = .string(reports[0].layout.rawValue)
                    if history { o["history"] = HistoryReport(results: histories).json }
                    report = .object(o)
                }
                printLine(report.jsonText)
            } else {
                printLine(JSONValue.object(["layouts": .array(reports.map { layout, results in
                    var report = ScoreReport(results).json
                    if case .object(var o) = report {
                        o["layout"] = .string(layout.rawValue)
                        report = .object(o)
                    }
                    return report
                })]).jsonText)
            }
        } else if reports.count == 1 {
            printLine(ScoreReport(reports[0].results).table)
            if history { printLine(HistoryReport(results: histories).table) }
        } else {
            for (layout, results) in reports {
                printLine("layout \(layout.rawValue): " + ScoreReport(results).table + "\n")
            }
            printLine(ScoreReport.layoutTable(reports))
        }
    }

    private func progress(_ text: String?) {
        guard isatty(2) == 1 else {
            if let text { writeStandardError(text + "\n") }
            return
        }
        writeStandardError("\r\u{1B}[K" + (text ?? ""))
    }
}

struct SeedResult {
    var seed: UInt64
    var fused: PresenceScore
    var strongest: PresenceScore
    var previous: PresenceScore
    /// The radio's own answer (`FloorSimulation.radioAnswers`): the gateway loudest with fast
    /// fading and losses averaged away, from the simulator's levels, not from the captures.
    var radio: PresenceScore
    /// The same with the levels averaged over each whole stand (`standsAveraged`).
    var radioStands: PresenceScore
    /// The brain's calibration at the end of the run, by gateway (in process only).
    var calibration: [String: CalibrationRecord] = [:]
}

/// The figures of a set of runs: per seed, and their distribution.
struct ScoreReport {
    var results: [SeedResult]

    init(_ results: [SeedResult]) { self.results = results }

    static let metrics: [(name: String, key: String, value: @Sendable (PresenceScore) -> Double, places: Int)] = [
        ("zone right %", "zoneRight", { $0.zoneRight }, 1),
        ("walking wrong %", "walkingWrong", { $0.walkingWrong }, 1),
        ("dwelling wrong %", "dwellingWrong", { $0.dwellingWrong }, 1),
        ("flaps/visit", "flapsPerVisit", { $0.flapsPerVisit }, 2),
        ("  at entry (first 5 s)", "flapsAtEntry", { $0.flapsAtEntry }, 2),
        ("  walking", "flapsWalking", { $0.flapsWalking }, 2),
        ("  standing", "flapsStanding", { $0.flapsStanding }, 2),
        ("changes/visit", "changesPerVisit", { $0.changesPerVisit }, 2),
        ("follow delay s", "followDelay", { $0.followDelay }, 2),
        ("entry delay s", "entryDelay", { $0.entryDelay }, 2),
        ("exit delay s", "exitDelay", { $0.exitDelay }, 2),
        ("false presence s/visit", "falsePresence", { $0.falsePresence }, 2),
        ("ghost moves/visit", "ghostMovesPerVisit", { $0.ghostMovesPerVisit }, 2),
        ("missed visits", "missed", { Double($0.missed) }, 0),
    ]

    static let deciders: [(name: String, pick: @Sendable (SeedResult) -> PresenceScore)] = [
        ("brain", { $0.fused }), ("strongest", { $0.strongest }), ("previous", { $0.previous }), ("radio", { $0.radio }), ("radioStands", { $0.radioStands }),
    ]

    /// One line per layout: the brain's zone right and flaps, the strongest-gateway rule's
    /// zone right, and how far the brain is above it (medians over the seeds, [min–max]).
    static func layoutTable(_ reports: [(layout: FloorScenario, results: [SeedResult])]) -> String {
        var lines = ["| layout | zone right, median [min–max] | flaps/visit | follow delay s | strongest | brain − strongest, median [min] | radio's own answer |",
                     "| --- | --- | --- | --- | --- | --- | --- |"]
        for (layout, results) in reports {
            let right = Summary(results.map(\.fused.zoneRight)), flaps = Summary(results.map(\.fused.flapsPerVisit))
            let follow = Summary(results.map(\.fused.followDelay)), strongest = Summary(results.map(\.strongest.zoneRight))
            let gain = Summary(results.map { $0.fused.zoneRight - $0.strongest.zoneRight })
            let radio = Summary(results.map(\.radio.zoneRight)), stands = Summary(results.map(\.radioStands.zoneRight))
            lines.append("| \(layout.rawValue) | \(decimal(right.median, places: 1)) % [\(decimal(right.min, places: 1))–"
                         + "\(decimal(right.max, places: 1))] | \(decimal(flaps.median, places: 2)) | \(decimal(follow.median, places: 2)) | "
                         + "\(decimal(strongest.median, places: 1)) % | \(decimal(gain.median, places: 1)) [\(decimal(gain.min, places: 1))] | "
                         + "\(decimal(radio.median, places: 1)) % (each stand averaged \(decimal(stands.median, places: 1)) %) |")
        }
        return lines.joined(separator: "\n")
    }

    var table: String {
        var lines: [String] = []
        let visits = results.map(\.fused.visits).reduce(0, +)
        let trueChanges = results.map { $0.fused.trueChangesPerVisit * Double($0.fused.visits) }.reduce(0, +)
        lines.append("\(results.count) seed\(results.count == 1 ? "" : "s"), \(visits) visits, "
                     + "\(decimal(trueChanges / Double(max(visits, 1)), places: 2)) true zone changes per visit")
        lines.append("")
        func pad(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }
        func left(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }
        let header = pad("", 24) + Self.deciders.map { left($0.name + " median", 18) + left("min", 8) + left("p10", 8) + left("max", 8) }
            .joined(separator: "  ")
        lines.append(header)
        for metric in Self.metrics {
            var line = pad(metric.name, 24)
            for decider in Self.deciders {
                let s = Summary(results.map { metric.value(decider.pick($0)) })
                line += left(decimal(s.median, places: metric.places), 18) + left(decimal(s.min, places: metric.places), 8)
                    + left(decimal(s.p10, places: metric.places), 8) + left(decimal(s.max, places: metric.places), 8) + "  "
            }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    var json: JSONValue {
        func figures(_ score: PresenceScore) -> JSONValue {
            .object(JSONObject(Self.metrics.map { (key: $0.key, value: .number(rounded($0.value(score), 4))) }))
        }
        func distribution(_ pick: (SeedResult) -> PresenceScore) -> JSONValue {
            .object(JSONObject(Self.metrics.map { metric in
                let s = Summary(results.map { metric.value(pick($0)) })
                return (key: metric.key, value: .object(["min": .number(rounded(s.min, 4)), "p10": .number(rounded(s.p10, 4)),
                                                         "median": .number(rounded(s.median, 4)), "max": .number(rounded(s.max, 4))]))
            }))
        }
        return .object([
            "seeds": .array(results.map { result -> JSONValue in
                var seed: JSONObject = ["seed": .number(Double(result.seed)), "visits": .number(Double(result.fused.visits)),
                                        "brain": figures(result.fused), "strongest": figures(result.strongest),
                                        "previous": figures(result.previous), "radio": figures(result.radio),
                                        "radioStands": figures(result.radioStands)]
                if !result.calibration.isEmpty {
                    // What the brain learned: the offset it adds to each gateway's RSSI, and the exponent.
                    seed["calibration"] = .object(JSONObject(result.calibration.sorted { $0.key < $1.key }.map {
                        (key: $0.key, value: .object(["rssiOffset": .number(rounded($0.value.rssiOffset, 2)),
                                                      "pathLossExponent": .number(rounded($0.value.pathLossExponent, 3))]))
                    }))
                }
                return .object(seed)
            }),
            "summary": .object(JSONObject(Self.deciders.map { (key: $0.name, value: distribution($0.pick)) })),
        ])
    }
}

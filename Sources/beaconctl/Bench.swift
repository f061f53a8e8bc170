import ArgumentParser
import BeaconKit
import Contract
import Wire
import Config
import Simulation
import Brain
import CommandLineSupport
import Gateway
import HCI
import Logging
import Synchronization
import SystemCalls
import BrainCore
import LiveClock

#if canImport(Glibc)
import Glibc
#endif

struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure the gateway and the brain end to end against a real broker, beside a C baseline.",
        discussion: """
        Starts a Mosquitto of its own on a free 127.0.0.1 port (stopped again by its PID) and, in one run:

          1. broker ceiling: mqtt-baseline (C, libmosquitto) publishes --adverts sighting-sized messages
             as fast as it can while a subscriber in the same program counts them (and again held to
             the gateway's pace after each gateway round);
          2. gateway, raw mode: a generated capture of --adverts advertisements from --beacons beacons is
             replayed at full speed through the real gateway pipeline (btsnoop source, GatewayEngine,
             MQTTClient); mqtt-baseline counts what a subscriber receives. Reports advertisements/s
             ingested, messages/s published, messages/s end to end and the ratio to (1); then the
             advertisement-to-subscriber latency at a steady --paced-rate, and CPU per 1,000 adverts;
          3. gateway process (beacon-gateway): resident memory idle and while tracking each of
             --tracked;
          4. brain (BrainService): join-to-reply latency over --joins joins one at a time beside the
             broker's own round trip, joins answered per second (a burst), and the RSSI report ingest rate
             the brain sustains beside the broker's rate in the same run;
          5. flood (beacon-brain): --flood-joins joins from as many observers, as fast as the broker
             takes them, while a legitimate observer joins every 10 ms: its join-to-reply latency beside
             the same joins with the brain idle and the broker's round trip, the greeter bytes per join,
             and the brain's resident memory idle, at its peak and after the flood left; twice, with
             brain.joins owned-or-near (the legitimate observer owns its beacons, the flood owns none)
             and open (every join answered), with the load average (docs/PERFORMANCE.md);
          6. fleet (only with --only fleet: it starts a Mosquitto per store): for each of --fleet-stores, a central
             Mosquitto, a Mosquitto per store bridged to it by the configuration `beaconctl bridge` writes, and
             beacon-brain at the centre; --fleet-gateways gateways × --fleet-customers customers per store are
             simulated and run through real gateway engines beforehand, and what the engines decided is replayed
             at real speed for --fleet-duration seconds through one connection per store into its store broker.
             Reports the centre's message rate and CPU per message as a C subscriber of everything sees them,
             the brain's CPU per 1,000 sightings beside that subscriber's, sighting-to-zone latency beside the
             bridge's own latency, and resident memory, with the load average (docs/PERFORMANCE.md, section 6).
             --fleet-centre nats puts a 3-node NATS JetStream cluster at the centre instead (the stores' bridges
             list its nodes, the brain takes the several-host URL); mosquitto,nats measures both on the same replay.

        mqtt-baseline, beacon-gateway and beacon-brain are taken from beside this executable (the same build).
        Use a release build: swift build -c release && .build/release/beaconctl bench

        Example:
          beaconctl bench             # the figures in docs/PERFORMANCE.md
          beaconctl bench --quick     # a few seconds: proves every phase still runs
          beaconctl bench --only fleet  # 10, 50, 100 stores bridged: 6 minutes
          # 100 stores, one central Mosquitto beside a 3-node NATS cluster:
          beaconctl bench --only fleet --fleet-stores 100 --fleet-centre mosquitto,nats
        """)

    @Option(name: .long, help: "Advertisements in the full-speed replay (and messages in the C baseline).")
    var adverts = 200_000

    @Option(name: .long, help: "Distinct beacons in the replayed capture.")
    var beacons = 1_000

    @Option(name: .long, help: "Advertisements per second for the latency run.")
    var pacedRate = 2_000.0

    @Option(name: .long, help: "Advertisements in the latency run.")
    var pacedAdverts = 6_000

    @Option(name: .long, help: ArgumentHelp("Beacon counts to measure the gateway's memory with, comma separated.",
                                            valueName: "LIST"))
    var tracked = "1000,10000"

    @Option(name: .long, help: "Joins answered one at a time (latency).")
    var joins = 1_000

    @Option(name: .long, help: "Joins sent at once (joins answered per second).")
    var joinBurst = 1_000

    @Option(name: .long, help: "Sightings sent to the brain as fast as possible.")
    var sightings = 100_000

    @Option(name: .long, help: "Joins in the flood the brain answers (each from an observer of its own).")
    var floodJoins = 10_000

    @Option(name: .long, help: "Rounds of (C baseline, gateway at full speed), alternating; medians are reported.")
    var rounds = 3

    @Option(name: .long, help: ArgumentHelp("Fleet sizes (stores) to measure, comma separated.", valueName: "LIST"))
    var fleetStores = "10,50,100"

    @Option(name: .long, help: "Gateways per store in the fleet phase.")
    var fleetGateways = 4

    @Option(name: .long, help: "Customers per store in the fleet phase (each a beacon walking in, lingering, leaving).")
    var fleetCustomers = 50

    @Option(name: .long, help: "Seconds of the fleet replay, per size.")
    var fleetDuration = 60.0

    @Option(name: .long, help: ArgumentHelp(
        "The fleet phase's centre: mosquitto (one central Mosquitto), nats (a 3-node NATS JetStream cluster speaking "
            + "MQTT, its node files written by the code `beaconctl provision` uses), or mosquitto,nats: both, one after "
            + "the other for each size, on the same replay.", valueName: "LIST"))
    var fleetCentre = "mosquitto"

    @Flag(name: .long, help: ArgumentHelp(
        "Replay each store straight into the centre (one connection per store, spread over the nodes) instead of "
            + "through a Mosquitto per store and its bridge: for sizes whose store brokers do not fit the machine. "
            + "Leaves out the store brokers and the bridges' sessions at the centre."))
    var fleetDirect = false

    @Option(name: .long, help: ArgumentHelp(
        "Run the bench's broker with this Mosquitto configuration's settings (queue and size limits, client ids), e.g. "
            + "deploy/mosquitto/mosquitto.conf as a store's broker ships; its listener, persistence, logging and "
            + "security lines give way to the bench's own (loopback, anonymous, in memory). Without it: no queue limit "
            + "and TCP_NODELAY.", valueName: "FILE"))
    var brokerConf: String?

    @Flag(name: .long, help: "Small counts, for a smoke test of every phase.")
    var quick = false

    @Flag(name: .long, help: "Print one JSON object instead of text.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Run only these phases: broker, gateway, memory, brain, flood, fleet (comma separated).",
                                            valueName: "LIST"))
    var only: String?

    func validate() throws {
        guard adverts >= 100, adverts <= 10_000_000 else { throw ValidationError("--adverts must be 100…10000000") }
        guard (1...10_000).contains(beacons) else { throw ValidationError("--beacons must be 1…10000") }
        guard pacedRate > 0, pacedRate <= 100_000 else { throw ValidationError("--paced-rate must be 0…100000") }
        guard pacedAdverts >= 10 else { throw ValidationError("--paced-adverts must be at least 10") }
        guard (try? trackedCounts()) != nil else { throw ValidationError("--tracked: counts 0…10000, comma separated") }
        guard (try? fleetSizes()) != nil else { throw ValidationError("--fleet-stores: store counts 1…1000, comma separated") }
        guard (1...8).contains(fleetGateways) else { throw ValidationError("--fleet-gateways must be 1…8") }
        guard (1...1_000).contains(fleetCustomers) else { throw ValidationError("--fleet-customers must be 1…1000") }
        guard fleetDuration >= 5, fleetDuration <= 3_600 else { throw ValidationError("--fleet-duration must be 5…3600 s") }
        guard (try? fleetCentres()) != nil else { throw ValidationError("--fleet-centre: mosquitto, nats or mosquitto,nats") }
        guard joins >= 1, joinBurst >= 1, sightings >= 1, rounds >= 1, floodJoins >= 1 else { throw ValidationError("counts must be positive") }
        if let only {
            for phase in only.split(separator: ",") where !["broker", "gateway", "memory", "brain", "flood", "fleet"].contains(phase) {
                throw ValidationError("--only: unknown phase \"\(phase)\"")
            }
        }
    }

    func fleetSizes() throws -> [Int] {
        try fleetStores.split(separator: ",").map { item in
            guard let n = Int(item), (1...1_000).contains(n) else { throw ValidationError("--fleet-stores") }
            return n
        }
    }

    func fleetCentres() throws -> [CentreConfig.Kind] {
        let kinds = try fleetCentre.split(separator: ",").map { item in
            guard let kind = CentreConfig.Kind(rawValue: String(item)) else { throw ValidationError("--fleet-centre") }
            return kind
        }
        guard !kinds.isEmpty, Set(kinds).count == kinds.count else { throw ValidationError("--fleet-centre") }
        return kinds
    }

    func trackedCounts() throws -> [Int] {
        try tracked.split(separator: ",").map { item in
            guard let n = Int(item), (0...10_000).contains(n) else { throw ValidationError("--tracked") }
            return n
        }
    }

    /// Every phase but the fleet when no --only is given.
    func runs(_ phase: String) -> Bool {
        only.map { $0.split(separator: ",").contains(Substring(phase)) } ?? (phase != "fleet")
    }

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = .error
            return handler
        }
        var settings = self
        if quick {
            settings.adverts = min(adverts, 5_000)
            settings.pacedAdverts = min(pacedAdverts, 500)
            settings.tracked = "1000"
            settings.joins = min(joins, 100)
            settings.joinBurst = min(joinBurst, 100)
            settings.sightings = min(sightings, 2_000)
            settings.floodJoins = min(floodJoins, 300)
            settings.rounds = 1
            settings.fleetStores = "2"
            settings.fleetCustomers = min(fleetCustomers, 10)
            settings.fleetDuration = min(fleetDuration, 10)
        }
        guard let baseline = Programs.sibling("mqtt-baseline") else {
            throw CommandFailure("mqtt-baseline is not beside beaconctl: build the whole package (swift build)", status: .failure)
        }
        let directory: String
        do { directory = try FileSystem.temporaryDirectory(prefix: "beaconctl-bench") } catch {
            throw CommandFailure("\(error)", status: .failure)
        }
        let brokerSettings: [String]?
        do { brokerSettings = try brokerConf.map { BenchBroker.settings(of: try FileSystem.readText($0)) } } catch {
            throw CommandFailure("--broker-conf: \(error)", status: .usage)
        }
        let broker = try await BenchBroker.start(in: directory, settings: brokerSettings)
        var run = BenchRun(settings: settings, baseline: baseline, directory: directory, broker: broker)
        do {
            try await run.all()
        } catch {
            await broker.stop()
            throw error
        }
        await broker.stop()
        run.report.print(json: json)
        try? FileSystem.removeTree(directory)
    }
}

/// Wall times at which frames entered the gateway engine, in order.
final class IngestLog: Sendable {
    struct Times {
        var monotonic: [Double] = []
        var firstCPU = 0.0
    }

    let times = Mutex(Times())

    init(capacity: Int) { times.withLock { $0.monotonic.reserveCapacity(capacity) } }

    func record() {
        let now = WallClock.monotonic()
        times.withLock { t in
            if t.monotonic.isEmpty { t.firstCPU = WallClock.processCPU() }
            t.monotonic.append(now)
        }
    }
}

/// A source that notes when each frame is handed over, then hands it to the engine.
struct TimedSource: AdvertisingSource {
    let inner: BtsnoopSource
    let log: IngestLog

    var name: String { inner.name }
    var clock: any SourceClock { inner.clock }
    func setScanning(_ enabled: Bool) async {}

    func run(_ output: @escaping @Sendable (SourceOutput) -> Void) async throws {
        let log = self.log
        try await inner.run { item in
            if case .frame = item { log.record() }
            output(item)
        }
    }
}

/// Every figure of one `beaconctl bench` run.
struct BenchReport {
    var lines: [String] = []
    var values = JSONObject()

    mutating func add(_ key: String, _ value: JSONValue, _ line: String) {
        values[key] = value
        lines.append(line)
    }

    func print(json: Bool) {
        if json {
            printLine(JSONValue.object(values).jsonText)
        } else {
            for line in lines { printLine(line) }
        }
    }
}

struct BenchRun {
    let settings: Bench
    let baseline: String
    let directory: String
    let broker: BenchBroker
    var report = BenchReport()
    var ceiling: Double?
    var step = 0

    init(settings: Bench, baseline: String, directory: String, broker: BenchBroker) {
        self.settings = settings
        self.baseline = baseline
        self.directory = directory
        self.broker = broker
    }

    mutating func all() async throws {
        let machine = "\(ProcessInfo.hostName), \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) CPUs"
        report.add("date", .string(WallClock.now().iso8601), "beaconctl bench, \(WallClock.now().iso8601), \(machine)")
        let brokerSettings = broker.settings ?? ["max_queued_messages 0", "set_tcp_nodelay true"]
        report.add("broker", .string(broker.url), "broker: mosquitto on \(broker.url) (\(brokerSettings.joined(separator: ", ")))")
        report.values["brokerSettings"] = .array(brokerSettings.map(JSONValue.string))
        if settings.runs("broker") || settings.runs("gateway") { try await brokerAndGateway() }
        if settings.runs("memory") { try await gatewayMemory() }
        if settings.runs("brain") { try await brain() }
        if settings.runs("flood") { try await flood() }
        if settings.runs("fleet") { try await fleet() }
    }

    func unique(_ name: String) -> String { "\(name)-\(WallClock.now().nanoseconds % 1_000_000_000)" }

    /// Runs mqtt-baseline to its end and returns its JSON.
    func baselineRun(_ arguments: [String], name: String, timeout: Double = 300) async throws -> JSONObject {
        let process = try RunningProgram(baseline, arguments + ["--port", String(broker.port)], name: unique(name),
                                       in: directory)
        guard await process.wait(timeout: timeout) != nil else {
            await process.stop()
            throw CommandFailure("mqtt-baseline \(arguments.first ?? "") did not finish in \(Int(timeout)) s", status: .failure)
        }
        guard let json = process.lastJSON else {
            throw CommandFailure("mqtt-baseline \(arguments.first ?? ""): no result\n\(process.errors)", status: .failure)
        }
        return json
    }

    // MARK: 1. The broker's ceiling, 2. the gateway pipeline

    /// Rounds alternate the C baseline and the gateway at full speed, so that a busy
    /// neighbour on a shared machine weighs on both alike; medians are compared.
    mutating func brokerAndGateway() async throws {
        var baselines: [Double] = []
        var pacedBaselines: [Double] = []
        var pipelines: [Double] = []
        var results: [JSONValue] = []
        var lastFull: (PipelineResult, Double, Double, Double)?
        for round in 1...settings.rounds {
            let result = try await baselineRun(["pub", "--count", String(settings.adverts), "--beacons", String(settings.beacons)],
                                               name: "baseline-pub")
            let rate = result["messagesPerSecond"]?.numberValue ?? 0
            baselines.append(rate)
            results.append(.object(result))
            report.lines.append("round \(round): C baseline (libmosquitto → mosquitto → subscriber) \(grouped(rate)) msg/s end to end "
                                + "(\(Int(result["received"]?.numberValue ?? 0)) of \(settings.adverts) messages of "
                                + "\(Int(result["payloadBytes"]?.numberValue ?? 0)) bytes, published at "
                                + "\(grouped(result["publishedPerSecond"]?.numberValue ?? 0)) msg/s)")
            guard settings.runs("gateway") else { continue }
            let full = try await gatewayFullSpeed()
            pipelines.append(full.2)
            lastFull = full
            report.lines.append("round \(round): gateway raw mode \(grouped(full.2)) msg/s end to end (ingested "
                                + "\(grouped(full.1)) adv/s) = \(decimal(full.2 / max(rate, 1), places: 2)) × this round's baseline")
            // The same C publisher held to the gateway's pace: how much of the difference is
            // the pace itself (a slower publisher hands the broker smaller batches).
            let paced = try await baselineRun(["pub", "--count", String(settings.adverts), "--beacons", String(settings.beacons),
                                               "--rate", String(Int(full.1))], name: "baseline-paced")
            let pacedRate = paced["messagesPerSecond"]?.numberValue ?? 0
            pacedBaselines.append(pacedRate)
            report.lines.append("round \(round): C baseline paced at \(grouped(full.1)) msg/s: \(grouped(pacedRate)) msg/s end to end; "
                                + "gateway = \(decimal(full.2 / max(pacedRate, 1), places: 2)) × that")
        }
        ceiling = median(baselines)
        report.values["cBaseline"] = .object(["runs": .array(results), "medianMessagesPerSecond": .number(ceiling!.rounded())])
        report.lines.append("C baseline, median of \(baselines.count): \(grouped(ceiling!)) msg/s end to end")
        guard let (full, ingestRate, _, cpuPerThousand) = lastFull else { return }
        let endToEnd = median(pipelines)
        let queued = LatencySummary(full.latencies)
        report.add("gatewayRaw", .object([
            "adverts": .number(Double(settings.adverts)), "beacons": .number(Double(settings.beacons)),
            "ingestedPerSecond": .number(ingestRate.rounded()), "received": .number(Double(full.received)),
            "messagesPerSecondEndToEnd": .number(endToEnd.rounded()),
            "roundsMessagesPerSecond": .array(pipelines.map { .number($0.rounded()) }),
            "ratioToCBaseline": .number(rounded(endToEnd / (ceiling ?? .nan), 3)),
            "cBaselineAtTheGatewaysPaceMedian": .number(median(pacedBaselines).rounded()),
            "ratioToPacedCBaseline": .number(rounded(endToEnd / median(pacedBaselines), 3)),
            "publishedMessages": .number(Double(full.published)),
            "cpuMsPer1000Adverts": .number(rounded(cpuPerThousand * 1000, 3)),
            "latencyAtFullSpeed": queued.json,
        ]), "gateway, raw mode, \(grouped(Double(settings.adverts))) adverts from \(settings.beacons) beacons at full speed, "
            + "median of \(pipelines.count): \(grouped(endToEnd)) msg/s end to end\(ratio(endToEnd)) "
            + "(\(decimal(endToEnd / median(pacedBaselines), places: 2)) × the C baseline at the gateway's pace, "
            + "median \(grouped(median(pacedBaselines))) msg/s); "
            + "last round: ingested \(grouped(ingestRate)) adv/s, \(full.received) of \(settings.adverts) received, "
            + "CPU \(milliseconds(cpuPerThousand)) ms per 1,000 adverts\n"
            + "  latency at full speed (queueing included): \(queued.text)")
        try await gatewayPacedAndLimited()
    }

    func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    func ratio(_ value: Double) -> String {
        guard let ceiling, ceiling > 0 else { return "" }
        return " = \(decimal(value / ceiling, places: 2)) × C baseline"
    }

    // MARK: 2. The gateway pipeline

    func fleetConfig(capture: String, speed: Double, raw: Bool, gatewayID: String) -> String {
        let document: JSONValue = .object([
            "broker": .object(["url": .string(broker.url)]),
            "defaults": .object(["exitTimeout": .number(3600), "staleAfter": .number(3600), "publishInterval": .number(1),
                                 "queueLimit": .number(1_000_000), "healthInterval": .number(3600)]),
            "gateways": .array([.object(["id": .string(gatewayID), "raw": .bool(raw),
                                         "source": .string("btsnoop:\(capture)?speed=\(speed)")])]),
        ])
        return document.jsonText
    }

    struct PipelineResult {
        var ingested: [Double]
        var firstCPU: Double
        var endCPU: Double
        var received: Int
        var lastReceived: Double
        var published: Int
        var latencies: [Double]
    }

    /// Replays `workload` through an in-process GatewayService into the broker while
    /// mqtt-baseline counts (and times) the sightings.
    func replay(_ workload: BenchmarkWorkload, interval: Double, speed: Double, raw: Bool, expected: Int,
                latency: Bool) async throws -> PipelineResult {
        let capture = directory + "/\(unique("capture")).log"
        let start = Instant(iso8601: "2026-11-21T09:00:00.000Z")!
        try FileSystem.write(capture, workload.capture(start: start, interval: interval).bytes)
        let latencyFile = directory + "/\(unique("latency")).txt"
        var arguments = ["sub", "--port", String(broker.port), "--count", String(expected), "--idle", "3"]
        if latency { arguments += ["--latency-out", latencyFile] }
        let subscriber = try RunningProgram(baseline, arguments, name: unique("sub"), in: directory)
        guard await subscriber.waitForOutput(timeout: 10, { $0.contains("ready") }) else {
            await subscriber.stop()
            throw CommandFailure("mqtt-baseline sub did not subscribe\n\(subscriber.errors)", status: .failure)
        }
        let config = try FleetConfig.parse(fleetConfig(capture: capture, speed: speed, raw: raw, gatewayID: "bench"))
        let gateway = config.gateways[0]
        let log = IngestLog(capacity: workload.count)
        let source = TimedSource(inner: try BtsnoopSource(path: capture, speed: speed), log: log)
        var logger = Logger(label: "bench.gateway")
        logger.logLevel = .error
        let service = try GatewayService(config: config, gateway: gateway, source: source, sourceHasOwnTime: true,
                                         password: nil, configPath: nil, logger: logger, clientID: unique("bench-gw"))
        let task = Task { try await service.run() }
        let status = await subscriber.wait(timeout: 600)
        let endCPU = WallClock.processCPU()
        let published = service.statistics.published
        task.cancel()
        _ = try? await task.value
        guard status == 0, let summary = subscriber.lastJSON else {
            throw CommandFailure("the subscriber failed (\(status.map(String.init) ?? "timeout"))\n\(subscriber.errors)",
                                 status: .failure)
        }
        let times = log.times.withLock { $0 }
        var latencies: [Double] = []
        if latency, let text = try? FileSystem.readText(latencyFile) {
            latencies.reserveCapacity(expected)
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: " ")
                guard fields.count == 3, let minor = Int(fields[0]), let seq = Int(fields[1]), let ns = Int64(fields[2]),
                      minor >= 1, seq >= 1 else { continue }
                // Advertisement k is beacon k % beacons; its n-th sighting carries seq n.
                let index = (seq - 1) * workload.beacons + (minor - 1)
                guard index < times.monotonic.count else { continue }
                latencies.append(Double(ns) / 1e9 - times.monotonic[index])
            }
        }
        return PipelineResult(ingested: times.monotonic, firstCPU: times.firstCPU, endCPU: endCPU,
                              received: Int(summary["received"]?.numberValue ?? 0),
                              lastReceived: summary["last"]?.numberValue ?? 0, published: published, latencies: latencies)
    }

    /// One full-speed raw-mode replay: the result, adverts/s ingested, messages/s end to
    /// end, and CPU seconds per 1,000 adverts.
    func gatewayFullSpeed() async throws -> (PipelineResult, Double, Double, Double) {
        let n = settings.adverts
        let workload = BenchmarkWorkload(count: n, beacons: settings.beacons)
        let full = try await replay(workload, interval: 0.001, speed: 0, raw: true, expected: n, latency: true)
        guard let first = full.ingested.first, let last = full.ingested.last, last > first else {
            throw CommandFailure("the replay delivered no advertisements", status: .failure)
        }
        let ingestRate = Double(full.ingested.count - 1) / (last - first)
        let endToEnd = Double(full.received) / (full.lastReceived - first)
        let cpuPerThousand = (full.endCPU - full.firstCPU) / Double(n) * 1000
        return (full, ingestRate, endToEnd, cpuPerThousand)
    }

    mutating func gatewayPacedAndLimited() async throws {
        let n = settings.adverts
        // A steady rate: the latency a customer's app would see.
        let pacedWorkload = BenchmarkWorkload(count: settings.pacedAdverts, beacons: min(settings.beacons, settings.pacedAdverts))
        let paced = try await replay(pacedWorkload, interval: 1 / settings.pacedRate, speed: 1, raw: true,
                                     expected: settings.pacedAdverts, latency: true)
        let steady = LatencySummary(paced.latencies)
        report.add("gatewayLatency", .object(["rate": .number(settings.pacedRate), "latency": steady.json]),
                   "  advertisement-to-subscriber latency at \(grouped(settings.pacedRate)) adv/s: \(steady.text)")

        // The usual mode: one sighting per beacon per second; 100 beacons at 10 Hz each.
        let usual = BenchmarkWorkload(count: min(n, 100_000), beacons: 100)
        let expected = usual.count / 10 // about one in ten advertisements is published
        let limited = try await replay(usual, interval: 0.001, speed: 0, raw: false, expected: expected, latency: false)
        let cpu = (limited.endCPU - limited.firstCPU) / Double(usual.count) * 1000
        let limitedRate = Double(limited.ingested.count - 1) / ((limited.ingested.last ?? 0) - (limited.ingested.first ?? 0))
        report.add("gatewayRateLimited", .object([
            "adverts": .number(Double(usual.count)), "ingestedPerSecond": .number(limitedRate.rounded()),
            "received": .number(Double(limited.received)), "cpuMsPer1000Adverts": .number(rounded(cpu * 1000, 3)),
        ]), "gateway, publishInterval 1 s (100 beacons at 10 Hz): ingested \(grouped(limitedRate)) adv/s, "
            + "\(limited.received) sightings received; CPU \(milliseconds(cpu)) ms per 1,000 adverts")
    }

    // MARK: 3. The gateway process's memory

    mutating func gatewayMemory() async throws {
        guard let program = Programs.sibling("beacon-gateway") else {
            throw CommandFailure("beacon-gateway is not beside beaconctl: build the whole package", status: .failure)
        }
        var rows: [JSONValue] = []
        for count in [0] + (try settings.trackedCounts()) {
            // `count` beacons heard within the first second, then silence until the last frame.
            let workload = BenchmarkWorkload(count: count, beacons: max(count, 1))
            var writer = BtsnoopWriter(datalink: .h4)
            let start = Instant(iso8601: "2026-11-21T09:00:00.000Z")!
            for (i, event) in workload.events().enumerated() { writer.appendEvent(event, at: start + Double(i) * 1e-4) }
            writer.appendEvent(HCIEventBuilder.commandComplete(0x0C03), at: start + 3000)
            let capture = directory + "/\(unique("memory")).log"
            try FileSystem.write(capture, writer.bytes)
            let configPath = directory + "/\(unique("fleet")).json"
            let gatewayID = unique("bench-mem")
            try FileSystem.write(configPath, Array(fleetConfig(capture: capture, speed: 1, raw: false,
                                                               gatewayID: gatewayID).utf8))
            // Presence of every beacon, or the gateway's `online` when there are none.
            let filter = count == 0 ? Topics().gatewayStatusFilter : Topics().presence(of: .anyIBeacon, seenBy: Topics.anyLevel)
            let subscriber = try RunningProgram(baseline, ["sub", "--port", String(broker.port), "--count", String(max(count, 1)),
                                                         "--filter", filter, "--idle", "30"],
                                              name: unique("memsub"), in: directory)
            guard await subscriber.waitForOutput(timeout: 10, { $0.contains("ready") }) else {
                await subscriber.stop()
                throw CommandFailure("mqtt-baseline sub did not subscribe", status: .failure)
            }
            let gateway = try RunningProgram(program, ["--config", configPath, "--id", gatewayID, "--log-level", "error"],
                                           name: unique("gateway"), in: directory)
            let status = await subscriber.wait(timeout: 120)
            // Let the last sightings and timers settle before reading /proc.
            try await Task.sleep(nanoseconds: 1_000_000_000)
            let memory = gateway.memory
            let cpu = gateway.cpuSeconds
            await gateway.stop()
            await subscriber.stop()
            guard status == 0, let memory else {
                throw CommandFailure("beacon-gateway with \(count) beacons did not come up\n\(gateway.errors)", status: .failure)
            }
            rows.append(.object(["beacons": .number(Double(count)), "residentBytes": .number(Double(memory.resident)),
                                 "peakResidentBytes": .number(Double(memory.peak)),
                                 "cpuSeconds": .number(rounded(cpu ?? 0, 3))]))
            report.lines.append("beacon-gateway tracking \(grouped(Double(count))) beacons: resident \(megabytes(memory.resident)) "
                                + "(peak \(megabytes(memory.peak))), CPU so far \(decimal(cpu ?? 0, places: 2)) s")
        }
        report.values["gatewayMemory"] = .array(rows)
    }

    // MARK: 4. The brain

    mutating func brain() async throws {
        let stores = 50
        var storeList: [JSONValue] = []
        for s in 0..<stores {
            storeList.append(.object(["major": .number(Double(100 + s)), "name": .string("Store \(100 + s)"),
                                      "ad": .object(["title": .string("Deal of the day"),
                                                     "text": .string("Two coffees for the price of one")])]))
        }
        let document: JSONValue = .object([
            "broker": .object(["url": .string(broker.url)]),
            "stores": .array(storeList),
            "brain": .object(["joins": .string("open")]),
        ])
        let config = try FleetConfig.parse(document.jsonText)
        var logger = Logger(label: "bench.brain")
        logger.logLevel = .error
        var options = BrainService.Options(clientID: unique("bench-brain"))
        options.healthInterval = 3600
        let service = try BrainService(config: config, password: nil, logger: logger, options: options)
        let task = Task { try await service.run() }
        defer { task.cancel() }
        let deadline = WallClock.monotonic() + 20
        while !service.statistics.settled {
            guard WallClock.monotonic() < deadline else { throw CommandFailure("the brain did not settle", status: .failure) }
            try await Task.sleep(nanoseconds: 10_000_000)
        }

        let rtt = try await baselineRun(["rtt", "--count", String(settings.joins)], name: "baseline-rtt")
        let brokerLatency = LatencySummary(rtt["latency"]) ?? LatencySummary([])
        let joins = try await baselineRun(["join", "--count", String(settings.joins), "--burst", String(settings.joinBurst),
                                           "--stores", String(stores)], name: "baseline-join")
        let joinLatency = LatencySummary(joins["joinToReply"]) ?? LatencySummary([])
        let joinRate = joins["joinsPerSecond"]?.numberValue ?? 0
        report.add("brainJoins", .object([
            "joinToReply": joinLatency.json, "brokerRoundTrip": brokerLatency.json,
            "burst": .number(Double(settings.joinBurst)), "replies": joins["replies"] ?? .null,
            "joinsPerSecond": .number(joinRate.rounded()),
        ]), "brain, join to reply over \(joinLatency.count) joins one at a time: \(joinLatency.text)\n"
            + "  broker's own round trip (publish → subscriber, C): \(brokerLatency.text)\n"
            + "  joins answered per second (\(settings.joinBurst) at once over \(stores) stores): \(grouped(joinRate))")

        // Gateways' RSSI reports (what the brain reads since issue 8; one beacon each) as fast as
        // the C publisher sends them; the brain counts what it handled.
        let before = service.statistics.counters.received
        let droppedBefore = service.statistics.droppedEvents
        let publisher = Task { [self] in
            try await baselineRun(["reports", "--count", String(settings.sightings), "--beacons", "1000"], name: "brain-pub")
        }
        var firstSeen: Double?
        var lastChange = WallClock.monotonic()
        var handled = 0
        var lastHandled = 0
        while handled < settings.sightings {
            try await Task.sleep(nanoseconds: 2_000_000)
            let now = WallClock.monotonic()
            handled = service.statistics.counters.received - before
            if handled > 0, firstSeen == nil { firstSeen = now }
            if handled != lastHandled {
                lastHandled = handled
                lastChange = now
            } else if now - lastChange > 5 {
                break
            }
        }
        let finished = lastChange
        let published = try await publisher.value
        let dropped = service.statistics.droppedEvents - droppedBefore
        let brainRate = Double(handled) / (finished - (firstSeen ?? finished))
        let brokerRate = published["messagesPerSecond"]?.numberValue ?? 0
        report.add("brainReports", .object([
            "sent": .number(Double(settings.sightings)), "handled": .number(Double(handled)),
            "dropped": .number(Double(dropped)), "handledPerSecond": .number(brainRate.rounded()),
            "brokerMessagesPerSecondSameRun": .number(brokerRate.rounded()),
        ]), "brain, RSSI report ingest: \(grouped(brainRate)) reports/s handled (\(handled) of \(settings.sightings), "
            + "\(dropped) dropped); the broker delivered \(grouped(brokerRate)) msg/s to the C subscriber in the same run"
            + " = \(decimal(brainRate / max(brokerRate, 1), places: 2)) × broker")
        task.cancel()
        _ = try? await task.value
    }
}

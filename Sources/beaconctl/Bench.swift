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
        "Brains at the centre, each with a contiguous slice of the stores (`beacon-brain --stores`) and a connection "
            + "of its own: at a NATS centre one connection's retained publishes are stored one at a time "
            + "(docs/fleet.md), so a chain shards its brains. CPU and memory are the brains' sums.", valueName: "N"))
    var fleetBrains = 1

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
        guard (1...16).contains(fleetBrains) else { throw ValidationError("--fleet-brains must be 1…16") }
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
}

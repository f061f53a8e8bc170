// Over 500 lines: the fleet phase's one run (centre, store brokers, bridges, the brain, the replay, the figures) is a single sequence sharing its processes and clients; splitting it would pass them all around.
import BeaconKit
import Contract
import CommandLineSupport
import Config
import MQTT
import Synchronization
import SystemCalls

#if canImport(Glibc)
import Glibc
#endif

// MARK: 6. A fleet: store brokers bridged to a central broker, and the brain

/// What a subscriber at the centre received, with when (monotonic seconds).
final class CentreLog: Sendable {
    struct Record {
        var time: Double
        var topic: String
        var empty: Bool
        var text: String
    }

    let records = Mutex([Record]())

    func append(_ message: MQTTMessage) {
        let now = WallClock.monotonic()
        let record = Record(time: now, topic: message.topic, empty: message.payload.isEmpty,
                            text: message.payload.count <= 8 || Self.isDecision(message.topic) ? message.text : "")
        records.withLock { $0.append(record) }
    }

    /// `beacons/<major>/<minor>/events`: kept whole, to read the decision's capture time.
    static func isDecision(_ topic: String) -> Bool {
        if case .beacon(_, .zoneEvents)? = Topics().parse(topic) { return true }
        return false
    }

    var count: Int { records.withLock { $0.count } }
    var all: [Record] { records.withLock { $0 } }
}

/// The fleet's central broker for one run: one Mosquitto with the bench's settings, or a
/// NATS cluster of three `nats-server`s on loopback, each node's file the text
/// `beaconctl provision` writes (`NATSNodeConfig`) for the fleet config's `centre`: JetStream,
/// routes to every node, the MQTT listener; anonymous and without TLS, as the Mosquitto beside it.
final class BenchCentre: Sendable {
    struct Node: Sendable {
        let name: String
        let process: RunningProgram
        let mqttPort: UInt16
    }

    let kind: CentreConfig.Kind
    let nodes: [Node]
    /// nats-server's version (`nats-server --version`), empty for Mosquitto.
    let version: String

    private init(kind: CentreConfig.Kind, nodes: [Node], version: String = "") {
        self.kind = kind
        self.nodes = nodes
        self.version = version
    }

    /// Every node, as a several-host broker URL.
    var url: String { "mqtt://" + nodes.map { "127.0.0.1:\($0.mqttPort)" }.joined(separator: ",") }

    /// Each node's CPU seconds so far (user + system).
    var cpuSeconds: [Double] { nodes.map { $0.process.cpuSeconds ?? 0 } }

    func kill() {
        for node in nodes {
            node.process.signal(SIGKILL)
            _ = node.process.poll()
        }
    }

    static func mosquitto(in directory: String) async throws -> BenchCentre {
        let broker = try await BenchBroker.start(in: directory)
        return BenchCentre(kind: .mosquitto, nodes: [Node(name: "mosquitto", process: broker.process, mqttPort: broker.port)])
    }

    /// Three nodes' free ports, as the fleet config's `centre` and its several-host URL.
    static func natsLayout(storeDir: String, count: Int = 3) throws -> (centre: JSONValue, url: String) {
        var nodes: [JSONValue] = []
        var endpoints: [String] = []
        for i in 0..<count {
            let (mqtt, cluster, client) = (try Loopback.freePort(), try Loopback.freePort(), try Loopback.freePort())
            nodes.append(.object(["name": .string("n\(i + 1)"), "host": .string("127.0.0.1"), "bind": .string("127.0.0.1"),
                                  "mqttPort": .number(Double(mqtt)), "clusterPort": .number(Double(cluster)),
                                  "clientPort": .number(Double(client))]))
            endpoints.append("127.0.0.1:\(mqtt)")
        }
        let centre: JSONValue = .object(["kind": .string("nats"), "cluster": .string("bench"), "storeDir": .string(storeDir),
                                         "nodes": .array(nodes)])
        return (centre, "mqtt://" + endpoints.joined(separator: ","))
    }

    /// Starts every node of `centre` and waits until each takes an MQTT client's QoS 1
    /// publish (a node refuses MQTT clients until the JetStream cluster has formed).
    static func nats(_ centre: CentreConfig, in directory: String) async throws -> BenchCentre {
        guard let program = Programs.find("nats-server") else {
            throw CommandFailure("--fleet-centre nats: nats-server is not installed (apt install nats-server)", status: .failure)
        }
        guard let publisher = Programs.find("mosquitto_pub") else {
            throw CommandFailure("--fleet-centre nats: mosquitto_pub is not installed (apt install mosquitto-clients)",
                                 status: .failure)
        }
        var version = ""
        if let probe = try? RunningProgram(program, ["--version"], name: "nats-version-\(centre.nodes.first?.mqttPort ?? 0)",
                                           in: directory) {
            _ = await probe.wait(timeout: 10)
            version = probe.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).last.map(String.init) ?? ""
        }
        var nodes: [Node] = []
        do {
            for node in centre.nodes {
                let path = directory + "/\(node.name)-\(node.mqttPort).conf"
                try FileSystem.write(path, Array(NATSNodeConfig(centre: centre, node: node, users: [], tls: nil).text.utf8))
                let process = try RunningProgram(program, ["-c", path], name: "nats-\(node.name)-\(node.mqttPort)", in: directory)
                nodes.append(Node(name: node.name, process: process, mqttPort: node.mqttPort))
            }
            for node in nodes {
                let deadline = WallClock.monotonic() + 60
                var ready = false
                while !ready {
                    guard node.process.poll() == nil else {
                        throw CommandFailure("nats-server \(node.name) ended\n\(String(node.process.errors.suffix(2000)))",
                                             status: .failure)
                    }
                    guard WallClock.monotonic() < deadline else {
                        throw CommandFailure("nats-server \(node.name) took no MQTT client in 60 s\n"
                                             + String(node.process.errors.suffix(2000)), status: .failure)
                    }
                    let pub = try RunningProgram(publisher, ["-h", "127.0.0.1", "-p", String(node.mqttPort), "-q", "1",
                                                             "-t", "probe/\(node.name)", "-n"],
                                                 name: "nats-probe-\(node.name)-\(node.mqttPort)", in: directory)
                    let status = await pub.wait(timeout: 10)
                    if status == nil { await pub.stop(grace: 1) }
                    ready = status == 0
                    if !ready { try await Task.sleep(nanoseconds: 200_000_000) }
                }
            }
        } catch {
            BenchCentre(kind: .nats, nodes: nodes).kill()
            throw error
        }
        return BenchCentre(kind: .nats, nodes: nodes, version: version)
    }
}

extension BenchRun {
    /// For each of `--fleet-stores` (10, 50, 100): a central Mosquitto, a Mosquitto per store
    /// with the bridge `beaconctl bridge` generates, `beacon-brain` at the centre, and the
    /// stores' gateways replayed (`FleetReplay`: what `--fleet-gateways` real gateway engines
    /// decided for `--fleet-customers` simulated customers each) through one connection per
    /// store into its store broker, at real speed for `--fleet-duration` seconds. Beside the
    /// brain, in the same run: a C subscriber of everything at the centre (its rate and its CPU)
    /// and the bridge's own latency for the gateways' presence (store broker → centre).
    mutating func fleet() async throws {
        guard let brainPath = Programs.sibling("beacon-brain") else {
            throw CommandFailure("beacon-brain is not beside beaconctl: build the whole package (swift build)", status: .failure)
        }
        let sizes = try settings.fleetSizes()
        let largest = sizes.max() ?? 0
        let majors = (0..<largest).map { UInt16(100 + $0) }
        // The timeline is decided once, for the largest fleet; a smaller one replays its first stores.
        var ports: [UInt16] = []
        for _ in majors { ports.append(try Loopback.freePort()) }
        let placeholder = try FleetConfig.parse(FleetReplay.fleetConfig(central: broker.url, majors: majors, ports: ports,
                                                                        gateways: settings.fleetGateways))
        let began = WallClock.monotonic()
        let replay = try FleetReplay(config: placeholder, majors: majors, gateways: settings.fleetGateways,
                                     customers: settings.fleetCustomers, duration: settings.fleetDuration)
        report.lines.append("fleet: \(replay.entries.count) messages decided by \(largest * settings.fleetGateways) gateway "
                            + "engines in \(decimal(WallClock.monotonic() - began, places: 1)) s (before the measurement)")
        var rows: [JSONValue] = []
        let centres = try settings.fleetCentres()
        for size in sizes {
            for centre in centres {
                do {
                    rows.append(try await fleetRun(stores: size, centre: centre, replay: replay, brainPath: brainPath))
                } catch let failure as CommandFailure where sizes.count * centres.count > 1 {
                    // One run that does not finish (a NATS centre that cannot carry the fleet)
                    // keeps the others' figures: it is reported, with why, beside them.
                    let why = failure.message.split(separator: "\n").first.map(String.init) ?? failure.message
                    report.lines.append("fleet: \(size) stores at the \(centre.rawValue) centre did not finish: \(why)")
                    rows.append(.object(["stores": .number(Double(size)), "centre": .string(centre.rawValue),
                                         "failed": .string(why)]))
                }
            }
        }
        report.values["fleet"] = .array(rows)
    }

    func loadAverage() -> String {
        ((try? FileSystem.readText("/proc/loadavg")) ?? "").split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// One fleet of `stores` stores at a `centre` of that kind, from brokers up to the figures.
    mutating func fleetRun(stores: Int, centre kind: CentreConfig.Kind, replay: FleetReplay,
                           brainPath: String) async throws -> JSONValue {
        let loadBefore = loadAverage()
        let majors = Array(replay.majors.prefix(stores))
        var ports: [UInt16] = []
        for _ in majors { ports.append(try Loopback.freePort()) }

        // The centre, and the fleet config naming it: the stores' bridges and the brain read it.
        let central: BenchCentre
        let configText: String
        switch kind {
        case .mosquitto:
            central = try await BenchCentre.mosquitto(in: directory)
            configText = FleetReplay.fleetConfig(central: central.url, majors: majors, ports: ports,
                                                 gateways: settings.fleetGateways)
        case .nats:
            let layout = try BenchCentre.natsLayout(storeDir: directory + "/\(unique("jetstream"))")
            configText = FleetReplay.fleetConfig(central: layout.url, centre: layout.centre, majors: majors, ports: ports,
                                                 gateways: settings.fleetGateways)
            let parsed = try FleetConfig.parse(configText)
            central = try await BenchCentre.nats(parsed.centre, in: directory)
        }
        var storeBrokers: [BenchBroker] = []
        var clients: [MQTTClient] = []
        var processes: [RunningProgram] = []
        defer {
            for process in processes { process.signal(SIGKILL); _ = process.poll() }
            for store in storeBrokers { store.process.signal(SIGKILL); _ = store.process.poll() }
            central.kill()
        }
        // The readers of everything side by side on node 1, served alike: the brain (the fleet's
        // broker URL), the C subscriber and this watcher; the stores' bridges in turn over the
        // nodes (store i's bridge lists node i mod 3 first: `FleetConfig.bridgeURL(ofStore:)`).
        func port(ofNode i: Int) -> UInt16 { central.nodes[i % central.nodes.count].mqttPort }
        let watcher = try MQTTClient(MQTTClientOptions(broker: BrokerURL(host: "127.0.0.1", port: port(ofNode: 0)),
                                                      clientID: unique("fleet-watch")))

        // The centre's view: the bridges' notifications, gateway presence, the brain's presence
        // and its decisions (with the capture time each was made at).
        let log = CentreLog()
        let topics = Topics()
        // QoS 0, as the C subscriber (and the brain at a NATS centre): on nats-server a QoS 1
        // subscription is a JetStream consumer, and what reaches it waits for a replicated
        // write that times out under load (the 100 bridges' `1` were all retained at the
        // centre, but not all delivered to a QoS 1 watcher: the bench gave up waiting).
        try watcher.subscribe([topics.bridgeStatusFilter(ofStore: nil), topics.presence(of: .anyIBeacon),
                               topics.presence(of: .anyIBeacon, seenBy: Topics.anyLevel), topics.zoneEvents(of: .anyIBeacon)],
                              qos: 0)
        try watcher.start()
        let consumer = Task {
            for await event in watcher.events {
                if case .message(let message) = event { log.append(message) }
            }
        }
        defer {
            consumer.cancel()
            Task { await watcher.stop(timeout: 1) }
        }

        // A broker per store, with its generated bridge (for a NATS centre: every node, store i's node i mod 3 first).
        let config = try FleetConfig.parse(configText)
        let configPath = directory + "/\(unique("fleet")).json"
        try FileSystem.write(configPath, Array(configText.utf8))
        // --fleet-direct: no store broker; each store's connection goes straight to the centre
        // (to the nodes in turn) and says `1` on its bridge topic, as its bridge would.
        let direct = settings.fleetDirect
        if direct {
            for (index, major) in majors.enumerated() {
                let client = try MQTTClient(MQTTClientOptions(broker: BrokerURL(host: "127.0.0.1", port: port(ofNode: index)),
                                                             clientID: "replay-\(major)"))
                try client.start()
                clients.append(client)
            }
            try await waitFor("the replay's connections", timeout: 60 + Double(stores) / 10) { clients.allSatisfy(\.isConnected) }
            for (client, major) in zip(clients, majors) {
                try client.publish(MQTTMessage(topic: topics.bridgeStatus(ofStore: major), payload: Array("1".utf8), qos: 1,
                                               retain: true))
            }
        } else {
            for major in majors {
                let bridge = try BridgePlan(config: config, store: major).mosquittoConfiguration(password: nil)
                storeBrokers.append(try await BenchBroker.start(in: directory, extra: bridge))
            }
        }
        // A NATS centre makes a replicated JetStream consumer of each QoS 1 subscription a
        // bridge makes as it connects (2 for these stores since the bridges take the retained
        // state at QoS 0; 11 before): seconds each on a loaded machine (docs/PERFORMANCE.md section 6).
        try await waitFor("every store's bridge to connect", timeout: 60 + Double(stores) * (kind == .nats && !direct ? 6 : 1)) {
            Set(log.all.compactMap { record -> UInt16? in
                guard case .bridgeStatus(let store)? = topics.parse(record.topic), record.text == "1" else { return nil }
                return store
            }).count == stores
        }

        // A client on each node but the C subscriber's, connected now, to probe with (below).
        var probers: [Int: MQTTClient] = [:]
        for node in central.nodes.indices.dropFirst() {
            let prober = try MQTTClient(MQTTClientOptions(broker: BrokerURL(host: "127.0.0.1", port: port(ofNode: node)),
                                                          clientID: unique("fleet-prober")))
            try prober.start()
            probers[node] = prober
        }
        try await waitFor("the probing connections", timeout: 60) { probers.values.allSatisfy(\.isConnected) }

        // The brains (`--fleet-brains`: each a contiguous slice of the stores), settled; the C
        // subscriber of everything at the centre.
        let brainCount = min(settings.fleetBrains, stores)
        var brains: [RunningProgram] = []
        for k in 0..<brainCount {
            let slice = majors[(k * stores / brainCount)..<((k + 1) * stores / brainCount)]
            let only = brainCount > 1 ? ["--stores", slice.map(String.init).joined(separator: ",")] : []
            let brain = try RunningProgram(brainPath, ["--config", configPath, "--client-id", unique("fleet-brain")] + only
                                               + ["--log-level", "info"], name: unique("fleet-brain"), in: directory)
            processes.append(brain)
            brains.append(brain)
        }
        try await waitFor("beacon-brain to settle", timeout: 60) {
            for brain in brains where brain.poll() != nil {
                throw CommandFailure("beacon-brain ended\n\(brain.errors)", status: .failure)
            }
            return brains.allSatisfy { $0.errors.contains("settled from retained state") }
        }
        var brainsCPU: Double { brains.reduce(0) { $0 + ($1.cpuSeconds ?? 0) } }
        // Every topic the product publishes, by its first level rather than `#`: nats-server
        // 2.9 gives a `#` subscriber its JetStream internals too ($MQTT/sess/…, $JS/API/…, the
        // retained messages' own stream), which MQTT keeps from `#` (a `$` topic) and Mosquitto
        // does; the same filters at both centres count the same messages.
        let filters = ["beacons", "gateways", "stores", "observers", "brain", "fleet"].flatMap { ["--filter", $0 + "/#"] }
        let everything = try RunningProgram(baseline, ["sub", "--port", String(port(ofNode: 0))] + filters
                                                + ["--count", "1000000000", "--idle", "5"],
                                          name: unique("fleet-sub"), in: directory)
        processes.append(everything)
        guard await everything.waitForOutput(timeout: 20, { $0.contains("ready") }) else {
            throw CommandFailure("mqtt-baseline sub did not subscribe\n\(everything.errors)", status: .failure)
        }
        // At a cluster its interest must reach the other nodes before the replay, or what their
        // bridges publish first is dropped there (a quick run lost a sighting so). A node passes
        // on its subscriptions over each route in order: once the watcher, on the C subscriber's
        // node, subscribed after it, hears a probe published on node j, node j knows of the C
        // subscriber too. The probes' topic is not one the C subscriber counts.
        if !probers.isEmpty {
            try watcher.subscribe([Self.probeTopic + "/#"], qos: 0)
            try await waitFor("every node to pass on the C subscriber's interest", timeout: 60) {
                var heard = true
                for (node, prober) in probers where !log.all.contains(where: { $0.topic == Self.probeTopic + "/\(node)" }) {
                    heard = false
                    if prober.isConnected {
                        try prober.publish(MQTTMessage(topic: Self.probeTopic + "/\(node)", payload: [], qos: 0, retain: false))
                    }
                }
                return heard
            }
            for prober in probers.values { await prober.stop(timeout: 1) }
        }

        // One connection per store, as its gateways' connections to its broker.
        for (major, port) in zip(majors, storeBrokers.map(\.port)) where !direct {
            let client = try MQTTClient(MQTTClientOptions(broker: BrokerURL(host: "127.0.0.1", port: port),
                                                         clientID: "replay-\(major)"))
            try client.start()
            clients.append(client)
        }
        defer { for client in clients { Task { await client.stop(timeout: 1) } } }
        try await waitFor("the replay's connections", timeout: 30) { clients.allSatisfy(\.isConnected) }

        // The replay, at real speed.
        let cpuBefore = (brain: brainsCPU, sub: everything.cpuSeconds ?? 0, central: central.cpuSeconds)
        var firstMessage: [BeaconRef: Double] = [:]
        var gatewayPublished: [String: [Double]] = [:]
        var sightings = 0
        var published = 0
        var lag: [Double] = []
        let start = WallClock.monotonic()
        for entry in replay.entries where entry.store < stores {
            var now = WallClock.monotonic() - start
            while now < entry.time {
                try await Task.sleep(nanoseconds: UInt64(min(entry.time - now, 0.01) * 1e9))
                now = WallClock.monotonic() - start
            }
            do {
                try clients[entry.store].publish(entry.message)
            } catch {
                throw CommandFailure("the replay could not publish to store \(majors[entry.store])'s broker: \(error)",
                                     status: .failure)
            }
            let at = WallClock.monotonic()
            published += 1
            lag.append(at - start - entry.time)
            guard case .beacon(let beacon, let about)? = topics.parse(entry.message.topic) else { continue }
            switch about {
            case .sighting:
                sightings += 1
                if firstMessage[beacon] == nil { firstMessage[beacon] = at }
            case .gatewayPresence:
                if firstMessage[beacon] == nil, !entry.message.payload.isEmpty { firstMessage[beacon] = at }
                gatewayPublished[entry.message.topic, default: []].append(at)
            default:
                break
            }
        }
        let replayEnded = WallClock.monotonic()

        // Until the centre has been quiet for 3 s.
        var seen = log.count
        var quietSince = WallClock.monotonic()
        // A NATS centre may still be passing on the brains' retained state minutes later
        // (docs/fleet.md, "What the brain's output costs"): waited for longer there.
        let drainLimit = kind == .nats ? 600.0 : 120.0
        while WallClock.monotonic() - quietSince < 3, WallClock.monotonic() - replayEnded < drainLimit {
            try await Task.sleep(nanoseconds: 200_000_000)
            if log.count != seen {
                seen = log.count
                quietSince = WallClock.monotonic()
            }
        }
        let drained = quietSince - replayEnded
        let brainCPU = brainsCPU - cpuBefore.brain
        let subCPU = (everything.cpuSeconds ?? 0) - cpuBefore.sub
        let nodeCPU = zip(central.cpuSeconds, cpuBefore.central).map { $0 - $1 }
        let centralCPU = nodeCPU.reduce(0, +)
        let memories = brains.compactMap(\.memory)
        let brainMemory: (resident: Int, peak: Int)? = memories.count == brains.count
            ? (memories.reduce(0) { $0 + $1.resident }, memories.reduce(0) { $0 + $1.peak }) : nil
        let nodeMemory = central.nodes.map { $0.process.memory?.resident ?? 0 }
        let centralMemory = nodeMemory.reduce(0, +)
        let storeMemory = storeBrokers.compactMap { $0.process.memory?.resident }
        guard await everything.wait(timeout: 60) == 0, let counted = everything.lastJSON else {
            throw CommandFailure("the C subscriber at the centre failed\n\(everything.errors)", status: .failure)
        }
        if let refused = counted["refused"]?.numberValue, refused > 0 {
            writeStandardError("beaconctl bench: the centre refused \(Int(refused)) of the C subscriber's subscriptions (SUBACK 0x80)\n")
        }
        if let times = counted["connections"]?.numberValue, times > 1 {
            writeStandardError("beaconctl bench: the C subscriber at the centre was connected \(Int(times)) times (libmosquitto reconnected it; it subscribed again)\n")
        }
        let loadAfter = loadAverage()
        for client in clients { await client.stop(timeout: 1) }
        clients.removeAll()
        await watcher.stop(timeout: 1)

        // Latencies: the bridge's own (each gateway presence, store broker → centre) and the
        // brain's (a customer's first gateway message → the brain's zone; a decision's capture
        // time, on the replay's clock → the decision at the centre), all read by the same
        // subscriber.
        let records = log.all
        var arrived: [String: [Double]] = [:]
        var bridgeLatency: [Double] = []
        var enterLatency: [Double] = []
        var decisionLatency: [Double] = []
        var exitLatency: [Double] = []
        var zoned = Set<BeaconRef>()
        for record in records {
            guard case .beacon(let beacon, let about)? = topics.parse(record.topic) else { continue }
            switch about {
            case .gatewayPresence:
                arrived[record.topic, default: []].append(record.time)
            case .fleetPresence:
                if !record.empty, !zoned.contains(beacon), let first = firstMessage[beacon] {
                    zoned.insert(beacon)
                    enterLatency.append(record.time - first)
                }
            case .zoneEvents:
                guard let value = try? JSONParser().parse(record.text),
                      let decision = try? ZoneDecision(parsing: value, topic: beacon) else { break }
                let latency = record.time - (start + decision.at.seconds(since: replay.origin))
                decisionLatency.append(latency)
                if decision.kind == .exit { exitLatency.append(latency) }
            default:
                break
            }
        }
        for (topic, times) in gatewayPublished {
            for (sent, received) in zip(times, arrived[topic] ?? []) { bridgeLatency.append(received - sent) }
        }
        let bridge = LatencySummary(bridgeLatency)
        let enter = LatencySummary(enterLatency)
        let decision = LatencySummary(decisionLatency)
        let exit = LatencySummary(exitLatency)
        let received = counted["received"]?.numberValue ?? 0
        let span = (counted["last"]?.numberValue ?? 0) - (counted["first"]?.numberValue ?? 0)
        let centralRate = span > 0 ? received / span : 0
        let brainPerThousand = sightings > 0 ? brainCPU / Double(sightings) * 1000 : 0
        let subPerThousand = received > 0 ? subCPU / received * 1000 : 0
        let lagSummary = LatencySummary(lag)
        let storeMean = storeMemory.isEmpty ? 0 : storeMemory.reduce(0, +) / storeMemory.count

        let centreName = kind == .nats ? "NATS cluster (\(central.nodes.count) nodes, nats-server \(central.version))" : "Mosquitto"
        let perNode = zip(central.nodes, zip(nodeCPU, nodeMemory)).map { node, figures in
            "\(node.name) \(milliseconds(received > 0 ? figures.0 / received * 1000 : 0)) ms, \(megabytes(figures.1))"
        }
        report.lines.append("""
        fleet of \(stores) stores × \(settings.fleetGateways) gateways × \(settings.fleetCustomers) customers, \
        \(decimal(settings.fleetDuration, places: 0)) s, centre: \(centreName) (load average \(loadBefore) before, \(loadAfter) after):
          replayed \(grouped(Double(published))) messages (\(grouped(Double(sightings))) sightings) \
        \(direct ? "straight into the centre, one connection per store" : "into \(stores) store brokers"); \
        replay behind schedule: median \(milliseconds(lagSummary.median)) ms, p99 \(milliseconds(lagSummary.p99)) ms; \
        the centre quiet \(decimal(drained, places: 1)) s after the replay ended
          centre: \(grouped(centralRate)) msg/s to a C subscriber of everything (\(grouped(received)) messages); \
        centre's CPU \(milliseconds(received > 0 ? centralCPU / received * 1000 : 0)) ms per 1,000 messages\
        \(kind == .nats ? " (per node: " + perNode.joined(separator: "; ") + ")" : "")
          brain CPU\(brainCount > 1 ? " (\(brainCount) brains, \(stores / brainCount)–\((stores + brainCount - 1) / brainCount) stores each)" : ""): \(milliseconds(brainPerThousand)) ms per 1,000 sightings; the C subscriber: \
        \(milliseconds(subPerThousand)) ms per 1,000 messages = \(decimal(brainPerThousand / max(subPerThousand, 1e-9), places: 1)) ×
          sighting to zone (customer's first gateway message → brain's zone at the centre): \(enter.text)
          decision (its capture time on the replay's clock → at the centre): \(decision.text); of which exits: \(exit.text)
          \(direct ? "centre's own (gateway presence, replay → centre → subscriber)" : "bridge's own (gateway presence, store broker → centre)"): \(bridge.text); \
        zone p50 \(decimal(enter.median / bridge.median, places: 1)) ×, p99 \(decimal(enter.p99 / bridge.p99, places: 1)) ×
          memory: beacon-brain \(brainMemory.map { megabytes($0.resident) } ?? "-") (peak \(brainMemory.map { megabytes($0.peak) } ?? "-")), \
        centre \(megabytes(centralMemory))\(direct ? "" : ", store mosquitto \(megabytes(storeMean)) each")
        """)
        // A run whose brains decided nothing the C subscriber saw is no figure: say what the
        // brains said (the last lines of each, past the start-up warnings), not only "n = 0".
        if decisionLatency.isEmpty, sightings > 0 {
            report.lines.append("  no decision reached the centre; the brains' last log lines:")
            for (k, brain) in brains.enumerated() {
                let said = brain.errors.split(separator: "\n").filter { !$0.contains("[beacon_brain]") }
                report.lines.append("    brain \(k + 1): " + (said.isEmpty ? "none" : said.suffix(4).joined(separator: "\n      ")))
            }
        }
        return .object([
            "stores": .number(Double(stores)), "gateways": .number(Double(stores * settings.fleetGateways)),
            "customers": .number(Double(stores * settings.fleetCustomers)), "seconds": .number(settings.fleetDuration),
            "brains": .number(Double(brainCount)), "drainedSeconds": .number(rounded(drained, 1)),
            "loadAverageBefore": .string(loadBefore), "loadAverageAfter": .string(loadAfter),
            "published": .number(Double(published)), "sightings": .number(Double(sightings)),
            "replayLag": lagSummary.json,
            "centralReceived": .number(received), "centralMessagesPerSecond": .number(centralRate.rounded()),
            "centre": .string(kind.rawValue), "direct": .bool(direct),
            "centreCpuMsPer1000Messages": .number(rounded(received > 0 ? centralCPU / received * 1e6 : 0, 3)),
            "centreNodes": .array(zip(central.nodes, zip(nodeCPU, nodeMemory)).map { node, figures in
                .object(["name": .string(node.name),
                         "cpuMsPer1000Messages": .number(rounded(received > 0 ? figures.0 / received * 1e6 : 0, 3)),
                         "residentBytes": .number(Double(figures.1))])
            }),
            "brainCpuMsPer1000Sightings": .number(rounded(brainPerThousand * 1000, 3)),
            "subscriberCpuMsPer1000Messages": .number(rounded(subPerThousand * 1000, 3)),
            "sightingToZone": enter.json, "decision": decision.json, "exitDecision": exit.json, "bridgeLatency": bridge.json,
            "brainResidentBytes": .number(Double(brainMemory?.resident ?? 0)),
            "brainPeakResidentBytes": .number(Double(brainMemory?.peak ?? 0)),
            "centralResidentBytes": .number(Double(centralMemory)),
            "storeBrokerResidentBytes": .number(Double(storeMean)),
        ])
    }

    /// Polls `condition` every 20 ms until it holds; fails naming `what` after `timeout` s.
    /// Where the fleet run probes a cluster's routes (outside the product's topics).
    static let probeTopic = "bench/probe"

    func waitFor(_ what: String, timeout: Double, _ condition: () throws -> Bool) async throws {
        let deadline = WallClock.monotonic() + timeout
        while try !condition() {
            guard WallClock.monotonic() < deadline else {
                throw CommandFailure("fleet: timed out waiting for \(what)", status: .failure)
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }
}

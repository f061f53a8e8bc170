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
                            text: message.payload.count <= 8 || message.topic.hasSuffix("/events") ? message.text : "")
        records.withLock { $0.append(record) }
    }

    var count: Int { records.withLock { $0.count } }
    var all: [Record] { records.withLock { $0 } }
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
        for size in sizes {
            rows.append(try await fleetRun(stores: size, replay: replay, brainPath: brainPath))
        }
        report.values["fleet"] = .array(rows)
    }

    func loadAverage() -> String {
        ((try? FileSystem.readText("/proc/loadavg")) ?? "").split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// One fleet of `stores` stores, from brokers up to the figures.
    mutating func fleetRun(stores: Int, replay: FleetReplay, brainPath: String) async throws -> JSONValue {
        let loadBefore = loadAverage()
        let central = try await BenchBroker.start(in: directory)
        var storeBrokers: [BenchBroker] = []
        var clients: [MQTTClient] = []
        var processes: [RunningProgram] = []
        let watcher = try MQTTClient(MQTTClientOptions(broker: BrokerURL(host: "127.0.0.1", port: central.port),
                                                      clientID: unique("fleet-watch")))
        defer {
            for process in processes { process.signal(SIGKILL); _ = process.poll() }
            for store in storeBrokers { store.process.signal(SIGKILL); _ = store.process.poll() }
            central.process.signal(SIGKILL)
            _ = central.process.poll()
        }
        let majors = Array(replay.majors.prefix(stores))

        // The centre's view: the bridges' notifications, gateway presence, the brain's presence
        // and its decisions (with the capture time each was made at).
        let log = CentreLog()
        let topics = Topics()
        try watcher.subscribe([topics.bridgeStatusFilter(ofStore: nil), topics.presence(of: .anyIBeacon),
                               topics.presence(of: .anyIBeacon, seenBy: Topics.anyLevel), topics.zoneEvents(of: .anyIBeacon)])
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

        // A broker per store, with its generated bridge.
        var ports: [UInt16] = []
        for _ in majors { ports.append(try Loopback.freePort()) }
        let configText = FleetReplay.fleetConfig(central: central.url, majors: majors, ports: ports,
                                                 gateways: settings.fleetGateways)
        let config = try FleetConfig.parse(configText)
        let configPath = directory + "/\(unique("fleet")).json"
        try FileSystem.write(configPath, Array(configText.utf8))
        for major in majors {
            let bridge = try BridgePlan(config: config, store: major).mosquittoConfiguration(password: nil)
            storeBrokers.append(try await BenchBroker.start(in: directory, extra: bridge))
        }
        try await waitFor("every store's bridge to connect", timeout: 60 + Double(stores)) {
            Set(log.all.filter { $0.topic.hasSuffix("/bridge") && $0.text == "1" }.map(\.topic)).count == stores
        }

        // The brain, settled; the C subscriber of everything at the centre.
        let brain = try RunningProgram(brainPath, ["--config", configPath, "--client-id", unique("fleet-brain"),
                                                 "--log-level", "info"], name: unique("fleet-brain"), in: directory)
        processes.append(brain)
        try await waitFor("beacon-brain to settle", timeout: 60) {
            if brain.poll() != nil { throw CommandFailure("beacon-brain ended\n\(brain.errors)", status: .failure) }
            return brain.errors.contains("settled from retained state")
        }
        let everything = try RunningProgram(baseline, ["sub", "--port", String(central.port), "--filter", "#",
                                                     "--count", "1000000000", "--idle", "5"],
                                          name: unique("fleet-sub"), in: directory)
        processes.append(everything)
        guard await everything.waitForOutput(timeout: 20, { $0.contains("ready") }) else {
            throw CommandFailure("mqtt-baseline sub did not subscribe\n\(everything.errors)", status: .failure)
        }

        // One connection per store, as its gateways' connections to its broker.
        for (major, port) in zip(majors, storeBrokers.map(\.port)) {
            let client = try MQTTClient(MQTTClientOptions(broker: BrokerURL(host: "127.0.0.1", port: port),
                                                         clientID: "replay-\(major)"))
            try client.start()
            clients.append(client)
        }
        defer { for client in clients { Task { await client.stop(timeout: 1) } } }
        try await waitFor("the replay's connections", timeout: 30) { clients.allSatisfy(\.isConnected) }

        // The replay, at real speed.
        let cpuBefore = (brain: brain.cpuSeconds ?? 0, sub: everything.cpuSeconds ?? 0, central: central.process.cpuSeconds ?? 0)
        var firstMessage: [String: Double] = [:]
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
            guard let topic = FleetTopic(entry.message.topic) else { continue }
            switch topic {
            case .sighting(let beacon):
                sightings += 1
                if firstMessage[beacon] == nil { firstMessage[beacon] = at }
            case .gatewayPresence(let beacon):
                if firstMessage[beacon] == nil, !entry.message.payload.isEmpty { firstMessage[beacon] = at }
                gatewayPublished[entry.message.topic, default: []].append(at)
            case .brainPresence, .decision:
                break
            }
        }
        let replayEnded = WallClock.monotonic()

        // Until the centre has been quiet for 3 s.
        var seen = log.count
        var quietSince = WallClock.monotonic()
        while WallClock.monotonic() - quietSince < 3, WallClock.monotonic() - replayEnded < 120 {
            try await Task.sleep(nanoseconds: 200_000_000)
            if log.count != seen {
                seen = log.count
                quietSince = WallClock.monotonic()
            }
        }
        let brainCPU = (brain.cpuSeconds ?? 0) - cpuBefore.brain
        let subCPU = (everything.cpuSeconds ?? 0) - cpuBefore.sub
        let centralCPU = (central.process.cpuSeconds ?? 0) - cpuBefore.central
        let brainMemory = brain.memory
        let centralMemory = central.process.memory
        let storeMemory = storeBrokers.compactMap { $0.process.memory?.resident }
        guard await everything.wait(timeout: 60) == 0, let counted = everything.lastJSON else {
            throw CommandFailure("the C subscriber at the centre failed\n\(everything.errors)", status: .failure)
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
        var zoned = Set<String>()
        for record in records {
            switch FleetTopic(record.topic) {
            case .gatewayPresence?:
                arrived[record.topic, default: []].append(record.time)
            case .brainPresence(let beacon)?:
                if !record.empty, !zoned.contains(beacon), let first = firstMessage[beacon] {
                    zoned.insert(beacon)
                    enterLatency.append(record.time - first)
                }
            case .decision?:
                guard case .object(let o)? = try? JSONParser().parse(record.text),
                      let ts = o["ts"]?.stringValue.flatMap(Instant.init(iso8601:)) else { break }
                let latency = record.time - (start + ts.seconds(since: replay.origin))
                decisionLatency.append(latency)
                if o["event"]?.stringValue == "exit" { exitLatency.append(latency) }
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

        report.lines.append("""
        fleet of \(stores) stores × \(settings.fleetGateways) gateways × \(settings.fleetCustomers) customers, \
        \(decimal(settings.fleetDuration, places: 0)) s (load average \(loadBefore) before, \(loadAfter) after):
          replayed \(grouped(Double(published))) messages (\(grouped(Double(sightings))) sightings) into \(stores) store brokers; \
        replay behind schedule: median \(milliseconds(lagSummary.median)) ms, p99 \(milliseconds(lagSummary.p99)) ms
          centre: \(grouped(centralRate)) msg/s to a C subscriber of everything (\(grouped(received)) messages); \
        central mosquitto CPU \(milliseconds(received > 0 ? centralCPU / received * 1000 : 0)) ms per 1,000 messages
          brain CPU: \(milliseconds(brainPerThousand)) ms per 1,000 sightings; the C subscriber: \
        \(milliseconds(subPerThousand)) ms per 1,000 messages = \(decimal(brainPerThousand / max(subPerThousand, 1e-9), places: 1)) ×
          sighting to zone (customer's first gateway message → brain's zone at the centre): \(enter.text)
          decision (its capture time on the replay's clock → at the centre): \(decision.text); of which exits: \(exit.text)
          bridge's own (gateway presence, store broker → centre): \(bridge.text); \
        zone p50 \(decimal(enter.median / bridge.median, places: 1)) ×, p99 \(decimal(enter.p99 / bridge.p99, places: 1)) ×
          memory: beacon-brain \(brainMemory.map { megabytes($0.resident) } ?? "-") (peak \(brainMemory.map { megabytes($0.peak) } ?? "-")), \
        central mosquitto \(centralMemory.map { megabytes($0.resident) } ?? "-"), store mosquitto \(megabytes(storeMean)) each
        """)
        return .object([
            "stores": .number(Double(stores)), "gateways": .number(Double(stores * settings.fleetGateways)),
            "customers": .number(Double(stores * settings.fleetCustomers)), "seconds": .number(settings.fleetDuration),
            "loadAverageBefore": .string(loadBefore), "loadAverageAfter": .string(loadAfter),
            "published": .number(Double(published)), "sightings": .number(Double(sightings)),
            "replayLag": lagSummary.json,
            "centralReceived": .number(received), "centralMessagesPerSecond": .number(centralRate.rounded()),
            "centralMosquittoCpuMsPer1000Messages": .number(rounded(received > 0 ? centralCPU / received * 1e6 : 0, 3)),
            "brainCpuMsPer1000Sightings": .number(rounded(brainPerThousand * 1000, 3)),
            "subscriberCpuMsPer1000Messages": .number(rounded(subPerThousand * 1000, 3)),
            "sightingToZone": enter.json, "decision": decision.json, "exitDecision": exit.json, "bridgeLatency": bridge.json,
            "brainResidentBytes": .number(Double(brainMemory?.resident ?? 0)),
            "brainPeakResidentBytes": .number(Double(brainMemory?.peak ?? 0)),
            "centralResidentBytes": .number(Double(centralMemory?.resident ?? 0)),
            "storeBrokerResidentBytes": .number(Double(storeMean)),
        ])
    }

    /// Polls `condition` every 20 ms until it holds; fails naming `what` after `timeout` s.
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

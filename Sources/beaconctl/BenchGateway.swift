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

/// `beaconctl bench`: the broker's ceiling, the gateway pipeline beside the C baseline, the
/// gateway process's memory (sections 1–3 of its output).
extension BenchRun {
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
        let start = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
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
            let start = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
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
}

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

/// `beaconctl bench`: the brain (section 4 of its output): join to reply, joins per second, RSSI reports.
extension BenchRun {
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

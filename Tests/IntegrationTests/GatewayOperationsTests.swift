import BeaconKit
import Wire
import Foundation
import Contract
import TestSupport
import Testing

/// What an operator relies on: outages, restarts, commands, live config, filtering.
@Suite("beacon-gateway operations")
struct GatewayOperationsTests {
    static let uuid = GatewayTests.uuid
    static let otherUUID = BeaconUUID("F7826DA6-4FA2-4E98-8024-BC5B71E0893E")!

    @Test("while the broker is down the gateway keeps scanning, counts what it drops, and republishes presence")
    func brokerOutage() async throws {
        let dir = try TemporaryDirectory("gateway-outage")
        let broker = try await MosquittoBroker.start(in: dir)
        // Beacon 1 is always in range (the capture loops); raw mode makes a sighting of
        // every advertisement so the 10-message queue overflows during the outage.
        let capture = try dir.write("store.log", bytes: GatewayTests.capture(beacons: [(1, 0...20)], step: 0.05).bytes)
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "source": "btsnoop:\#(capture)?loop", "raw": true, "queueLimit": 10, "healthInterval": 1}"#,
        ])
        // Its metrics show the outage while the broker cannot carry its health.
        let metricsPort = try FreePort.allocate()
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "door",
                                                          "--metrics", "127.0.0.1:\(metricsPort)"], in: dir)
        let first = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/7/1/presence/door"], in: dir)
        let present = await first.waitFor(topic: "beacons/7/1/presence/door", timeout: 15)
        try #require(present != nil, "\(gateway.diagnostics)")
        await first.stop()

        // The broker dies and loses its retained messages (persistence is off). The outage
        // lasts until the gateway has seen it and its queue has overflowed (its metrics say
        // both; not a time), and it is still running then.
        await broker.kill()
        let metrics = "http://127.0.0.1:\(metricsPort)/metrics"
        let connected = #"beaconbridge_gateway_broker_connected{gateway="door"}"#
        let dropped = #"beaconbridge_gateway_dropped_total{gateway="door"}"#
        let during = try await MetricsTests.scrape(metrics, in: dir) {
            MetricsTests.value(connected, in: $0) == 0 && (MetricsTests.value(dropped, in: $0) ?? 0) > 0
        }
        #expect(MetricsTests.value(connected, in: during) == 0 && (MetricsTests.value(dropped, in: during) ?? 0) > 0,
                "\(during)\n\(gateway.diagnostics)")
        #expect(gateway.isRunning, "the gateway must survive a broker outage\n\(gateway.diagnostics)")
        try await broker.restart()

        let after = try await MosquittoSubscriber.start(broker: broker,
                                                        filters: ["beacons/7/1/presence/door", "gateways/door/#"], in: dir)
        let republished = await after.waitFor(topic: "beacons/7/1/presence/door", timeout: 40)
        #expect(republished != nil, "presence was not republished after the reconnect\n\(gateway.diagnostics)")
        #expect(await after.waitFor(topic: "gateways/door/status", text: "online", timeout: 10) != nil)
        // Once the queue has drained, health still reports what overflowed it.
        let health = await after.waitFor(timeout: 10) {
            $0.topic == "gateways/door/health" && ($0.json?["dropped"]?.numberValue ?? 0) > 0
                && $0.json?["queueDepth"] == .number(0)
        }
        #expect(health != nil, "health should count the sightings dropped from the full queue")
        await gateway.stop()
        await after.stop()
        await broker.stop()
    }

    @Test("a restarted gateway deletes the presence it left behind for beacons it no longer sees")
    func stalePresenceCleared() async throws {
        let dir = try TemporaryDirectory("gateway-stale")
        let broker = try await MosquittoBroker.start(in: dir)
        // An earlier run left beacon 9/9 present on this gateway.
        let publisher = try ChildProcess(Programs.system("mosquitto_pub")!, [
            "-h", "127.0.0.1", "-p", String(broker.port), "-r", "-q", "1",
            "-t", "beacons/9/9/presence/door", "-m", #"{"gateway":"door","proximity":"near"}"#,
        ], in: dir)
        #expect(await publisher.waitForExit(timeout: 5) == 0)

        let capture = try dir.write("store.log", bytes: GatewayTests.capture(beacons: [(1, 0...30)], step: 0.5).bytes)
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "source": "btsnoop:\#(capture)?loop"}"#,
        ], defaults: #"{"exitTimeout": 2}"#)
        let subscriber = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/+/+/presence/door"], in: dir)
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "door"], in: dir)
        let cleared = await subscriber.waitFor(timeout: 15) {
            $0.topic == "beacons/9/9/presence/door" && $0.payload.isEmpty
        }
        #expect(cleared != nil, "\(gateway.diagnostics)")
        // What it still sees stays.
        let kept = subscriber.records.last { $0.topic == "beacons/7/1/presence/door" }
        #expect(kept.map { !$0.payload.isEmpty } == true)
        await gateway.stop()
        await subscriber.stop()
        await broker.stop()
    }

    @Test("the uuids allow-list decides what is published")
    func allowList() async throws {
        let dir = try TemporaryDirectory("gateway-allow")
        let broker = try await MosquittoBroker.start(in: dir)
        var writer = BtsnoopWriter(datalink: .h4)
        let start = CaptureTime(iso8601: "2026-11-21T10:00:00.000Z")!
        for i in 0..<20 {
            writer.appendEvent(advertisingEvent(IBeacon(uuid: Self.uuid, major: 7, minor: 1, txPower: -59),
                                                address: 1, rssi: -60), at: start + Double(i) * 0.2)
            writer.appendEvent(advertisingEvent(IBeacon(uuid: Self.otherUUID, major: 7, minor: 2, txPower: -59),
                                                address: 2, rssi: -60), at: start + Double(i) * 0.2 + 0.1)
        }
        let capture = try dir.write("mixed.log", bytes: writer.bytes)
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "source": "btsnoop:\#(capture)?speed=0"}"#,
        ], extra: #""uuids": ["\#(Self.uuid)"]"#, defaults: #"{"exitTimeout": 1}"#)
        let subscriber = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/#"], in: dir)
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "door"], in: dir)
        let exit = await subscriber.waitFor(timeout: 15) { $0.topic == "beacons/7/1/presence/door" && $0.payload.isEmpty }
        try #require(exit != nil, "\(gateway.diagnostics)")
        #expect(subscriber.records.contains { $0.topic == "beacons/7/1" })
        #expect(!subscriber.records.contains { $0.topic.hasPrefix("beacons/7/2") })
        await gateway.stop()
        await subscriber.stop()
        await broker.stop()
    }

    @Test("operator commands and live config: applied, acknowledged, invalid ones rejected while the gateway runs on")
    func commandsAndLiveConfig() async throws {
        let dir = try TemporaryDirectory("gateway-commands")
        let broker = try await MosquittoBroker.start(in: dir)
        let capture = try dir.write("store.log", bytes: GatewayTests.capture(beacons: [(1, 0...30)], step: 0.5).bytes)
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "source": "btsnoop:\#(capture)?loop", "healthInterval": 1}"#,
        ])
        let subscriber = try await MosquittoSubscriber.start(broker: broker, filters: ["gateways/door/#"], in: dir)
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "door"], in: dir)
        #expect(await subscriber.waitFor(topic: "gateways/door/status", text: "online", timeout: 15) != nil)

        func send(_ topic: String, _ payload: String, retain: Bool = false) async throws {
            let pub = try ChildProcess(Programs.system("mosquitto_pub")!, [
                "-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-t", topic, "-m", payload,
            ] + (retain ? ["-r"] : []), in: dir)
            #expect(await pub.waitForExit(timeout: 5) == 0)
        }
        // The gateway's events, read as Contract's `GatewayEvent`.
        func reply(_ predicate: @escaping (CommandReply) -> Bool) async -> CommandReply? {
            let record = await subscriber.waitFor(timeout: 10) { record in
                guard record.topic == "gateways/door/events", case .command(let reply)? = record.gatewayEvent else { return false }
                return predicate(reply)
            }
            if case .command(let reply)? = record?.gatewayEvent { return reply }
            return nil
        }
        func configReport(_ predicate: @escaping (ConfigReport<ServiceWallClock>.Outcome) -> Bool) async -> ConfigReport<ServiceWallClock>? {
            let record = await subscriber.waitFor(timeout: 10) { record in
                guard record.topic == "gateways/door/events", case .config(let report)? = record.gatewayEvent else { return false }
                return predicate(report.outcome)
            }
            if case .config(let report)? = record?.gatewayEvent { return report }
            return nil
        }

        try await send("gateways/door/cmd", #"{"scan":"pause"}"#)
        let paused = await reply { $0.command == "scan" && $0.detail == "paused" }
        #expect(paused?.status == .ok)
        let pausedHealth = await subscriber.waitFor(timeout: 5) {
            $0.topic == "gateways/door/health" && $0.json?["sourceState"] == .string("paused")
        }
        #expect(pausedHealth != nil)
        try await send("gateways/door/cmd", #"{"scan":"resume"}"#)
        #expect(await reply { $0.detail == "resumed" } != nil)

        // Garbage on the command topic: a clear rejection, and the gateway runs on.
        try await send("gateways/door/cmd", "definitely not json")
        #expect(await reply { $0.status == .rejected && $0.command == "?" } != nil)

        // A broken config on disk: reload is rejected and the last good one stays.
        _ = try dir.write("fleet.json", #"{"gateways": [{"id": "door", "exitTimout": 3}]}"#)
        try await send("gateways/door/cmd", #"{"reload":true}"#)
        let rejected = await configReport { if case .rejected = $0 { true } else { false } }
        guard case .rejected(let errors)? = rejected?.outcome else {
            Issue.record("no rejection: \(subscriber.records)")
            return
        }
        #expect(errors.first?.contains("gateways[0].exitTimout") == true, "\(errors)")

        // A valid config pushed with `beaconctl config push` is applied live; an invalid one
        // is never pushed.
        let invalid = try dir.write("invalid.json", #"{"gateways": [{"id": "door", "exitTimeout": -1}]}"#)
        let refused = try startProgram("beaconctl", ["config", "push", invalid, "--broker", broker.url], in: dir)
        #expect(await refused.waitForExit(timeout: 10) == 2)
        let next = try dir.write("next.json", #"{"broker": {"url": "\#(broker.url)", "keepalive": 5}, "gateways": [{"id": "door", "source": "btsnoop:\#(capture)?loop", "exitTimeout": 4, "healthInterval": 1}]}"#)
        let push = try startProgram("beaconctl", ["config", "push", next], in: dir)
        #expect(await push.waitForExit(timeout: 20) == 0, "\(push.diagnostics)")
        #expect(await configReport { if case .applied = $0 { true } else { false } } != nil)
        #expect(gateway.isRunning)
        await gateway.stop()
        await subscriber.stop()
        await broker.stop()
    }
}

import Foundation
import MQTT
import TestSupport
import Testing
import BeaconKit

/// Last wills: published by the broker when a client vanishes, not when it says goodbye.
@Suite("Last will")
struct WillTests {
    @Test("a mosquitto_pub killed with SIGKILL has its will published")
    func killedClientWill() async throws {
        let directory = try TemporaryDirectory("mqtt-will-killed")
        let broker = try await MosquittoBroker.start(in: directory)
        let observer = try await MosquittoSubscriber.start(broker: broker, filters: ["gateways/#"], in: directory)
        let id = "door-\(UUID().uuidString.prefix(6))"
        // -l: read lines from stdin and stay connected; the pipe stays open until we kill it.
        let stdin = Pipe()
        let program = try #require(Programs.system("mosquitto_pub"))
        let publisher = try ChildProcess(program, ["-h", "127.0.0.1", "-p", "\(broker.port)", "-i", id, "-l",
                                                   "-t", "gateways/\(id)/lines",
                                                   "--will-topic", "gateways/\(id)/status", "--will-payload", "offline",
                                                   "--will-qos", "1", "--will-retain"],
                                         in: directory, stdin: stdin.fileHandleForReading)
        #expect(await eventually { broker.log.contains(" as \(id) ") }, "\(broker.diagnostics)")

        publisher.signal(SIGKILL)
        await publisher.waitForExit()
        let will = await observer.waitFor(topic: "gateways/\(id)/status")
        #expect(will?.text == "offline", "\(observer.process.diagnostics)\n\(broker.diagnostics)")
        try? stdin.fileHandleForWriting.close()

        await observer.stop()
        await broker.stop()
    }

    /// MQTT 3.1.1 §3.1.4: a second connection with the same client id makes the broker close
    /// the first one, which did not send DISCONNECT, so its will is published. Mosquitto
    /// 2.0.11 does this for 3.1.1 and for 5.
    @Test("our client's will is published when another connection takes over its session",
          arguments: [MQTTVersion.v311, .v5])
    func takeoverWill(version: MQTTVersion) async throws {
        let directory = try TemporaryDirectory("mqtt-will-takeover")
        let broker = try await MosquittoBroker.start(in: directory)
        let observer = try await MosquittoSubscriber.start(broker: broker, filters: ["gateways/#"], in: directory)
        let id = "door-\(UUID().uuidString.prefix(6))"

        var first = options(broker, id: id)
        first.version = version
        first.will = MQTTMessage(topic: "gateways/\(id)/status", text: "offline", qos: 1, retain: true)
        first.reconnectDelay = 30...30  // do not take the session back during the test
        let (original, originalLog) = try startedClient(first)
        #expect(await originalLog.waitForConnection())
        try original.publish(MQTTMessage(topic: "gateways/\(id)/status", text: "online", qos: 1, retain: true))
        #expect(await original.waitUntilPublished(timeout: 5))

        var second = options(broker, id: id)
        second.version = version
        let (usurper, usurperLog) = try startedClient(second)
        #expect(await usurperLog.waitForConnection())

        let reason = await originalLog.waitForDisconnection()
        // Mosquitto 2.0.11 closes the old connection without a DISCONNECT packet, also for 5;
        // a broker that sends one (reason 0x8E) is reported as "session taken over".
        #expect(reason == "connection lost" || reason?.contains("session taken over") == true, "\(reason ?? "-")")
        let will = await observer.waitFor(topic: "gateways/\(id)/status", text: "offline")
        #expect(will != nil, "\(observer.records)\n\(broker.diagnostics)")
        #expect(!original.isConnected)

        let fresh = try await MosquittoSubscriber.start(broker: broker, filters: ["gateways/\(id)/status"], in: directory)
        let retained = await fresh.waitFor(topic: "gateways/\(id)/status")
        #expect(retained?.text == "offline" && retained?.retained == true, "the will was retained")

        await original.stop(timeout: 0)
        await usurper.stop()
        await observer.stop()
        await fresh.stop()
        await broker.stop()
    }

    @Test("stop() disconnects cleanly: the will is not published")
    func cleanStopWithholdsWill() async throws {
        let directory = try TemporaryDirectory("mqtt-will-clean")
        let broker = try await MosquittoBroker.start(in: directory)
        let observer = try await MosquittoSubscriber.start(broker: broker, filters: ["brain/#"], in: directory)
        var settings = options(broker)
        settings.will = MQTTMessage(topic: "brain/status", text: "offline", qos: 1, retain: true)
        let (client, log) = try startedClient(settings)
        #expect(await log.waitForConnection())
        try client.publish(MQTTMessage(topic: "brain/status", text: "online", qos: 1, retain: true))
        await client.stop()
        #expect(await eventually { log.isFinished })
        #expect(log.disconnectReasons == ["disconnected"])

        // The marker goes out after the stop; had the will been sent, it would be before it.
        let (marker, markerLog) = try startedClient(options(broker))
        #expect(await markerLog.waitForConnection())
        try marker.publish(MQTTMessage(topic: "brain/marker", text: "m", qos: 1))
        #expect(await observer.waitFor(topic: "brain/marker") != nil)
        #expect(observer.records.map(\.text) == ["online", "m"], "\(observer.records)")

        await marker.stop()
        await observer.stop()
        await broker.stop()
    }
}

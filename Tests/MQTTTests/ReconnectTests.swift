import Foundation
import MQTT
import TestSupport
import Testing
import BeaconKit

/// Outages: the broker vanishes, or is not there yet; the client keeps trying.
@Suite("Reconnection")
struct ReconnectTests {
    @Test("a killed and restarted broker: disconnected, connected again, subscriptions restored")
    func brokerRestart() async throws {
        let directory = try TemporaryDirectory("mqtt-restart")
        let broker = try await MosquittoBroker.start(in: directory)
        let client = try MQTTClient(options(broker))
        let log = EventLog(client)
        try client.subscribe(["fleet/config"])
        try client.start()
        #expect(await log.waitForConnection())
        #expect(await awaitSubscription(client, log, topic: "fleet/config"))

        await broker.kill()
        let reason = await log.waitForDisconnection()
        #expect(reason == "connection lost", "\(log.all)")
        #expect(!client.isConnected)
        for qos in [0, 1] {
            #expect(throws: MQTTError.noConnection("publish")) {
                try client.publish(MQTTMessage(topic: "fleet/config", text: "queued?", qos: qos))
            }
        }

        try await broker.restart()
        #expect(await log.waitForConnection(number: 2), "\(log.all)\n\(broker.diagnostics)")
        // The restarted broker (no persistence) knows nothing: the client subscribed again.
        try await run("mosquitto_pub", ["-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1", "-r",
                                        "-t", "fleet/config", "-m", "{\"v\":2}"], in: directory)
        let config = await log.waitFor {
            if case .message(let message) = $0 { message.text == "{\"v\":2}" } else { false }
        }
        #expect(config != nil, "\(log.all)")
        #expect(!log.messages.contains { $0.text == "queued?" }, "a refused publish is not sent later")

        await client.stop()
        await broker.stop()
    }

    @Test("several nodes: a connection lost after a while moves to the next node at once, not after the back-off")
    func nextNodeAtOnce() async throws {
        let directory = try TemporaryDirectory("mqtt-next-node")
        let first = try await MosquittoBroker.start(in: directory)
        let second = try await MosquittoBroker.start(in: directory)
        var settings = MQTTClientOptions(broker: try BrokerURL(parsing: "mqtt://127.0.0.1:\(first.port),127.0.0.1:\(second.port)"),
                                         clientID: "mover")
        // A back-off of 10 minutes: a client that waited it out could not pass.
        settings.reconnectDelay = 600...600
        let (client, log) = try startedClient(settings)
        try client.subscribe(["orders/#"])
        #expect(await log.waitForConnection(), "\(log.all)")
        // Only a connection that lived 5 s (TakeOver.window) moves at once: one closed sooner
        // may be a take-over or a node refusing sessions, and waits.
        try await Task.sleep(for: .seconds(5.5))
        await first.kill()
        #expect(await log.waitForDisconnection() == "connection lost", "\(log.all)")
        #expect(await log.waitForConnection(number: 2, timeout: 60), "\(log.all)\n\(second.diagnostics)")
        #expect(await awaitSubscription(client, log, topic: "orders/1"), "subscribed again on the second node\n\(log.all)")
        await client.stop()
        await second.stop()
    }

    @Test("start() before the broker is up: reports the refusal, connects when it comes")
    func brokerNotUpYet() async throws {
        let directory = try TemporaryDirectory("mqtt-late-broker")
        let port = try FreePort.allocate()
        var settings = MQTTClientOptions(broker: BrokerURL(host: "127.0.0.1", port: port), clientID: "early-bird")
        settings.reconnectDelay = 0.1...0.4
        let (client, log) = try startedClient(settings)

        let reason = await log.waitForDisconnection()
        #expect(reason == "connection failed: connection refused", "\(log.all)")
        #expect(throws: MQTTError.noConnection("publish")) {
            try client.publish(MQTTMessage(topic: "x", text: "y", qos: 1))
        }
        // Several retries happen before the broker comes (the client counts them); each
        // identical failure is reported once. The connection's event comes after every
        // report of them in the same stream, so once it is in the log they all are.
        #expect(await eventually { client.disconnections >= 3 }, "\(client.disconnections) failed attempts")

        let broker = try await MosquittoBroker.start(in: directory, port: port)
        #expect(await log.waitForConnection(), "\(log.all)\n\(broker.diagnostics)")
        #expect(log.disconnectReasons.count == 1, "\(log.all)")
        try client.publish(MQTTMessage(topic: "x", text: "y", qos: 1))
        #expect(await client.waitUntilPublished(timeout: 5))

        await client.stop()
        await broker.stop()
    }

    @Test("stop() during back-off returns promptly; stop() twice and concurrently is fine")
    func stopWhileDisconnected() async throws {
        let port = try FreePort.allocate()
        var settings = MQTTClientOptions(broker: BrokerURL(host: "127.0.0.1", port: port), clientID: "nobody-home")
        // A back-off of 10 minutes: a stop() that waited it out could not pass for prompt
        // however loaded the machine is.
        settings.reconnectDelay = 600...600
        let (client, log) = try startedClient(settings)
        #expect(await log.waitForDisconnection() != nil)

        let started = ContinuousClock.now
        async let first: Void = client.stop()
        async let second: Void = client.stop()
        _ = await (first, second)
        await client.stop()
        // Well under the back-off proves stop() did not wait it out. On an idle machine it
        // takes milliseconds; at the start of a whole test run, hundreds of tests starting at
        // once have held this test's task back for up to 20 s.
        #expect(ContinuousClock.now - started < .seconds(300))
        #expect(await eventually(timeout: 30) { log.isFinished })
        #expect(throws: MQTTError.self) { try client.start() }

        // A client that never started stops too.
        let idle = try MQTTClient(settings)
        await idle.stop()
        await idle.stop()
    }
}

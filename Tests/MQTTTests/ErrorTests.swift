import Foundation
import MQTT
import TestSupport
import Testing
import BeaconKit

/// Bad input is an error that says what was being done, never a crash.
@Suite("Errors")
struct ErrorTests {
    @Test("invalid filters, topics and QoS are refused with the operation named")
    func invalidArguments() async throws {
        let directory = try TemporaryDirectory("mqtt-errors")
        let broker = try await MosquittoBroker.start(in: directory)
        let (client, log) = try startedClient(options(broker))
        #expect(await log.waitForConnection())

        let badFilter = #expect(throws: MQTTError.self) { try client.subscribe(["ok/#", "bad/#/filter"]) }
        #expect(badFilter?.operation == "subscribe")
        #expect(badFilter?.description.contains("bad/#/filter") == true, "\(badFilter.map(String.init(describing:)) ?? "")")
        #expect(throws: MQTTError.self) { try client.subscribe(["x"], qos: 3) }

        let wildcard = #expect(throws: MQTTError.self) { try client.publish(MQTTMessage(topic: "beacons/+/1", text: "x")) }
        #expect(wildcard?.operation == "publish")
        #expect(wildcard?.isNoConnection == false)
        #expect(throws: MQTTError.self) { try client.publish(MQTTMessage(topic: "", text: "x")) }
        #expect(throws: MQTTError.self) { try client.publish(MQTTMessage(topic: "x", text: "x", qos: 3)) }

        // The connection survives all of that.
        try client.subscribe(["still/here"])
        #expect(await awaitSubscription(client, log, topic: "still/here"))
        await client.stop()
        await broker.stop()
    }

    @Test("a keepalive libmosquitto rejects fails start(), naming connect")
    func badKeepalive() throws {
        var settings = MQTTClientOptions(broker: BrokerURL(host: "127.0.0.1", port: 1), clientID: "k")
        settings.keepalive = 2
        let client = try MQTTClient(settings)
        let error = #expect(throws: MQTTError.self) { try client.start() }
        #expect(error?.operation == "connect")
    }

    @Test("a missing CA file fails at init, naming tls_set")
    func missingCAFile() {
        var settings = MQTTClientOptions(broker: BrokerURL(tls: true, host: "127.0.0.1"), clientID: "t")
        settings.tls = TLSConfig(caFile: "/nonexistent/ca.pem")
        let error = #expect(throws: MQTTError.self) { _ = try MQTTClient(settings) }
        #expect(error?.operation == "tls_set")
        #expect(error?.description.contains("/nonexistent/ca.pem") == true)
    }

    @Test("a persistent session needs a client id")
    func persistentSessionNeedsID() {
        var settings = MQTTClientOptions(broker: BrokerURL(host: "127.0.0.1"), clientID: "")
        settings.cleanSession = false
        let error = #expect(throws: MQTTError.self) { _ = try MQTTClient(settings) }
        #expect(error?.operation == "new")
    }

    @Test("MQTTMessage text round-trips and decodes invalid UTF-8 lossily")
    func messageText() {
        #expect(MQTTMessage(topic: "t", text: "héllo").payload == Array("héllo".utf8))
        #expect(MQTTMessage(topic: "t", payload: [0x68, 0xFF]).text == "h\u{FFFD}")
        #expect(MQTTError.noConnection("publish").isNoConnection)
        #expect(MQTTError.noConnection("publish").description.contains("publish"))
    }
}

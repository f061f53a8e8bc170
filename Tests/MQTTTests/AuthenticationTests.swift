import Foundation
import MQTT
import TestSupport
import Testing
import BeaconKit

/// A broker with a password file and no anonymous access.
@Suite("Authentication")
struct AuthenticationTests {
    static func securedBroker(in directory: TemporaryDirectory) async throws -> MosquittoBroker {
        let passwords = try await MosquittoBroker.passwordFile(in: directory, user: "door-1", password: "s3cret pass")
        return try await MosquittoBroker.start(in: directory, extraConfig: """
            allow_anonymous false
            password_file \(passwords)
            """)
    }

    @Test("the right user name and password connect", arguments: [MQTTVersion.v311, .v5])
    func rightCredentials(version: MQTTVersion) async throws {
        let directory = try TemporaryDirectory("mqtt-auth-ok")
        let broker = try await Self.securedBroker(in: directory)
        var settings = options(broker)
        settings.version = version
        settings.username = "door-1"
        settings.password = "s3cret pass"
        let (client, log) = try startedClient(settings)
        #expect(await log.waitForConnection(), "\(log.all)\n\(broker.diagnostics)")
        try client.publish(MQTTMessage(topic: "gateways/door-1/status", text: "online", qos: 1, retain: true))
        #expect(await client.waitUntilPublished(timeout: 5))
        await client.stop()
        await broker.stop()
    }

    @Test("the user name may come from the broker URL")
    func usernameFromURL() async throws {
        let directory = try TemporaryDirectory("mqtt-auth-url")
        let broker = try await Self.securedBroker(in: directory)
        var settings = MQTTClientOptions(broker: try BrokerURL(parsing: "mqtt://door-1@127.0.0.1:\(broker.port)"),
                                         clientID: "door-1")
        settings.password = "s3cret pass"
        let (client, log) = try startedClient(settings)
        #expect(await log.waitForConnection(), "\(log.all)")
        await client.stop()
        await broker.stop()
    }

    @Test("a wrong password or none is reported as a refusal and retried, never a crash",
          arguments: [(MQTTVersion.v311, "wrong"), (.v311, nil), (.v5, "wrong"), (.v5, nil)] as [(MQTTVersion, String?)])
    func wrongCredentials(version: MQTTVersion, password: String?) async throws {
        let directory = try TemporaryDirectory("mqtt-auth-bad")
        let broker = try await Self.securedBroker(in: directory)
        var settings = options(broker)
        settings.version = version
        settings.reconnectDelay = 0.2...0.2
        if let password {
            settings.username = "door-1"
            settings.password = password
        }
        let (client, log) = try startedClient(settings)
        let reason = try #require(await log.waitForDisconnection(), "\(log.all)\n\(broker.diagnostics)")
        #expect(reason.hasPrefix("connection refused: "))
        #expect(reason.lowercased().contains("authori") || reason.lowercased().contains("password"), "\(reason)")
        #expect(!client.isConnected)
        #expect(throws: MQTTError.noConnection("publish")) {
            try client.publish(MQTTMessage(topic: "x", text: "y"))
        }
        // It keeps trying (the password file may be fixed) without reporting each attempt.
        let attempts = { broker.log.components(separatedBy: "New connection from").count - 1 }
        #expect(await eventually(timeout: 5) { attempts() >= 3 }, "\(broker.diagnostics)")
        #expect(log.connectionCount == 0)
        #expect(Set(log.disconnectReasons).count == 1, "\(log.all)")

        await client.stop()
        await broker.stop()
    }
}

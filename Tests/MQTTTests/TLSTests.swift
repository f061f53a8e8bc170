import Foundation
import MQTT
import TestSupport
import Testing
import BeaconKit

/// `mqtts://` to a Mosquitto TLS listener with certificates made by `openssl` for the test.
@Suite("TLS")
struct TLSTests {
    /// A CA and a server certificate signed by it, named `serverName`.
    struct Certificates {
        var ca: String
        var certificate: String
        var key: String
    }

    static func makeCertificates(in directory: TemporaryDirectory, serverName: String,
                                 ipAddress: Bool) async throws -> Certificates {
        let ca = directory.file("ca.pem"), caKey = directory.file("ca.key")
        let csr = directory.file("server.csr"), key = directory.file("server.key"), certificate = directory.file("server.pem")
        let extensions = try directory.write("server.ext", "subjectAltName=\(ipAddress ? "IP" : "DNS"):\(serverName)\n")
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        let steps: [[String]] = [
            ["req", "-x509"] + curve + ["-keyout", caKey, "-out", ca, "-days", "1", "-subj", "/CN=BeaconBridge test CA"],
            ["req"] + curve + ["-keyout", key, "-out", csr, "-subj", "/CN=\(serverName)"],
            ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-out", certificate,
             "-days", "1", "-extfile", extensions],
        ]
        for step in steps {
            let status = try await run("openssl", step, in: directory)
            try #require(status == 0, "openssl \(step.joined(separator: " ")) failed")
        }
        return Certificates(ca: ca, certificate: certificate, key: key)
    }

    static func tlsBroker(in directory: TemporaryDirectory, _ certificates: Certificates) async throws -> MosquittoBroker {
        try await MosquittoBroker.start(in: directory, extraConfig: """
            cafile \(certificates.ca)
            certfile \(certificates.certificate)
            keyfile \(certificates.key)
            """)
    }

    @Test("a broker certificate for 127.0.0.1 signed by the configured CA is accepted")
    func verifiedConnection() async throws {
        let directory = try TemporaryDirectory("mqtt-tls")
        let certificates = try await Self.makeCertificates(in: directory, serverName: "127.0.0.1", ipAddress: true)
        let broker = try await Self.tlsBroker(in: directory, certificates)
        var settings = MQTTClientOptions(broker: try BrokerURL(parsing: "mqtts://127.0.0.1:\(broker.port)"), clientID: "tls-ok")
        settings.tls = TLSConfig(caFile: certificates.ca)
        let (client, log) = try startedClient(settings)
        #expect(await log.waitForConnection(), "\(log.all)\n\(broker.diagnostics)")
        try client.subscribe(["secure/#"])
        #expect(await awaitSubscription(client, log, topic: "secure/probe"))
        await client.stop()
        await broker.stop()
    }

    @Test("a certificate for another host name is refused and retried; `insecure` accepts it")
    func hostNameMismatch() async throws {
        let directory = try TemporaryDirectory("mqtt-tls-name")
        let certificates = try await Self.makeCertificates(in: directory, serverName: "broker.example", ipAddress: false)
        let broker = try await Self.tlsBroker(in: directory, certificates)
        var settings = MQTTClientOptions(broker: try BrokerURL(parsing: "mqtts://127.0.0.1:\(broker.port)"), clientID: "tls-name")
        settings.tls = TLSConfig(caFile: certificates.ca)
        settings.reconnectDelay = 0.1...0.1

        let (strict, strictLog) = try startedClient(settings)
        #expect(await strictLog.waitForDisconnection() != nil, "\(strictLog.all)")
        // libmosquitto's own loop would give up after a TLS error; this one keeps trying.
        let attempts = { broker.log.components(separatedBy: "New connection from").count - 1 }
        #expect(await eventually(timeout: 5) { attempts() >= 3 }, "\(broker.diagnostics)")
        #expect(strictLog.connectionCount == 0)
        await strict.stop()

        settings.tls?.insecure = true
        settings.clientID = "tls-insecure"
        let (lenient, lenientLog) = try startedClient(settings)
        #expect(await lenientLog.waitForConnection(), "\(lenientLog.all)\n\(broker.diagnostics)")
        await lenient.stop()
        await broker.stop()
    }
}

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

    /// `days: -1` makes a certificate that expired when it was made; `prefix` keeps two sets apart.
    static func makeCertificates(in directory: TemporaryDirectory, serverName: String,
                                 ipAddress: Bool, days: Int = 1, prefix: String = "") async throws -> Certificates {
        let ca = directory.file(prefix + "ca.pem"), caKey = directory.file(prefix + "ca.key")
        let csr = directory.file(prefix + "server.csr"), key = directory.file(prefix + "server.key")
        let certificate = directory.file(prefix + "server.pem")
        let extensions = try directory.write(prefix + "server.ext", "subjectAltName=\(ipAddress ? "IP" : "DNS"):\(serverName)\n")
        let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        let steps: [[String]] = [
            ["req", "-x509"] + curve + ["-keyout", caKey, "-out", ca, "-days", "1", "-subj", "/CN=BeaconBridge test CA"],
            ["req"] + curve + ["-keyout", key, "-out", csr, "-subj", "/CN=\(serverName)"],
            ["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-out", certificate,
             "-days", String(days), "-extfile", extensions],
        ]
        for step in steps {
            let status = try await run("openssl", step, in: directory)
            try #require(status == 0, "openssl \(step.joined(separator: " ")) failed")
        }
        return Certificates(ca: ca, certificate: certificate, key: key)
    }

    static func tlsBroker(in directory: TemporaryDirectory, _ certificates: Certificates,
                          extraConfig: String = "") async throws -> MosquittoBroker {
        try await MosquittoBroker.start(in: directory, extraConfig: """
            cafile \(certificates.ca)
            certfile \(certificates.certificate)
            keyfile \(certificates.key)
            \(extraConfig)
            """)
    }

    /// The reason a client with `tls` gives for failing to connect to `broker` over TLS: the
    /// first that starts with `prefix` (a loaded machine may add others, e.g. a descriptor
    /// past select()'s limit in this crowded test process), else the last one given.
    static func failure(_ broker: MosquittoBroker, tls: TLSConfig?, expecting prefix: String) async throws -> String? {
        var settings = MQTTClientOptions(broker: try BrokerURL(parsing: "mqtts://127.0.0.1:\(broker.port)"),
                                         clientID: "tls-\(UUID().uuidString.prefix(8))")
        settings.tls = tls
        settings.reconnectDelay = 0.2...0.2
        let (client, log) = try startedClient(settings)
        _ = await eventually(timeout: 20) { log.disconnectReasons.contains { $0.hasPrefix(prefix) } }
        #expect(log.connectionCount == 0)
        await client.stop()
        return log.disconnectReasons.first { $0.hasPrefix(prefix) } ?? log.disconnectReasons.last
    }

    @Test("a TLS failure says which check failed, not \"a TLS error occurred\"")
    func whichCheckFailed() async throws {
        let directory = try TemporaryDirectory("mqtt-tls-why")
        let good = try await Self.makeCertificates(in: directory, serverName: "127.0.0.1", ipAddress: true)
        let other = try await Self.makeCertificates(in: directory, serverName: "127.0.0.1", ipAddress: true, prefix: "other-")
        let named = try await Self.makeCertificates(in: directory, serverName: "broker.example", ipAddress: false,
                                                    prefix: "named-")
        let expired = try await Self.makeCertificates(in: directory, serverName: "127.0.0.1", ipAddress: true, days: -1,
                                                      prefix: "expired-")

        // Unknown CA: the client trusts another CA than the one that signed the broker's certificate.
        let broker = try await Self.tlsBroker(in: directory, good)
        let unknown = try await Self.failure(broker, tls: TLSConfig(caFile: other.ca),
                                             expecting: "TLS: the broker's certificate is not signed by a CA this client trusts")
        #expect(unknown?.hasPrefix("TLS: the broker's certificate is not signed by a CA this client trusts") == true,
                "\(unknown ?? "no failure")")
        #expect(unknown?.contains("unknown CA") == true && unknown?.contains(other.ca) == true, "\(unknown ?? "")")
        await broker.stop()

        // Host name mismatch: a certificate for broker.example, reached as 127.0.0.1.
        let namedBroker = try await Self.tlsBroker(in: directory, named)
        let mismatch = try await Self.failure(namedBroker, tls: TLSConfig(caFile: named.ca),
                                              expecting: "TLS: the broker's certificate is not for 127.0.0.1")
        #expect(mismatch?.hasPrefix("TLS: the broker's certificate is not for 127.0.0.1 (host name mismatch)") == true,
                "\(mismatch ?? "no failure")")
        await namedBroker.stop()

        // Expired.
        let expiredBroker = try await Self.tlsBroker(in: directory, expired)
        let old = try await Self.failure(expiredBroker, tls: TLSConfig(caFile: expired.ca),
                                         expecting: "TLS: the broker's certificate has expired")
        #expect(old?.hasPrefix("TLS: the broker's certificate has expired") == true, "\(old ?? "no failure")")
        await expiredBroker.stop()

        // Handshake refused: the broker wants a client certificate this client does not have.
        let strict = try await Self.tlsBroker(in: directory, good, extraConfig: "require_certificate true")
        let refused = try await Self.failure(strict, tls: TLSConfig(caFile: good.ca), expecting: "TLS: the broker re")
        #expect(refused?.hasPrefix("TLS: the broker requires a client certificate") == true
                    || refused?.hasPrefix("TLS: the broker refused the handshake") == true, "\(refused ?? "no failure")")
        await strict.stop()

        // Not TLS at all: mqtts:// to a plain listener.
        let plain = try await MosquittoBroker.start(in: directory)
        let notTLS = try await Self.failure(plain, tls: TLSConfig(caFile: good.ca), expecting: "TLS: 127.0.0.1:")
        #expect(notTLS?.contains("did not answer in TLS") == true, "\(notTLS ?? "no failure")")
        await plain.stop()

        for reason in [unknown, mismatch, old, refused, notTLS] {
            #expect(reason?.contains("A TLS error occurred") == false)
        }
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

import BeaconKit
public import Config
public import Hummingbird
import HummingbirdCore
import HummingbirdTLS
public import Logging
import NIOCore
import NIOSSL
import SystemCalls
import WebDisplay

/// Puts `beacon-web` together: the MQTT feed, the HTTP application, TLS when configured.
public enum WebServer {
    public struct Options: Sendable {
        public var host = "127.0.0.1"
        /// 0 picks a free port (printed when listening).
        public var port = 8080
        public var clientID: String
        public var mqttUsername: String?
        public var mqttPassword: String?
        /// PEM files; both or neither.
        public var tlsCertificate: String?
        public var tlsKey: String?
        /// How failed logins slow further attempts.
        public var loginThrottle = LoginThrottle.Settings()

        public init(clientID: String) { self.clientID = clientID }
    }

    public struct SetupError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// The application, ready to run as a service (SIGTERM/SIGINT end it cleanly).
    /// `onListening` gets the URL once the port is bound.
    public static func application(config: FleetConfig, accounts: StaffAccounts, options: Options, logger: Logger,
                                   onListening: @escaping @Sendable (String) -> Void) throws -> some ApplicationProtocol {
        let feed: FleetFeed
        do {
            feed = try FleetFeed(config: config, username: options.mqttUsername, password: options.mqttPassword,
                                 logger: logger, options: .init(clientID: options.clientID))
        } catch {
            throw SetupError(description: "cannot set up the MQTT client: \(error)")
        }
        let sessions = MemoryPersistDriver()
        var settings = WebApp.Settings()
        settings.history = config.history
        settings.loginThrottle = options.loginThrottle
        var server = HTTPServerBuilder.http1()
        let scheme: String
        if let certificate = options.tlsCertificate, let key = options.tlsKey {
            do {
                let chain = try NIOSSLCertificate.fromPEMFile(certificate).map { NIOSSLCertificateSource.certificate($0) }
                let privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
                let tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(privateKey))
                server = try .tls(.http1(), tlsConfiguration: tls)
            } catch {
                throw SetupError(description: "cannot use the TLS certificate \(certificate) and key \(key): \(error)")
            }
            settings.secureCookies = true
            scheme = "https"
        } else {
            scheme = "http"
        }
        let router = WebApp.router(feed: feed, accounts: accounts, sessions: sessions, settings: settings)
        let host = options.host
        return Application(
            router: router, server: server,
            configuration: .init(address: .hostname(host, port: options.port), serverName: nil),
            services: [sessions, feed],
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? options.port
                onListening("\(scheme)://\(host.contains(":") ? "[\(host)]" : host):\(port)")
            },
            logger: logger)
    }
}

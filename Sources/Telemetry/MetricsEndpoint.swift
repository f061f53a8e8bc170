public import Hummingbird
public import Logging
public import ServiceLifecycle
import Metrics
import NIOCore
import Prometheus
import Synchronization

/// A Prometheus endpoint (`GET /metrics`, text format 0.0.4) for a daemon, off unless
/// `--metrics HOST:PORT` asks for it. `bootstrap()` makes swift-metrics record into the
/// registry this endpoint serves; call it once, before any metric is made.
public enum MetricsEndpoint {
    private static let registry = PrometheusCollectorRegistry()
    private static let bootstrapped = Mutex(false)

    /// Sends swift-metrics to the registry served here (once per process).
    public static func bootstrap() {
        let first = bootstrapped.withLock { done in
            defer { done = true }
            return !done
        }
        if first { MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry)) }
    }

    /// `HOST:PORT` (IPv6 in brackets), or the reason it is not one.
    public static func parse(address text: String) -> Result<(host: String, port: Int), AddressError> {
        var host = Substring(text)
        guard let colon = host.lastIndex(of: ":") else { return .failure(AddressError(text)) }
        let portText = host[host.index(after: colon)...]
        host = host[..<colon]
        if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else { return .failure(AddressError(text)) }
        return .success((String(host), port))
    }

    public struct AddressError: Error, CustomStringConvertible, Sendable {
        public var text: String
        init(_ text: String) { self.text = text }
        public var description: String { "\"\(text)\" is not HOST:PORT (e.g. 127.0.0.1:9464)" }
    }

    /// The HTTP service; `onListening` gets the URL of `/metrics` once the port is open.
    public static func service(host: String, port: Int, logger: Logger,
                               onListening: @escaping @Sendable (String) -> Void = { _ in }) -> some ApplicationProtocol {
        let router = Router()
        router.get("metrics") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        return Application(router: router, configuration: .init(address: .hostname(host, port: port)),
                           onServerRunning: { channel in
                               onListening("http://\(host):\(channel.localAddress?.port ?? port)/metrics")
                           },
                           logger: logger)
    }
}

/// What `--metrics HOST:PORT` sets up in a daemon: the recorder its health goes through
/// and the endpoint to run beside it; nothing when the option is absent.
public struct MetricsSetup: Sendable {
    public var recorder: HealthMetrics?
    public var services: [any Service]

    public init(address: String?, kind: HealthMetrics.Kind, id: String, logger: Logger) throws(MetricsEndpoint.AddressError) {
        guard let address else {
            recorder = nil
            services = []
            return
        }
        let (host, port) = try MetricsEndpoint.parse(address: address).get()
        MetricsEndpoint.bootstrap()
        recorder = HealthMetrics(kind: kind, id: id)
        services = [MetricsEndpoint.service(host: host, port: port, logger: logger) { url in
            logger.info("serving metrics", metadata: ["url": "\(url)"])
        }]
    }
}

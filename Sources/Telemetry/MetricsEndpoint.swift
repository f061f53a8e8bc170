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
    static let registry = PrometheusCollectorRegistry()
    private static let bootstrapped = Mutex(false)
    /// Run before each scrape: they write the daemon's figures of that moment.
    private static let collectors = Mutex<[@Sendable () -> Void]>([])

    /// Has `body` bring the figures up to date before every scrape.
    public static func beforeScrape(_ body: @escaping @Sendable () -> Void) {
        collectors.withLock { $0.append(body) }
    }

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
            for collect in collectors.withLock({ $0 }) { collect() }
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        return Application(router: router, configuration: .init(address: .hostname(host, port: port)),
                           onServerRunning: { channel in
                               onListening("http://\(host):\(channel.localAddress?.port ?? port)/metrics")
                           },
                           logger: logger)
    }
}

/// What `--metrics HOST:PORT` sets up in a daemon: the recorder its figures go through
/// (read from the daemon's statistics at every scrape) and the endpoint to run beside it;
/// nothing when the option is absent.
public struct MetricsSetup: Sendable {
    public var recorder: FigureRecorder?
    public var services: [any Service]

    /// `label`: the series' own label (`gateway`/`brain` and the id); `info`: the labels of
    /// `beaconbridge_build_info` (program, version, …).
    public init(address: String?, label: (String, String), info: [(String, String)],
                logger: Logger) throws(MetricsEndpoint.AddressError) {
        guard let address else {
            recorder = nil
            services = []
            return
        }
        let (host, port) = try MetricsEndpoint.parse(address: address).get()
        MetricsEndpoint.bootstrap()
        recorder = FigureRecorder(registry: MetricsEndpoint.registry, label: label, info: [label] + info)
        services = [MetricsEndpoint.service(host: host, port: port, logger: logger) { url in
            logger.info("serving metrics", metadata: ["url": "\(url)"])
        }]
    }

    /// Before every scrape, `figures` reads the gateway's statistics, and they are recorded.
    public func collect(gateway figures: @escaping @Sendable () -> GatewayFigures) {
        guard let recorder else { return }
        MetricsEndpoint.beforeScrape { recorder.record(figures()) }
    }

    /// Before every scrape, `figures` reads the brain's statistics, and they are recorded.
    public func collect(brain figures: @escaping @Sendable () -> BrainFigures) {
        guard let recorder else { return }
        MetricsEndpoint.beforeScrape { recorder.record(figures()) }
    }

    /// Before every scrape, `figures` reads beacon-history's counters and database.
    public func collect(history figures: @escaping @Sendable () -> HistoryMetricFigures) {
        guard let recorder else { return }
        MetricsEndpoint.beforeScrape { recorder.record(figures()) }
    }
}

import BeaconKit
public import Config
public import HCI
public import Logging
public import MQTT
public import ServiceLifecycle
import Synchronization
import SystemCalls

/// One gateway process: a source, the engine, the broker connection and the timers,
/// run as a `Service` so SIGTERM/SIGINT shut it down in order: stop scanning (which
/// restores the controller), withdraw presence, say `offline`, disconnect.
public struct GatewayService: Service, CustomStringConvertible {
    public static let version = "0.1.0"

    let config: FleetConfig
    let gateway: GatewayConfig
    let source: any AdvertisingSource
    let client: MQTTClient
    let engine: GatewayEngine
    let logger: Logger
    /// Re-read for `{"reload":true}`; `nil` when the config did not come from a file.
    let configPath: String?
    /// The source reports time in-band (replays); otherwise the wall clock drives timers.
    let sourceHasOwnTime: Bool
    /// What the fleet config last said this gateway advertises, to apply a change live.
    let configuredAdvertising: ConfiguredAdvertising
    /// Called with each health payload as it is published (`--metrics`); set before `run()`.
    public var onHealth: (@Sendable (String) -> Void)?

    /// `clientID`: the MQTT client id, `beacon-gateway-<id>` by default (`BrokerIdentity`).
    public init(config: FleetConfig, gateway: GatewayConfig, source: any AdvertisingSource, sourceHasOwnTime: Bool,
                password: String?, configPath: String?, logger: Logger, clientID: String? = nil) throws(MQTTError) {
        self.config = config
        self.gateway = gateway
        self.source = source
        self.sourceHasOwnTime = sourceHasOwnTime
        self.configPath = configPath
        self.logger = logger
        let topics = config.topics
        let broker = config.broker(forGateway: gateway.id)
        var options = MQTTClientOptions(broker, identity: BrokerIdentity.gatewayUser(gateway.id),
                                        clientID: clientID ?? BrokerIdentity.gatewayClientID(gateway.id), password: password)
        options.will = MQTTMessage(topic: topics.status(ofGateway: gateway.id), text: "offline", qos: 1, retain: true)
        client = try MQTTClient(options)
        engine = GatewayEngine(config: config, gateway: gateway, publisher: client, logger: logger)
        configuredAdvertising = ConfiguredAdvertising(gateway.advertise)
    }

    public var description: String { "GatewayService(\(gateway.id), \(source.name))" }

    /// The engine's counters (decoded, tracked, published, queued), for health checks and benchmarks.
    public var statistics: GatewayEngine.Statistics { engine.statistics }

    public func run() async throws {
        let topics = config.topics
        let readBack = topics.presenceFilter(seenBy: gateway.id)
        try client.subscribe(readBack + [topics.commands(ofGateway: gateway.id), topics.fleetConfig], qos: 1)
        try client.start()
        logger.info("gateway starting", metadata: [
            "id": "\(gateway.id)", "source": "\(source.name)", "broker": "\(config.broker(forGateway: gateway.id).url)",
        ])
        let started = WallClock.monotonic()
        let notifier = ServiceNotifier.fromEnvironment()
        notify(notifier, [.ready, .status("starting: \(source.name), broker \(config.broker.url)")])

        // A source that cannot run (missing capabilities, no Bluetooth in the kernel) ends
        // the gateway too, after the same clean exit as a shutdown, with its error.
        var failure: (any Error)?
        do {
            try await runUntilShutdown(readBack: readBack, started: started, notifier: notifier)
        } catch is CancellationError {
            // Graceful shutdown: fall through to the clean-exit sequence.
        } catch {
            failure = error
        }
        notify(notifier, [.stopping, .status("stopping: withdrawing presence")])
        logger.info("gateway stopping: withdrawing presence")
        engine.withdraw()
        if !(await client.waitUntilPublished(timeout: 3)) {
            logger.warning("broker did not acknowledge the last messages in time")
        }
        await client.stop(timeout: 2)
        logger.info("gateway stopped")
        if let failure { throw failure }
    }

    /// The source, the broker's events and the timers, until shutdown cancels them.
    func runUntilShutdown(readBack: [String], started: Double, notifier: ServiceNotifier?) async throws {
        let sourceFinished = AtomicFlag()
        let timers = Heartbeat()
        try await cancelWhenGracefulShutdown {
            try await withThrowingTaskGroup(of: Void.self) { group in
                if let notifier {
                    let watchdog = ServiceWatchdog(notifier: notifier, loops: [
                        .init("scan") { self.source.heartbeat?.lastRound },
                        .init("mqtt") { self.client.heartbeat.lastRound },
                        .init("timer") { timers.lastRound },
                    ])
                    group.addTask {
                        await watchdog.run(status: { self.serviceStatus() }, failed: { error in
                            self.logger.warning("cannot notify the service manager", metadata: ["error": "\(error)"])
                        })
                    }
                }
                group.addTask {
                    if self.sourceHasOwnTime {
                        // A replay starts once the broker is reachable, so it publishes what a
                        // live run would instead of a burst from the outage queue.
                        while !self.engine.isConnected { try await Task.sleep(nanoseconds: 20_000_000) }
                    }
                    try await self.source.run { output in
                        switch output {
                        case .frame(let frame): self.engine.handle(frame: frame)
                        case .tick(let time): self.engine.advance(to: time)
                        case .state(let state, let detail):
                            if state == .finished { sourceFinished.set() }
                            self.engine.sourceChanged(state, detail: detail)
                        }
                    }
                }
                group.addTask {
                    for await event in self.client.events {
                        self.handle(event, readBack: readBack)
                    }
                }
                group.addTask {
                    var nextHealth = WallClock.monotonic() + 1
                    while !Task.isCancelled {
                        timers.beat()
                        try await Task.sleep(nanoseconds: 100_000_000)
                        if !self.sourceHasOwnTime || sourceFinished.isSet {
                            self.engine.advance(to: self.source.clock.now())
                        }
                        if self.engine.settleInheritedPresence(at: WallClock.now()) {
                            // Our own presence needs no echo once the old one is settled.
                            try? self.client.unsubscribe(readBack)
                        }
                        let now = WallClock.monotonic()
                        if now >= nextHealth {
                            nextHealth = now + self.gateway.healthInterval
                            let health = self.engine.health(at: WallClock.now(), uptime: now - started,
                                                            version: Self.version, sourceName: self.source.name)
                            self.engine.publish(OutgoingMessage(topic: health.topic, payload: health.text,
                                                              qos: health.qos, retain: health.retain))
                            self.onHealth?(health.text)
                        }
                    }
                }
                // A replay that ends leaves the other tasks running, so exits still come
                // due and health keeps flowing until shutdown. A task that throws (a source
                // that cannot run) ends them all at once: `waitForAll` would wait for the
                // others first, that is forever.
                while try await group.next() != nil {}
            }
        }
    }

    /// One line for `systemctl status`: broker, source, beacons.
    func serviceStatus() -> String {
        let s = engine.statistics
        return "broker \(s.connected ? "connected" : "not connected"); source \(source.name) \(s.sourceState.rawValue); "
            + "\(s.tracked) beacons tracked, \(s.published) messages published"
    }

    func notify(_ notifier: ServiceNotifier?, _ fields: [ServiceNotifier.Field]) {
        do {
            try notifier?.send(fields)
        } catch {
            logger.warning("cannot notify the service manager", metadata: ["error": "\(error)"])
        }
    }

    func handle(_ event: MQTTEvent, readBack: [String]) {
        let topics = config.topics
        switch event {
        case .connected:
            engine.connected(at: WallClock.now())
        case .disconnected(let reason):
            engine.disconnected(reason: reason)
        case .message(let message):
            if message.topic == topics.commands(ofGateway: gateway.id) {
                command(message)
            } else if message.topic == topics.fleetConfig {
                guard !message.payload.isEmpty else { return }
                switch Result(catching: { () throws(ConfigErrors) in try FleetConfig.parse(message.text) }) {
                case .success(let new):
                    // The retained config comes again on every reconnect: only a change is news.
                    if new != engine.config { apply(new, origin: "fleet/config") }
                case .failure(let errors): report(config: .rejected(errors.errors.map(\.description)), origin: "fleet/config")
                }
            } else if message.retain, !message.payload.isEmpty,
                      case .gatewayPresence(_, _, let owner) = topics.parse(message.topic), owner == gateway.id {
                engine.inheritedPresence(topic: message.topic)
            }
        }
    }

    func command(_ message: MQTTMessage) {
        let topics = config.topics
        func reply(_ command: String, _ status: String, _ detail: String? = nil) {
            var writer = JSONWriter()
            writer.object { o in
                o("event", "command")
                o("command", command)
                o("status", status)
                if let detail { o("detail", detail) }
                o("ts", WallClock.now())
            }
            engine.publish(OutgoingMessage(topic: topics.events(ofGateway: gateway.id), payload: writer.text, qos: 1, retain: false))
        }
        guard let json = try? JSONParser(maxDepth: 8).parse(message.payload), case .object(let object) = json,
              object.members.count == 1, let (key, value) = object.members.first
        else {
            logger.warning("ignored a malformed command", metadata: ["payload": "\(message.text.prefix(200))"])
            reply("?", "rejected", "expected one of {\"scan\":\"pause\"|\"resume\"}, {\"reload\":true}, {\"advertise\":{…}}")
            return
        }
        switch (key, value) {
        case ("scan", .string("pause")), ("scan", .string("resume")):
            let enable = value == .string("resume")
            engine.setScanningPaused(!enable)
            Task { await source.setScanning(enable) }
            logger.info("scanning \(enable ? "resumed" : "paused") by command")
            reply("scan", "ok", enable ? "resumed" : "paused")
        case ("reload", .bool(true)):
            guard let configPath else { return reply("reload", "rejected", "the gateway was not started from a config file") }
            do {
                let text = try FileSystem.readText(configPath)
                let new = try FleetConfig.parse(text)
                apply(new, origin: configPath)
                reply("reload", "ok")
            } catch let error as ConfigErrors {
                report(config: .rejected(error.errors.map(\.description)), origin: configPath)
                reply("reload", "rejected", "invalid config; the last good one stays")
            } catch {
                reply("reload", "rejected", "\(error)")
            }
        case ("advertise", _):
            let wanted: AdvertiseConfig?
            switch value {
            case .bool(false):
                wanted = nil
            case .bool(true):
                guard let configured = gateway.advertise else {
                    return reply("advertise", "rejected", "gateway \"\(gateway.id)\" has no advertise settings in the config")
                }
                wanted = configured
            default:
                do {
                    wanted = try AdvertiseConfig.parse(value)
                } catch {
                    return reply("advertise", "rejected", error.errors.map(\.description).joined(separator: "; "))
                }
            }
            Task {
                do {
                    let change = try await source.setAdvertising(wanted)
                    logger.info("advertising \(change.rawValue) by command", metadata: [
                        "beacon": "\(wanted.map { "\($0.beacon.uuid)/\($0.beacon.major)/\($0.beacon.minor)" } ?? "none")",
                    ])
                    reply("advertise", "ok", Self.describe(change, wanted))
                } catch {
                    logger.warning("advertise command failed", metadata: ["error": "\(error)"])
                    reply("advertise", "rejected", "\(error)")
                }
            }
        default:
            reply(key, "rejected", "unknown command")
        }
    }

    /// Applies a new fleet config; a changed `advertise` of this gateway takes effect at
    /// once on its controller (a command's advertising stays until the config changes it).
    func apply(_ new: FleetConfig, origin: String) {
        let result = engine.apply(new)
        report(config: result, origin: origin)
        guard case .applied = result, let mine = new.gateway(id: gateway.id) else { return }
        guard configuredAdvertising.replace(with: mine.advertise) else { return }
        let wanted = mine.advertise
        Task {
            do {
                let change = try await source.setAdvertising(wanted)
                logger.info("advertising \(change.rawValue) by the new config", metadata: ["origin": "\(origin)"])
            } catch {
                logger.warning("the new config's advertising failed", metadata: ["origin": "\(origin)", "error": "\(error)"])
            }
        }
    }

    static func describe(_ change: AdvertisingChange, _ config: AdvertiseConfig?) -> String {
        switch change {
        case .stopped: return "advertising stopped"
        case .pending: return "the controller is not reachable now; the change applies when it is back"
        case .started:
            guard let config else { return "advertising" }
            let beacon = config.beacon
            return "advertising \(beacon.uuid) major \(beacon.major) minor \(beacon.minor), "
                + "\(beacon.txPower) dBm at 1 m, every \(config.intervalMs) ms"
        }
    }

    func report(config result: ConfigApplyResult, origin: String) {
        var writer = JSONWriter()
        writer.object { o in
            o("event", "config")
            o("origin", origin)
            switch result {
            case .applied(let needsRestart):
                o("status", "applied")
                if !needsRestart.isEmpty {
                    o("needsRestart", .array(needsRestart.map(JSONValue.string)))
                }
            case .rejected(let errors):
                o("status", "rejected")
                o("errors", .array(errors.map(JSONValue.string)))
            }
            o("ts", WallClock.now())
        }
        switch result {
        case .applied: logger.info("applied a new fleet config", metadata: ["origin": "\(origin)"])
        case .rejected(let errors): logger.error("rejected a fleet config; keeping the last good one",
                                                 metadata: ["origin": "\(origin)", "errors": "\(errors.joined(separator: "; "))"])
        }
        engine.publish(OutgoingMessage(topic: config.topics.events(ofGateway: gateway.id), payload: writer.text, qos: 1, retain: false))
    }
}

/// The `advertise` settings of the config in force, shared by the service's copies.
final class ConfiguredAdvertising: Sendable {
    private let current: Mutex<AdvertiseConfig?>

    init(_ initial: AdvertiseConfig?) { current = Mutex(initial) }

    /// Stores `new`; whether it differs from what was there.
    func replace(with new: AdvertiseConfig?) -> Bool {
        current.withLock { value in
            defer { value = new }
            return value != new
        }
    }
}

public import BeaconKit
import Contract
public import Config
public import GatewayCore
public import HCI
public import LiveClock
public import Logging
public import MQTT
public import ServiceLifecycle
import Synchronization
import CoreHost
import SystemCalls
import Wire

/// One gateway process: a source, the engine, the broker connection and the timers,
/// run as a `Service` so SIGTERM/SIGINT shut it down in order: stop scanning (which
/// restores the controller), withdraw presence, say `offline`, disconnect.
///
/// The decisions are the `GatewayEngine`'s, a value; this is where they meet the world.
/// Every input (a frame from the source thread, a timer, an MQTT event, an operator
/// command) is handed to the engine under the lock of its `CoreHost`, and what it decides
/// is published and logged inside the same lock, so messages leave in the order decided.
/// What the client cannot take because the connection went goes back to the engine
/// (`GatewayEngine.undelivered`), which keeps the outage's messages itself.
public final class GatewayService: Service, Sendable, CustomStringConvertible {
    public static let version = "0.1.0"

    /// The engine's counters and the service's own.
    public struct Statistics: Sendable, Equatable {
        public var engine: GatewayEngine.Statistics
        /// Messages handed to the broker.
        public var published: Int
        /// Publications the client refused for a reason other than a lost connection.
        public var publishErrors: Int
        /// `fleet/config` pushes dropped unread because a newer one came before they were read.
        public var supersededConfigs: Int
    }

    /// What the gateway keeps under its host's lock: the engine and the state of its wiring.
    struct State {
        var engine: GatewayEngine
        /// The hot path's output, reused frame after frame.
        var output = GatewayOutput()
        /// `client.supersededMessages` when the last push was answered.
        var supersededAnswered = 0
    }

    typealias Hosted = HostState<State>

    let config: FleetConfig
    let gateway: GatewayConfig
    let source: any AdvertisingSource
    let client: MQTTClient
    let host: CoreHost<State>
    let logger: Logger
    /// Re-read for `{"reload":true}`; `nil` when the config did not come from a file.
    let configPath: String?
    /// The source reports time in-band (replays); otherwise the wall clock drives timers.
    let sourceHasOwnTime: Bool
    /// What the fleet config last said this gateway advertises, to apply a change live.
    let configuredAdvertising: ConfiguredAdvertising
    /// Called with each health payload as it is published (`--metrics`).
    let onHealth: (@Sendable (String) -> Void)?
    /// The proof of presence of the store this gateway advertises for (`advertise.proof`):
    /// its minor changes to the store's value at every slot.
    let proof: PresenceProof?
    /// Where the gateway reads the wall time and its timers' seconds (`ServiceClock`); a
    /// replayed source keeps its own capture time (`AdvertisingSource.clock`).
    var clock: any ServiceClock { host.clock }

    /// `clientID`: the MQTT client id, `beacon-gateway-<id>` by default (`BrokerIdentity`).
    public init(config: FleetConfig, gateway: GatewayConfig, source: any AdvertisingSource, sourceHasOwnTime: Bool,
                password: String?, configPath: String?, logger: Logger, clientID: String? = nil,
                onHealth: (@Sendable (String) -> Void)? = nil, proof: PresenceProof? = nil,
                brokerFromCommandLine: Bool = false, clock: any ServiceClock = SystemClock()) throws(MQTTError) {
        self.config = config
        self.proof = proof
        self.onHealth = onHealth
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
        // Each push of the fleet config replaces the last: only the newest not yet read
        // waits (pushes faster than they parse once took a gateway past its MemoryMax).
        options.newestOnly = [topics.fleetConfig]
        client = try MQTTClient(options)
        var engine = GatewayEngine(config: config, gateway: gateway)
        engine.logsBeacons = logger.logLevel <= .debug
        engine.brokerFromCommandLine = brokerFromCommandLine
        host = CoreHost(State(engine: engine), client: client, logger: logger, clock: clock,
                        outage: .core { s, messages in s.engine.undelivered(messages) })
        configuredAdvertising = ConfiguredAdvertising(gateway.advertise)
        configuredAdvertising.inForce = gateway.advertise?.at(clock.now(), proof: proof)
    }

    /// `advertise` as it goes on the air now: a proof's minor is the store's value of this slot.
    func resolved(_ advertise: AdvertiseConfig?) -> AdvertiseConfig? {
        advertise?.at(self.clock.now(), proof: proof)
    }

    /// Every slot of the store's proof, the advertised minor changes to the slot's value
    /// (while the advertising in force is a proof: a command may have replaced it).
    func rotateProof(_ proof: PresenceProof) async throws {
        while !Task.isCancelled {
            let now = self.clock.now()
            let wait = max(0, proof.nextSlotStart(after: now).seconds(since: now)) + 0.001
            try await clock.sleep(until: clock.monotonic() + wait)
            guard let current = configuredAdvertising.inForce, current.proof else { continue }
            let wanted = current.at(self.clock.now(), proof: proof)
            guard wanted != current else { continue }
            do {
                _ = try await source.setAdvertising(wanted)
                configuredAdvertising.inForce = wanted
                logger.debug("advertising the store's proof of presence of a new slot", metadata: [
                    "major": "\(wanted.beacon.major)", "minor": "\(wanted.beacon.minor)",
                ])
            } catch {
                logger.warning("the proof of presence of a new slot could not be advertised", metadata: ["error": "\(error)"])
            }
        }
    }

    public var description: String { "GatewayService(\(gateway.id), \(source.name))" }

    /// The engine's counters (decoded, tracked, queued) and what was published, for health
    /// checks and benchmarks.
    public var statistics: Statistics {
        let superseded = client.supersededMessages
        return host.withLock {
            Statistics(engine: $0.core.engine.statistics, published: $0.published, publishErrors: $0.refused,
                       supersededConfigs: superseded)
        }
    }

    /// The clock's monotonic seconds of the last round of the timers (`CoreHost.timerRound`):
    /// a test that advanced a `ManualClock` to `t` waits until this is at least `t`.
    public var timerRound: Double? { host.timerRound }

    public func run() async throws {
        let topics = config.topics
        let readBack = topics.presenceFilter(seenBy: gateway.id)
        try client.subscribe(readBack + [topics.commands(ofGateway: gateway.id), topics.fleetConfig, topics.brainStatus],
                             qos: 1)
        try client.start()
        logger.info("gateway starting", metadata: [
            "id": "\(gateway.id)", "source": "\(source.name)", "broker": "\(config.broker(forGateway: gateway.id).url)",
        ])
        let started = self.clock.monotonic()
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
        input { $0.withdraw() }
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
                        while !self.host.withLock({ $0.core.engine.isConnected }) { try await Task.sleep(nanoseconds: 20_000_000) }
                    }
                    try await self.source.run { output in
                        switch output {
                        case .frame(let frame): self.handle(frame)
                        case .tick(let time): self.input { $0.advance(to: time) }
                        case .state(let state, let detail):
                            if state == .finished { sourceFinished.set() }
                            self.input { $0.sourceChanged(state, detail: detail) }
                        }
                    }
                }
                if let proof = self.proof {
                    group.addTask { try await self.rotateProof(proof) }
                }
                group.addTask {
                    for await event in self.client.events {
                        self.handle(event, readBack: readBack)
                    }
                }
                group.addTask {
                    for await message in self.client.newest(on: self.config.topics.fleetConfig) {
                        self.pushed(message)
                    }
                }
                group.addTask {
                    await self.host.runTimers(self.timers(readBack: readBack, started: started, sourceFinished: sourceFinished),
                                              heartbeat: timers)
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
        let s = statistics
        return "broker \(s.engine.connected ? "connected" : "not connected"); source \(source.name) \(s.engine.sourceState.rawValue); "
            + "\(s.engine.tracked) beacons tracked, \(s.published) messages published"
    }

    func notify(_ notifier: ServiceNotifier?, _ fields: [ServiceNotifier.Field]) {
        do {
            try notifier?.send(fields)
        } catch {
            logger.warning("cannot notify the service manager", metadata: ["error": "\(error)"])
        }
    }

    // MARK: - Timers (run by the host, under its lock, on the service's clock)

    /// Every 100 ms the engine's time moves on (exits, reports, inherited presence);
    /// health every `healthInterval`; the wait for the brain after a reconnect.
    func timers(readBack: [String], started: Double, sourceFinished: AtomicFlag) -> [CoreHost<State>.Timer] {
        [
            .init("round", every: 0.1) { h, _ in
                // A replay's time is its own (in-band ticks) until it has ended.
                if !self.sourceHasOwnTime || sourceFinished.isSet {
                    // A live source's captures are dated by the service's wall clock (as
                    // `LiveSourceClock` dates them): the engine's time moves on by it.
                    let now = self.sourceHasOwnTime ? self.source.clock.now() : self.clock.now().asCaptureTime()
                    self.emit(&h, h.core.engine.advance(to: now))
                }
                let settled = h.core.engine.settleInheritedPresence(at: self.clock.now())
                self.emit(&h, settled)
                if settled.readBackEnded {
                    // Our own presence needs no echo once the old one is settled.
                    try? self.client.unsubscribe(readBack)
                }
            },
            .init("health", every: gateway.healthInterval, firstAfter: 1) { h, now in
                let health = h.core.engine.health(at: self.clock.now(), uptime: now - started, version: Self.version,
                                                  sourceName: self.source.name, published: h.published)
                self.emit(&h, h.core.engine.publish(health))
                self.onHealth?(health.text)
            },
            // Scheduled by a reconnect that waits for the brain (`handle(_:readBack:)`).
            .init(Self.brainWait, every: .infinity, firstAfter: .infinity) { h, _ in
                self.emit(&h, h.core.engine.brainReady(timedOut: true))
            },
        ]
    }

    /// The timer that ends a reconnect's wait for the brain (`GatewayEngine.brainWaitSeconds`).
    static let brainWait = "brain wait"

    func handle(_ event: MQTTEvent, readBack: [String]) {
        let topics = config.topics
        switch event {
        case .connected:
            let output = host.withLock { h in
                host.connected(&h)
                let output = h.core.engine.connected(at: self.clock.now())
                emit(&h, output)
                // A later connection's wait replaces an earlier one's.
                if h.core.engine.awaitsBrain {
                    h.schedule(Self.brainWait, at: clock.monotonic() + GatewayEngine.brainWaitSeconds)
                }
                return output
            }
            // Stale presence a restarted broker brought back is read and deleted again.
            if output.readBackStarted { try? client.subscribe(readBack, qos: 1) }
        case .disconnected(let reason):
            host.withLock { h in
                host.disconnected(&h)
                emit(&h, h.core.engine.disconnected(reason: reason))
            }
        case .message(let message):
            // Commands, the brain's status, and this gateway's own presence read back on start.
            // No size limit of its own: the broker's `message_size_limit` is the one.
            let decoder = Inbound.Decoder(topics: topics, maxPayload: .max, maxConfigPayload: .max)
            let inbound = decoder.decode(topic: message.topic, payload: message.payload, retained: message.retain)
            switch inbound.message {
            case .gatewayCommand(let id, let body) where id == gateway.id:
                command(body, payload: message.text)
            case .brainStatus(let status):
                host.withLock { $0.core.engine.brainStatus(online: status == .value(.online)) }
            case .gatewayPresence(_, let owner, let body) where inbound.retained && body != .empty && owner == gateway.id:
                input { $0.inheritedPresence(topic: message.topic) }
            default:
                break
            }
        }
    }

    /// A push of the fleet config (`client.newest(on:)`: the newest since the last one read).
    /// Its answer on `gateways/<id>/events` counts the pushes it superseded unread.
    func pushed(_ message: MQTTMessage) {
        guard !message.payload.isEmpty else { return }
        let superseded = { () -> Int in
            let total = self.client.supersededMessages
            return self.host.withLock { h in
                defer { h.core.supersededAnswered = total }
                return total - h.core.supersededAnswered
            }
        }
        switch Result(catching: { () throws(ConfigErrors) in try FleetConfig.parse(message.text) }) {
        case .success(let new):
            // The retained config comes again on every reconnect: only a change is news.
            if new != host.withLock({ $0.core.engine.config }) {
                apply(new, origin: "fleet/config", superseded: superseded())
            }
        case .failure(let errors):
            let count = superseded()
            input { $0.reject(errors.errors.map(\.description), origin: "fleet/config", superseded: count, at: self.clock.now()) }
        }
    }

    // MARK: - The engine's inputs and outputs

    /// One frame from the source: the hot path, which reuses one output.
    func handle(_ frame: HCIFrame) {
        host.withLock { h in
            h.core.engine.handle(frame, into: &h.core.output)
            var output = h.core.output
            h.core.output = GatewayOutput()
            emit(&h, output)
            output.removeAll()
            h.core.output = output
        }
    }

    /// Hands one input to the engine and carries out what it decided.
    @discardableResult
    func input(_ body: (inout GatewayEngine) -> GatewayOutput) -> GatewayOutput {
        host.withLock { h in
            let output = body(&h.core.engine)
            emit(&h, output)
            return output
        }
    }

    /// Logs and publishes an output, in order (`CoreHost.emit`).
    func emit(_ h: inout Hosted, _ output: GatewayOutput) {
        host.emit(log: output.log, messages: output.messages, in: &h)
    }

    /// Applies a new fleet config; a changed `advertise` of this gateway takes effect at
    /// once on its controller (a command's advertising stays until the config changes it).
    func apply(_ new: FleetConfig, origin: String, superseded: Int = 0) {
        let result = input { $0.apply(new, origin: origin, superseded: superseded, at: self.clock.now()) }.config
        guard case .applied = result, let mine = new.gateway(id: gateway.id) else { return }
        guard configuredAdvertising.replace(with: mine.advertise) else { return }
        let wanted = resolved(mine.advertise)
        Task {
            do {
                let change = try await source.setAdvertising(wanted)
                configuredAdvertising.inForce = wanted
                logger.info("advertising \(change.rawValue) by the new config", metadata: ["origin": "\(origin)"])
            } catch {
                logger.warning("the new config's advertising failed", metadata: ["origin": "\(origin)", "error": "\(error)"])
            }
        }
    }
}

/// The `advertise` settings of the config in force, shared by the service's copies.
final class ConfiguredAdvertising: Sendable {
    private let current: Mutex<AdvertiseConfig?>
    private let onAir = Mutex<AdvertiseConfig?>(nil)

    init(_ initial: AdvertiseConfig?) { current = Mutex(initial) }

    /// What the controller was last told to advertise (a proof's minor resolved).
    var inForce: AdvertiseConfig? {
        get { onAir.withLock { $0 } }
        set { onAir.withLock { $0 = newValue } }
    }

    /// Stores `new`; whether it differs from what was there.
    func replace(with new: AdvertiseConfig?) -> Bool {
        current.withLock { value in
            defer { value = new }
            return value != new
        }
    }
}

import BeaconKit
import Contract
import BrainCore
public import Config
public import Logging
public import MQTT
public import ServiceLifecycle
import Synchronization
import LiveClock
import SystemCalls

/// A brain of a sharded fleet (`beacon-brain --shard NAME`): answers for its own shard's
/// stores, and for the stores of a shard whose brain is gone when it is that shard's
/// successor (`ShardTable`), until that brain is back. docs/fleet.md, "Brains in shards".
///
/// A small MQTT connection of its own keeps `brain/shards/<name>/status` (`online`; its will
/// says `offline`, so a killed brain is noticed at once) and reads every shard's status and
/// holder. Each shard answered for is a `BrainService` with that shard's stores: the own one
/// under `<client id>-<name>`, a stand-in under `<client id>-<other>-by-<name>`. A stand-in
/// rebuilds its shard's state from the retained messages, as any brain does after a restart,
/// so the visits and joins the other brain answered are not answered again.
public final class ShardSupervisor: Service, Sendable {
    public struct Options: Sendable {
        /// Seconds after reading the shards' statuses before standing in for a shard whose
        /// brain never said anything (brains starting together see each other first).
        public var startGrace: Double = 5
        /// Seconds the own shard waits for a live stand-in to let go before starting anyway.
        public var holdLimit: Double = 30
        /// Seconds between decisions.
        public var tickInterval: Double = 0.25
        /// Options every `BrainService` starts from (its client id is set per shard).
        public var brain: BrainService.Options

        public init(brain: BrainService.Options) { self.brain = brain }
    }

    /// A brain answering for one shard.
    final class Running: Sendable {
        let service: BrainService
        let task: Task<Void, Never>

        init(service: BrainService, logger: Logger) {
            self.service = service
            task = Task {
                do { try await service.run() } catch {
                    logger.error("a shard's brain ended", metadata: ["error": "\(error)"])
                }
            }
        }

        func stop() async {
            task.cancel()
            await task.value
        }
    }

    struct State {
        var table: ShardTable
        var connected = false
        var syncToken = ""
        /// When the shards' retained state had been read (the sync marker came back), in
        /// monotonic seconds of the brains' clock (`BrainService.Options.clock`).
        var readAt: Double?
        /// The clock's monotonic seconds of the last decision (`decide`).
        var decidedAt: Double?
        var own: Running?
        var covering: [String: Running] = [:]
    }

    let config: FleetConfig
    let shard: BrainShard
    let password: String?
    let logger: Logger
    let options: Options
    let topics: Topics
    let watcher: MQTTClient
    let state: Mutex<State>
    /// Where the supervisor reads the time: its brains' clock (`BrainService.Options.clock`).
    var clock: any ServiceClock { options.brain.clock }

    /// `name` must name one of `config.brain.shards` (`beacon-brain` checks).
    public init(config: FleetConfig, shard name: String, password: String?, logger: Logger, options: Options) throws(MQTTError) {
        self.config = config
        shard = config.brain.shards.first { $0.name == name } ?? BrainShard(name: name, stores: [])
        self.password = password
        self.logger = logger
        self.options = options
        topics = config.topics
        var mqtt = MQTTClientOptions(config.broker, identity: BrokerIdentity.brain,
                                     clientID: options.brain.clientID + "-" + name + "-shards", password: password)
        mqtt.reconnectDelay = options.brain.reconnectDelay
        mqtt.will = MQTTMessage(topic: topics.shardStatus(name), text: "offline", qos: 1, retain: true)
        watcher = try MQTTClient(mqtt)
        state = Mutex(State(table: ShardTable(shards: config.brain.shards, me: name)))
    }

    /// Which shards this brain answers for right now: its own (when started) and the others.
    public var answering: (own: Bool, covering: [String]) {
        state.withLock { ($0.own != nil, $0.covering.keys.sorted()) }
    }

    /// Whether the shards' statuses and holders have been read (the sync marker came back):
    /// decisions are taken from then on.
    public var hasReadShards: Bool { state.withLock { $0.readAt != nil } }

    /// The clock's monotonic seconds of the last decision, once its brains were started and
    /// stopped: a test that advanced a `ManualClock` to `t` waits until this is at least `t`.
    public var decidedAt: Double? { state.withLock { $0.decidedAt } }

    /// The brains running now: its own shard's, then those it covers for others.
    public var brains: [BrainService] {
        state.withLock { s in
            (s.own.map { [$0.service] } ?? []) + s.covering.keys.sorted().compactMap { s.covering[$0]?.service }
        }
    }

    public func run() async throws {
        try watcher.subscribe(topics.shardFilters + [topics.shardSync(shard.name)], qos: 1)
        try watcher.start()
        logger.info("brain shard starting", metadata: [
            "shard": "\(shard.name)", "stores": "\(shard.stores.count)",
            "shards": "\(config.brain.shards.map(\.name).joined(separator: ","))",
        ])
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await event in self.watcher.events { self.handle(event) }
                }
                group.addTask {
                    while !Task.isCancelled {
                        try? await self.clock.sleep(until: self.clock.monotonic() + self.options.tickInterval)
                        await self.decide()
                    }
                }
                await group.waitForAll()
            }
        }
        let (own, covering) = state.withLock { s in
            defer { s.own = nil; s.covering = [:] }
            return (s.own, s.covering)
        }
        for (name, running) in covering.sorted(by: { $0.key < $1.key }) {
            await running.stop()
            publish(topics.shardHolder(name), "")
        }
        await own?.stop()
        publish(topics.shardStatus(shard.name), "offline")
        _ = await watcher.waitUntilPublished(timeout: 3)
        await watcher.stop(timeout: 2)
        logger.info("brain shard stopped", metadata: ["shard": "\(shard.name)"])
    }

    // MARK: - Inputs

    func handle(_ event: MQTTEvent) {
        switch event {
        case .connected:
            let token = state.withLock { s in
                s.connected = true
                s.syncToken = "\(clock.now().nanoseconds)"
                return s.syncToken
            }
            publish(topics.shardStatus(shard.name), "online")
            publish(topics.shardSync(shard.name), token, retain: false)
        case .disconnected:
            state.withLock { $0.connected = false }
        case .message(let message):
            state.withLock { s in
                if message.topic == topics.shardSync(shard.name) {
                    if message.text == s.syncToken, s.readAt == nil { s.readAt = clock.monotonic() }
                    return
                }
                switch topics.parse(message.topic) {
                case .shardStatus(let name)?: s.table.status(of: name, ShardTable.Status(rawValue: message.text))
                case .shardHolder(let name)?: s.table.holder(of: name, message.text)
                default: break
                }
            }
        }
    }

    // MARK: - Decisions

    /// Starts and stops the brains of the shards this one should answer for.
    func decide() async {
        let now = clock.monotonic()
        defer { state.withLock { $0.decidedAt = now } }
        let plan = state.withLock { s -> (startOwn: Bool, start: [String], stop: [String]) in
            guard s.connected, let readAt = s.readAt else { return (false, [], []) }
            var startOwn = false
            if s.own == nil {
                if s.table.mayRunOwnShard {
                    startOwn = true
                } else if now - readAt >= options.holdLimit {
                    logger.warning("the shard's stand-in did not let go; starting anyway",
                                   metadata: ["shard": "\(shard.name)", "holder": "\(s.table.holders[shard.name] ?? "")"])
                    startOwn = true
                }
            }
            let wanted = now - readAt >= options.startGrace ? Set(s.table.covered)
                : Set(s.table.covered.filter { s.table.statuses[$0] == .offline })
            return (startOwn, wanted.subtracting(s.covering.keys).sorted(), Set(s.covering.keys).subtracting(wanted).sorted())
        }
        for name in plan.stop {
            guard let running = state.withLock({ $0.covering.removeValue(forKey: name) }) else { continue }
            logger.notice("its own brain is back: handing the shard over", metadata: ["shard": "\(name)"])
            await running.stop()
            publish(topics.shardHolder(name), "")
        }
        for name in plan.start {
            guard let other = config.brain.shards.first(where: { $0.name == name }) else { continue }
            logger.notice("a shard's brain is gone: standing in for it", metadata: ["shard": "\(name)", "stores": "\(other.stores.count)"])
            publish(topics.shardHolder(name), shard.name)
            if let running = start(other, clientID: options.brain.clientID + "-" + name + "-by-" + shard.name, standIn: true) {
                state.withLock { $0.covering[name] = running }
            }
        }
        if plan.startOwn, let running = start(shard, clientID: options.brain.clientID + "-" + shard.name, standIn: false) {
            state.withLock { $0.own = running }
        }
    }

    private func start(_ shard: BrainShard, clientID: String, standIn: Bool) -> Running? {
        var brain = options.brain
        brain.clientID = clientID
        brain.isStandIn = standIn
        var logger = self.logger
        logger[metadataKey: "shard"] = "\(shard.name)"
        do {
            let service = try BrainService(config: config, stores: Set(shard.stores), password: password, logger: logger,
                                           options: brain)
            return Running(service: service, logger: logger)
        } catch {
            logger.error("cannot start the shard's brain", metadata: ["error": "\(error)"])
            return nil
        }
    }

    private func publish(_ topic: String, _ text: String, retain: Bool = true) {
        do {
            try watcher.publish(MQTTMessage(topic: topic, text: text, qos: 1, retain: retain))
        } catch {
            logger.warning("could not publish the shard's state", metadata: ["topic": "\(topic)", "error": "\(error)"])
        }
    }
}

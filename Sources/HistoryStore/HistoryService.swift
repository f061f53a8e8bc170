public import BeaconKit
public import Config
public import History
public import Logging
public import MQTT
public import ServiceLifecycle
import LiveClock
import SystemCalls
import Synchronization

/// `beacon-history`: subscribes to the brain's decisions and keeps them in the history.
///
/// The MQTT session is persistent (clean session off, QoS 1): while the service is down or
/// its connection is, the broker keeps its decisions and delivers them on reconnect. Every
/// decision is stored by its natural key, so what the broker delivers twice (a redelivery, a
/// replay, a restart that re-reads) is stored once. Messages arrive in batches of whatever
/// came since the last write, each written in one transaction. A write that fails (a full
/// disk, a read-only or locked file) keeps its batch and is retried with back-off, so
/// nothing is lost once the cause is gone; while it fails, at most `pendingLimit` decisions
/// wait (beyond that the oldest are dropped and counted).
public final class HistoryService: Service, Sendable {
    public static let version = "0.1.0"

    public struct Options: Sendable {
        public var clientID = "beacon-history"
        /// Decisions waiting for the database while it fails.
        public var pendingLimit = 500_000
        /// Seconds between retries of a failed write (doubling).
        public var retryDelay: ClosedRange<Double> = 0.25...15
        /// Seconds between prunes of visits older than the retention.
        public var pruneInterval: Double = 3600
        /// Seconds between the counters in the log.
        public var reportInterval: Double = 60
        /// Seconds between readings of today's footfall and occupancy (`latestStoreFigures`).
        public var figuresInterval: Double = 15
        public init() {}
    }

    /// What the service has done since it started.
    public struct Counters: Sendable, Equatable {
        public var stored = 0
        public var duplicates = 0
        public var skipped: [HistorySkip: Int] = [:]
        public var dropped = 0
        public var writeFailures = 0
        public var pruned = 0
    }

    let client: MQTTClient
    let database: any HistoryKeeping
    let pseudonyms: Pseudonymizer
    let reader: DecisionReader
    let config: HistoryConfig
    let logger: Logger
    let options: Options
    private let pending = Mutex<[HistoryEvent]>([])
    private let state = Mutex(Counters())
    private let connected = Mutex(false)
    private let latestFigures = Mutex<[StoreFigures]?>(nil)
    let configuredStores: Set<UInt16>

    public init(config: FleetConfig, password: String?, database: any HistoryKeeping, pseudonyms: Pseudonymizer,
                logger: Logger, options: Options = Options()) throws(MQTTError) {
        var mqtt = MQTTClientOptions(broker: config.broker.url, clientID: options.clientID)
        mqtt.username = config.broker.username
        mqtt.password = password
        mqtt.tls = config.broker.tls
        mqtt.keepalive = config.broker.keepalive
        mqtt.version = config.broker.mqttVersion
        mqtt.cleanSession = false
        client = try MQTTClient(mqtt)
        self.database = database
        self.pseudonyms = pseudonyms
        reader = DecisionReader(config: config)
        configuredStores = Set(config.stores.map(\.major))
        self.config = config.history
        self.logger = logger
        self.options = options
    }

    public var counters: Counters { state.withLock { $0 } }

    /// Connected to the broker now.
    public var isConnected: Bool { connected.withLock { $0 } }

    /// `storeFigures` as last read (every `figuresInterval`), for a metrics scrape that
    /// cannot wait on the database; `nil` before the first reading or when it failed.
    public var latestStoreFigures: [StoreFigures]? { latestFigures.withLock { $0 } }

    /// One store's figures at a moment.
    public struct StoreFigures: Sendable, Equatable {
        public var store: UInt16
        /// Visits begun since the store's local midnight (`history.utcOffsetMinutes`).
        public var footfallToday: Int
        /// Visits begun and not ended.
        public var occupancy: Int
    }

    /// Today's footfall and the occupancy of every store the config lists or the history
    /// holds (a quiet store reads 0, not nothing), read from the database at `now`; `nil`
    /// when the database cannot be read.
    public func storeFigures(at now: CaptureTime) async -> [StoreFigures]? {
        let offset = Double(config.utcOffsetMinutes * 60)
        let midnight = CaptureTime(seconds: ((now.seconds + offset) / 86_400).rounded(.down) * 86_400 - offset)
        guard let visits = try? await database.visits(store: nil, from: midnight, to: now + 60) else { return nil }
        var stores = Set(visits.map(\.store)).union(configuredStores)
        if let held = try? await database.stores() { stores.formUnion(held) }
        return stores.sorted().map { store in
            let mine = visits.filter { $0.store == store }
            return StoreFigures(store: store, footfallToday: mine.count { $0.since >= midnight },
                                occupancy: HistoryFigures.occupancy(of: mine, at: now))
        }
    }

    public func run() async throws {
        try client.subscribe(reader.filters, qos: 1)
        try client.start()
        logger.info("history starting", metadata: ["database": "\(database.location)", "client": "\(options.clientID)"])
        await prune()
        await readFigures()
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                let (bell, ring) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
                group.addTask {
                    for await event in self.client.events {
                        switch event {
                        case .message(let message): self.take(message)
                        case .connected(let sessionPresent):
                            self.connected.withLock { $0 = true }
                            self.logger.info("connected to the broker", metadata: ["sessionPresent": "\(sessionPresent)"])
                        case .disconnected(let reason):
                            self.connected.withLock { $0 = false }
                            self.logger.warning("lost the broker; it keeps our decisions until we are back", metadata: ["reason": "\(reason)"])
                        }
                        ring.yield()
                    }
                    ring.finish()
                }
                group.addTask {
                    for await _ in bell { await self.writePending() }
                }
                group.addTask {
                    var lastPrune = WallClock.monotonic(), lastReport = WallClock.monotonic(), lastFigures = WallClock.monotonic()
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(1))
                        let now = WallClock.monotonic()
                        if now - lastPrune >= self.options.pruneInterval {
                            lastPrune = now
                            await self.prune()
                        }
                        if now - lastFigures >= self.options.figuresInterval {
                            lastFigures = now
                            await self.readFigures()
                        }
                        if now - lastReport >= self.options.reportInterval {
                            lastReport = now
                            self.report()
                        }
                    }
                }
                await group.next()
                group.cancelAll()
            }
        }
        // Shutting down: whatever arrived is written (one last try), then disconnect.
        await writePending(retry: false)
        await client.stop()
        report()
    }

    func take(_ message: MQTTMessage) {
        switch reader.read(topic: message.topic, payload: message.payload) {
        case .success(let event):
            pending.withLock { queue in
                queue.append(event)
                if queue.count > options.pendingLimit {
                    let excess = queue.count - options.pendingLimit
                    queue.removeFirst(excess)
                    state.withLock { $0.dropped += excess }
                }
            }
        case .failure(let skip):
            let count = state.withLock { s in
                s.skipped[skip, default: 0] += 1
                return s.skipped[skip]!
            }
            // The first of each kind is said in full; the rest are counted (report()).
            if count == 1 {
                logger.warning("skipped a decision", metadata: ["reason": "\(skip.rawValue)", "topic": "\(message.topic)"])
            }
        }
    }

    /// Writes what is waiting; on failure keeps it and retries with back-off until it is
    /// written or the service stops. The first failure of a run of them is logged, then one
    /// a minute or so (at the longest delay), and the write that ends them.
    func writePending(retry: Bool = true) async {
        var delay = options.retryDelay.lowerBound
        var failed = 0
        while true {
            let batch = pending.withLock { $0 }
            guard !batch.isEmpty else { return }
            do {
                let count = try await database.ingest(batch, pseudonyms: pseudonyms)
                pending.withLock { $0.removeFirst(min(batch.count, $0.count)) }
                state.withLock { s in
                    s.stored += count.stored
                    s.duplicates += count.duplicates
                }
                if failed > 0 {
                    logger.notice("writing the history again", metadata: [
                        "database": "\(database.location)", "failedTries": "\(failed)", "decisions": "\(batch.count)"])
                }
                return
            } catch {
                state.withLock { $0.writeFailures += 1 }
                failed += 1
                if failed == 1 || delay >= options.retryDelay.upperBound {
                    logger.error("cannot write the history; keeping \(batch.count) decisions and retrying",
                                 metadata: ["error": "\(error)", "retryIn": "\(delay) s"])
                }
                guard retry, !Task.isCancelled else { return }
                try? await Task.sleep(for: .seconds(delay))
                if Task.isCancelled { return }
                delay = min(options.retryDelay.upperBound, delay * 2)
            }
        }
    }

    func readFigures() async {
        // Today's figures by the service's clock, over decisions dated by capture time: live,
        // the gateways' clocks are the wall clock.
        let figures = await storeFigures(at: WallClock.now().asCaptureTime())
        latestFigures.withLock { $0 = figures }
    }

    func prune() async {
        // Retention by the service's clock, over decisions dated by capture time (as above).
        let now = WallClock.now().asCaptureTime()
        do {
            let erased = try await database.prune(before: now - Double(config.retentionDays) * 86_400,
                                            options: config.figureOptions, now: now)
            state.withLock { $0.pruned += erased }
            if erased > 0 { logger.info("erased visits past the retention", metadata: ["visits": "\(erased)", "days": "\(config.retentionDays)"]) }
        } catch {
            logger.error("cannot prune the history", metadata: ["error": "\(error)"])
        }
    }

    func report() {
        let c = counters
        logger.info("history", metadata: [
            "stored": "\(c.stored)", "duplicates": "\(c.duplicates)", "dropped": "\(c.dropped)",
            "writeFailures": "\(c.writeFailures)",
            "skipped": "\(HistorySkip.allCases.map { "\($0.rawValue)=\(c.skipped[$0] ?? 0)" }.joined(separator: " "))",
        ])
    }
}

extension HistoryConfig {
    /// The figures' zones and clock from the config.
    public var figureOptions: HistoryFigures.Options {
        HistoryFigures.Options(counterZones: Set(counterZones), queueZones: Set(queueZones), utcOffsetMinutes: utcOffsetMinutes,
                               minimumStay: minimumStaySeconds ?? HistoryFigures.Options.defaultMinimumStay)
    }
}

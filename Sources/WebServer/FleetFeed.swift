import BeaconKit
public import Config
public import Logging
public import MQTT
public import ServiceLifecycle
import Synchronization
import LiveClock
import SystemCalls
public import WebDisplay

/// Now, on the history's timeline: the analytics page's "today" and open visits, over
/// decisions dated by capture time. Live, the gateways date their captures by their wall
/// clocks, so the web's stands for them.
func historyNow() -> CaptureTime { WallClock.now().asCaptureTime() }

/// `beacon-web`'s MQTT side: subscribes (read-only) to the fleet's retained state, keeps
/// a `FleetState`, tells `LiveUpdates` what changed, and, when the fleet config asks for
/// it, keeps Home Assistant's discovery configs in line with the fleet.
///
/// Discovery waits until the retained state has been read (no retained message for
/// `settleQuiet` seconds, at most `settleLimit` after connecting), so that it neither
/// deletes the entities of customers not yet read back nor publishes half a fleet.
public final class FleetFeed: Service, Sendable {
    public static let version = "0.1.0"

    public struct Options: Sendable {
        public var clientID: String
        public var settleQuiet: Double = 1
        public var settleLimit: Double = 10
        /// Seconds between heartbeats of the live streams (the fleet page's ages move).
        public var heartbeat: Double = 2

        public init(clientID: String) { self.clientID = clientID }
    }

    struct State {
        var fleet: FleetState
        var connected = false
        var connectedAt: ContinuousClock.Instant?
        var lastRetained: ContinuousClock.Instant?
        var settled = false
        var discoveryDirty = true
        var ledger = DiscoveryLedger()
        var published = 0
        /// Unreadable messages are logged at most once per `malformedLogInterval`; the
        /// rest are counted into the next line.
        var malformedLoggedAt: ContinuousClock.Instant?
        var malformedUnlogged = 0
    }

    /// Seconds between log lines about unreadable messages (a flood of them is one line
    /// every so often, with their count; the fleet page counts every one).
    static let malformedLogInterval: Duration = .seconds(10)

    let client: MQTTClient
    let state: Mutex<State>
    let logger: Logger
    let options: Options
    public let updates: LiveUpdates

    public init(config: FleetConfig, username: String?, password: String?, logger: Logger, options: Options,
                updates: LiveUpdates = LiveUpdates()) throws(MQTTError) {
        var mqtt = MQTTClientOptions(config.broker, identity: BrokerIdentity.display, clientID: options.clientID,
                                     password: password)
        if let username { mqtt.username = username }
        client = try MQTTClient(mqtt)
        state = Mutex(State(fleet: FleetState(config: config)))
        self.logger = logger
        self.options = options
        self.updates = updates
    }

    /// Reads the state under the lock (for rendering pages).
    public func withState<T>(_ body: (FleetState) -> T) -> T {
        state.withLock { body($0.fleet) }
    }

    public var isSettled: Bool { state.withLock { $0.settled } }
    /// Discovery messages published so far.
    public var discoveryPublished: Int { state.withLock { $0.published } }

    public func run() async throws {
        let (filters, discovery) = state.withLock { s in
            (s.fleet.subscriptions, HomeAssistantDiscovery.filters(s.fleet.config.homeAssistant))
        }
        // The discovery configs and states of earlier runs are read back even when discovery is off:
        // turning it off removes them.
        try client.subscribe(filters + discovery, qos: 1)
        try client.start()
        logger.info("reading the fleet's retained state", metadata: ["client": "\(options.clientID)"])
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await event in self.client.events { self.handle(event) }
                }
                group.addTask {
                    var beats = 0
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(0.25))
                        self.tick()
                        beats += 1
                        if Double(beats) * 0.25 >= self.options.heartbeat {
                            beats = 0
                            self.updates.heartbeat { _ in true }
                        }
                    }
                }
                await group.waitForAll()
            }
        }
        updates.finishAll()
        _ = await client.waitUntilPublished(timeout: 2)
        await client.stop(timeout: 2)
    }

    func handle(_ event: MQTTEvent) {
        switch event {
        case .connected:
            state.withLock { s in
                s.connected = true
                s.connectedAt = .now
                s.lastRetained = nil
                s.settled = false
                s.ledger = DiscoveryLedger()
            }
            updates.publish(state.withLock { $0.fleet.setBrokerConnected(true) })
            logger.info("connected to the broker")
        case .disconnected(let reason):
            let was = state.withLock { s in
                defer { s.connected = false }
                return s.connected
            }
            updates.publish(state.withLock { $0.fleet.setBrokerConnected(false) })
            if was { logger.warning("broker connection lost; reconnecting", metadata: ["reason": "\(reason)"]) }
            else { logger.notice("cannot reach the broker; retrying", metadata: ["reason": "\(reason)"]) }
        case .message(let message):
            let change = state.withLock { s -> FleetState.Change in
                if message.retain { s.lastRetained = .now }
                let ha = s.fleet.config.homeAssistant
                if message.topic.hasPrefix(ha.discoveryPrefix + "/") {
                    // Our own discovery configs and states, read back (also those a previous run left).
                    if !s.settled { s.ledger.readBack(topic: message.topic, payload: message.text) }
                    return FleetState.Change()
                }
                let change = s.fleet.receive(topic: message.topic, payload: message.payload, at: WallClock.now())
                if change.config || !change.stores.isEmpty || change.fleet { s.discoveryDirty = true }
                return change
            }
            updates.publish(change)
            if let malformed = change.malformed { logMalformed(malformed) }
        }
    }

    func logMalformed(_ message: MalformedMessage) {
        let skipped = state.withLock { s -> Int? in
            let now = ContinuousClock.now
            if let last = s.malformedLoggedAt, now - last < Self.malformedLogInterval {
                s.malformedUnlogged += 1
                return nil
            }
            defer { s.malformedLoggedAt = now; s.malformedUnlogged = 0 }
            return s.malformedUnlogged
        }
        guard let skipped else { return }
        var metadata: Logger.Metadata = ["topic": "\(message.topic)", "reason": "\(message.reason)"]
        if skipped > 0 { metadata["unloggedSinceLast"] = "\(skipped)" }
        logger.warning("ignored an unreadable message", metadata: metadata)
    }

    func tick() {
        // A greeter card held through a drop-out goes when its hold is over.
        let expired = state.withLock { $0.fleet.expireCards(at: WallClock.now()) }
        if !expired.isEmpty { updates.publish(expired) }
        state.withLock { s in
            guard s.connected, let connectedAt = s.connectedAt else { return }
            let now = ContinuousClock.now
            if !s.settled {
                let quiet = now - (s.lastRetained ?? connectedAt) >= .seconds(options.settleQuiet)
                guard quiet || now - connectedAt >= .seconds(options.settleLimit) else { return }
                s.settled = true
                s.discoveryDirty = true
                logger.info("retained state read", metadata: ["gateways": "\(s.fleet.gateways.count)",
                                                              "beacons": "\(s.fleet.presence.count)"])
            }
            guard s.discoveryDirty else { return }
            s.discoveryDirty = false
            let wanted = HomeAssistantDiscovery.messages(for: s.fleet, version: Self.version)
            for (topic, payload) in s.ledger.reconcile(wanted) {
                do {
                    try client.publish(MQTTMessage(topic: topic, text: payload, qos: 1, retain: true))
                    s.published += 1
                } catch {
                    logger.warning("cannot publish a Home Assistant discovery message", metadata: ["topic": "\(topic)", "error": "\(error)"])
                }
            }
        }
    }
}

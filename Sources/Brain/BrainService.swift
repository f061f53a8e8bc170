import BeaconKit
import Contract
public import Config
public import BrainCore
public import Logging
public import MQTT
public import ServiceLifecycle
import Synchronization
import CoreHost
public import LiveClock
import SystemCalls

/// The brain process: one MQTT connection, one `BrainCore`, its timers; run as a `Service`
/// so SIGTERM/SIGINT end it in order: `offline` on `brain/status`, then disconnect.
///
/// Every input (a message, a connection change, a timer) is handled to completion under
/// the lock of its `CoreHost`, and what it produces is published inside it, so messages
/// leave in the order the core decided. Messages are handled in arrival order, except that those of
/// observers the brain does not know wait behind the rest (`InboundLanes`): a flood of
/// joins from made-up names does not hold up a registry owner's join.
///
/// On its first connection the core rebuilds its state from the retained messages (no
/// database; docs/brain.md, "Start-up and recovery"): after subscribing, the brain publishes a marker to `brain/sync/<client id>`;
/// when it comes back, the broker has delivered every retained message of the earlier
/// subscriptions and the core settles. Should the marker not come back (an ACL forbids it),
/// the brain settles after `settleQuiet` seconds without a retained message, and at the
/// latest after `settleLimit`.
///
/// After a lost connection the core keeps its state and reads the retained state back the
/// same way (`BrainCore.reconnect`), so nothing it answered is answered again and nothing
/// that ended during the outage goes unanswered. What the core decides while the connection
/// is down waits in the host's outbox (`CoreHost.OutagePolicy.outbox`, the gateway's policy:
/// retained state latest per topic, the rest bounded by `outageQueueLimit`) and goes out
/// first on reconnect.
public final class BrainService: Service, Sendable {
    public static let version = "0.1.0"

    public struct Options: Sendable {
        public var clientID: String
        /// Seconds without a retained message after which the brain settles anyway.
        public var settleQuiet: Double = 1
        /// Seconds after connecting after which the brain settles at the latest.
        public var settleLimit: Double = 10
        /// Seconds between `brain/health` messages.
        public var healthInterval: Double = 30
        /// Called with each health payload as it is published (the metrics endpoint).
        public var onHealth: (@Sendable (String) -> Void)?
        /// Seconds between timer ticks (expiring views and cooldowns).
        public var tickInterval: Double = 0.2
        public var limits = BrainCore.Limits()
        /// Seconds between reconnection attempts (doubling from the lower bound).
        public var reconnectDelay: ClosedRange<Double> = 1...30
        /// Wills held back and what must be seen again after a reconnect (docs/brain.md).
        public var recovery = ConnectionRecovery.Settings()
        /// Messages that are not retained (replies, events) decided while disconnected and kept
        /// for the reconnect; the oldest go first when it is full (counted in
        /// `publishFailures`). Retained state is kept latest per topic, whatever this says.
        public var outageQueueLimit = 10_000
        /// Standing in for another shard's brain (`ShardSupervisor`): no `online`/`offline` on
        /// `brain/status` (nor a will) and no service-manager notifications, which belong to
        /// the process's own brain.
        public var isStandIn = false
        /// The key that seals the brain's records (`RecordSeal`); `nil`: unsealed.
        public var recordKey: [UInt8]?
        /// The stores' proof-of-presence secrets by file (`BrainCore.proofSecrets`).
        public var proofSecrets: [String: [UInt8]] = [:]
        /// The deferred lane (`InboundLanes`: observers the brain does not know) waits while
        /// more of the brain's messages than this await the broker's acknowledgement, for at
        /// most 0.1 s at a time: an answer from the first lane then never queues behind
        /// thousands of replies to a flood in libmosquitto's queue.
        public var deferredUnacknowledgedLimit = 100
        /// Where the brain reads the time (`ServiceClock`): the system's clocks, or in tests
        /// a `ManualClock` that moves only when the test says so.
        public var clock: any ServiceClock = SystemClock()
        /// `MQTTClientOptions.roundSpacing`: while the stores' gateway traffic keeps coming
        /// (`gathers`), the network thread reads it this many seconds' worth at a time and the
        /// brain handles each batch in one wake-up, where it took one a message (and one per
        /// acknowledgement of its own publishes): a quarter of the context switches at 20
        /// stores (docs/PERFORMANCE.md section 11, "Fewer wake-ups"). A round with anything
        /// else (an observer's join, whose sender waits for the answer) does not pause, nor
        /// does one after a quiet spell. 0: a round a packet.
        public var roundSpacing: Double = 0.002

        public init(clientID: String) { self.clientID = clientID }
    }

    /// What the brain keeps under its host's lock: the core and the state of its wiring.
    struct State {
        var brain: BrainCore
        /// The retained state of this connection has been read (the sync marker came back).
        var synced = false
        /// Monotonic seconds (`ServiceClock.monotonic()`).
        var connectedAt: Double?
        var lastRetained: Double?
        var syncToken = ""
        var subscribed: [String] = []
        /// Messages received at the last memory check.
        var receivedAtCheck = 0
        var burstSince = 0
        /// Messages and connection changes waiting to be handled (`InboundLanes`).
        var lanes = InboundLanes<Arrival>(limit: MQTTClient.eventBufferLimit)
        /// Events the lanes had no room for.
        var droppedEvents = 0
        /// Whether messages were sorted since the network thread's last round ended: of the
        /// stores' gateway traffic (`gathers`), and of the rest.
        var sortedStream = false
        var sortedOther = false
        /// What the last round with messages said (`gathers`), kept through rounds of
        /// acknowledgements alone.
        var gathering = false
    }

    typealias Hosted = HostState<State>

    /// An event waiting in the lanes, with its message's topic as parsed to sort it (`nil`
    /// for a connection change, the sync marker, or a topic not of the contract): the topic
    /// is parsed once, not again when the brain reads the message.
    struct Arrival: Sendable {
        var event: MQTTEvent
        var kind: Topics.Kind?
    }

    let client: MQTTClient
    let host: CoreHost<State>
    /// Events from the network thread not yet sorted into the lanes.
    let arrivals = Mutex<[MQTTEvent]>([])
    /// Held by whoever handles what waits, one at a time, in lane order: the network thread
    /// while it has no backlog (`networkRoundEnded`), else the drain task (`drain`). Its
    /// value is the handler's scratch buffer for the arrivals it sorts.
    let handling = Mutex<[MQTTEvent]>([])
    /// Set once the service is stopping: the network thread handles nothing more itself.
    let stopping = Atomic<Bool>(false)
    let logger: Logger
    let options: Options
    let topics: Topics
    /// The client id as a topic level.
    let clientSegment: String
    /// Where the settle marker goes (`brain/sync/<client id>`).
    let syncTopic: String
    /// The QoS of the brain's subscriptions: 1, or 0 at a NATS centre. There a QoS 1
    /// subscription is a JetStream consumer, which nats-server 2.9 deletes and creates again
    /// through JetStream's leaders when the brain moves to another node after its node died:
    /// while they are elected again (4-10 s) it holds the CONNECT and refuses subscriptions,
    /// and the brain missed 10 s of reports. A QoS 0 subscription is NATS routing, taken at
    /// once. The brain's session is clean, so QoS 1 kept nothing for it across a move anyway
    /// (docs/fleet.md, NATSNodeFaultTests).
    let subscriptionQoS: Int
    let started: Double
    /// Where the brain reads the time (`Options.clock`).
    var clock: any ServiceClock { host.clock }

    /// The time `BrainCore` is handed: the brain's wall clock as capture time. The core's
    /// present is on the capture timeline, where it compares arrivals and its timers with
    /// the evidence; live, the gateways date their captures by their wall clocks, so the
    /// brain's stands for them. The one place the brain's service converts: its health is
    /// dated by the brain's own clock unconverted, and the one timer of the core that is the
    /// brain's time passing rather than capture time (how long a late gateway holds decisions
    /// back) is handed back as `WallTime` by `BrainCore.runningClock`.
    var coreNow: CaptureTime { clock.now().asCaptureTime() }

    /// The client id a brain uses by default: `beacon-brain`, with its stores appended so
    /// that brains splitting a fleet do not take over each other's connection.
    public static func defaultClientID(stores: Set<UInt16>) -> String {
        BrokerIdentity.brainClientID(stores: stores)
    }

    /// The client id as one topic level (for `brain/sync/…` and `brain/health/…`): what a
    /// level may not hold (`+`, `#`, `/`, control characters, a leading `$`) becomes `_`.
    static func topicSegment(clientID: String) -> String {
        var segment = ""
        for scalar in clientID.unicodeScalars {
            segment.unicodeScalars.append("+#/".unicodeScalars.contains(scalar) || scalar.value < 0x20 ? "_" : scalar)
        }
        if segment.isEmpty || segment.hasPrefix("$") { segment = "_" + segment }
        return segment
    }

    public init(config: FleetConfig, stores: Set<UInt16> = [], password: String?, logger: Logger,
                options: Options? = nil) throws(MQTTError) {
        let options = options ?? Options(clientID: Self.defaultClientID(stores: stores))
        self.options = options
        self.logger = logger
        started = options.clock.monotonic()
        var core = BrainCore(config: config, stores: stores, limits: options.limits)
        core.recovery.settings = options.recovery
        core.recordSeal = RecordSeal(key: options.recordKey)
        core.proofSecrets = options.proofSecrets
        topics = core.topics
        clientSegment = Self.topicSegment(clientID: options.clientID)
        syncTopic = core.topics.brainSync(clientSegment)
        subscriptionQoS = config.centre.kind == .nats ? 0 : 1
        var mqtt = MQTTClientOptions(config.broker, identity: BrokerIdentity.brain, clientID: options.clientID,
                                     password: password)
        mqtt.reconnectDelay = options.reconnectDelay
        // At a NATS centre its retained state (presence, visits, rosters) goes out at QoS 0:
        // nats-server 2.9 acknowledges a retained QoS 1 publish only once JetStream has stored
        // it on the replicas, one at a time per connection, and at 20 bridged stores the
        // brain's queued behind each other for 8-33 s (docs/fleet.md). The node stores a QoS 0
        // one alike; one lost with a dying connection is written again when the brain reads
        // the retained state back after reconnecting (`RetainedMirror`).
        if config.centre.kind == .nats { mqtt.retainedQoS = 0 }
        if !options.isStandIn { mqtt.will = core.offlineMessage }
        mqtt.roundSpacing = options.roundSpacing
        client = try MQTTClient(mqtt)
        host = CoreHost(State(brain: core), client: client, logger: logger, clock: options.clock,
                        outage: .outbox(limit: options.outageQueueLimit))
    }

    public func run() async throws {
        let filters = host.withLock { h in
            h.core.subscribed = wantedSubscriptions(h.core)
            return h.core.subscribed
        }
        try client.subscribe(filters, qos: subscriptionQoS)
        // The network thread keeps what it reads in `arrivals` and handles it itself while
        // it has no backlog; otherwise it rings the drain task (`networkRoundEnded`).
        let (bell, ring) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        try client.start(deliveringTo: EventSink(
            receive: { event in self.arrivals.withLock { $0.append(event) } },
            roundEnded: { moreWaiting in self.networkRoundEnded(moreWaiting: moreWaiting, ring: ring) }))
        let (broker, stores) = host.withLock { h in (h.core.brain.config.broker.url, h.core.brain.stores.sorted()) }
        logger.info("brain starting", metadata: [
            "broker": "\(broker)", "client": "\(options.clientID)", "stores": "\(stores)",
        ])

        let notifier = options.isStandIn ? nil : ServiceNotifier.fromEnvironment()
        notify(notifier, [.ready, .status("starting: broker \(broker)")])
        let ticks = Heartbeat()

        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                // What the network thread leaves to a task, sorted into lanes; the brain takes
                // it one at a time, the first lane first (`InboundLanes`).
                group.addTask {
                    for await _ in bell { await self.drain() }
                }
                group.addTask { await self.host.runTimers(self.timers, heartbeat: ticks) }
                if let notifier {
                    let watchdog = ServiceWatchdog(notifier: notifier, loops: [
                        .init("mqtt") { self.client.heartbeat.lastRound },
                        .init("core") { ticks.lastRound },
                    ])
                    group.addTask {
                        await watchdog.run(status: { self.serviceStatus() }, failed: { error in
                            self.logger.warning("cannot notify the service manager", metadata: ["error": "\(error)"])
                        })
                    }
                }
                await group.waitForAll()
            }
        }

        stopping.store(true, ordering: .sequentiallyConsistent)
        handling.withLock { _ in }  // the network thread's last round of handling is over
        notify(notifier, [.stopping, .status("stopping")])
        logger.info("brain stopping")
        if !options.isStandIn { host.withLock { h in host.publish([h.core.brain.offlineMessage], in: &h) } }
        if !(await client.waitUntilPublished(timeout: 3)) {
            logger.warning("the broker did not acknowledge the last messages in time")
        }
        await client.stop(timeout: 2)
        logger.info("brain stopped")
    }

    /// One line for `systemctl status`: connection, settled, beacons, joins.
    func serviceStatus() -> String {
        let s = statistics
        return "broker \(s.connected ? "connected" : "not connected")\(s.settled ? "" : ", reading the retained state"); "
            + "\(s.beacons) beacons, \(s.joins) joins, \(s.published) messages published"
    }

    func notify(_ notifier: ServiceNotifier?, _ fields: [ServiceNotifier.Field]) {
        do {
            try notifier?.send(fields)
        } catch {
            logger.warning("cannot notify the service manager", metadata: ["error": "\(error)"])
        }
    }

    // MARK: - Inputs

    /// After the network thread's round (`EventSink.roundEnded`): what it read is handled
    /// at once, on that thread, unless the socket holds more (a backlog: the thread keeps
    /// reading, so the lanes can put a known observer's join before a flood's) or the drain
    /// task is at work; then the drain task is rung. Handling on the network thread saves
    /// the two thread wake-ups per message that handing it to a task costs, and the replies
    /// go out in the same round (docs/PERFORMANCE.md, section 11).
    ///
    /// Returns whether the next messages may gather before the thread reads again
    /// (`Options.roundSpacing`): when this round handled the stores' gateway traffic and
    /// nothing else (`gathers`); a round of acknowledgements alone keeps what the last round
    /// with messages said.
    private func networkRoundEnded(moreWaiting: Bool, ring: AsyncStream<Void>.Continuation) -> Bool {
        guard !stopping.load(ordering: .relaxed) else { return false }
        guard arrivals.withLock({ !$0.isEmpty }) else { return host.withLock { $0.core.gathering } }
        if !moreWaiting {
            let held = client.unacknowledged > options.deferredUnacknowledgedLimit
            // A bounded turn: the thread reads nothing meanwhile.
            let done = handling.withLockIfAvailable { scratch in
                for _ in 0..<64 {
                    switch handleNext(held: held, scratch: &scratch) {
                    case .handled: continue
                    case .empty: return true
                    case .waiting: return false
                    }
                }
                return false
            }
            if done == true {
                return host.withLock { h in
                    if h.core.sortedStream || h.core.sortedOther {
                        h.core.gathering = h.core.sortedStream && !h.core.sortedOther
                    }
                    (h.core.sortedStream, h.core.sortedOther) = (false, false)
                    return h.core.gathering
                }
            }
        }
        ring.yield()
        return false
    }

    /// What the stores send all the time and nobody waits on an answer to: RSSI reports,
    /// sightings, gateway presence, statuses, health and events. A round of it alone lets the
    /// next gather (`Options.roundSpacing`).
    static func gathers(_ kind: Topics.Kind?) -> Bool {
        switch kind {
        case .gatewayRSSI?, .gatewayStatus?, .gatewayHealth?, .gatewayEvents?,
             .beacon(_, .sighting)?, .beacon(_, .gatewayPresence)?: true
        default: false
        }
    }

    /// Handles what has arrived until nothing waits, one message a round, so a join of a
    /// known observer that comes during a flood is handled next (after the message in hand).
    /// The deferred lane also waits for the broker to take what the brain has published
    /// (`deferredUnacknowledgedLimit`), at most 0.1 s at a time.
    func drain() async {
        var rounds = 0
        var heldSince: Double?
        while true {
            let now = WallClock.monotonic()  // pacing the network, not a decision: the system clock
            let held = client.unacknowledged > options.deferredUnacknowledgedLimit && now - (heldSince ?? now) < 0.1
            if !held { heldSince = nil }
            switch handling.withLock({ handleNext(held: held, scratch: &$0) }) {
            case .empty:
                return
            case .waiting:
                guard !Task.isCancelled else { return }
                heldSince = heldSince ?? now
                try? await Task.sleep(for: .milliseconds(1))
            case .handled:
                rounds += 1
                // A long flood leaves the timer and the watchdog their turn.
                if rounds % 256 == 0 { await Task.yield() }
            }
        }
    }

    private enum Round { case handled, waiting, empty }

    /// One round (under `handling`): sorts the new arrivals into the lanes and handles the
    /// next message; `.waiting` when only held messages wait, `.empty` when nothing does.
    private func handleNext(held: Bool, scratch: inout [MQTTEvent]) -> Round {
        arrivals.withLock { swap(&$0, &scratch) }
        let (event, waiting): (Arrival?, Bool) = host.withLock { h in
            for event in scratch { sort(event, into: &h.core) }
            let event = h.core.lanes.next(takingDeferred: !held)
            return (event, h.core.lanes.count > 0)
        }
        scratch.removeAll(keepingCapacity: true)
        guard let event else { return waiting ? .waiting : .empty }
        handle(event)
        return .handled
    }

    /// Puts an event in its lane (`BrainCore.lane(of:payloadIsEmpty:)`): connection changes
    /// and the sync marker are barriers, so they keep their place among everything else.
    private func sort(_ event: MQTTEvent, into s: inout State) {
        var (lane, observer): (InboundLane, String?) = (.barrier, nil)
        var kind: Topics.Kind?
        if case .message(let message) = event, message.topic != syncTopic {
            kind = s.brain.topics.parse(message.topic)
            (lane, observer) = s.brain.lane(of: kind, payloadIsEmpty: message.payload.isEmpty)
            // Reading the retained state back after a reconnect: nothing waits.
            if !s.synced { lane = .first }
        }
        if Self.gathers(kind) { s.sortedStream = true } else { s.sortedOther = true }
        if !s.lanes.push(Arrival(event: event, kind: kind), lane: lane, observer: observer) { s.droppedEvents += 1 }
    }

    func handle(_ arrival: Arrival) {
        switch arrival.event {
        case .connected:
            host.withLock { h in
                h.core.synced = false
                h.core.connectedAt = clock.monotonic()
                h.core.lastRetained = nil
                // What was decided during the outage first, in its order.
                host.connected(&h)
                h.core.syncToken = "\(h.connections)-\(clock.now().nanoseconds)"
                if h.connections > 1 {
                    // Our own retained topics again, for the read-back (before the marker).
                    h.core.subscribed = wantedSubscriptions(h.core)
                    do { try client.subscribe(h.core.brain.readBackSubscriptions, qos: subscriptionQoS) } catch {
                        logger.error("could not subscribe to the brain's own topics", metadata: ["error": "\(error)"])
                    }
                    emit(&h, h.core.brain.reconnect(at: coreNow))
                }
                host.publish((options.isStandIn ? [] : [h.core.brain.onlineMessage])
                             + [MQTTMessage(topic: syncTopic, text: h.core.syncToken, qos: 1, retain: false)], in: &h)
            }
            logger.info("connected; reading the retained state")
        case .disconnected(let reason):
            let was = host.withLock { h in
                defer { host.disconnected(&h) }
                if h.isConnected { h.core.brain.connectionLost() }
                return h.isConnected
            }
            if was { logger.warning("broker connection lost; reconnecting", metadata: ["reason": "\(reason)"]) }
            else { logger.notice("cannot reach the broker; retrying", metadata: ["reason": "\(reason)"]) }
        case .message(let message):
            host.withLock { h in
                if message.topic == syncTopic {
                    if message.text == h.core.syncToken { settle(&h) }
                    return
                }
                if message.retain { h.core.lastRetained = clock.monotonic() }
                let output = h.core.brain.receive(topic: message.topic, kind: arrival.kind, payload: message.payload,
                                                  retained: message.retain, at: coreNow)
                emit(&h, output)
            }
        }
    }

    // MARK: - Timers (run by the host, under its lock, on `Options.clock`)

    var timers: [CoreHost<State>.Timer] {
        [
            // Settling without the marker; expiring views and cooldowns.
            .init("tick", every: options.tickInterval) { h, now in self.tick(&h, now: now) },
            .init("memory", every: 2) { h, _ in self.returnMemoryAfterABurst(&h) },
            // Due at once when the brain settles (`settle`).
            .init("health", every: options.healthInterval, firstAfter: .infinity) { h, now in self.health(&h, now: now) },
        ]
    }

    private func tick(_ h: inout Hosted, now: Double) {
        guard h.isConnected, let connectedAt = h.core.connectedAt else { return }
        if !h.core.synced {
            let quiet = now - (h.core.lastRetained ?? connectedAt) >= options.settleQuiet
            if quiet || now - connectedAt >= options.settleLimit {
                logger.notice("settling without the sync marker", metadata: ["quiet": "\(quiet)"])
                settle(&h)
            }
            return
        }
        emit(&h, h.core.brain.advance(to: coreNow))
    }

    private func health(_ h: inout Hosted, now: Double) {
        guard h.isConnected, h.core.synced else { return }
        let health = h.core.brain.health(client: clientSegment, version: Self.version, uptime: now - started,
                                        published: h.published, publishFailures: h.refused + h.outboxDropped,
                                        at: clock.now())
        host.publish([health], in: &h)
        options.onHealth?(health.text)
    }

    /// Once a burst (a join flood: thousands of messages) is over, what it allocated and the
    /// brain has freed goes back to the system: checked every 2 s, trimmed when at least
    /// `5,000` messages came since the last trim and fewer than 100 in the last 2 s.
    private func returnMemoryAfterABurst(_ h: inout Hosted) {
        guard h.isConnected, h.core.synced else { return }
        let received = h.core.brain.counters.received
        let recent = received - h.core.receivedAtCheck
        h.core.receivedAtCheck = received
        h.core.burstSince += recent
        guard h.core.burstSince >= 5_000, recent < 100 else { return }
        h.core.burstSince = 0
        Memory.returnFreeMemory()
    }

    // MARK: - Inside the lock

    private func settle(_ h: inout Hosted) {
        guard !h.core.synced else { return }
        h.core.synced = true
        emit(&h, h.core.brain.settle(at: coreNow))
        h.schedule("health", at: clock.monotonic())
        // Settled: the brain is the authority on its own topics and needs no echo of them.
        let readBack = h.core.brain.readBackSubscriptions
        h.core.subscribed = wantedSubscriptions(h.core)
        do { try client.unsubscribe(readBack) } catch {
            logger.warning("could not unsubscribe from the brain's own topics", metadata: ["error": "\(error)"])
        }
    }

    private func emit(_ h: inout Hosted, _ output: BrainOutput) {
        host.emit(log: output.log, messages: output.messages, in: &h)
        if output.subscriptionsChanged { resubscribe(&h.core) }
    }

    /// What the brain listens to: everything while reading the retained state back, then
    /// only what others publish (and its sync marker).
    private func wantedSubscriptions(_ s: State) -> [String] {
        s.brain.liveSubscriptions + [syncTopic] + (s.synced ? [] : s.brain.readBackSubscriptions)
    }

    private func resubscribe(_ s: inout State) {
        let wanted = wantedSubscriptions(s)
        let gone = s.subscribed.filter { !wanted.contains($0) }
        let new = wanted.filter { !s.subscribed.contains($0) }
        s.subscribed = wanted
        do {
            if !gone.isEmpty { try client.unsubscribe(gone) }
            if !new.isEmpty { try client.subscribe(new, qos: subscriptionQoS) }
            logger.info("subscriptions follow the new config", metadata: ["added": "\(new)", "removed": "\(gone)"])
        } catch {
            logger.error("could not change subscriptions", metadata: ["error": "\(error)"])
        }
    }
}

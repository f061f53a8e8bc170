public import BeaconKit
public import Contract
public import Config
import Tracking

/// What one input led to.
public struct BrainOutput: Sendable, Equatable {
    /// To publish, in this order.
    public var messages: [MQTTMessage] = []
    public var log: [LogEntry] = []
    /// `BrainCore.subscriptions` changed (a new config moved beacons between stores).
    public var subscriptionsChanged = false

    public init() {}
}

/// What the brain counts. Every input that is dropped is counted here, once.
public struct BrainCounters: Sendable, Equatable {
    /// The kind of input, by topic.
    public enum Input: String, Sendable, CaseIterable, Comparable {
        case rssiReport, gatewayPresence, gatewayStatus, join, observerStatus, fleetConfig
        case fleetPresence, ad, roster, record, bridgeStatus, telemetry

        public static func < (lhs: Input, rhs: Input) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Messages received.
    public var received = 0
    /// Payloads over the size limit, dropped before parsing.
    public var oversized = 0
    /// Payloads that were not valid JSON, not the documented shape, or contradicted their topic.
    public var malformed: [Input: Int] = [:]
    /// Topics outside the contract.
    public var unknownTopics = 0
    /// Messages about beacons of stores this brain does not handle (`--stores`).
    public var foreign = 0
    public var joinsAccepted = 0
    /// Joins answered with an error (oversized, malformed or over the client's rate; the
    /// first two also counted above).
    public var joinsRejected = 0
    /// Joins refused because their client made too many (`BrainCore.Limits.joinBurst`).
    public var joinsThrottled = 0
    public var leaves = 0
    public var rulesFired = 0
    /// Actions a rule could not carry out: no ad or location for the beacon, a rendered
    /// topic that is not a valid topic.
    public var actionsSkipped = 0
    public var inboxMessages = 0
    public var configsApplied = 0
    public var configsRejected = 0

    public init() {}

    /// Every input dropped as bad.
    public var rejected: Int { oversized + malformed.values.reduce(0, +) }
}

/// The brain: fleet presence, observers, rules, roster and the records that let a
/// restarted brain carry on, as one value fed with MQTT messages and time.
///
/// Life cycle per broker connection: `receive` every message of the subscriptions (the
/// retained ones arrive first), then `settle` once the retained messages are in. Until then
/// the core only collects state (and answers nothing), because a retained join may arrive
/// before the record saying it was answered. `settle` reconciles: visits and joins that
/// the records show as answered carry on silently; the ones begun while no brain ran are
/// answered now; the ones ended meanwhile are closed. After that every input is handled as
/// it comes, and `advance` lets time pass. Pure: no I/O, no clock.
///
/// The value is composed of parts that stand alone (`BeaconDirectory`, `RetainedMirror`,
/// `FleetPresence`, `ObserverRegistry`, `RuleEngine`, `RosterBook`, `ConnectionRecovery`, …);
/// what ties them together is split by concern into extensions, one file each:
/// `BrainCore+Settling` (read-back and reconciling), `+Routing` (each topic to its part),
/// `+Presence` (fleet events, outages, bridges, calibration, beacon health), `+Observers`,
/// `+Rules` and `+Output` (what is written, and when). The state below is internal rather
/// than private so those files can reach it; nothing outside the module can.
public struct BrainCore: Sendable {
    /// Bounds on untrusted input.
    public struct Limits: Sendable, Equatable {
        /// Largest payload parsed, bytes; larger ones are counted and dropped.
        public var maxPayload: Int
        /// Largest fleet config accepted from `fleet/config`, bytes.
        public var maxConfigPayload: Int
        /// Deepest JSON nesting accepted (fleet config excepted).
        public var maxDepth: Int
        /// Customers listed in a `stores/<store>/roster` summary (the latest arrivals).
        public var rosterLimit = 50
        /// Seconds between two summaries of one store's roster: the first change after a
        /// quiet spell goes out at once, later ones are folded into one at the end.
        public var rosterInterval = 1.0
        /// Joins (new ones or changed profiles) one client may make at once…
        public var joinBurst = 10
        /// …and seconds after which it may make one more (0: no limit).
        public var joinInterval = 6.0
        /// Rejected inputs reported one by one on `brain/events` per second; the rest are
        /// counted in a summary.
        public var eventsPerSecond = 20

        public init(maxPayload: Int = 64 * 1024, maxConfigPayload: Int = 4 * 1024 * 1024, maxDepth: Int = 8) {
            self.maxPayload = maxPayload
            self.maxConfigPayload = maxConfigPayload
            self.maxDepth = maxDepth
        }
    }

    public internal(set) var config: FleetConfig
    /// The stores (majors) this brain handles; empty for all.
    public var stores: Set<UInt16> { directory.stores }
    public let limits: Limits
    public let topics: Topics
    public internal(set) var presence: FleetPresence
    /// Whether a hole in a gateway's live reports is asked for again before it is decided as
    /// a gap (`FleetPresence.Settings.asksAgainForHoles`): the live brain's gateways answer
    /// (`GatewayEngine.brainReady(resendingAfter:)`). Off for a caller whose gateways cannot
    /// (the unit tests' shorthand reports, which leave holes on purpose).
    public var asksForLostReports: Bool {
        get { presence.settings.asksAgainForHoles }
        set { presence.settings.asksAgainForHoles = newValue }
    }
    /// The gateways' RSSI offsets learned from reference transmitters (`brain.calibration`).
    public internal(set) var calibrator: Calibrator
    public internal(set) var observers = ObserverRegistry()
    public internal(set) var rules: RuleEngine
    public var counters = BrainCounters()
    public internal(set) var isSettled = false
    /// The bridges of stores with a broker of their own: which stores' presence is on hold.
    public internal(set) var bridges = StoreBridges()
    /// What must be seen again after a reconnect, and wills held back (see `ConnectionRecovery`).
    public var recovery = ConnectionRecovery()
    /// Reading the retained state back after a reconnect (`reconnect`), until `settle`.
    public var isReadingBack: Bool { recovery.isReadingBack }
    /// Retained messages of the brain's own topics only tell what the broker holds.
    var readingBack: Bool { !isSettled || recovery.isReadingBack }

    /// The config's beacons, stores and gateways, indexed.
    public internal(set) var directory: BeaconDirectory
    /// The seal on the brain's records: only sealed ones are trusted (`RecordSeal`).
    public var recordSeal = RecordSeal()
    /// Who may join which beacon (`brain.joins`).
    var joinPolicy: JoinPolicy
    /// The stores' proof-of-presence secrets by `stores[].proof.secretFile`, read where the
    /// brain runs (the core reads no files). A store whose file is missing here proves
    /// nothing: its joins are decided as `owned-or-near` decides them.
    public var proofSecrets: [String: [UInt8]] = [:] {
        didSet { joinPolicy.proofs = Self.proofs(config, proofSecrets) }
    }
    /// When joins past `brain.joinMaxAge` are next looked for.
    var nextAgeCheck = CaptureTime.epoch
    /// Visits whose views were missing at settling while their store was unknown: decided
    /// when the store is back (a view coming back continues the visit).
    var heldVisits: [BeaconRef: VisitRecord] = [:]
    /// Tells retained gateway presence of visits that ended (`StalePresence`).
    var stalePresence = StalePresence()
    /// Last seen and battery of the registry's beacons (`brain/beacons/<beacon>`).
    public internal(set) var beaconHealth = BeaconHealth()
    /// When the registry's beacons are next checked for `beaconHealth`.
    var nextHealthCheck = CaptureTime.epoch
    /// Telemetry read while settling, applied once the health records are in.
    var pendingTelemetry: [BeaconRef: Int?] = [:]
    /// Seconds between two checks of the registry's beacons.
    static let healthCheckInterval = 10.0

    // Collected while settling.
    var visitRecords: [BeaconRef: VisitRecord] = [:]
    var answeredRecords: [ObserverJoin.Key: AnsweredRecord] = [:]
    var retainedPresence: [BeaconRef: FleetPresenceReport] = [:]
    var pendingJoins: [ObserverJoin.Key: (request: JoinRequest, fingerprint: String)] = [:]
    var pendingErrors: [ObserverJoin.Key: String] = [:]
    var offlineObservers: Set<String> = []

    /// What the broker holds on the brain's own retained topics (`RetainedMirror`).
    var known = RetainedMirror()
    /// Scopes whose visit or join ended while a cooldown in seconds still runs.
    var lingering: Set<RuleEngine.Scope> = []
    var dirtyPresence: Set<BeaconRef> = []
    /// Each beacon's presence signature, encoded again only when it changed.
    var presenceSignatures = PresenceSignatures()
    var dirtyVisits: Set<BeaconRef> = []
    var dirtyJoins: Set<ObserverJoin.Key> = []
    var dirtyStores: Set<UInt16> = []
    /// Clients whose entry in a store's roster may have changed.
    var dirtyCustomers: Set<RosterBook.Key> = []
    public internal(set) var rosterBook = RosterBook()
    /// Customers on the rosters of stores driven by proximity (`stores[].roster`).
    public internal(set) var proximityRoster = ProximityRoster()
    /// Customer entries found on the broker while settling: proximity visits carry on.
    var retainedCustomers: [RosterBook.Key: Roster.Customer] = [:]
    /// When each store's next roster summary may go out.
    var rosterDue: [UInt16: CaptureTime] = [:]
    var joinLimiter: JoinRateLimiter
    var rejections: RejectionReports
    /// The size of the input being handled, for reports.
    var inputBytes = 0
    var out = BrainOutput()
    /// The latest time seen, for the rosters' `ts`.
    var lastTime = CaptureTime.epoch

    public init(config: FleetConfig, stores: Set<UInt16> = [], limits: Limits = .init()) {
        self.config = config
        self.limits = limits
        topics = config.topics
        presence = FleetPresence(settings: Self.presenceSettings(config, asking: true))
        presence.zoneNames = Self.zoneNames(config)
        calibrator = Calibrator(config: config, stores: stores)
        rules = RuleEngine(rules: config.rules)
        joinLimiter = JoinRateLimiter(burst: limits.joinBurst, interval: limits.joinInterval)
        rejections = RejectionReports(perSecond: limits.eventsPerSecond)
        joinPolicy = JoinPolicy(config: config)
        directory = BeaconDirectory(config: config, stores: stores)
        proximityRoster.configure(config)
        bridges.configure(bridgedStores(config))
    }

    // MARK: - Queries

    /// The registry entry of a beacon (`BeaconDirectory.entry`).
    public func entry(_ ref: BeaconRef, uuid: BeaconUUID? = nil) -> BeaconEntry? { directory.entry(ref, uuid: uuid) }

    /// The store (a major) a beacon belongs to (`BeaconDirectory.store(of:)`).
    public func store(of ref: BeaconRef) -> UInt16? { directory.store(of: ref) }

    /// Whether this brain handles the beacon (`--stores`).
    public func owns(_ ref: BeaconRef) -> Bool { directory.owns(ref) }

    /// The beacon's standing offer (`BeaconDirectory.ad(of:)`).
    public func ad(of ref: BeaconRef) -> JSONValue? { directory.ad(of: ref) }

    /// The majors whose topics this brain needs; `nil` for every major.
    public var majors: [UInt16]? { directory.majors }

    /// The Eddystone beacons whose topics this brain needs; `nil` for every one.
    public var eddystoneBeacons: [BeaconRef]? { directory.eddystoneBeacons }

    /// The Eddystone beacons the subscriptions name; `[nil]` for every one.
    var eddystoneLevels: [BeaconRef?] { eddystoneBeacons.map { $0 as [BeaconRef?] } ?? [nil] }

    /// The topic filters to subscribe to.
    public var subscriptions: [String] { liveSubscriptions + readBackSubscriptions }

    /// The filters of what others publish: gateways, observers, config (and bridges).
    public var liveSubscriptions: [String] {
        // Gateways' RSSI reports name the gateway in the topic (an ACL pins it to the
        // gateway's user) and carry every store's beacons: a brain of some stores takes its
        // own from them. The brain reads no sightings (beacons/<major>/<minor>): their gateway
        // is only in the payload, which anyone allowed to publish sightings could forge.
        var filters = [topics.fleetConfig, topics.gatewayStatusFilter, topics.gatewayRSSIFilter, topics.observerStatusFilter]
        for major in majorLevels { filters += topics.beaconFilters(ofStore: major) }
        for beacon in eddystoneLevels { filters += topics.eddystoneFilters(of: beacon) }
        if !config.bridgedStores.isEmpty {
            filters += stores.isEmpty ? [topics.bridgeStatusFilter(ofStore: nil)]
                : config.bridgedStores.map(\.major).filter(stores.contains).sorted().map(topics.bridgeStatusFilter(ofStore:))
        }
        return filters
    }

    /// The filters of the brain's own retained topics (records, fleet presence, ads, rosters,
    /// customers): needed only while the retained state is read back, at start and after a
    /// reconnect. A settled brain unsubscribes from them, so it does not receive the echo of
    /// everything it writes (half of its input in a join flood).
    public var readBackSubscriptions: [String] {
        var filters: [String] = []
        for major in majorLevels { filters += topics.brainRecordFilters(ofStore: major) }
        for beacon in eddystoneLevels { filters += topics.eddystoneRecordFilters(of: beacon) }
        if stores.isEmpty {
            filters += [topics.rosterFilter(ofStore: nil), topics.customersFilter(ofStore: nil)]
        } else {
            for store in stores.sorted() { filters += [topics.rosterFilter(ofStore: store), topics.customersFilter(ofStore: store)] }
        }
        filters.append(topics.calibrationFilter)
        return filters
    }

    /// The majors the subscriptions name; `nil` for every major.
    var majorLevels: [UInt16?] { majors.map { $0 as [UInt16?] } ?? [nil] }

    /// `brain/status` `online`, retained; the will says `offline`.
    public var onlineMessage: MQTTMessage { MQTTMessage(topic: topics.brainStatus, text: "online", qos: 1, retain: true) }
    public var offlineMessage: MQTTMessage { MQTTMessage(topic: topics.brainStatus, text: "offline", qos: 1, retain: true) }

    /// `brain/health/<client>` (retained): `BrainHealth`, dated by the brain's own clock.
    public func health(client: String, version: String, uptime: Double, published: Int, publishFailures: Int,
                       at now: WallTime) -> MQTTMessage {
        let c = counters
        var health = BrainHealth()
        health.version = version
        health.uptime = uptime
        health.stores = stores.isEmpty ? nil : stores.sorted().map { Int($0) }
        health.settled = isSettled
        health.unknownStores = bridges.unknownStores.map { Int($0) }
        health.beacons = presence.beacons.count
        health.joins = observers.count
        health.received = c.received
        health.oversized = c.oversized
        health.malformed = Dictionary(uniqueKeysWithValues: c.malformed.map { ($0.key.rawValue, $0.value) })
        health.unknownTopics = c.unknownTopics
        health.foreign = c.foreign
        health.staleReports = presence.staleReports
        health.behindReports = presence.behindReports
        health.joinsAccepted = c.joinsAccepted
        health.joinsRejected = c.joinsRejected
        health.joinsThrottled = c.joinsThrottled
        health.leaves = c.leaves
        health.rulesFired = c.rulesFired
        health.actionsSkipped = c.actionsSkipped
        health.inboxMessages = c.inboxMessages
        health.configsApplied = c.configsApplied
        health.configsRejected = c.configsRejected
        health.published = published
        health.publishFailures = publishFailures
        health.ts = now
        return MQTTMessage(topic: topics.brainHealth(client), text: health.json, qos: 0, retain: true)
    }

    // MARK: - Inputs

    /// The brain's present read as its running clock: the one place `BrainCore` crosses
    /// from capture time to wall time.
    ///
    /// Every input of the core is dated by the brain's present, a `CaptureTime`: what it
    /// compares with the evidence (visits' `since`, a beacon's last sighting, a roster's
    /// ages) and what it dates on the capture timeline. Live, that present is the service's
    /// clock read as capture time once (`BrainService.coreNow`: the gateways date what they
    /// hear by their wall clocks); in a replay it is the capture's own time.
    ///
    /// The report clock's patience (`FleetPresence.report(receivedAt:)`, `advance(to:)`,
    /// `reconnected(at:)`: how long a late gateway holds decisions back) is the brain's time
    /// passing, not capture time, which stands still while that gateway holds it: the
    /// fleet presence takes it as `WallTime`. Live this gives the service clock back; in a
    /// replay, the capture's time as the pace the replay runs at.
    static func runningClock(_ now: CaptureTime) -> WallTime { now.asWallTime() }

    // `receive`, one message at a time, is in BrainCore+Routing.swift.

    /// Time passes: views known from sightings expire, cooldowns in seconds run out.
    public mutating func advance(to now: CaptureTime) -> BrainOutput {
        let wall = Self.runningClock(now)
        for summary in rejections.roll(at: wall) { event(summary) }
        joinLimiter.prune(at: wall)
        guard isSettled else { return finish(at: now) }
        for change in bridges.advance(to: now) { bridgeChanged(change, at: now) }
        if bridges.unknownStores.isEmpty {
            handle(presence.advance(to: wall), at: now)
        } else {
            let (bridges, storeOf) = (self.bridges, viewStore)
            handle(presence.advance(to: wall) { ref, view in bridges.isUnknown(storeOf(ref, view.gateway)) }, at: now)
        }
        noteUnansweredResends()
        let due = recovery.due(at: wall)
        if !due.isEmpty { apply(due, at: now) }
        let waiting = proximityRoster.waiting
        if !waiting.isEmpty { observeProximity(Set(waiting), at: now) }
        endOldJoins(at: now)
        if now >= nextHealthCheck {
            nextHealthCheck = now + Self.healthCheckInterval
            checkBeaconHealth(at: now)
        }
        for scope in lingering.sorted() where !rules.retire(scope, at: now) {
            lingering.remove(scope)
            markRecordDirty(scope)
        }
        return finish(at: now)
    }

    /// Applies a new fleet config: registry, stores, ads, rules and zone tuning change live;
    /// the topic prefix and the broker need a restart (reported, not applied).
    public mutating func apply(_ newConfig: FleetConfig, origin: String, at now: CaptureTime) -> BrainOutput {
        applyConfig(newConfig, origin: origin, at: now)
        return finish(at: now)
    }

    mutating func applyConfig(_ newConfig: FleetConfig, origin: String, at now: CaptureTime) {
        var new = newConfig
        var needsRestart: [String] = []
        if new.topicPrefix != config.topicPrefix { needsRestart.append("topicPrefix") }
        new.topicPrefix = config.topicPrefix
        new.broker = config.broker
        guard new != config else { return }
        let subscriptionsBefore = subscriptions
        let removedGateways = Set(config.gateways.map(\.id)).subtracting(new.gateways.map(\.id))
        config = new
        index(new)
        let rosterVisits = proximityRoster.visits
        for key in proximityRoster.configure(new) { dirtyCustomers.insert(key) }
        presence.settings = Self.presenceSettings(new, asking: asksForLostReports)
        for gateway in calibrator.configure(new, stores: stores) {
            setRetained(topics.calibration(ofGateway: gateway), signature: nil) { "" }
            note(.info, "calibration withdrawn: the brain no longer corrects this gateway's RSSI", ["gateway": gateway])
        }
        presence.zoneNames.merge(Self.zoneNames(new)) { _, configured in configured }
        for renamed in rules.replaceRules(with: new.rules) {
            note(.info, "a renamed rule keeps what it did (once, cooldowns)", ["from": renamed.from, "to": renamed.to])
            for scope in rules.scopes { markRecordDirty(scope) }
        }
        bridges.configure(bridgedStores(new))
        counters.configsApplied += 1
        for ref in presence.beacons.keys.sorted() where !owns(ref) {
            presence.forget(ref)
            rules.forget(RuleEngine.Scope(beacon: ref))
        }
        for key in observers.joins.keys.sorted() where !owns(key.beacon) {
            observers.remove(key)
            rules.forget(RuleEngine.Scope(beacon: key.beacon, client: key.client))
        }
        var stale = stalePresence
        stale.retain(gateway: { !removedGateways.contains($0) }, beacon: { owns($0) })
        stalePresence = stale
        out.subscriptionsChanged = subscriptions != subscriptionsBefore
        if isSettled {
            syncAds()
            // Beacons may have moved between stores: every roster entry is checked again.
            rosterBook.removeAll()
            for key in observers.joins.keys { touchRoster(key) }
            for topic in known.topics {
                guard case let .customer(store, client)? = topics.parse(topic) else { continue }
                dirtyCustomers.insert(RosterBook.Key(store: store, client: client))
                dirtyStores.insert(store)
            }
            for store in directory.configuredStores { dirtyStores.insert(store) }
            // Owners, profiles and which gateways count may have changed.
            for (store, visit) in rosterVisits { dirtyCustomers.insert(RosterBook.Key(store: store, client: visit.client)) }
            observeProximity(Set(presence.beacons.keys).union(rosterVisits.map { $0.visit.beacon }), at: now)
        }
        report(.applied(needsRestart: needsRestart), origin: origin, at: now)
        note(.info, "applied a new fleet config", ["origin": origin, "rules": "\(new.rules.count)",
                                                   "beacons": "\(new.beacons.count)"])
        if !needsRestart.isEmpty {
            note(.warning, "fleet config changes that need a restart were not applied",
                 ["settings": needsRestart.joined(separator: ", ")])
        }
    }

    mutating func index(_ config: FleetConfig) {
        directory = BeaconDirectory(config: config, stores: stores)
        joinPolicy = JoinPolicy(config: config)
        joinPolicy.proofs = Self.proofs(config, proofSecrets)
    }

    /// Each store's proof of presence whose secret is known.
    static func proofs(_ config: FleetConfig, _ secrets: [String: [UInt8]]) -> [UInt16: PresenceProof] {
        var proofs: [UInt16: PresenceProof] = [:]
        for store in config.stores {
            guard let proof = store.proof, let secret = secrets[proof.secretFile] else { continue }
            proofs[store.major] = PresenceProof(secret: secret, slotSeconds: proof.slotSeconds)
        }
        return proofs
    }

    /// The fleet presence's settings from the config, asking for holes again as
    /// `asksForLostReports` says.
    static func presenceSettings(_ config: FleetConfig, asking: Bool) -> FleetPresence.Settings {
        var settings = FleetPresence.Settings(config)
        settings.asksAgainForHoles = asking
        return settings
    }

    /// The configured zone name of every gateway.
    static func zoneNames(_ config: FleetConfig) -> [String: String] {
        Dictionary(config.gateways.map { ($0.id, $0.zone ?? $0.id) }, uniquingKeysWith: { first, _ in first })
    }
}


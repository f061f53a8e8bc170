public import BeaconKit
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

    public private(set) var config: FleetConfig
    /// The stores (majors) this brain handles; empty for all.
    public let stores: Set<UInt16>
    public let limits: Limits
    public let topics: Topics
    public private(set) var presence: FleetPresence
    /// The gateways' RSSI offsets learned from reference transmitters (`brain.calibration`).
    public private(set) var calibrator: Calibrator
    public private(set) var observers = ObserverRegistry()
    public private(set) var rules: RuleEngine
    public var counters = BrainCounters()
    public private(set) var isSettled = false
    /// The bridges of stores with a broker of their own: which stores' presence is on hold.
    public private(set) var bridges = StoreBridges()
    /// What must be seen again after a reconnect, and wills held back (see `ConnectionRecovery`).
    public var recovery = ConnectionRecovery()
    /// Reading the retained state back after a reconnect (`reconnect`), until `settle`.
    public var isReadingBack: Bool { recovery.isReadingBack }
    /// Retained messages of the brain's own topics only tell what the broker holds.
    private var readingBack: Bool { !isSettled || recovery.isReadingBack }

    /// The config's beacons, stores and gateways, indexed.
    public private(set) var directory: BeaconDirectory
    /// The seal on the brain's records: only sealed ones are trusted (`RecordSeal`).
    public var recordSeal = RecordSeal()
    /// Who may join which beacon (`brain.joins`).
    private(set) var joinPolicy: JoinPolicy
    /// The stores' proof-of-presence secrets by `stores[].proof.secretFile`, read where the
    /// brain runs (the core reads no files). A store whose file is missing here proves
    /// nothing: its joins are decided as `owned-or-near` decides them.
    public var proofSecrets: [String: [UInt8]] = [:] {
        didSet { joinPolicy.proofs = Self.proofs(config, proofSecrets) }
    }
    /// When joins past `brain.joinMaxAge` are next looked for.
    private var nextAgeCheck = Instant.epoch
    /// Visits whose views were missing at settling while their store was unknown: decided
    /// when the store is back (a view coming back continues the visit).
    private var heldVisits: [BeaconRef: VisitRecord] = [:]
    /// Tells retained gateway presence of visits that ended (`StalePresence`).
    private(set) var stalePresence = StalePresence()
    /// Last seen and battery of the registry's beacons (`brain/beacons/<beacon>`).
    public private(set) var beaconHealth = BeaconHealth()
    /// When the registry's beacons are next checked for `beaconHealth`.
    private var nextHealthCheck = Instant.epoch
    /// Telemetry read while settling, applied once the health records are in.
    private var pendingTelemetry: [BeaconRef: Int?] = [:]
    /// Seconds between two checks of the registry's beacons.
    static let healthCheckInterval = 10.0

    // Collected while settling.
    private var visitRecords: [BeaconRef: VisitRecord] = [:]
    private var answeredRecords: [ObserverJoin.Key: AnsweredRecord] = [:]
    private var retainedPresence: [BeaconRef: FleetPresenceReport] = [:]
    private var pendingJoins: [ObserverJoin.Key: (request: JoinRequest, fingerprint: String)] = [:]
    private var pendingErrors: [ObserverJoin.Key: String] = [:]
    private var offlineObservers: Set<String> = []

    /// What the broker holds on the brain's own retained topics (`RetainedMirror`).
    private var known = RetainedMirror()
    /// Scopes whose visit or join ended while a cooldown in seconds still runs.
    private var lingering: Set<RuleEngine.Scope> = []
    private var dirtyPresence: Set<BeaconRef> = []
    private var dirtyVisits: Set<BeaconRef> = []
    private var dirtyJoins: Set<ObserverJoin.Key> = []
    private var dirtyStores: Set<UInt16> = []
    /// Clients whose entry in a store's roster may have changed.
    private var dirtyCustomers: Set<RosterBook.Key> = []
    public private(set) var rosterBook = RosterBook()
    /// Customers on the rosters of stores driven by proximity (`stores[].roster`).
    public private(set) var proximityRoster = ProximityRoster()
    /// Customer entries found on the broker while settling: proximity visits carry on.
    private var retainedCustomers: [RosterBook.Key: Roster.Customer] = [:]
    /// When each store's next roster summary may go out.
    private var rosterDue: [UInt16: Instant] = [:]
    private var joinLimiter: JoinRateLimiter
    private var rejections: RejectionReports
    /// The size of the input being handled, for reports.
    private var inputBytes = 0
    private var out = BrainOutput()

    public init(config: FleetConfig, stores: Set<UInt16> = [], limits: Limits = .init()) {
        self.config = config
        self.stores = stores
        self.limits = limits
        topics = config.topics
        presence = FleetPresence(settings: FleetPresence.Settings(config))
        presence.zoneNames = Self.zoneNames(config)
        calibrator = Calibrator(config: config, stores: stores)
        rules = RuleEngine(rules: config.rules)
        joinLimiter = JoinRateLimiter(burst: limits.joinBurst, interval: limits.joinInterval)
        rejections = RejectionReports(perSecond: limits.eventsPerSecond)
        joinPolicy = JoinPolicy(config: config)
        directory = BeaconDirectory(config: config, stores: stores)
        index(config)
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
    private var eddystoneLevels: [BeaconRef?] { eddystoneBeacons.map { $0 as [BeaconRef?] } ?? [nil] }

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
    private var majorLevels: [UInt16?] { majors.map { $0 as [UInt16?] } ?? [nil] }

    /// `brain/status` `online`, retained; the will says `offline`.
    public var onlineMessage: MQTTMessage { MQTTMessage(topic: topics.brainStatus, text: "online", qos: 1, retain: true) }
    public var offlineMessage: MQTTMessage { MQTTMessage(topic: topics.brainStatus, text: "offline", qos: 1, retain: true) }

    /// `brain/health/<client>` (retained): `{"version","uptime","stores","settled","beacons","joins",
    /// "received","oversized","malformed":{kind:count},"unknownTopics","foreign",
    /// "joinsAccepted","joinsRejected","leaves","rulesFired","actionsSkipped","inboxMessages",
    /// "configsApplied","configsRejected","published","publishFailures","ts"}`; `uptime` in s.
    public func health(client: String, version: String, uptime: Double, published: Int, publishFailures: Int,
                       at now: Instant) -> MQTTMessage {
        var writer = JSONWriter()
        let c = counters
        writer.object { o in
            o("version", version)
            o("uptime", uptime, places: 1)
            o("stores", stores.isEmpty ? JSONValue.null : .array(stores.sorted().map { .number(Double($0)) }))
            o("settled", isSettled)
            o("unknownStores", .array(bridges.unknownStores.map { .number(Double($0)) }))
            o("beacons", presence.beacons.count)
            o("joins", observers.count)
            o("received", c.received)
            o("oversized", c.oversized)
            o("malformed", .object(JSONObject(c.malformed.sorted { $0.key < $1.key }.map {
                (key: $0.key.rawValue, value: .number(Double($0.value)))
            })))
            o("unknownTopics", c.unknownTopics)
            o("foreign", c.foreign)
            o("joinsAccepted", c.joinsAccepted)
            o("joinsRejected", c.joinsRejected)
            o("joinsThrottled", c.joinsThrottled)
            o("leaves", c.leaves)
            o("rulesFired", c.rulesFired)
            o("actionsSkipped", c.actionsSkipped)
            o("inboxMessages", c.inboxMessages)
            o("configsApplied", c.configsApplied)
            o("configsRejected", c.configsRejected)
            o("published", published)
            o("publishFailures", publishFailures)
            o("ts", now)
        }
        return MQTTMessage(topic: topics.brainHealth(client), text: writer.text, qos: 0, retain: true)
    }

    // MARK: - Inputs

    /// One MQTT message. `retained`: the broker delivered it from its store (state from
    /// before this connection) rather than as it was published.
    public mutating func receive(topic: String, payload: [UInt8], retained: Bool, at now: Instant) -> BrainOutput {
        counters.received += 1
        lastTime = max(lastTime, now)
        inputBytes = payload.count
        let isConfig = topic == topics.fleetConfig
        let limit = isConfig ? limits.maxConfigPayload : limits.maxPayload
        if payload.count > limit {
            counters.oversized += 1
            note(.debug, "dropped an oversized payload", ["topic": String(topic.prefix(200)), "bytes": "\(payload.count)"])
            let reason = "payload of \(payload.count) bytes exceeds \(limit)"
            reportRejected("oversized", topic: topic, reason: reason)
            if isConfig {
                counters.configsRejected += 1
                report(status: "rejected", origin: "fleet/config", details: ["errors": ["fleet/config: " + reason]], at: now)
                note(.error, "rejected an oversized fleet config; keeping the last good one", ["bytes": "\(payload.count)"])
            }
            if case let (ref, .observer(client))? = topics.parseBeacon(topic) {
                let key = ObserverJoin.Key(beacon: ref, client: client)
                if owns(key.beacon) {
                    reject(key, reason: "join payload of \(payload.count) bytes exceeds \(limits.maxPayload)", at: now)
                }
            }
            return finish(at: now)
        }
        if let (ref, about) = topics.parseBeacon(topic) {
            routeBeacon(ref, about, topic: topic, payload: payload, retained: retained, at: now)
        } else if let parsed = topics.parse(topic) {
            route(parsed, topic: topic, payload: payload, retained: retained, at: now)
        } else if let record = topics.parseBrainRecord(topic) {
            readRecord(record, topic: topic, payload: payload, retained: retained)
        } else if let (store, client) = topics.parseCustomer(topic) {
            readCustomer(store: store, client: client, topic: topic, payload: payload, retained: retained)
        } else if let gateway = topics.parseCalibration(topic) {
            readCalibration(gateway, topic: topic, payload: payload, retained: retained)
        } else {
            unknownTopic(topic)
        }
        return finish(at: now)
    }

    /// The retained messages are in: reconcile them and start answering (see the type's
    /// documentation). Calling it again does nothing.
    public mutating func settle(at now: Instant) -> BrainOutput {
        guard !isSettled else {
            if recovery.isReadingBack { readBackComplete(at: now) }
            return finish(at: now)
        }
        isSettled = true
        bridges.settle(at: now)

        // Visits the records show as answered carry on silently.
        var begun: [BeaconRef] = []
        for ref in presence.beacons.keys.sorted() {
            let record = visitRecords[ref]
            if let record { restore(record.rules, for: RuleEngine.Scope(beacon: ref)) }
            // With a key only the sealed record is trusted: anyone may write the fleet presence.
            let trusted = recordSeal.isOn ? nil : retainedPresence[ref]
            if let since = record?.since ?? trusted?.since {
                presence.restore(ref, since: since, zone: record?.zone ?? trusted?.zone)
            } else {
                // Begun while no brain ran: dated by its evidence (capture time), not by now.
                presence.restore(ref, since: nil, zone: nil)
                begun.append(ref)
            }
            dirtyVisits.insert(ref)
            dirtyPresence.insert(ref)
        }

        // Joins: carry on the answered ones, answer the new ones, close the ended ones.
        for (key, pending) in pendingJoins.sorted(by: { $0.key < $1.key }) {
            let record = answeredRecords[key]
            let scope = RuleEngine.Scope(beacon: key.beacon, client: key.client)
            if let record { restore(record.rules, for: scope) }
            if offlineObservers.contains(key.client) {
                // The observer died while no brain ran: its join ends now.
                deleteJoinTopic(key)
                if record?.join != nil, let since = record?.since {
                    let join = ObserverJoin(key: key, profile: pending.request.profile, since: since,
                                            fingerprint: pending.fingerprint)
                    counters.leaves += 1
                    runRules(.leave, beacon: key.beacon, join: join, at: now)
                }
                if rules.retire(scope, at: now) { lingering.insert(scope) }
                dirtyJoins.insert(key)
            } else if let record, record.join != nil {
                let join = ObserverJoin(key: key, profile: pending.request.profile, since: record.since ?? now,
                                        fingerprint: pending.fingerprint)
                observers.insert(join)
                dirtyJoins.insert(key)
                touchRoster(key)
            } else if allowJoin(key, at: now), permitted(key, at: now) {
                accept(key, pending.request, fingerprint: pending.fingerprint, at: now)
            }
        }
        for (key, record) in answeredRecords.sorted(by: { $0.key < $1.key }) where pendingJoins[key] == nil {
            let scope = RuleEngine.Scope(beacon: key.beacon, client: key.client)
            restore(record.rules, for: scope)
            if record.join != nil, let since = record.since {
                // Left while no brain ran.
                counters.leaves += 1
                runRules(.leave, beacon: key.beacon,
                         join: ObserverJoin(key: key, profile: nil, since: since, fingerprint: record.join ?? ""), at: now)
            }
            if rules.retire(scope, at: now) { lingering.insert(scope) }
            dirtyJoins.insert(key)
        }

        // Visits begun or ended while no brain ran, now that the observers are known.
        for ref in begun {
            var events: [FleetEvent] = [.enter(ref)]
            if let proximity = presence[ref]?.proximity, proximity != .unknown {
                events.append(.proximity(ref, from: .unknown, to: proximity))
            }
            handle(events, at: now)
        }
        for (ref, record) in visitRecords.sorted(by: { $0.key < $1.key }) where presence[ref] == nil {
            if record.since != nil, bridges.isUnknown(store(of: ref)) {
                // Its store's bridge is down: the visit may well go on.
                heldVisits[ref] = record
                continue
            }
            endVisit(ref, record, at: now)
        }

        // Proximity rosters: visits on the broker carry on while their beacon is still there.
        if proximityRoster.isActive {
            for (key, customer) in retainedCustomers.sorted(by: { $0.key < $1.key })
            where joinPolicy.owner(of: customer.beacon) == key.client && owns(customer.beacon) {
                proximityRoster.resume(ProximityRoster.Visit(beacon: customer.beacon, client: key.client,
                                                             profile: entry(customer.beacon)?.profile, since: customer.since),
                                       store: key.store)
                dirtyCustomers.insert(key)
            }
            observeProximity(Set(presence.beacons.keys).union(proximityRoster.visits.map { $0.visit.beacon }), at: now)
        }
        retainedCustomers = [:]
        for (ref, millivolts) in pendingTelemetry.sorted(by: { $0.key < $1.key }) { telemetry(of: ref, millivolts: millivolts) }
        pendingTelemetry = [:]
        checkBeaconHealth(at: now)

        for (key, reason) in pendingErrors.sorted(by: { $0.key < $1.key }) {
            inbox(key.client, .error(beacon: key.beacon, reason: reason), at: now)
            if observers[key] == nil { deleteJoinTopic(key) }
        }
        markLeftovers()
        syncCalibration()
        visitRecords = [:]
        answeredRecords = [:]
        retainedPresence = [:]
        pendingJoins = [:]
        pendingErrors = [:]
        offlineObservers = []
        syncAds()
        note(.info, "settled from retained state", [
            "beacons": "\(presence.beacons.count)", "joins": "\(observers.count)",
        ])
        return finish(at: now)
    }

    /// The broker connection is back after being lost. A brain that had settled keeps its
    /// state: it is the authority on what it answered, and the broker may have lost its
    /// records (a broker without persistence) or hold stale ones. It reads the retained
    /// state again while handling what comes live, and `settle` ends the read-back: then it
    /// republishes whatever of its retained topics the broker lacks, and visits and joins
    /// not seen again end once their gateways and observers are back (`ConnectionRecovery`).
    /// A brain that had not settled yet starts its collection again.
    public mutating func reconnect(at now: Instant) -> BrainOutput {
        guard isSettled else {
            var fresh = BrainCore(config: config, stores: stores, limits: limits)
            fresh.recordSeal = recordSeal
            fresh.proofSecrets = proofSecrets
            fresh.counters = counters
            fresh.recovery = ConnectionRecovery(settings: recovery.settings)
            self = fresh
            return BrainOutput()
        }
        recovery.reconnected(views: presence.beacons.mapValues { Array($0.views.keys) },
                             joins: Array(observers.joins.keys))
        presence.reconnected(at: now, patience: recovery.settings.reconnectGrace)
        bridges.reconnected()
        known.reconnected()
        note(.info, "reconnected; reading the retained state back",
             ["beacons": "\(presence.beacons.count)", "joins": "\(observers.count)"])
        return finish(at: now)
    }

    /// The broker connection dropped (`ConnectionRecovery.connectionLost`): the last wills
    /// it held are not acted on.
    public mutating func connectionLost() {
        recovery.connectionLost()
    }

    /// The end of a read-back after a reconnect: every retained topic of ours is checked
    /// against what the broker holds (`known`).
    private mutating func readBackComplete(at now: Instant) {
        recovery.readBackComplete(at: now)
        known.readBackComplete()
        // A bridged store whose status the broker no longer holds (it lost its retained
        // messages) is unknown until its bridge says 1 again.
        for change in bridges.readBackComplete() { bridgeChanged(change, at: now) }
        for ref in presence.beacons.keys {
            dirtyVisits.insert(ref)
            dirtyPresence.insert(ref)
        }
        for scope in lingering { markRecordDirty(scope) }
        for key in observers.joins.keys {
            dirtyJoins.insert(key)
            touchRoster(key)
        }
        for (store, _) in rosterBook.stores { dirtyStores.insert(store) }
        for (store, visit) in proximityRoster.visits { dirtyCustomers.insert(RosterBook.Key(store: store, client: visit.client)) }
        markLeftovers()
        syncCalibration()
        rosterDue = [:]
        syncAds()
        let pending = recovery.pending
        note(.info, "read the retained state back", ["unconfirmedViews": "\(pending.views)", "unconfirmedJoins": "\(pending.joins)"])
    }

    /// Whatever of ours the broker holds gets checked, so leftovers are deleted.
    private mutating func markLeftovers() {
        for topic in known.topics {
            if case let (ref, .fleetPresence)? = topics.parseBeacon(topic) {
                dirtyPresence.insert(ref)
                continue
            }
            switch (topics.parse(topic), topics.parseBrainRecord(topic)) {
            case (.roster(let store)?, _): dirtyStores.insert(store)
            case (nil, nil):
                if let (store, client) = topics.parseCustomer(topic) {
                    dirtyCustomers.insert(RosterBook.Key(store: store, client: client))
                }
            case (_, .visit(let ref)?): dirtyVisits.insert(ref)
            case (_, .answered(let ref, let client)?): dirtyJoins.insert(ObserverJoin.Key(beacon: ref, client: client))
            default: break
            }
        }
    }

    /// Time passes: views known from sightings expire, cooldowns in seconds run out.
    public mutating func advance(to now: Instant) -> BrainOutput {
        for text in rejections.roll(at: now) { event(text) }
        joinLimiter.prune(at: now)
        guard isSettled else { return finish(at: now) }
        for change in bridges.advance(to: now) { bridgeChanged(change, at: now) }
        if bridges.unknownStores.isEmpty {
            handle(presence.advance(to: now), at: now)
        } else {
            let (bridges, storeOf) = (self.bridges, viewStore)
            handle(presence.advance(to: now) { ref, view in bridges.isUnknown(storeOf(ref, view.gateway)) }, at: now)
        }
        let due = recovery.due(at: now)
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
    public mutating func apply(_ newConfig: FleetConfig, origin: String, at now: Instant) -> BrainOutput {
        applyConfig(newConfig, origin: origin, at: now)
        return finish(at: now)
    }

    private mutating func applyConfig(_ newConfig: FleetConfig, origin: String, at now: Instant) {
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
        presence.settings = FleetPresence.Settings(new)
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
                guard let (store, client) = topics.parseCustomer(topic) else { continue }
                dirtyCustomers.insert(RosterBook.Key(store: store, client: client))
                dirtyStores.insert(store)
            }
            for store in directory.configuredStores { dirtyStores.insert(store) }
            // Owners, profiles and which gateways count may have changed.
            for (store, visit) in rosterVisits { dirtyCustomers.insert(RosterBook.Key(store: store, client: visit.client)) }
            observeProximity(Set(presence.beacons.keys).union(rosterVisits.map { $0.visit.beacon }), at: now)
        }
        report(status: "applied", origin: origin, details: needsRestart.isEmpty ? [:] : ["needsRestart": needsRestart],
               at: now)
        note(.info, "applied a new fleet config", ["origin": origin, "rules": "\(new.rules.count)",
                                                   "beacons": "\(new.beacons.count)"])
        if !needsRestart.isEmpty {
            note(.warning, "fleet config changes that need a restart were not applied",
                 ["settings": needsRestart.joined(separator: ", ")])
        }
    }

    // MARK: - Routing

    private mutating func route(_ parsed: Topics.Parsed, topic: String, payload: [UInt8], retained: Bool, at now: Instant) {
        switch parsed {
        case .gatewayRSSI(let gateway):
            guard let json = json(payload, .rssiReport, topic) else { return }
            do {
                var report = try RSSIReport(parsing: json, topic: gateway)
                recovery.gatewayIsLive(gateway, at: now)
                // Calibration learns from the report as the gateway sent it; the zone fusion
                // takes it corrected by the gateway's learned offset.
                for record in calibrator.learn(from: report) { calibrated(record) }
                report = calibrator.corrected(report)
                // Every store's beacons are in a report: this brain takes its own.
                if !stores.isEmpty { report.entries.removeAll { !owns($0.beacon) } }
                handle(presence.report(report, receivedAt: now, holding: holdsView), at: now)
                for gap in presence.takeGaps() {
                    note(.warning, "a gateway's reports missed a span of capture time: decided as unknown, not as silence",
                         ["gateway": gap.gateway, "from": gap.from.iso8601, "to": gap.to.iso8601])
                    event(gap.json)
                }
                for entry in report.entries where presence[entry.beacon]?.views[gateway] != nil {
                    recovery.confirmView(entry.beacon, gateway: gateway, live: true)
                }
            } catch {
                malformed(.rssiReport, topic, error.reason)
            }

        case .sighting, .gatewayPresence, .observer, .fleetPresence, .ad:
            break  // topics about one beacon: `routeBeacon`

        case .gatewayStatus(let gateway):
            switch String(decoding: payload, as: UTF8.self) {
            case "online":
                if !retained { recovery.gatewayIsLive(gateway, at: now) }
                handle(presence.gatewayStatus(gateway, online: true), at: now)
                // A gateway back after an outage waits for us, subscribed, to ask for the
                // reports it kept (GatewayEngine.connected); retained, it is one we read back
                // after our own reconnect. A gateway that does not wait ignores it.
                out.messages.append(MQTTMessage(topic: topics.commands(ofGateway: gateway), text: #"{"reports":"send"}"#,
                                                qos: 1, retain: false))
            case "offline" where isSettled && retained:
                // Read back after a reconnect: perhaps the mass will of a broker's shutdown.
                // Its views wait for the gateway to come back (or the reconnect grace).
                recovery.retainedOffline(gateway: gateway, views: presence.beacons.values.filter { $0.views[gateway] != nil }.map(\.ref))
            case "offline" where isSettled && recovery.hold(offlineGateway: gateway, at: now):
                note(.info, "gateway offline: dropping its views unless it is back within the grace",
                     ["gateway": gateway, "grace": "\(recovery.settings.offlineGrace)"])
            case "offline":
                dropGateway(gateway, at: now)
            case "": break
            default: malformed(.gatewayStatus, topic, "expected online or offline")
            }
            if isSettled, let major = directory.store(ofGateway: gateway) {
                bridgeChanged(bridges.gatewayStatus(gateway, store: major), at: now)
            }

        case .bridgeStatus(let major):
            guard stores.isEmpty || stores.contains(major) else {
                counters.foreign += 1
                return
            }
            let text = String(decoding: payload, as: UTF8.self)
            guard text == "1" || text == "0" else {
                if !payload.isEmpty { malformed(.bridgeStatus, topic, "expected 1 or 0 (Mosquitto's bridge notification)") }
                return
            }
            if isSettled {
                bridgeChanged(bridges.status(major, connected: text == "1", live: !retained, at: now), at: now)
            } else {
                bridges.remember(major, connected: text == "1", live: !retained)
            }

        case .observerStatus(let client):
            switch String(decoding: payload, as: UTF8.self) {
            case "online":
                offlineObservers.remove(client)
                if !retained { recovery.observerIsLive(client, at: now) }
            case "offline" where isSettled && retained:
                recovery.retainedOffline(observer: client, joins: observers.joins(ofClient: client).map(\.key))
            case "offline" where isSettled && recovery.hold(offlineObserver: client, at: now):
                break
            case "offline" where isSettled:
                endJoins(of: client, at: now)
            case "offline":
                offlineObservers.insert(client)
            case "": break
            default: malformed(.observerStatus, topic, "expected online or offline")
            }

        case .fleetConfig:
            guard !payload.isEmpty else { return }
            let document: JSONValue
            do {
                document = try JSONParser(maxDepth: 64).parse(payload)
            } catch {
                return rejectConfig([error.description], at: now)
            }
            do {
                let new = try FleetConfig.parse(document)
                // The retained config comes again on every reconnect: only a change is news.
                if new != config { applyConfig(new, origin: "fleet/config", at: now) }
            } catch {
                rejectConfig(error.errors.map(\.description), at: now)
            }

        case .roster(let store):
            guard readingBack, retained, stores.isEmpty || stores.contains(store), !payload.isEmpty else { return }
            guard let json = json(payload, .roster, topic) else {
                known[topic] = ""
                return
            }
            do {
                known[topic] = try Roster(parsing: json).json(at: nil)
            } catch {
                known[topic] = ""
                malformed(.roster, topic, error.reason)
            }

        case .zoneEvents, .gatewayHealth, .gatewayCommand, .gatewayEvents, .inbox, .brainStatus:
            unknownTopic(topic)
        }
    }

    /// A topic about one beacon, iBeacon (`beacons/<major>/<minor>…`) or Eddystone-UID
    /// (`eddystone/<namespace>/<instance>…`): both families are handled alike.
    private mutating func routeBeacon(_ ref: BeaconRef, _ about: Topics.BeaconTopic, topic: String, payload: [UInt8],
                                      retained: Bool, at now: Instant) {
        switch about {
        case .sighting:
            // Not subscribed: the brain hears gateways through their RSSI reports.
            unknownTopic(topic)

        case .gatewayPresence(let gateway):
            guard owned(ref) else { return }
            if !retained { recovery.gatewayIsLive(gateway, at: now) }
            if payload.isEmpty {
                handle(presence.gatewayPresenceDeleted(ref, gateway: gateway), at: now)
                recovery.viewEnded(ref, gateway: gateway)
                return
            }
            // Left behind by a gateway found offline after a reconnect: only it can say.
            if retained, isSettled, recovery.ignoresRetained(fromGateway: gateway) { return }
            guard let json = json(payload, .gatewayPresence, topic) else { return }
            do {
                let report = try GatewayPresenceReport(parsing: json, topic: ref, gateway: gateway)
                // A broker that lost a delete brings back a visit that ended: no new visit.
                if retained, presence[ref] == nil, stalePresence.isStale(report) {
                    note(.info, "ignored retained presence of a visit that ended", ["beacon": "\(ref)", "gateway": gateway])
                    return
                }
                stalePresence.took(report)
                handle(presence.gatewayPresence(report, retained: retained, at: now), at: now)
                // A gateway without reports changes its view's class with no event of the fleet's.
                if isSettled, proximityRoster.isActive { observeProximity([ref], at: now) }
                if presence[ref]?.views[gateway] != nil { recovery.confirmView(ref, gateway: gateway, live: !retained) }
                if presence[ref] != nil { dirtyPresence.insert(ref) }
            } catch {
                malformed(.gatewayPresence, topic, error.reason)
            }

        case .observer(let client):
            let key = ObserverJoin.Key(beacon: ref, client: client)
            guard owned(key.beacon) else { return }
            if !retained {
                offlineObservers.remove(client)
                recovery.observerIsLive(client, at: now)
            }
            if payload.isEmpty {
                if isSettled {
                    leave(key, deleteTopic: false, at: now)
                    recovery.joinEnded(key)
                } else {
                    pendingJoins[key] = nil
                    pendingErrors[key] = nil
                }
                return
            }
            let request: JoinRequest
            do {
                request = try JoinRequest(parsing: payload)
            } catch {
                malformed(.join, topic, error.reason)
                reject(key, reason: error.reason, at: now)
                return
            }
            let fingerprint = JoinRequest.fingerprint(payload)
            if isSettled {
                join(key, request, fingerprint: fingerprint, at: now)
            } else {
                pendingJoins[key] = (request, fingerprint)
                pendingErrors[key] = nil
            }

        case .fleetPresence:
            guard readingBack, retained, owned(ref), !payload.isEmpty else { return }
            guard let json = json(payload, .fleetPresence, topic) else { return }
            do {
                let report = try FleetPresenceReport(parsing: json, topic: ref)
                if !isSettled { retainedPresence[ref] = report }
                known[topic] = report.signature
            } catch {
                known[topic] = ""
                malformed(.fleetPresence, topic, error.reason)
            }

        case .ad:
            guard readingBack, retained, owned(ref), !payload.isEmpty else { return }
            known[topic] = String(decoding: payload, as: UTF8.self)

        case .telemetry:
            guard owned(ref), directory.isRegistered(ref), !payload.isEmpty else { return }
            guard let json = json(payload, .telemetry, topic), case .object(let o) = json else { return }
            let millivolts: Int? = switch o["batteryMv"] {
            case .number(let mv)? where mv == mv.rounded() && (1...65535).contains(mv): Int(mv)
            case .null?, nil: nil
            default: -1
            }
            guard millivolts != -1 else {
                malformed(.telemetry, topic, "batteryMv must be mV (1-65535) or null")
                return
            }
            if isSettled { telemetry(of: ref, millivolts: millivolts) } else { pendingTelemetry[ref] = millivolts }
        }
    }

    private mutating func readRecord(_ record: Topics.BrainRecordTopic, topic: String, payload: [UInt8], retained: Bool) {
        let ref: BeaconRef = switch record {
        case .visit(let ref), .answered(let ref, _), .health(let ref): ref
        }
        if case .health = record {
            // Unsealed (the fleet page reads it): at worst a forged one dates a last sighting wrong.
            guard readingBack, retained, owned(ref), !payload.isEmpty else { return }
            guard let json = json(payload, .record, topic) else {
                known[topic] = ""
                return
            }
            do {
                let value = try BeaconHealth.Record(parsing: json)
                beaconHealth.restore(value, of: ref)
                known[topic] = String(decoding: payload, as: UTF8.self)
            } catch {
                known[topic] = ""
                malformed(.record, topic, error.reason)
            }
            return
        }
        // After settling the brain is the authority on its records; what comes back is its own
        // echo, or (read back after a reconnect) only tells what the broker holds.
        guard readingBack, retained, owned(ref), !payload.isEmpty, let opened = opened(payload, topic: topic) else { return }
        guard let json = json(Array(opened.utf8), .record, topic) else {
            known[topic] = ""
            return
        }
        do {
            switch record {
            case .visit(let ref):
                let value = try VisitRecord(parsing: json)
                if !isSettled { visitRecords[ref] = value }
                known[topic] = value.json
            case .answered(let ref, let client):
                let value = try AnsweredRecord(parsing: json)
                if !isSettled { answeredRecords[ObserverJoin.Key(beacon: ref, client: client)] = value }
                known[topic] = value.json
            case .health:
                break
            }
        } catch {
            known[topic] = ""
            malformed(.record, topic, error.reason)
        }
    }

    /// The record under this brain's seal (`RecordSeal`), or `nil` for one it did not seal:
    /// forged, or written under another key. That one is ignored, logged, reported on
    /// `brain/events`, and (its `known` signature emptied) replaced or deleted by what the
    /// brain knows once the retained state is in.
    private mutating func opened(_ payload: [UInt8], topic: String) -> String? {
        if let opened = recordSeal.open(String(decoding: payload, as: UTF8.self), topic: topic) { return opened }
        known[topic] = ""
        note(.warning, "ignored a record without this brain's seal (brain-secret)", ["topic": String(topic.prefix(200))])
        reportRejected("record", topic: topic, reason: "not sealed with this brain's key (brain-secret): ignored")
        return nil
    }

    /// A calibration record read back (retained): a restarted brain applies what it had
    /// learned, if it sealed it. Records of gateways another brain calibrates (`--stores`)
    /// are that brain's to check.
    private mutating func readCalibration(_ gateway: String, topic: String, payload: [UInt8], retained: Bool) {
        guard readingBack, retained, !payload.isEmpty else { return }
        guard calibrator.calibrates(gateway) else {
            known[topic] = String(decoding: payload, as: UTF8.self)
            return
        }
        guard let opened = opened(payload, topic: topic) else { return }
        known[topic] = opened
        guard let json = json(Array(opened.utf8), .record, topic) else { return }
        do {
            calibrator.restore(try CalibrationRecord(parsing: json, topic: gateway))
        } catch {
            known[topic] = ""
            malformed(.record, topic, error.reason)
        }
    }

    /// The retained calibration records as the calibrator has them: applied ones written,
    /// those of gateways this brain calibrates but no longer corrects deleted.
    private mutating func syncCalibration() {
        let seal = recordSeal
        for (gateway, record) in calibrator.applied.sorted(by: { $0.key < $1.key }) {
            let text = record.json, topic = topics.calibration(ofGateway: gateway)
            setRetained(topic, signature: text) { seal.seal(text, topic: topic) }
        }
        for topic in known.topics {
            guard let gateway = topics.parseCalibration(topic), calibrator.applied[gateway] == nil,
                  stores.isEmpty || calibrator.calibrates(gateway) else { continue }
            setRetained(topic, signature: nil) { "" }
        }
    }

    /// New values applied for a gateway: the retained record, a log line and an event.
    private mutating func calibrated(_ record: CalibrationRecord) {
        let text = record.json, topic = topics.calibration(ofGateway: record.gateway), seal = recordSeal
        setRetained(topic, signature: text) { seal.seal(text, topic: topic) }
        var metadata = ["gateway": record.gateway, "rssiOffset": fixed(record.rssiOffset, places: 1),
                        "pathLossExponent": fixed(record.pathLossExponent, places: 2), "samples": "\(record.samples)",
                        "residual": fixed(record.residual, places: 1)]
        if let before = record.before {
            metadata["was"] = fixed(before.rssiOffset, places: 1) + " dB, n " + fixed(before.pathLossExponent, places: 2)
        }
        if record.pinned { metadata["pinned"] = "rssiOffset set in the config" }
        note(.info, "calibrated a gateway from reference beacons", metadata)
        event("{\"event\":\"calibration\"," + text.dropFirst())
    }

    /// A customer topic of ours on the broker (read back while settling): a proximity visit
    /// carries on from it, so only a sealed one is trusted.
    private mutating func readCustomer(store: UInt16, client: String, topic: String, payload: [UInt8], retained: Bool) {
        guard readingBack, retained, stores.isEmpty || stores.contains(store), !payload.isEmpty,
              let opened = opened(payload, topic: topic) else { return }
        guard let json = json(Array(opened.utf8), .roster, topic) else {
            known[topic] = ""
            return
        }
        do {
            let customer = try Roster.Customer(parsing: json)
            known[topic] = customer.json.jsonText
            if !isSettled { retainedCustomers[RosterBook.Key(store: store, client: client)] = customer }
        } catch {
            known[topic] = ""
            malformed(.roster, topic, error.reason)
        }
    }

    // MARK: - Presence events

    private mutating func handle(_ events: [FleetEvent], at now: Instant) {
        defer {
            if isSettled, proximityRoster.isActive, !events.isEmpty { observeProximity(Set(events.map(\.beacon)), at: now) }
            // A registry beacon's arrival and departure date its last sighting at once.
            let moved = events.compactMap { event -> BeaconRef? in
                switch event {
                case .enter(let ref): ref
                case .exit(let beacon): beacon.ref
                default: nil
                }
            }
            if !moved.isEmpty { checkBeaconHealth(Set(moved), at: now) }
        }
        var resumed: Set<BeaconRef> = []
        for event in events {
            let ref = event.beacon
            switch event {
            case .enter:
                dirtyVisits.insert(ref)
                dirtyPresence.insert(ref)
                if isSettled, let held = heldVisits.removeValue(forKey: ref) {
                    // A visit held while its store was unknown goes on: no enter rules.
                    restore(held.rules, for: RuleEngine.Scope(beacon: ref))
                    presence.restore(ref, since: held.since, zone: nil)
                    resumed.insert(ref)
                } else if isSettled {
                    let scope = RuleEngine.Scope(beacon: ref)
                    if lingering.remove(scope) != nil { _ = rules.retire(scope, at: now) }
                    runRules(.enter, beacon: ref, fleet: presence[ref], since: presence[ref]?.since ?? now, at: now)
                }
            case .exit(let last):
                recovery.beaconLeft(ref)
                dirtyVisits.insert(ref)
                dirtyPresence.insert(ref)
                if isSettled {
                    runRules(.exit, beacon: ref, fleet: last, since: last.since, at: now)
                    let scope = RuleEngine.Scope(beacon: ref)
                    if rules.retire(scope, at: now) { lingering.insert(scope) }
                    visitEnded(ref, at: now)
                }
            case .zoneChanged:
                dirtyPresence.insert(ref)
                dirtyVisits.insert(ref)
            case .viewsChanged:
                dirtyPresence.insert(ref)
            case .proximity(_, _, let to):
                dirtyPresence.insert(ref)
                if isSettled, to != .unknown, !resumed.contains(ref), let fleet = presence[ref] {
                    runRules(.proximity(to), beacon: ref, fleet: fleet, since: fleet.since, at: now)
                }
            case .update(_, let proximity, let captured):
                guard isSettled else { break }
                if !rules.update(ref, proximity: proximity).isEmpty { dirtyVisits.insert(ref) }
                if !resumed.contains(ref), let fleet = presence[ref] {
                    runRules(.update, beacon: ref, fleet: fleet, since: fleet.since, at: now, captured: captured)
                }
            }
        }
        // The zone decisions with their capture times (dropped while collecting: the brain
        // says nothing before it has settled).
        for decision in presence.takeDecisions() where isSettled {
            out.messages.append(MQTTMessage(topic: topics.zoneEvents(of: decision.beacon), text: decision.json,
                                            qos: 1, retain: false))
        }
    }

    // MARK: - Outages and last wills

    private mutating func dropGateway(_ gateway: String, at now: Instant) {
        note(.info, "gateway offline: dropping its views", ["gateway": gateway])
        handle(presence.gatewayStatus(gateway, online: false), at: now)
    }

    /// The observer's last will: every join ends and its retained joins are deleted, so the
    /// profiles leave the broker.
    private mutating func endJoins(of client: String, at now: Instant) {
        let joins = observers.joins(ofClient: client)
        if !joins.isEmpty { note(.info, "observer offline: ending its joins", ["client": client, "joins": "\(joins.count)"]) }
        for join in joins { leave(join.key, deleteTopic: true, at: now) }
    }

    private mutating func apply(_ due: ConnectionRecovery.Due, at now: Instant) {
        for gateway in due.offlineGateways { dropGateway(gateway, at: now) }
        for client in due.offlineObservers { endJoins(of: client, at: now) }
        let (bridges, storeOf) = (self.bridges, viewStore)
        for (ref, gateway) in due.views where !bridges.isUnknown(storeOf(ref, gateway)) {
            // (A view of a store that is cut off waits for its store: see `bridgeChanged`.)
            // One its gateway's reports keep ends by their silence, in capture time.
            if presence.reportsKeep(ref, gateway: gateway) { continue }
            note(.info, "a view not seen again after the reconnect ends", ["beacon": "\(ref)", "gateway": gateway])
            handle(presence.endView(ref, gateway: gateway), at: now)
        }
        for key in due.joins {
            note(.info, "a join not seen again after the reconnect ends", ["beacon": "\(key.beacon)", "client": key.client])
            leave(key, deleteTopic: false, at: now)
        }
    }

    // MARK: - Observers

    private mutating func join(_ key: ObserverJoin.Key, _ request: JoinRequest, fingerprint: String, at now: Instant) {
        if var existing = observers[key] {
            recovery.confirmJoin(key, live: true)
            guard existing.fingerprint != fingerprint else { return }
            // The same observer re-published its join (a new profile): no new ad.
            let since = existing.since
            guard allowJoin(key, at: now) else { return }
            existing = ObserverJoin(key: key, profile: request.profile, since: since, fingerprint: fingerprint)
            observers.insert(existing)
            dirtyJoins.insert(key)
            touchRoster(key)
            return
        }
        guard allowJoin(key, at: now), permitted(key, at: now) else { return }
        accept(key, request, fingerprint: fingerprint, at: now)
    }

    /// Whether `brain.joins` lets this client join this beacon now; otherwise it gets an
    /// error and its join leaves the broker (`JoinPolicy`).
    private mutating func permitted(_ key: ObserverJoin.Key, at now: Instant) -> Bool {
        guard let refusal = joinPolicy.refusal(client: key.client, beacon: key.beacon, store: store(of: key.beacon),
                                               presence: presence, viewStore: viewStore, at: now) else { return true }
        note(.info, "join refused", ["beacon": "\(key.beacon)", "client": key.client, "reason": refusal])
        reportRejected("join", topic: topics.observer(key.client, of: key.beacon), reason: refusal)
        reject(key, reason: refusal, at: now)
        return false
    }

    /// A visit ended (`owned-or-near`, `proof`): the joins of its beacon end, and so do its owner's
    /// joins of the store's beacons once none of the owner's beacons is in that store; their
    /// profiles leave the broker. (`open` joins last until the app leaves, its last will,
    /// or `brain.joinMaxAge`.)
    private mutating func visitEnded(_ ref: BeaconRef, at now: Instant) {
        guard joinPolicy.access != .open else { return }
        for join in observers.joins(of: ref) {
            leave(join.key, deleteTopic: true, told: "the visit of beacon \(ref) ended: it left the store", at: now)
        }
        guard let owner = joinPolicy.owner(of: ref) else { return }
        for join in observers.joins(ofClient: owner) where joinPolicy.owner(of: join.beacon) == nil
            && !joinPolicy.isNear(owner, store: store(of: join.beacon), presence: presence, viewStore: viewStore) {
            leave(join.key, deleteTopic: true,
                  told: "none of \(owner)'s beacons is in store \(store(of: join.beacon).map(String.init) ?? "?") any more", at: now)
        }
    }

    /// Joins older than `brain.joinMaxAge` end, whatever the app does: profiles do not stay
    /// on the broker for ever. Looked for once a second.
    private mutating func endOldJoins(at now: Instant) {
        guard now >= nextAgeCheck else { return }
        nextAgeCheck = now + 1
        let maxAge = config.brain.joinMaxAge
        for join in observers.joins.values.sorted(by: { $0.key < $1.key }) where now.seconds(since: join.since) >= maxAge {
            note(.info, "join ended: older than brain.joinMaxAge", ["beacon": "\(join.beacon)", "client": join.client])
            leave(join.key, deleteTopic: true,
                  told: "the join is older than brain.joinMaxAge (\(fixed(maxAge, places: 0)) s); join again to stay", at: now)
        }
        for key in proximityRoster.endVisits(olderThan: maxAge, at: now) {
            note(.info, "roster visit ended: older than brain.joinMaxAge", ["store": "\(key.store)", "client": key.client])
            dirtyCustomers.insert(key)
        }
    }

    private mutating func accept(_ key: ObserverJoin.Key, _ request: JoinRequest, fingerprint: String, at now: Instant) {
        let scope = RuleEngine.Scope(beacon: key.beacon, client: key.client)
        if lingering.remove(scope) != nil { _ = rules.retire(scope, at: now) }
        let join = ObserverJoin(key: key, profile: request.profile, since: now, fingerprint: fingerprint)
        observers.insert(join)
        counters.joinsAccepted += 1
        inbox(key.client, .ad(beacon: key.beacon, ad: ad(of: key.beacon), rule: nil), at: now)
        runRules(.join, beacon: key.beacon, join: join, at: now)
        dirtyJoins.insert(key)
        touchRoster(key)
        note(.debug, "join answered", ["beacon": "\(key.beacon)", "client": key.client])
    }

    /// `told`: why the brain ended the join, said to the app on its inbox (`left`); `nil`
    /// when the app left itself or is offline.
    private mutating func leave(_ key: ObserverJoin.Key, deleteTopic: Bool, told reason: String? = nil, at now: Instant) {
        guard let join = observers.remove(key) else { return }
        if let reason { inbox(key.client, .left(beacon: key.beacon, reason: reason), at: now) }
        counters.leaves += 1
        runRules(.leave, beacon: key.beacon, join: join, at: now)
        let scope = RuleEngine.Scope(beacon: key.beacon, client: key.client)
        if rules.retire(scope, at: now) { lingering.insert(scope) }
        if deleteTopic { deleteJoinTopic(key) }
        dirtyJoins.insert(key)
        touchRoster(key)
    }

    /// Deletes a join the observer can no longer delete itself, so its profile leaves the broker.
    private mutating func deleteJoinTopic(_ key: ObserverJoin.Key) {
        out.messages.append(MQTTMessage(topic: topics.observer(key.client, of: key.beacon), text: "", qos: 1, retain: true))
    }

    /// The client may make this join (new, or a changed profile) within its rate; otherwise
    /// it gets an error and nothing changes.
    private mutating func allowJoin(_ key: ObserverJoin.Key, at now: Instant) -> Bool {
        guard !joinLimiter.allow(key.client, at: now) else { return true }
        counters.joinsThrottled += 1
        let reason = "too many joins from \(key.client): at most \(limits.joinBurst) at once, then one every "
            + "\(fixed(limits.joinInterval, places: 1)) s; publish the join again later"
        reportRejected("join", topic: topics.observer(key.client, of: key.beacon), reason: reason)
        reject(key, reason: reason, at: now)
        return false
    }

    /// A client's roster entry in the store of `key`'s beacon is to be checked.
    private mutating func touchRoster(_ key: ObserverJoin.Key) {
        // An Eddystone beacon of no store has no roster.
        guard let store = store(of: key.beacon) else { return }
        dirtyCustomers.insert(RosterBook.Key(store: store, client: key.client))
    }

    /// Customer beacons (registry beacons with an `owner`) as the gateways see them now, for
    /// the stores whose roster is driven by proximity; a beacon that is nobody's any more, or
    /// no longer this brain's, leaves them.
    private mutating func observeProximity(_ refs: Set<BeaconRef>, at now: Instant) {
        let storeOf = viewStore
        for ref in refs.sorted() {
            guard let owner = joinPolicy.owner(of: ref), owns(ref) else {
                for key in proximityRoster.forget(ref) { dirtyCustomers.insert(key) }
                continue
            }
            let views = presence[ref].map { Array($0.views.values) } ?? []
            for key in proximityRoster.observe(ref, owner: owner, profile: entry(ref)?.profile, views: views,
                                               storeOf: { storeOf(ref, $0) }, at: now) {
                dirtyCustomers.insert(key)
            }
        }
    }

    /// An oversized, malformed, throttled or refused join: an error to the observer, and a
    /// join that was not one already leaves the broker (its profile and photo with it).
    private mutating func reject(_ key: ObserverJoin.Key, reason: String, at now: Instant) {
        counters.joinsRejected += 1
        if isSettled {
            inbox(key.client, .error(beacon: key.beacon, reason: reason), at: now)
            if observers[key] == nil { deleteJoinTopic(key) }
        } else {
            pendingErrors[key] = reason
        }
    }

    // MARK: - Rules

    /// `captured`: an update's capture time, which its rules' rate limit counts in.
    private mutating func runRules(_ trigger: Rule.Trigger, beacon ref: BeaconRef, fleet: FleetBeacon?, since: Instant,
                                   at now: Instant, captured: Instant? = nil) {
        let entry = self.entry(ref, uuid: fleet?.uuid)
        var context = RuleEngine.Context(trigger: trigger, beacon: ref, uuid: fleet?.uuid, entry: entry,
                                         rssi: fleet?.zoneView?.rssiSmoothed, zone: fleet?.zone, since: since)
        context.captured = captured
        let scope = RuleEngine.Scope(beacon: ref)
        let fired = rules.fire(context, scope: scope, at: now)
        if fired.contains(where: { $0.once || $0.cooldown != nil }) { dirtyVisits.insert(ref) }
        for rule in fired {
            counters.rulesFired += 1
            note(.debug, "rule fired", ["rule": rule.name, "beacon": "\(ref)"])
            perform(rule, beacon: ref, entry: entry, fleet: fleet, targets: observers.joins(of: ref), subject: nil, at: now)
        }
    }

    private mutating func runRules(_ trigger: Rule.Trigger, beacon ref: BeaconRef, join: ObserverJoin, at now: Instant) {
        let fleet = presence[ref]
        let entry = self.entry(ref, uuid: fleet?.uuid)
        let context = RuleEngine.Context(trigger: trigger, beacon: ref, uuid: fleet?.uuid ?? entry?.id?.uuid,
                                         entry: entry, rssi: fleet?.zoneView?.rssiSmoothed, zone: fleet?.zone,
                                         since: join.since)
        let fired = rules.fire(context, scope: RuleEngine.Scope(beacon: ref, client: join.client), at: now)
        if fired.contains(where: { $0.once || $0.cooldown != nil }) { dirtyJoins.insert(join.key) }
        for rule in fired {
            counters.rulesFired += 1
            note(.debug, "rule fired", ["rule": rule.name, "beacon": "\(ref)", "client": join.client])
            perform(rule, beacon: ref, entry: entry, fleet: fleet, targets: [join], subject: join, at: now)
        }
    }

    /// Carries out a rule's actions. Inbox actions go to `targets` (the observer of a join or
    /// leave, or every observer joined to the beacon); `publish` goes out once.
    private mutating func perform(_ rule: Rule, beacon ref: BeaconRef, entry: BeaconEntry?, fleet: FleetBeacon?,
                                  targets: [ObserverJoin], subject: ObserverJoin?, at now: Instant) {
        for action in rule.actions {
            switch action {
            case .ad:
                guard let ad = ad(of: ref) else {
                    counters.actionsSkipped += 1
                    continue
                }
                for target in targets { inbox(target.client, .ad(beacon: ref, ad: ad, rule: rule.name), at: now) }
            case .greeting(let template):
                for target in targets {
                    let values = variables(rule, ref, entry, fleet, target, at: now)
                    guard let text = rule.text(template, values) else {
                        // "Hello ! A  is on its way." is worse than nothing.
                        counters.actionsSkipped += 1
                        note(.debug, "skipped a greeting whose template lacks values; give the rule a fallback",
                             ["rule": rule.name, "client": target.client])
                        continue
                    }
                    inbox(target.client, .greeting(beacon: ref, text: text, rule: rule.name), at: now)
                }
            case .locationFix:
                guard let location = entry?.location else {
                    counters.actionsSkipped += 1
                    continue
                }
                for target in targets {
                    inbox(target.client, .locationFix(beacon: ref, location: location, rule: rule.name), at: now)
                }
            case .publish(let topicTemplate, let template, let retain, let qos):
                let values = variables(rule, ref, entry, fleet, subject, at: now)
                guard let topic = renderTopic(topicTemplate, values) else {
                    counters.actionsSkipped += 1
                    note(.debug, "skipped a publish whose topic would not be valid", ["rule": rule.name])
                    continue
                }
                guard let text = rule.text(template, values) else {
                    counters.actionsSkipped += 1
                    note(.debug, "skipped a publish whose template lacks values; give the rule a fallback",
                         ["rule": rule.name, "topic": topic])
                    continue
                }
                out.messages.append(MQTTMessage(topic: topic, text: text, qos: qos, retain: retain))
            }
        }
    }

    /// Template values (see `Template.variables`); numbers as text, missing ones empty.
    private func variables(_ rule: Rule, _ ref: BeaconRef, _ entry: BeaconEntry?, _ fleet: FleetBeacon?,
                           _ join: ObserverJoin?, at now: Instant) -> [String: String] {
        var values: [String: String] = ["rule": rule.name, "ts": now.iso8601]
        values["store"] = store(of: ref).map(String.init)
        if let eddystone = ref.eddystone {
            values["namespace"] = eddystone.namespace.description
            values["instance"] = eddystone.instance.description
        } else {
            values["major"] = "\(ref.major)"
            values["minor"] = "\(ref.minor)"
        }
        values["uuid"] = (fleet?.uuid ?? entry?.id?.uuid)?.description
        values["name"] = entry?.name
        if let fleet {
            values["zone"] = fleet.zoneView?.zoneName ?? fleet.zone
            values["gateway"] = fleet.zone
            values["proximity"] = fleet.proximity.rawValue
            values["distance"] = fleet.zoneView?.distance.map { fixed($0, places: 2) }
            values["rssi"] = fleet.zoneView?.rssiSmoothed.map { fixed($0, places: 1) }
        }
        if let join {
            values["client"] = join.client
            values["customer"] = join.name
            values["favorite"] = join.favorite
        } else if let owner = entry?.owner {
            // A customer's own beacon: the profile of the owner's accepted join (of this beacon,
            // else of any) as the app gave it, else the registry's, as a proximity roster shows it.
            let accepted = observers[ObserverJoin.Key(beacon: ref, client: owner)]
                ?? observers.joins(ofClient: owner).first { $0.name != nil }
            values["client"] = owner
            values["customer"] = accepted?.name ?? entry?.profile?.name
            values["favorite"] = accepted?.favorite ?? entry?.profile?.favorite
        } else if let accepted = observers.joins(of: ref).filter({ $0.name != nil }).min(by: { $0.since < $1.since }) {
            // A beacon an app has joined with a profile (the customer's phone as the beacon):
            // the first such join names the customer.
            values["client"] = accepted.client
            values["customer"] = accepted.name
            values["favorite"] = accepted.favorite
        }
        if let location = entry?.location {
            values["lat"] = location.latitude.map { fixed($0, places: 6) }
            values["lon"] = location.longitude.map { fixed($0, places: 6) }
            values["heading"] = location.heading.map { fixed($0, places: 1) }
            values["floor"] = location.floor.map { "\($0)" }
        }
        return values
    }

    /// Renders a rule's topic. Every variable used in it must have a value that is one
    /// valid topic segment, so a customer named `#` or `brain/answered/1/2/x` cannot
    /// redirect the message; the rule's topic is under the fleet's topic prefix.
    private func renderTopic(_ template: String, _ values: [String: String]) -> String? {
        for name in Template.names(in: template) {
            guard let value = values[name], Topics.problem(withSegment: value) == nil else { return nil }
        }
        let rendered = Template.render(template, values)
        guard Topics.problem(withSegment: rendered, allowSlash: true) == nil, !rendered.contains("//") else { return nil }
        return topics.topic(rendered)
    }

    // MARK: - Output

    private mutating func inbox(_ client: String, _ message: InboxMessage, at now: Instant) {
        counters.inboxMessages += 1
        out.messages.append(MQTTMessage(topic: topics.inbox(of: client), text: message.json(at: now),
                                         qos: 1, retain: false))
    }

    /// The latest time seen, for the rosters' `ts`.
    private var lastTime = Instant.epoch

    /// Publishes the standing ads of this brain's registry beacons and deletes those that
    /// went away.
    private mutating func syncAds() {
        var desired: [String: String] = [:]
        for ref in directory.ownBeacons {
            if let ad = ad(of: ref) { desired[topics.ad(of: ref)] = ad.jsonText }
        }
        for (topic, text) in desired.sorted(by: { $0.key < $1.key }) { setRetained(topic, signature: text) { text } }
        for topic in known.topics where desired[topic] == nil {
            if case (_, .ad)? = topics.parseBeacon(topic) { setRetained(topic, signature: nil) { "" } }
        }
    }

    /// Publishes `text()` retained unless the broker already holds the same `signature`;
    /// a `nil` signature deletes what the broker holds.
    /// `expiry`: seconds after which the broker drops it (MQTT 5).
    private mutating func setRetained(_ topic: String, signature: String?, expiry: UInt32? = nil, text: () -> String) {
        if let message = known.set(topic, signature: signature, expiry: expiry, text: text) { out.messages.append(message) }
    }

    /// What the brain retains about customers (roster entries and summaries) expires on the
    /// broker after `brain.joinMaxAge` on MQTT 5, even if no brain is left to delete it.
    private var personalExpiry: UInt32 { UInt32(config.brain.joinMaxAge.rounded(.up)) }

    /// Writes what changed: fleet presence, records, rosters. Replies and rule messages
    /// are already out, so a crash in between makes a restarted brain answer again (at
    /// least once) rather than never.
    private mutating func finish(at now: Instant? = nil) -> BrainOutput {
        if let now { lastTime = max(lastTime, now) }
        if isSettled {
            let seal = recordSeal
            // Records first: a presence on the broker then always has its record, so a brain
            // restarted in between never takes a visit it answered for a new one.
            for ref in dirtyVisits.sorted() where heldVisits[ref] == nil {
                let memory = rules.memory(for: RuleEngine.Scope(beacon: ref))
                let record: VisitRecord? = if let fleet = presence[ref] {
                    VisitRecord(since: fleet.since, zone: fleet.zone, rules: memory ?? RuleMemory())
                } else {
                    memory.map { VisitRecord(since: nil, rules: $0) }
                }
                let text = record?.json, topic = topics.visitRecord(of: ref)
                setRetained(topic, signature: text) { text.map { seal.seal($0, topic: topic) } ?? "" }
            }
            for ref in dirtyPresence.sorted() where heldVisits[ref] == nil {
                // Checked on every sighting: the signature decides, the payload is made only to send.
                let report = presence[ref]?.report
                setRetained(topics.presence(of: ref), signature: report?.signature) { report?.json ?? "" }
            }
            for key in dirtyJoins.sorted() {
                let memory = rules.memory(for: RuleEngine.Scope(beacon: key.beacon, client: key.client))
                let record: AnsweredRecord? = if let join = observers[key] {
                    AnsweredRecord(join: join.fingerprint, since: join.since, rules: memory ?? RuleMemory())
                } else {
                    memory.map { AnsweredRecord(join: nil, since: nil, rules: $0) }
                }
                let text = record?.json, topic = topics.answeredRecord(of: key.beacon, client: key.client)
                setRetained(topic, signature: text) { text.map { seal.seal($0, topic: topic) } ?? "" }
            }
            for key in dirtyCustomers.sorted() where stores.isEmpty || stores.contains(key.store) {
                let source = directory.storeEntry(key.store)?.roster.source ?? .joins
                let joins = source.usesJoins ? observers.joins(ofClient: key.client).filter { store(of: $0.beacon) == key.store } : []
                let visits = proximityRoster.visits(of: key.client, in: key.store)
                let text = rosterBook.update(client: key.client, store: key.store, joins: joins, visits: visits,
                                             topics: topics)?.json.jsonText
                let before = known[topics.customer(key.client, ofStore: key.store)]
                let topic = topics.customer(key.client, ofStore: key.store)
                setRetained(topic, signature: text, expiry: personalExpiry) { text.map { seal.seal($0, topic: topic) } ?? "" }
                if before != text { dirtyStores.insert(key.store) }
            }
            dirtyCustomers = []
            // Summaries at most once per `rosterInterval` per store; the rest wait for `advance`.
            var waiting: Set<UInt16> = []
            for store in dirtyStores.sorted() where stores.isEmpty || stores.contains(store) {
                if let due = rosterDue[store], lastTime < due {
                    waiting.insert(store)
                    continue
                }
                let topic = topics.roster(ofStore: store)
                if rosterBook.count(of: store) == 0 && known[topic] == nil { continue }
                let roster = rosterBook.summary(store: store, name: directory.storeEntry(store)?.name, limit: limits.rosterLimit)
                let time = lastTime
                let signature = roster.json(at: nil)
                guard known[topic] != signature else { continue }
                setRetained(topic, signature: signature, expiry: personalExpiry) { roster.json(at: time) }
                rosterDue[store] = lastTime + limits.rosterInterval
            }
            dirtyVisits = []
            dirtyPresence = []
            dirtyJoins = []
            dirtyStores = waiting
        }
        defer { out = BrainOutput() }
        return out
    }

    // MARK: - Store bridges

    /// The bridged stores this brain handles, with their gateways.
    private func bridgedStores(_ config: FleetConfig) -> [UInt16: Set<String>] {
        var bridged: [UInt16: Set<String>] = [:]
        for store in config.bridgedStores where stores.isEmpty || stores.contains(store.major) {
            bridged[store.major] = Set(config.gateways(ofStore: store.major).map(\.id))
        }
        return bridged
    }

    /// Whether a beacon's view from a gateway is held (its store's bridge is down): its
    /// silence says nothing, so it neither ends nor lets the beacon exit.
    private var holdsView: (BeaconRef, String) -> Bool {
        guard !bridges.unknownStores.isEmpty else { return { _, _ in false } }
        let (bridges, storeOf) = (self.bridges, viewStore)
        return { ref, gateway in bridges.isUnknown(storeOf(ref, gateway)) }
    }

    /// The store a gateway's view comes from (`BeaconDirectory.viewStore`).
    private var viewStore: @Sendable (BeaconRef, String) -> UInt16? { directory.viewStore }

    private mutating func bridgeChanged(_ change: StoreBridges.Change, at now: Instant) {
        switch change {
        case .none:
            break
        case .lost(let major):
            note(.notice, "store bridge down: holding the store's presence until it is back", ["store": "\(major)"])
        case .healing(let major):
            note(.info, "store bridge up: reading what changed", ["store": "\(major)"])
        case .found(let major):
            note(.info, "store bridge came back while the brain was away", ["store": "\(major)"])
        case .reconciled(let major, let since):
            // The replay is in: views it did not confirm are gone, held visits without a view end.
            let storeOf = viewStore
            let dropped = presence.dropViews { ref, view in storeOf(ref, view.gateway) == major && view.lastUpdate < since }
            handle(dropped, at: now)
            var ended = 0
            for (ref, record) in heldVisits.sorted(by: { $0.key < $1.key }) where store(of: ref) == major {
                heldVisits[ref] = nil
                if presence[ref] == nil {
                    endVisit(ref, record, at: now)
                    ended += 1
                }
            }
            note(.notice, "store bridge back: presence reconciled", [
                "store": "\(major)", "exits": "\(dropped.filter { if case .exit = $0 { true } else { false } }.count)",
                "heldVisitsEnded": "\(ended)",
            ])
        }
    }

    /// A visit that ended while no brain saw it (or while its store was unknown): its exit
    /// rules, and its record and fleet presence go.
    private mutating func endVisit(_ ref: BeaconRef, _ record: VisitRecord, at now: Instant) {
        let scope = RuleEngine.Scope(beacon: ref)
        restore(record.rules, for: scope)
        if let since = record.since {
            runRules(.exit, beacon: ref, fleet: nil, since: since, at: now)
        }
        if rules.retire(scope, at: now) { lingering.insert(scope) }
        dirtyVisits.insert(ref)
        dirtyPresence.insert(ref)
        visitEnded(ref, at: now)
    }

    // MARK: - Helpers

    /// Puts back what a record says rules did; says so when it names rules the config lacks.
    private mutating func restore(_ recorded: RuleMemory, for scope: RuleEngine.Scope) {
        let unknown = rules.restore(recorded, for: scope)
        guard !unknown.isEmpty else { return }
        note(.notice, "a record names rules the config does not have (renamed or removed while no brain ran): "
             + "their once and cooldown state is dropped", ["beacon": "\(scope.beacon)", "rules": unknown.joined(separator: ", ")])
        markRecordDirty(scope)
    }

    /// The record of a scope (a visit's, or an answered join's) is to be written again.
    private mutating func markRecordDirty(_ scope: RuleEngine.Scope) {
        if let client = scope.client {
            dirtyJoins.insert(ObserverJoin.Key(beacon: scope.beacon, client: client))
        } else {
            dirtyVisits.insert(scope.beacon)
        }
    }

    private mutating func owned(_ ref: BeaconRef) -> Bool {
        if owns(ref) { return true }
        counters.foreign += 1
        return false
    }

    private mutating func json(_ payload: [UInt8], _ kind: BrainCounters.Input, _ topic: String) -> JSONValue? {
        do {
            return try JSONParser(maxDepth: limits.maxDepth).parse(payload)
        } catch {
            malformed(kind, topic, error.description)
            return nil
        }
    }

    private mutating func malformed(_ kind: BrainCounters.Input, _ topic: String, _ reason: String) {
        counters.malformed[kind, default: 0] += 1
        note(.debug, "ignored a malformed payload", ["topic": String(topic.prefix(200)), "reason": String(reason.prefix(300))])
        reportRejected(kind.rawValue, topic: topic, reason: reason)
    }

    private mutating func unknownTopic(_ topic: String) {
        counters.unknownTopics += 1
        note(.debug, "ignored a topic outside the contract", ["topic": String(topic.prefix(200))])
        reportRejected("topic", topic: topic, reason: "not a topic of the contract")
    }

    /// `brain/events`: `{"event":"rejected","kind","topic","reason","bytes","ts"}`, rate-limited
    /// (see `RejectionReports`). Every rejected input is also counted in `counters`.
    private mutating func reportRejected(_ kind: String, topic: String, reason: String) {
        for text in rejections.report(kind: kind, topic: topic, reason: reason, bytes: inputBytes, at: lastTime) {
            event(text)
        }
    }

    // MARK: - Beacon health

    /// The registry's beacons this brain handles, against the fleet presence: records
    /// written where they changed, records of beacons gone from the registry deleted.
    private mutating func checkBeaconHealth(_ only: Set<BeaconRef>? = nil, at now: Instant) {
        guard isSettled else { return }
        let all = directory.ownBeacons
        let beacons = only.map { only in all.filter(only.contains) } ?? all
        guard !beacons.isEmpty else { return }
        let present = presence.beacons
        let (changed, reports) = beaconHealth.check(beacons, isPresent: { present[$0] != nil },
                                                    missingAfter: config.brain.missingAfter, at: now)
        for ref in changed { writeHealth(ref) }
        for report in reports { health(report, at: now) }
        guard only == nil else { return }
        for ref in beaconHealth.keep(only: Set(all)) { setRetained(topics.beaconHealth(of: ref), signature: nil) { "" } }
    }

    private mutating func telemetry(of ref: BeaconRef, millivolts: Int?) {
        let (changed, report) = beaconHealth.telemetry(of: ref, millivolts: millivolts, lowBattery: config.brain.lowBattery)
        if changed { writeHealth(ref) }
        if let report { health(report, at: lastTime) }
    }

    private mutating func writeHealth(_ ref: BeaconRef) {
        guard let record = beaconHealth.records[ref] else { return }
        let text = record.json(beacon: ref, name: entry(ref)?.name)
        setRetained(topics.beaconHealth(of: ref), signature: text) { text }
    }

    /// `brain/events`: `{"event":"battery-low","beacon","name","battery","threshold","ts"}` (mV) or
    /// `{"event":"beacon-missing","beacon","name","lastSeen","seconds","ts"}` (`lastSeen` null: never seen).
    private mutating func health(_ report: BeaconHealth.Report, at now: Instant) {
        var writer = JSONWriter(capacity: 200)
        writer.object { o in
            switch report {
            case .batteryLow(let ref, let millivolts, let threshold):
                o("event", "battery-low")
                o("beacon", ref.json)
                o("name", entry(ref)?.name)
                o("battery", millivolts)
                o("threshold", threshold)
                note(.warning, "a beacon's battery is low", ["beacon": "\(ref)", "battery": "\(millivolts) mV"])
            case .missing(let ref, let lastSeen, let seconds):
                o("event", "beacon-missing")
                o("beacon", ref.json)
                o("name", entry(ref)?.name)
                o("lastSeen", lastSeen.map { JSONValue.string($0.iso8601) } ?? .null)
                o("seconds", seconds, places: 0)
                note(.warning, "a registry beacon has not been seen", ["beacon": "\(ref)", "seconds": "\(Int(seconds))"])
            }
            o("ts", now)
        }
        event(writer.text)
    }

    private mutating func event(_ text: String) {
        out.messages.append(MQTTMessage(topic: topics.brainEvents, text: text, qos: 1, retain: false))
    }

    private mutating func rejectConfig(_ errors: [String], at now: Instant) {
        counters.configsRejected += 1
        counters.malformed[.fleetConfig, default: 0] += 1
        report(status: "rejected", origin: "fleet/config", details: ["errors": Array(errors.prefix(50))], at: now)
        note(.error, "rejected a fleet config; keeping the last good one",
             ["errors": errors.prefix(5).joined(separator: "; ")])
    }

    /// `brain/events`: `{"event":"config","origin","status":"applied"|"rejected",
    /// "needsRestart":[…]?,"errors":[…]?,"ts"}`.
    private mutating func report(status: String, origin: String, details: [String: [String]], at now: Instant) {
        var writer = JSONWriter()
        writer.object { o in
            o("event", "config")
            o("origin", origin)
            o("status", status)
            for (key, list) in details.sorted(by: { $0.key < $1.key }) { o(key, .array(list.map(JSONValue.string))) }
            o("ts", now)
        }
        out.messages.append(MQTTMessage(topic: topics.brainEvents, text: writer.text, qos: 1, retain: false))
    }

    private mutating func note(_ level: LogEntry.Level, _ message: String, _ metadata: [String: String] = [:]) {
        out.log.append(LogEntry(level, message, metadata))
    }

    private mutating func index(_ config: FleetConfig) {
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

    /// The configured zone name of every gateway.
    static func zoneNames(_ config: FleetConfig) -> [String: String] {
        Dictionary(config.gateways.map { ($0.id, $0.zone ?? $0.id) }, uniquingKeysWith: { first, _ in first })
    }
}

/// Fixed-point text for template values: `52.520008`, `1.5`, `-3`.
func fixed(_ value: Double, places: Int) -> String {
    var writer = JSONWriter(capacity: 16)
    writer.writeFixed(value, places: places)
    return writer.text
}

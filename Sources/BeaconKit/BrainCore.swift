/// Something the brain's core wants logged; the core itself never logs.
public struct BrainLogEntry: Sendable, Equatable {
    public enum Level: String, Sendable { case debug, info, notice, warning, error }
    public var level: Level
    public var message: String
    public var metadata: [String: String]

    public init(_ level: Level, _ message: String, _ metadata: [String: String] = [:]) {
        self.level = level
        self.message = message
        self.metadata = metadata
    }
}

/// What one input led to.
public struct BrainOutput: Sendable, Equatable {
    /// To publish, in this order.
    public var messages: [OutgoingMessage] = []
    public var log: [BrainLogEntry] = []
    /// `BrainCore.subscriptions` changed (a new config moved beacons between stores).
    public var subscriptionsChanged = false

    public init() {}
}

/// What the brain counts. Every input that is dropped is counted here, once.
public struct BrainCounters: Sendable, Equatable {
    /// The kind of input, by topic.
    public enum Input: String, Sendable, CaseIterable, Comparable {
        case sighting, gatewayPresence, gatewayStatus, join, observerStatus, fleetConfig
        case fleetPresence, ad, roster, record

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
    /// Joins answered with an error (oversized or malformed; also counted above).
    public var joinsRejected = 0
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
    public private(set) var observers = ObserverRegistry()
    public private(set) var rules: RuleEngine
    public var counters = BrainCounters()
    public private(set) var isSettled = false

    private var registry: [BeaconRef: [BeaconEntry]] = [:]
    private var storeEntries: [UInt16: StoreEntry] = [:]

    // Collected while settling.
    private var visitRecords: [BeaconRef: VisitRecord] = [:]
    private var answeredRecords: [ObserverJoin.Key: AnsweredRecord] = [:]
    private var retainedPresence: [BeaconRef: FleetPresenceReport] = [:]
    private var pendingJoins: [ObserverJoin.Key: (request: JoinRequest, fingerprint: String)] = [:]
    private var pendingErrors: [ObserverJoin.Key: String] = [:]
    private var offlineObservers: Set<String> = []

    /// What the broker holds on the brain's own retained topics, as signatures (see
    /// `signature(of:)`): lets the brain publish only changes and delete what it left behind.
    private var known: [String: String] = [:]
    /// Scopes whose visit or join ended while a cooldown in seconds still runs.
    private var lingering: Set<RuleEngine.Scope> = []
    private var dirtyPresence: Set<BeaconRef> = []
    private var dirtyVisits: Set<BeaconRef> = []
    private var dirtyJoins: Set<ObserverJoin.Key> = []
    private var dirtyStores: Set<UInt16> = []
    private var out = BrainOutput()

    public init(config: FleetConfig, stores: Set<UInt16> = [], limits: Limits = .init()) {
        self.config = config
        self.stores = stores
        self.limits = limits
        topics = config.topics
        presence = FleetPresence(settings: Self.presenceSettings(config))
        rules = RuleEngine(rules: config.rules)
        index(config)
    }

    // MARK: - Queries

    /// The registry entry of a beacon; with a UUID, only an entry with that UUID.
    public func entry(_ ref: BeaconRef, uuid: BeaconUUID? = nil) -> BeaconEntry? {
        guard let entries = registry[ref] else { return nil }
        guard let uuid else { return entries.first }
        return entries.first { $0.id.uuid == uuid }
    }

    /// The store (a major) a beacon belongs to: its registry `store`, else its major.
    public func store(of ref: BeaconRef) -> UInt16 { registry[ref]?.first?.store ?? ref.major }

    /// Whether this brain handles the beacon (`--stores`).
    public func owns(_ ref: BeaconRef) -> Bool { stores.isEmpty || stores.contains(store(of: ref)) }

    /// The beacon's standing offer: its registry entry's ad, else its store's. Keyed by
    /// major/minor like the `ad` topic, so the reply to a join and the retained ad agree.
    public func ad(of ref: BeaconRef) -> JSONValue? {
        entry(ref)?.ad ?? storeEntries[store(of: ref)]?.ad
    }

    /// The majors whose topics this brain needs: its stores and the majors of registry
    /// beacons assigned to them; `nil` for every major.
    public var majors: [UInt16]? {
        guard !stores.isEmpty else { return nil }
        var majors = stores
        for ref in registry.keys where owns(ref) { majors.insert(ref.major) }
        return majors.sorted()
    }

    /// The topic filters to subscribe to.
    public var subscriptions: [String] {
        var filters = [topics.fleetConfig, topics.topic("gateways/+/status"), topics.topic("observers/+/status")]
        let majors = self.majors.map { $0.map(String.init) } ?? ["+"]
        for major in majors {
            filters += ["beacons/\(major)/+", "beacons/\(major)/+/presence", "beacons/\(major)/+/presence/+",
                        "beacons/\(major)/+/ad", "beacons/\(major)/+/observers/+",
                        "brain/visits/\(major)/+", "brain/answered/\(major)/+/+"].map(topics.topic)
        }
        if stores.isEmpty {
            filters.append(topics.topic("stores/+/roster"))
        } else {
            filters += stores.sorted().map { topics.roster(ofStore: $0) }
        }
        return filters
    }

    /// `brain/status` `online`, retained; the will says `offline`.
    public var onlineMessage: OutgoingMessage { OutgoingMessage(topic: topics.brainStatus, payload: "online", qos: 1, retain: true) }
    public var offlineMessage: OutgoingMessage { OutgoingMessage(topic: topics.brainStatus, payload: "offline", qos: 1, retain: true) }

    /// `brain/health/<client>` (retained): `{"version","uptime","stores","settled","beacons","joins",
    /// "received","oversized","malformed":{kind:count},"unknownTopics","foreign",
    /// "joinsAccepted","joinsRejected","leaves","rulesFired","actionsSkipped","inboxMessages",
    /// "configsApplied","configsRejected","published","publishFailures","ts"}`; `uptime` in s.
    public func health(client: String, version: String, uptime: Double, published: Int, publishFailures: Int,
                       at now: Instant) -> OutgoingMessage {
        var writer = JSONWriter()
        let c = counters
        writer.object { o in
            o("version", version)
            o("uptime", uptime, places: 1)
            o("stores", stores.isEmpty ? JSONValue.null : .array(stores.sorted().map { .number(Double($0)) }))
            o("settled", isSettled)
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
        return OutgoingMessage(topic: topics.brainHealth(client), payload: writer.text, qos: 0, retain: true)
    }

    // MARK: - Inputs

    /// One MQTT message. `retained`: the broker delivered it from its store (state from
    /// before this connection) rather than as it was published.
    public mutating func receive(topic: String, payload: [UInt8], retained: Bool, at now: Instant) -> BrainOutput {
        counters.received += 1
        let isConfig = topic == topics.fleetConfig
        if payload.count > (isConfig ? limits.maxConfigPayload : limits.maxPayload) {
            counters.oversized += 1
            note(.debug, "dropped an oversized payload", ["topic": String(topic.prefix(200)), "bytes": "\(payload.count)"])
            if case .observer(let major, let minor, let client)? = topics.parse(topic) {
                let key = ObserverJoin.Key(beacon: BeaconRef(major: major, minor: minor), client: client)
                if owns(key.beacon) {
                    reject(key, reason: "join payload of \(payload.count) bytes exceeds \(limits.maxPayload)", at: now)
                }
            }
            return finish(at: now)
        }
        if let parsed = topics.parse(topic) {
            route(parsed, topic: topic, payload: payload, retained: retained, at: now)
        } else if let record = topics.parseBrainRecord(topic) {
            readRecord(record, topic: topic, payload: payload, retained: retained)
        } else {
            counters.unknownTopics += 1
            note(.debug, "ignored a topic outside the contract", ["topic": String(topic.prefix(200))])
        }
        return finish(at: now)
    }

    /// The retained messages are in: reconcile them and start answering (see the type's
    /// documentation). Calling it again does nothing.
    public mutating func settle(at now: Instant) -> BrainOutput {
        guard !isSettled else { return finish(at: now) }
        isSettled = true

        // Visits the records show as answered carry on silently.
        var begun: [BeaconRef] = []
        for ref in presence.beacons.keys.sorted() {
            let record = visitRecords[ref]
            if let record { rules.restore(record.rules, for: RuleEngine.Scope(beacon: ref)) }
            if let since = record?.since ?? retainedPresence[ref]?.since {
                presence.restore(ref, since: since, zone: retainedPresence[ref]?.zone)
            } else {
                presence.restore(ref, since: now, zone: nil)
                begun.append(ref)
            }
            dirtyVisits.insert(ref)
            dirtyPresence.insert(ref)
        }

        // Joins: carry on the answered ones, answer the new ones, close the ended ones.
        for (key, pending) in pendingJoins.sorted(by: { $0.key < $1.key }) {
            let record = answeredRecords[key]
            let scope = RuleEngine.Scope(beacon: key.beacon, client: key.client)
            if let record { rules.restore(record.rules, for: scope) }
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
                dirtyStores.insert(store(of: key.beacon))
            } else {
                accept(key, pending.request, fingerprint: pending.fingerprint, at: now)
            }
        }
        for (key, record) in answeredRecords.sorted(by: { $0.key < $1.key }) where pendingJoins[key] == nil {
            let scope = RuleEngine.Scope(beacon: key.beacon, client: key.client)
            rules.restore(record.rules, for: scope)
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
            let scope = RuleEngine.Scope(beacon: ref)
            rules.restore(record.rules, for: scope)
            if let since = record.since {
                runRules(.exit, beacon: ref, fleet: nil, since: since, at: now)
            }
            if rules.retire(scope, at: now) { lingering.insert(scope) }
            dirtyVisits.insert(ref)
            dirtyPresence.insert(ref)
        }

        for (key, reason) in pendingErrors.sorted(by: { $0.key < $1.key }) {
            inbox(key.client, .error(beacon: key.beacon, reason: reason), at: now)
        }
        // Whatever of ours the broker holds gets checked, so leftovers are deleted.
        for topic in known.keys {
            switch (topics.parse(topic), topics.parseBrainRecord(topic)) {
            case (.roster(let store)?, _): dirtyStores.insert(store)
            case (.fleetPresence(let major, let minor)?, _): dirtyPresence.insert(BeaconRef(major: major, minor: minor))
            case (_, .visit(let ref)?): dirtyVisits.insert(ref)
            case (_, .answered(let ref, let client)?): dirtyJoins.insert(ObserverJoin.Key(beacon: ref, client: client))
            default: break
            }
        }
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

    /// Time passes: views known from sightings expire, cooldowns in seconds run out.
    public mutating func advance(to now: Instant) -> BrainOutput {
        guard isSettled else { return finish(at: now) }
        handle(presence.advance(to: now), at: now)
        for scope in lingering.sorted() where !rules.retire(scope, at: now) {
            lingering.remove(scope)
            if let client = scope.client {
                dirtyJoins.insert(ObserverJoin.Key(beacon: scope.beacon, client: client))
            } else {
                dirtyVisits.insert(scope.beacon)
            }
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
        config = new
        index(new)
        presence.settings = Self.presenceSettings(new)
        rules.rules = new.rules
        counters.configsApplied += 1
        for ref in presence.beacons.keys.sorted() where !owns(ref) {
            presence.forget(ref)
            rules.forget(RuleEngine.Scope(beacon: ref))
        }
        for key in observers.joins.keys.sorted() where !owns(key.beacon) {
            observers.remove(key)
            rules.forget(RuleEngine.Scope(beacon: key.beacon, client: key.client))
        }
        out.subscriptionsChanged = subscriptions != subscriptionsBefore
        if isSettled {
            syncAds()
            for join in observers.joins.values { dirtyStores.insert(store(of: join.beacon)) }
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
        case .sighting(let major, let minor):
            let ref = BeaconRef(major: major, minor: minor)
            guard owned(ref) else { return }
            guard let json = json(payload, .sighting, topic) else { return }
            do {
                let report = try SightingReport(parsing: json, topic: ref)
                let zone = config.gateway(id: report.gateway)?.zone ?? report.gateway
                handle(presence.sighting(report, zoneName: zone, at: now), at: now)
                // Any gateway's proximity is in the fleet presence; its signature decides.
                if presence[ref] != nil { dirtyPresence.insert(ref) }
            } catch {
                malformed(.sighting, topic, error.reason)
            }

        case .gatewayPresence(let major, let minor, let gateway):
            let ref = BeaconRef(major: major, minor: minor)
            guard owned(ref) else { return }
            if payload.isEmpty {
                handle(presence.gatewayPresenceDeleted(ref, gateway: gateway), at: now)
                return
            }
            guard let json = json(payload, .gatewayPresence, topic) else { return }
            do {
                let report = try GatewayPresenceReport(parsing: json, topic: ref, gateway: gateway)
                handle(presence.gatewayPresence(report, retained: retained, at: now), at: now)
                if presence[ref] != nil { dirtyPresence.insert(ref) }
            } catch {
                malformed(.gatewayPresence, topic, error.reason)
            }

        case .gatewayStatus(let gateway):
            switch String(decoding: payload, as: UTF8.self) {
            case "online": handle(presence.gatewayStatus(gateway, online: true), at: now)
            case "offline":
                note(.info, "gateway offline: dropping its views", ["gateway": gateway])
                handle(presence.gatewayStatus(gateway, online: false), at: now)
            case "": break
            default: malformed(.gatewayStatus, topic, "expected online or offline")
            }

        case .observer(let major, let minor, let client):
            let key = ObserverJoin.Key(beacon: BeaconRef(major: major, minor: minor), client: client)
            guard owned(key.beacon) else { return }
            if !retained { offlineObservers.remove(client) }
            if payload.isEmpty {
                if isSettled {
                    leave(key, deleteTopic: false, at: now)
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
                counters.malformed[.join, default: 0] += 1
                note(.debug, "rejected a join", ["topic": String(topic.prefix(200)), "reason": error.reason])
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

        case .observerStatus(let client):
            switch String(decoding: payload, as: UTF8.self) {
            case "online": offlineObservers.remove(client)
            case "offline":
                if isSettled {
                    let joins = observers.joins(ofClient: client)
                    if !joins.isEmpty { note(.info, "observer offline: ending its joins", ["client": client, "joins": "\(joins.count)"]) }
                    for join in joins { leave(join.key, deleteTopic: true, at: now) }
                } else {
                    offlineObservers.insert(client)
                }
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

        case .fleetPresence(let major, let minor):
            let ref = BeaconRef(major: major, minor: minor)
            guard !isSettled, retained, owned(ref), !payload.isEmpty else { return }
            guard let json = json(payload, .fleetPresence, topic) else { return }
            do {
                let report = try FleetPresenceReport(parsing: json, topic: ref)
                retainedPresence[ref] = report
                known[topic] = report.signature
            } catch {
                known[topic] = ""
                malformed(.fleetPresence, topic, error.reason)
            }

        case .ad(let major, let minor):
            let ref = BeaconRef(major: major, minor: minor)
            guard !isSettled, retained, owned(ref), !payload.isEmpty else { return }
            known[topic] = String(decoding: payload, as: UTF8.self)

        case .roster(let store):
            guard !isSettled, retained, stores.isEmpty || stores.contains(store), !payload.isEmpty else { return }
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

        case .gatewayHealth, .gatewayCommand, .gatewayEvents, .inbox, .brainStatus:
            counters.unknownTopics += 1
        }
    }

    private mutating func readRecord(_ record: Topics.BrainRecordTopic, topic: String, payload: [UInt8], retained: Bool) {
        let ref: BeaconRef = switch record {
        case .visit(let ref), .answered(let ref, _): ref
        }
        // After settling the brain is the authority on its records; what comes back is its own echo.
        guard !isSettled, retained, owned(ref), !payload.isEmpty else { return }
        guard let json = json(payload, .record, topic) else {
            known[topic] = ""
            return
        }
        do {
            switch record {
            case .visit(let ref):
                let value = try VisitRecord(parsing: json)
                visitRecords[ref] = value
                known[topic] = value.json
            case .answered(let ref, let client):
                let value = try AnsweredRecord(parsing: json)
                answeredRecords[ObserverJoin.Key(beacon: ref, client: client)] = value
                known[topic] = value.json
            }
        } catch {
            known[topic] = ""
            malformed(.record, topic, error.reason)
        }
    }

    // MARK: - Presence events

    private mutating func handle(_ events: [FleetEvent], at now: Instant) {
        for event in events {
            let ref = event.beacon
            switch event {
            case .enter:
                dirtyVisits.insert(ref)
                dirtyPresence.insert(ref)
                if isSettled {
                    let scope = RuleEngine.Scope(beacon: ref)
                    if lingering.remove(scope) != nil { _ = rules.retire(scope, at: now) }
                    runRules(.enter, beacon: ref, fleet: presence[ref], since: presence[ref]?.since ?? now, at: now)
                }
            case .exit(let last):
                dirtyVisits.insert(ref)
                dirtyPresence.insert(ref)
                if isSettled {
                    runRules(.exit, beacon: ref, fleet: last, since: last.since, at: now)
                    let scope = RuleEngine.Scope(beacon: ref)
                    if rules.retire(scope, at: now) { lingering.insert(scope) }
                }
            case .zoneChanged, .viewsChanged:
                dirtyPresence.insert(ref)
            case .proximity(_, _, let to):
                dirtyPresence.insert(ref)
                if isSettled, to != .unknown, let fleet = presence[ref] {
                    runRules(.proximity(to), beacon: ref, fleet: fleet, since: fleet.since, at: now)
                }
            case .update(_, let proximity):
                if isSettled, !rules.update(ref, proximity: proximity).isEmpty { dirtyVisits.insert(ref) }
            }
        }
    }

    // MARK: - Observers

    private mutating func join(_ key: ObserverJoin.Key, _ request: JoinRequest, fingerprint: String, at now: Instant) {
        if var existing = observers[key] {
            guard existing.fingerprint != fingerprint else { return }
            // The same observer re-published its join (a new profile): no new ad.
            let since = existing.since
            existing = ObserverJoin(key: key, profile: request.profile, since: since, fingerprint: fingerprint)
            observers.insert(existing)
            dirtyJoins.insert(key)
            dirtyStores.insert(store(of: key.beacon))
            return
        }
        accept(key, request, fingerprint: fingerprint, at: now)
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
        dirtyStores.insert(store(of: key.beacon))
        note(.debug, "join answered", ["beacon": "\(key.beacon)", "client": key.client])
    }

    private mutating func leave(_ key: ObserverJoin.Key, deleteTopic: Bool, at now: Instant) {
        guard let join = observers.remove(key) else { return }
        counters.leaves += 1
        runRules(.leave, beacon: key.beacon, join: join, at: now)
        let scope = RuleEngine.Scope(beacon: key.beacon, client: key.client)
        if rules.retire(scope, at: now) { lingering.insert(scope) }
        if deleteTopic { deleteJoinTopic(key) }
        dirtyJoins.insert(key)
        dirtyStores.insert(store(of: key.beacon))
    }

    /// Deletes a join the observer can no longer delete itself, so its profile leaves the broker.
    private mutating func deleteJoinTopic(_ key: ObserverJoin.Key) {
        out.messages.append(OutgoingMessage(topic: topics.observer(key.client, of: key.beacon), payload: "", qos: 1, retain: true))
    }

    /// An oversized or malformed join: an error to the observer, nothing else changes.
    private mutating func reject(_ key: ObserverJoin.Key, reason: String, at now: Instant) {
        counters.joinsRejected += 1
        if isSettled {
            inbox(key.client, .error(beacon: key.beacon, reason: reason), at: now)
        } else {
            pendingErrors[key] = reason
        }
    }

    // MARK: - Rules

    private mutating func runRules(_ trigger: Rule.Trigger, beacon ref: BeaconRef, fleet: FleetBeacon?, since: Instant,
                                   at now: Instant) {
        let entry = self.entry(ref, uuid: fleet?.uuid)
        let context = RuleEngine.Context(trigger: trigger, beacon: ref, uuid: fleet?.uuid, entry: entry,
                                         rssi: fleet?.zoneView?.rssiSmoothed, zone: fleet?.zone, since: since)
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
        let context = RuleEngine.Context(trigger: trigger, beacon: ref, uuid: fleet?.uuid ?? entry?.id.uuid,
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
                    inbox(target.client, .greeting(beacon: ref, text: Template.render(template, values), rule: rule.name), at: now)
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
                out.messages.append(OutgoingMessage(topic: topic, payload: Template.render(template, values), qos: qos,
                                                 retain: retain))
            }
        }
    }

    /// Template values (see `Template.variables`); numbers as text, missing ones empty.
    private func variables(_ rule: Rule, _ ref: BeaconRef, _ entry: BeaconEntry?, _ fleet: FleetBeacon?,
                           _ join: ObserverJoin?, at now: Instant) -> [String: String] {
        var values: [String: String] = [
            "major": "\(ref.major)", "minor": "\(ref.minor)", "store": "\(store(of: ref))", "rule": rule.name,
            "ts": now.iso8601,
        ]
        values["uuid"] = (fleet?.uuid ?? entry?.id.uuid)?.description
        values["name"] = entry?.name
        if let fleet {
            values["zone"] = fleet.zoneView?.zoneName ?? fleet.zone
            values["gateway"] = fleet.zone
            values["proximity"] = fleet.proximity.rawValue
            values["distance"] = fleet.zoneView?.distance.map { fixed($0, places: 2) }
        }
        if let join {
            values["client"] = join.client
            values["customer"] = join.name
            values["favorite"] = join.favorite
        }
        if let location = entry?.location {
            values["lat"] = fixed(location.latitude, places: 6)
            values["lon"] = fixed(location.longitude, places: 6)
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
        out.messages.append(OutgoingMessage(topic: topics.inbox(of: client), payload: message.json(at: now),
                                         qos: 1, retain: false))
    }

    /// The latest time seen, for the rosters' `ts`.
    private var lastTime = Instant.epoch

    /// Publishes the standing ads of this brain's registry beacons and deletes those that
    /// went away.
    private mutating func syncAds() {
        var desired: [String: String] = [:]
        for ref in registry.keys where owns(ref) {
            if let ad = ad(of: ref) { desired[topics.ad(of: ref)] = ad.jsonText }
        }
        for (topic, text) in desired.sorted(by: { $0.key < $1.key }) { setRetained(topic, signature: text) { text } }
        for topic in known.keys.sorted() where desired[topic] == nil {
            if case .ad? = topics.parse(topic) { setRetained(topic, signature: nil) { "" } }
        }
    }

    /// Publishes `text()` retained unless the broker already holds the same `signature`;
    /// a `nil` signature deletes what the broker holds.
    private mutating func setRetained(_ topic: String, signature: String?, text: () -> String) {
        guard known[topic] != signature else { return }
        known[topic] = signature
        out.messages.append(OutgoingMessage(topic: topic, payload: signature == nil ? "" : text(), qos: 1, retain: true))
    }

    /// Writes what changed: fleet presence, records, rosters. Replies and rule messages
    /// are already out, so a crash in between makes a restarted brain answer again (at
    /// least once) rather than never.
    private mutating func finish(at now: Instant? = nil) -> BrainOutput {
        if let now { lastTime = max(lastTime, now) }
        if isSettled {
            // Records first: a presence on the broker then always has its record, so a brain
            // restarted in between never takes a visit it answered for a new one.
            for ref in dirtyVisits.sorted() {
                let memory = rules.memory(for: RuleEngine.Scope(beacon: ref))
                let record: VisitRecord? = if let fleet = presence[ref] {
                    VisitRecord(since: fleet.since, rules: memory ?? RuleMemory())
                } else {
                    memory.map { VisitRecord(since: nil, rules: $0) }
                }
                let text = record?.json
                setRetained(topics.visitRecord(of: ref), signature: text) { text ?? "" }
            }
            for ref in dirtyPresence.sorted() {
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
                let text = record?.json
                setRetained(topics.answeredRecord(of: key.beacon, client: key.client), signature: text) { text ?? "" }
            }
            for store in dirtyStores.sorted() where stores.isEmpty || stores.contains(store) {
                let topic = topics.roster(ofStore: store)
                let roster = observers.roster(store: store, name: storeEntries[store]?.name, topics: topics,
                                              storeOf: { self.store(of: $0) })
                if roster.customers.isEmpty && known[topic] == nil { continue }
                let time = lastTime
                setRetained(topic, signature: roster.json(at: nil)) { roster.json(at: time) }
            }
            dirtyVisits = []
            dirtyPresence = []
            dirtyJoins = []
            dirtyStores = []
        }
        defer { out = BrainOutput() }
        return out
    }

    // MARK: - Helpers

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
        out.messages.append(OutgoingMessage(topic: topics.brainEvents, payload: writer.text, qos: 1, retain: false))
    }

    private mutating func note(_ level: BrainLogEntry.Level, _ message: String, _ metadata: [String: String] = [:]) {
        out.log.append(BrainLogEntry(level, message, metadata))
    }

    private mutating func index(_ config: FleetConfig) {
        registry = [:]
        for entry in config.beacons {
            guard let major = entry.id.major, let minor = entry.id.minor else { continue }
            registry[BeaconRef(major: major, minor: minor), default: []].append(entry)
        }
        storeEntries = Dictionary(config.stores.map { ($0.major, $0) }, uniquingKeysWith: { first, _ in first })
    }

    static func presenceSettings(_ config: FleetConfig) -> FleetPresence.Settings {
        let longestExit = config.gateways.map(\.tracker.exitTimeout).max() ?? 10
        return FleetPresence.Settings(config.brain, sightingTimeout: max(30, 3 * longestExit))
    }
}

extension Template {
    /// The variables a template uses, in order.
    static func names(in template: String) -> [String] {
        var names: [String] = []
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            names.append(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return names
    }
}

/// Fixed-point text for template values: `52.520008`, `1.5`, `-3`.
func fixed(_ value: Double, places: Int) -> String {
    var writer = JSONWriter(capacity: 16)
    writer.writeFixed(value, places: places)
    return writer.text
}

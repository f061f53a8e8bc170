public import BeaconKit
public import Contract
public import Config
import Tracking

/// A message `beacon-web` could not read: shown on the fleet page and logged.
public struct MalformedMessage: Sendable, Equatable {
    public var topic: String
    public var reason: String
    /// When it arrived, by the web's clock.
    public var at: WallTime
}

/// The fleet as the broker's retained state tells it, kept by `beacon-web`: gateways
/// (status and health), the brain's fleet presence (who is in which zone), the customers
/// the brain lists per store, and the photos in the customers' retained joins.
///
/// Pure: messages in (with the time they arrived), views out; no I/O, no clock. The
/// server feeds it every message of `subscriptions` and renders `greeter`, `floor` and
/// `fleet` when `receive` says they changed.
public struct FleetState: Sendable {
    public private(set) var config: FleetConfig
    /// The gateways heard from (status or health), by id; the config's gateways are
    /// shown even before they are.
    public private(set) var gateways: [String: GatewayStatus] = [:]
    public private(set) var presence: [BeaconRef: FleetPresenceReport] = [:]
    public private(set) var customers = CustomerBook()
    /// The greeter display's cards, steady through drop-outs (`GreeterCards`).
    public private(set) var cards = GreeterCards()
    /// Since when each present beacon has been in its zone (as seen here: a zone change
    /// is dated when it arrives; a beacon first read in a zone, from its presence `since`).
    /// Capture time, as the presence's `since` is.
    private(set) var zoneSince: [BeaconRef: CaptureTime] = [:]
    /// Photos from retained joins, by join topic (the roster's `photo` reference).
    private(set) var photos: [String: [UInt8]] = [:]
    /// `brain/status`: `nil` until heard.
    public private(set) var brainOnline: Bool?
    /// The brain's health records of registry beacons (`brain/beacons/<beacon>`): last seen, battery.
    public private(set) var beaconHealth: [BeaconRef: BeaconHealthRecord] = [:]
    /// Messages that could not be read (kept, not fatal: the page shows the rest).
    public private(set) var malformed = 0
    /// The last of them: which topic, why, when (the fleet page shows it).
    public private(set) var lastMalformed: MalformedMessage?
    /// When the config came from `fleet/config` rather than the file.
    public private(set) var configFromBroker = false
    /// Whether the feed is connected to the broker: while it is not, every page says that
    /// what it shows may be out of date.
    public private(set) var brokerConnected = false

    public init(config: FleetConfig) { self.config = config }

    public var topics: Topics { config.topics }

    /// What `beacon-web` subscribes to: all read-only.
    public var subscriptions: [String] {
        [topics.gatewayStatusFilter, topics.health(ofGateway: Topics.anyLevel), topics.calibrationFilter,
         topics.presence(of: .anyIBeacon), topics.presence(of: .anyEddystone),
         topics.observer(Topics.anyLevel, of: .anyIBeacon),
         topics.fleetConfig, topics.brainStatus, topics.beaconHealthFilter] + CustomerBook.subscriptions(topics)
    }

    /// What one message changed, so that only the pages showing it are sent again.
    public struct Change: Sendable, Equatable {
        /// The fleet dashboard.
        public var fleet = false
        /// The greeter and floor pages of these stores.
        public var stores: Set<UInt16> = []
        /// The config changed: every page (names, positions, stores) may have.
        public var config = false
        /// The message could not be read (it changed nothing but the fleet page's count).
        public var malformed: MalformedMessage?

        public init(fleet: Bool = false, stores: Set<UInt16> = [], config: Bool = false,
                    malformed: MalformedMessage? = nil) {
            self.fleet = fleet
            self.stores = stores
            self.config = config
            self.malformed = malformed
        }

        public var isEmpty: Bool { !fleet && stores.isEmpty && !config && malformed == nil }

        public mutating func formUnion(_ other: Change) {
            fleet = fleet || other.fleet
            stores.formUnion(other.stores)
            config = config || other.config
            malformed = other.malformed ?? malformed
        }

        public func affects(_ page: Page) -> Bool {
            if config { return true }
            switch page {
            case .fleet: return fleet
            case .greeter(let store), .floor(let store): return stores.contains(store)
            }
        }
    }

    /// A page of `beacon-web`.
    public enum Page: Sendable, Hashable {
        case greeter(store: UInt16)
        case floor(store: UInt16)
        case fleet
    }

    // MARK: - Input

    /// The broker connection came or went; every page shows it.
    public mutating func setBrokerConnected(_ connected: Bool) -> Change {
        guard connected != brokerConnected else { return Change() }
        brokerConnected = connected
        return Change(fleet: true, stores: Set(knownStores), config: true)
    }

    public mutating func receive(topic: String, payload: [UInt8], at now: WallTime) -> Change {
        guard let segments = topics.segments(of: topic) else { return Change() }
        switch customers.receive(segments: segments, payload: payload) {
        case .changed(let store):
            reconcileCards(store: store, at: now)
            return Change(stores: [store])
        case .malformed:
            return reject(topic, "not a roster or customer record of that store", at: now)
        case .ignored: break
        }
        let kind = topics.parse(topic)
        if case .gatewayCalibration(let id)? = kind {
            // What the brain's calibration learned (docs/presence.md): shown beside the config's.
            if payload.isEmpty {
                guard gateways[id]?.calibration != nil else { return Change() }
                gateways[id]?.calibration = nil
            } else if let value = try? JSONParser(maxDepth: 4).parse(payload),
                      let record = try? CalibrationRecord(parsing: value, topic: id) {
                guard gateways[id]?.calibration != record else { return Change() }
                gateways[id, default: GatewayStatus()].calibration = record
            } else {
                return reject(topic, "not a calibration record", at: now)
            }
            return Change(fleet: true)
        }
        if case .brainRecord(.health(let ref))? = kind {
            if payload.isEmpty {
                guard beaconHealth.removeValue(forKey: ref) != nil else { return Change() }
            } else if let value = try? JSONParser(maxDepth: 4).parse(payload), let record = try? BeaconHealthRecord(parsing: value) {
                guard beaconHealth[ref] != record else { return Change() }
                beaconHealth[ref] = record
            } else {
                return reject(topic, "not a beacon health record", at: now)
            }
            return Change(fleet: true)
        }
        switch kind {
        case .gatewayStatus(let id)?:
            let text = String(decoding: payload, as: UTF8.self)
            gateways[id, default: GatewayStatus()].online = payload.isEmpty ? nil : text == "online"
            return Change(fleet: true, stores: storesShowing(gateway: id))
        case .gatewayHealth(let id)?:
            if payload.isEmpty {
                gateways[id]?.health = nil
            } else if let health = GatewayHealth(parsing: payload) {
                gateways[id, default: GatewayStatus()].health = health
                gateways[id, default: GatewayStatus()].healthReceived = now
            } else {
                return reject(topic, "not a gateway health report", at: now)
            }
            return Change(fleet: true)
        case .beacon(let ref, .fleetPresence)?:
            return receivePresence(of: ref, payload, topic: topic, at: now)
        case .beacon(let ref, .observer)? where ref.eddystone == nil:
            // Only the photo is kept: the roster says who is in and with which profile.
            let store = config.store(of: ref)
            if payload.isEmpty {
                guard photos.removeValue(forKey: topic) != nil else { return Change() }
            } else if let join = try? JoinRequest(parsing: payload) {
                let photo = join.profile?.photo
                guard photos[topic] != photo else { return Change() }
                photos[topic] = photo
            } else {
                return reject(topic, "not an observer's join", at: now)
            }
            return Change(stores: [store])
        case .fleetConfig?:
            guard !payload.isEmpty else { return Change() }
            guard let text = String(validating: payload, as: UTF8.self) else {
                return reject(topic, "not UTF-8", at: now)
            }
            var parsed: FleetConfig
            do {
                parsed = try FleetConfig.parse(text)
            } catch {
                return reject(topic, "not a valid fleet config: \(error)", at: now)
            }
            // The broker and prefix this process runs with stay: like the brain, a new
            // one needs a restart.
            parsed.broker = config.broker
            parsed.topicPrefix = config.topicPrefix
            guard parsed != config else { return Change() }
            config = parsed
            configFromBroker = true
            for store in knownStores { reconcileCards(store: store, at: now) }
            return Change(fleet: true, config: true)
        case .brainStatus?:
            brainOnline = payload.isEmpty ? nil : String(decoding: payload, as: UTF8.self) == "online"
            return Change(fleet: true)
        default:
            return Change()
        }
    }

    /// Counts a message that could not be read, and says so to the fleet page.
    mutating func reject(_ topic: String, _ reason: String, at now: WallTime) -> Change {
        malformed += 1
        let message = MalformedMessage(topic: topic, reason: String(reason.prefix(300)), at: now)
        lastMalformed = message
        return Change(fleet: true, malformed: message)
    }

    /// The stores whose floor shows a gateway.
    func storesShowing(gateway id: String) -> Set<UInt16> {
        if let store = config.gateway(id: id)?.store { return [store] }
        var stores: Set<UInt16> = []
        for (ref, report) in presence where report.gateways.contains(where: { $0.gateway == id }) {
            stores.insert(config.store(of: ref))
        }
        return stores
    }

    /// The JPEG of a join, when the join is still retained and carries one.
    public func photo(atJoinTopic topic: String) -> [UInt8]? { photos[topic] }

    /// The brain's fleet presence of a beacon (an iBeacon's or an Eddystone's); empty: gone.
    private mutating func receivePresence(of ref: BeaconRef, _ payload: [UInt8], topic: String, at now: WallTime) -> Change {
        if payload.isEmpty {
            presence[ref] = nil
            zoneSince[ref] = nil
        } else if let value = try? JSONParser(maxDepth: 8).parse(payload),
                  let report = try? FleetPresenceReport(parsing: value, topic: ref) {
            let before = presence.updateValue(report, forKey: ref)
            // A zone change is dated when it arrives here: live, the web's clock is the
            // gateways' capture clock, and the page reads `zoneSince` beside capture times.
            let arrived = now.asCaptureTime()
            if before?.zone != report.zone { zoneSince[ref] = before == nil ? min(report.since, arrived) : arrived }
        } else {
            return reject(topic, "not a fleet presence report", at: now)
        }
        let store = config.store(of: ref)
        reconcileCards(store: store, at: now)
        return Change(stores: [store])
    }

    // MARK: - Greeter cards

    /// Whether a customer on `store`'s roster is in the store: their beacon has a fleet
    /// presence, or it is the store's own beacon carrying its proof of presence (the brain
    /// let the join in because the app heard it: in the shop, in no particular zone).
    func isInRange(_ customer: Roster.Customer, store: UInt16) -> Bool {
        if presence[customer.beacon] != nil { return true }
        let ref = customer.beacon
        return ref.eddystone == nil && ref.major == store && config.storeEntry(store)?.proof != nil
            && !config.beacons.contains { $0.id?.ref == ref }
    }

    func isOwnTag(_ customer: Roster.Customer) -> Bool {
        config.beacons.contains { $0.owner == customer.client && $0.id?.ref == customer.beacon }
    }

    mutating func reconcileCards(store: UInt16, at now: WallTime) {
        // A customer's own tag (registry `owner`) was in the store from its presence's since:
        // folded into the card, so "in store since" stays when the presence ends first.
        let present = customers.customers(inStore: store).map { c -> Roster.Customer in
            guard let report = presence[c.beacon], report.since < c.since, isOwnTag(c) else { return c }
            var customer = c
            customer.since = report.since
            return customer
        }
        let heard = Dictionary(present.map { ($0.client, isInRange($0, store: store)) }, uniquingKeysWith: { a, _ in a })
        cards.reconcile(store: store, present: present, heard: { heard[$0.client] ?? false }, hold: cardHold(store: store), at: now)
    }

    /// Seconds a card is held after its customer left the roster while in range: the
    /// longest `exitTimeout` of the store's gateways (of every gateway when none says
    /// `store`): a drop-out shorter than that is not the customer leaving.
    public func cardHold(store: UInt16) -> Double {
        let own = config.gateways(inStore: store)
        return (own.isEmpty ? config.gateways : own).map(\.tracker.exitTimeout).max() ?? TrackerSettings().exitTimeout
    }

    /// Ends the holds of cards whose time is up (the server calls it as time passes).
    public mutating func expireCards(at now: WallTime) -> Change {
        guard cards.holding else { return Change() }
        let holds = Dictionary(knownStores.map { ($0, cardHold(store: $0)) }, uniquingKeysWith: { a, _ in a })
        return Change(stores: cards.expire(hold: { holds[$0] ?? TrackerSettings().exitTimeout }, at: now))
    }

    /// Every store there is something to show for: the config's stores, and those with
    /// customers or beacons present.
    public var knownStores: [UInt16] {
        var all = Set(config.stores.map(\.major))
        all.formUnion(customers.stores)
        for ref in presence.keys { all.insert(config.store(of: ref)) }
        for gateway in config.gateways { if let store = gateway.store { all.insert(store) } }
        return all.sorted()
    }

    public func storeName(_ store: UInt16) -> String? {
        config.storeEntry(store)?.name ?? customers.name(ofStore: store)
    }
}

/// One gateway as its retained topics tell it.
public struct GatewayStatus: Sendable, Equatable {
    /// `gateways/<id>/status`: `nil` when never heard (or deleted).
    public var online: Bool?
    public var health: GatewayHealth?
    /// When the last health message arrived here.
    /// By the web's clock.
    public var healthReceived: WallTime?
    /// `gateways/<id>/calibration`: what the brain learned, if it calibrates this gateway.
    public var calibration: CalibrationRecord?

    public init(online: Bool? = nil, health: GatewayHealth? = nil, healthReceived: WallTime? = nil) {
        self.online = online
        self.health = health
        self.healthReceived = healthReceived
    }
}

extension FleetConfig {
    /// The store a beacon belongs to: its registry `store`, else its major (0 for an
    /// Eddystone beacon, which has none).
    func store(of beacon: BeaconRef) -> UInt16 {
        beacons.first { $0.id?.ref == beacon }?.store ?? beacon.major
    }
}

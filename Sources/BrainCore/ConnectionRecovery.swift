public import BeaconKit
public import Contract

/// How the brain keeps its effects exactly-once across broker outages (docs/brain.md,
/// "Broker outages"): what it must see again after a reconnect before it believes a visit
/// or a join ended, and how long it holds an `offline` last will before acting on it.
///
/// After a reconnect the brain keeps its state (it is the authority on what it answered)
/// and marks every gateway view and every join *unconfirmed*. The broker's retained state
/// and live messages confirm them. Whatever is still unconfirmed ends (exit and leave rules,
/// once) when its gateway or observer has been back for `confirmDelay` seconds (they
/// republish everything they hold right after reconnecting) or, for those that never come
/// back, `reconnectGrace` seconds after the retained state was read.
///
/// A live `offline` (a last will) is held for `offlineGrace` seconds: a broker that shuts
/// down publishes every client's will and then drops the brain's own connection, and that
/// mass will must not read as every gateway and app dying. Pure: time is passed in, on the brain's
/// running clock (`WallTime`, `BrainCore.runningClock`): these are seconds of the brain
/// waiting for its clients, not spans of capture time.
public struct ConnectionRecovery: Sendable {
    public struct Settings: Sendable, Equatable {
        /// Seconds a live `offline` waits before its gateway's views or observer's joins end.
        public var offlineGrace: Double
        /// Seconds after a gateway's or observer's first live message after a reconnect by
        /// which it has republished what it holds.
        public var confirmDelay: Double
        /// Seconds after the retained state was read back by which a gateway or observer that
        /// has not come back is taken as gone. Longer than the clients' reconnect back-off (30 s).
        public var reconnectGrace: Double

        public init(offlineGrace: Double = 3, confirmDelay: Double = 2, reconnectGrace: Double = 45) {
            self.offlineGrace = offlineGrace
            self.confirmDelay = confirmDelay
            self.reconnectGrace = reconnectGrace
        }
    }

    /// What has come due: views and joins to end, wills to act on.
    public struct Due: Sendable, Equatable {
        public var views: [(beacon: BeaconRef, gateway: String)] = []
        public var joins: [ObserverJoin.Key] = []
        public var offlineGateways: [String] = []
        public var offlineObservers: [String] = []

        public var isEmpty: Bool { views.isEmpty && joins.isEmpty && offlineGateways.isEmpty && offlineObservers.isEmpty }

        public static func == (lhs: Due, rhs: Due) -> Bool {
            lhs.views.map { "\($0.beacon)@\($0.gateway)" } == rhs.views.map { "\($0.beacon)@\($0.gateway)" }
                && lhs.joins == rhs.joins && lhs.offlineGateways == rhs.offlineGateways
                && lhs.offlineObservers == rhs.offlineObservers
        }
    }

    public var settings: Settings
    /// Between a reconnect and the end of the retained read-back.
    public private(set) var isReadingBack = false
    private var unconfirmedViews: [BeaconRef: Set<String>] = [:]
    private var unconfirmedJoins: Set<ObserverJoin.Key> = []
    /// First live message from each gateway or observer since the reconnect.
    private var gatewaysBack: [String: WallTime] = [:]
    private var observersBack: [String: WallTime] = [:]
    /// Retained `offline` found on reconnect: only a live message confirms these.
    private var gatewaysToReturn: Set<String> = []
    private var observersToReturn: Set<String> = []
    private var deadline: WallTime?
    /// Held wills, by when they take effect.
    private var heldGateways: [String: WallTime] = [:]
    private var heldObservers: [String: WallTime] = [:]

    public init(settings: Settings = .init()) { self.settings = settings }

    /// Whether any view waits to be confirmed (after a reconnect): else `confirmView` has
    /// nothing to do, and the brain skips it for every entry of every report.
    public var awaitsViews: Bool { !unconfirmedViews.isEmpty }

    /// Views and joins waiting to be confirmed.
    public var pending: (views: Int, joins: Int) { (unconfirmedViews.values.reduce(0) { $0 + $1.count }, unconfirmedJoins.count) }

    // MARK: Reconnecting

    /// The connection is back: everything the brain holds must be confirmed again. Held
    /// wills are dropped: they came with the outage.
    public mutating func reconnected(views: [BeaconRef: [String]], joins: [ObserverJoin.Key]) {
        isReadingBack = true
        unconfirmedViews = views.filter { !$0.value.isEmpty }.mapValues(Set.init)
        unconfirmedJoins = Set(joins)
        gatewaysBack = [:]
        observersBack = [:]
        gatewaysToReturn = []
        observersToReturn = []
        deadline = nil
        heldGateways = [:]
        heldObservers = [:]
    }

    /// The brain's own connection dropped. The wills it holds came with the outage (a broker
    /// that shuts down publishes every client's will, then drops the brain's connection) and
    /// are dropped now, before their grace runs out while nobody can be heard: after the
    /// reconnect the retained state and live messages tell who is really gone.
    public mutating func connectionLost() {
        heldGateways = [:]
        heldObservers = [:]
    }

    /// The retained state is in: the grace for clients that do not come back starts.
    public mutating func readBackComplete(at now: WallTime) {
        guard isReadingBack else { return }
        isReadingBack = false
        deadline = now + settings.reconnectGrace
    }

    // MARK: What the brain sees

    /// A message from `gateway` confirms its view of `beacon` (a retained one only if the
    /// gateway was not found `offline`).
    public mutating func confirmView(_ beacon: BeaconRef, gateway: String, live: Bool) {
        guard live || !gatewaysToReturn.contains(gateway) else { return }
        remove(gateway, from: beacon)
    }

    /// Whether a retained presence of `gateway` is stale (it was found `offline` on reconnect).
    public func ignoresRetained(fromGateway gateway: String) -> Bool { gatewaysToReturn.contains(gateway) }

    /// The view ended the ordinary way (deleted, or the beacon left).
    public mutating func viewEnded(_ beacon: BeaconRef, gateway: String) { remove(gateway, from: beacon) }

    public mutating func beaconLeft(_ beacon: BeaconRef) { unconfirmedViews[beacon] = nil }

    public mutating func confirmJoin(_ key: ObserverJoin.Key, live: Bool) {
        guard live || !observersToReturn.contains(key.client) else { return }
        unconfirmedJoins.remove(key)
    }

    public mutating func joinEnded(_ key: ObserverJoin.Key) { unconfirmedJoins.remove(key) }

    /// A live message from the gateway: it is connected, and any will of its is void.
    public mutating func gatewayIsLive(_ gateway: String, at now: WallTime) {
        heldGateways[gateway] = nil
        gatewaysToReturn.remove(gateway)
        if gatewaysBack[gateway] == nil, unconfirmedViews.values.contains(where: { $0.contains(gateway) }) {
            gatewaysBack[gateway] = now
        }
    }

    public mutating func observerIsLive(_ client: String, at now: WallTime) {
        heldObservers[client] = nil
        observersToReturn.remove(client)
        if observersBack[client] == nil, unconfirmedJoins.contains(where: { $0.client == client }) {
            observersBack[client] = now
        }
    }

    /// A retained `offline` read back after a reconnect (perhaps the will of a broker's
    /// shutdown): the gateway's views wait for the gateway itself.
    public mutating func retainedOffline(gateway: String, views: [BeaconRef]) {
        gatewaysToReturn.insert(gateway)
        for beacon in views { unconfirmedViews[beacon, default: []].insert(gateway) }
    }

    public mutating func retainedOffline(observer client: String, joins: [ObserverJoin.Key]) {
        observersToReturn.insert(client)
        unconfirmedJoins.formUnion(joins)
    }

    /// A live `offline`: held for `offlineGrace`; false when it takes effect at once.
    public mutating func hold(offlineGateway gateway: String, at now: WallTime) -> Bool {
        guard settings.offlineGrace > 0 else { return false }
        if heldGateways[gateway] == nil { heldGateways[gateway] = now + settings.offlineGrace }
        return true
    }

    public mutating func hold(offlineObserver client: String, at now: WallTime) -> Bool {
        guard settings.offlineGrace > 0 else { return false }
        if heldObservers[client] == nil { heldObservers[client] = now + settings.offlineGrace }
        return true
    }

    // MARK: Time

    /// Takes out what has come due at `now`.
    public mutating func due(at now: WallTime) -> Due {
        var due = Due()
        for (gateway, at) in heldGateways.sorted(by: { $0.key < $1.key }) where now >= at {
            heldGateways[gateway] = nil
            due.offlineGateways.append(gateway)
        }
        for (client, at) in heldObservers.sorted(by: { $0.key < $1.key }) where now >= at {
            heldObservers[client] = nil
            due.offlineObservers.append(client)
        }
        guard !isReadingBack else { return due }
        let expired = deadline.map { now >= $0 } ?? false
        func back(_ since: WallTime?) -> Bool { expired || since.map { now.seconds(since: $0) >= settings.confirmDelay } ?? false }
        for (beacon, gateways) in unconfirmedViews.sorted(by: { $0.key < $1.key }) {
            for gateway in gateways.sorted() where back(gatewaysBack[gateway]) {
                due.views.append((beacon, gateway))
                remove(gateway, from: beacon)
            }
        }
        for key in unconfirmedJoins.sorted() where back(observersBack[key.client]) {
            due.joins.append(key)
            unconfirmedJoins.remove(key)
        }
        if unconfirmedViews.isEmpty && unconfirmedJoins.isEmpty {
            deadline = nil
            gatewaysBack = [:]
            observersBack = [:]
        }
        return due
    }

    private mutating func remove(_ gateway: String, from beacon: BeaconRef) {
        guard var gateways = unconfirmedViews[beacon], gateways.remove(gateway) != nil else { return }
        unconfirmedViews[beacon] = gateways.isEmpty ? nil : gateways
    }
}

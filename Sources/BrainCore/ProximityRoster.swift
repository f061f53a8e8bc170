public import BeaconKit
public import Contract
public import Config
import Tracking

/// Who is on the rosters of the stores whose roster is driven by proximity
/// (`stores[].roster`, docs/brain.md): the storefront greeter's way, with no app. A registry
/// beacon with an `owner` enters store S's roster when a counting gateway of S (the roster's
/// `gateways`, else every gateway of S) sees it at `enter` or closer for `enterAfter`
/// seconds, and leaves when none sees it closer than `leave` for `leaveAfter` seconds, or
/// at once when no gateway of S sees it at all (it left the store). `leave` is always
/// farther than `enter`: the class between them changes nothing, so a customer standing on
/// the border of `enter` does not come and go.
///
/// Pure: the views and the time are passed in.
public struct ProximityRoster: Sendable {
    /// A customer's beacon on a store's roster.
    public struct Visit: Sendable, Equatable {
        public var beacon: BeaconRef
        public var client: String
        public var profile: CustomerProfile?
        /// When it entered the roster.
        public var since: CaptureTime

        public init(beacon: BeaconRef, client: String, profile: CustomerProfile?, since: CaptureTime) {
            self.beacon = beacon
            self.client = client
            self.profile = profile
            self.since = since
        }
    }

    struct Key: Hashable, Comparable, Sendable {
        var store: UInt16
        var beacon: BeaconRef

        static func < (lhs: Key, rhs: Key) -> Bool { (lhs.store, lhs.beacon) < (rhs.store, rhs.beacon) }
    }

    struct State: Sendable {
        var visit: Visit?
        /// Since when the beacon has been meeting the condition to change (enter when out,
        /// leave when in); `nil` when it does not.
        var pending: CaptureTime?
    }

    /// The settings of every store with a proximity roster.
    public private(set) var stores: [UInt16: StoreRoster] = [:]
    private var states: [Key: State] = [:]

    public init() {}

    /// Takes a new config's roster settings; returns the roster entries that end because
    /// their store no longer uses proximity.
    @discardableResult
    public mutating func configure(_ config: FleetConfig) -> [RosterBook.Key] {
        stores = [:]
        for store in config.stores where store.roster.source.usesProximity { stores[store.major] = store.roster }
        var ended: [RosterBook.Key] = []
        for (key, state) in states where stores[key.store] == nil {
            if let visit = state.visit { ended.append(RosterBook.Key(store: key.store, client: visit.client)) }
            states[key] = nil
        }
        return ended.sorted()
    }

    /// Whether any store uses proximity.
    public var isActive: Bool { !stores.isEmpty }

    /// The visits of `client` on `store`'s roster, earliest first.
    public func visits(of client: String, in store: UInt16) -> [Visit] {
        states.filter { $0.key.store == store && $0.value.visit?.client == client }.compactMap { $0.value.visit }
            .sorted { ($0.since, $0.beacon) < ($1.since, $1.beacon) }
    }

    /// Every visit on any roster.
    public var visits: [(store: UInt16, visit: Visit)] {
        states.sorted { $0.key < $1.key }.compactMap { key, state in state.visit.map { (store: key.store, visit: $0) } }
    }

    /// Beacons waiting for `enterAfter` or `leaveAfter` to pass: `advance` checks them again.
    public var waiting: [BeaconRef] { Array(Set(states.filter { $0.value.pending != nil }.map { $0.key.beacon })).sorted() }

    /// A visit a restarted brain finds on the broker (`stores/<store>/customers/<client>`): it
    /// carries on with its `since` if the beacon is still in the store, else it ends at once.
    public mutating func resume(_ visit: Visit, store: UInt16) {
        guard stores[store] != nil else { return }
        states[Key(store: store, beacon: visit.beacon)] = State(visit: visit, pending: nil)
    }

    /// Looks at one customer beacon as the gateways see it now (`views`: every gateway's
    /// view, none when it left the fleet; `storeOf`: the store a gateway's view is in).
    /// Returns the roster entries that changed.
    public mutating func observe(_ ref: BeaconRef, owner: String, profile: CustomerProfile?, views: [GatewayView],
                                 storeOf: (String) -> UInt16?, at now: CaptureTime) -> [RosterBook.Key] {
        var changed: [RosterBook.Key] = []
        for (store, settings) in stores.sorted(by: { $0.key < $1.key }) {
            let key = Key(store: store, beacon: ref)
            let inStore = views.filter { storeOf($0.gateway) == store }
            let closest = inStore.filter { settings.gateways.isEmpty || settings.gateways.contains($0.gateway) }
                .map(\.proximity).min()
            var state = states[key] ?? State()
            if var visit = state.visit {
                if inStore.isEmpty {
                    state = State()  // it left the store: no waiting
                } else if closest.map({ $0 >= settings.leave }) ?? true {
                    let start = state.pending ?? now
                    state.pending = start
                    if now.seconds(since: start) >= settings.leaveAfter { state = State() }
                } else {
                    state.pending = nil
                    if visit.profile != profile || visit.client != owner {
                        visit.profile = profile
                        visit.client = owner
                        state.visit = visit
                        changed.append(RosterBook.Key(store: store, client: owner))
                    }
                }
                if state.visit == nil { changed.append(RosterBook.Key(store: store, client: visit.client)) }
            } else if let closest, closest <= settings.enter {
                let start = state.pending ?? now
                state.pending = start
                if now.seconds(since: start) >= settings.enterAfter {
                    state = State(visit: Visit(beacon: ref, client: owner, profile: profile, since: now), pending: nil)
                    changed.append(RosterBook.Key(store: store, client: owner))
                }
            } else {
                state.pending = nil
            }
            states[key] = state.visit == nil && state.pending == nil ? nil : state
        }
        return changed
    }

    /// Visits that began `maxAge` seconds ago or more end, as joins do (`brain.joinMaxAge`):
    /// the broker drops their retained entries then anyway (MQTT 5 expiry). A customer still
    /// at the counter enters again, with a fresh entry.
    public mutating func endVisits(olderThan maxAge: Double, at now: CaptureTime) -> [RosterBook.Key] {
        var ended: [RosterBook.Key] = []
        for (key, state) in states.sorted(by: { $0.key < $1.key }) {
            guard let visit = state.visit, now.seconds(since: visit.since) >= maxAge else { continue }
            ended.append(RosterBook.Key(store: key.store, client: visit.client))
            states[key] = nil
        }
        return ended
    }

    /// A beacon that is no customer's any more (the registry changed): its visits end.
    public mutating func forget(_ ref: BeaconRef) -> [RosterBook.Key] {
        var ended: [RosterBook.Key] = []
        for (key, state) in states where key.beacon == ref {
            if let visit = state.visit { ended.append(RosterBook.Key(store: key.store, client: visit.client)) }
            states[key] = nil
        }
        return ended.sorted()
    }
}

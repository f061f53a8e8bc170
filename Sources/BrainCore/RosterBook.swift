import BeaconKit
public import Contract
import Config

/// The greeter view of every store, kept up to date one customer at a time.
///
/// A join, leave or profile change touches one client's entry in one store: the brain
/// republishes that client's `stores/<store>/customers/<client>` and marks the store's
/// summary (`stores/<store>/roster`, at most `limit` customers) for the next debounced
/// write. So the bytes a join costs do not grow with the number of customers.
public struct RosterBook: Sendable {
    /// One client in one store.
    public struct Key: Hashable, Comparable, Sendable {
        public var store: UInt16
        public var client: String

        public init(store: UInt16, client: String) {
            self.store = store
            self.client = client
        }

        public static func < (lhs: Key, rhs: Key) -> Bool { (lhs.store, lhs.client) < (rhs.store, rhs.client) }
    }

    /// Per store, per client.
    public private(set) var stores: [UInt16: [String: Roster.Customer]] = [:]

    public init() {}

    /// Customers present in `store`.
    public func count(of store: UInt16) -> Int { stores[store]?.count ?? 0 }

    public func customer(_ client: String, in store: UInt16) -> Roster.Customer? { stores[store]?[client] }

    /// Recomputes one client's entry in one store from that client's joins of the store's
    /// beacons (`joins`, any order) and their beacons' visits on a proximity roster
    /// (`visits`): the profile and beacon of the latest join, else the registry profile and
    /// beacon of the first visit (no app: no photo); the time of the first of either.
    /// Returns the entry, `nil` when the client has neither there any more.
    @discardableResult
    public mutating func update(client: String, store: UInt16, joins: [ObserverJoin], visits: [ProximityRoster.Visit] = [],
                                topics: Topics) -> Roster.Customer? {
        var latest: ObserverJoin?
        var first: CaptureTime?
        for join in joins {
            first = min(first ?? join.since, join.since)
            if let current = latest, (current.since, current.beacon) >= (join.since, join.beacon) { continue }
            latest = join
        }
        let visit = visits.min { ($0.since, $0.beacon) < ($1.since, $1.beacon) }
        if let visit { first = min(first ?? visit.since, visit.since) }
        let customer: Roster.Customer
        if let latest, let first {
            customer = Roster.Customer(client: client, name: latest.name, favorite: latest.favorite,
                                       photo: latest.hasPhoto ? topics.observer(client, of: latest.beacon) : nil,
                                       beacon: latest.beacon, since: first)
        } else if let visit, let first {
            customer = Roster.Customer(client: client, name: visit.profile?.name, favorite: visit.profile?.favorite,
                                       photo: nil, beacon: visit.beacon, since: first)
        } else {
            stores[store]?[client] = nil
            if stores[store]?.isEmpty == true { stores[store] = nil }
            return nil
        }
        stores[store, default: [:]][client] = customer
        return customer
    }

    /// The summary for `stores/<store>/roster`: the `limit` customers who arrived last,
    /// oldest first, and the count of all of them. Costs O(n log n) in the store's
    /// customers, which is why the brain writes it at most once per `rosterInterval`.
    public func summary(store: UInt16, name: String?, limit: Int) -> Roster {
        let all = stores[store].map { Array($0.values) } ?? []
        let ordered = all.sorted { ($0.since, $0.client) < ($1.since, $1.client) }
        return Roster(store: store, name: name, count: all.count, customers: Array(ordered.suffix(max(0, limit))))
    }

    /// Forgets everything (a new config moved beacons between stores).
    public mutating func removeAll() { stores = [:] }
}

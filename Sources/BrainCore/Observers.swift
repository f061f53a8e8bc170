public import BeaconKit
public import Contract

/// One observer's join of one beacon's channel.
public struct ObserverJoin: Sendable, Equatable {
    public struct Key: Hashable, Comparable, Sendable {
        public var beacon: BeaconRef
        public var client: String

        public init(beacon: BeaconRef, client: String) {
            self.beacon = beacon
            self.client = client
        }

        public static func < (lhs: Key, rhs: Key) -> Bool { (lhs.beacon, lhs.client) < (rhs.beacon, rhs.client) }
    }

    public var key: Key
    public var name: String?
    public var favorite: String?
    /// The retained join holds a photo; the brain keeps no copy of it.
    public var hasPhoto: Bool
    /// When the brain answered the join.
    public var since: CaptureTime
    /// `JoinRequest.fingerprint` of the payload answered.
    public var fingerprint: String

    public init(key: Key, profile: ObserverProfile?, since: CaptureTime, fingerprint: String) {
        self.key = key
        name = profile?.name
        favorite = profile?.favorite
        hasPhoto = profile?.photo != nil
        self.since = since
        self.fingerprint = fingerprint
    }

    public var client: String { key.client }
    public var beacon: BeaconRef { key.beacon }
}

/// Who has joined which beacon, indexed both ways.
///
/// Holds names and favorites only while a join lasts; photos stay on the broker, in the
/// join the observer published.
public struct ObserverRegistry: Sendable {
    public private(set) var joins: [ObserverJoin.Key: ObserverJoin] = [:]
    private var byClient: [String: Set<BeaconRef>] = [:]
    private var byBeacon: [BeaconRef: Set<String>] = [:]

    public init() {}

    public var count: Int { joins.count }

    public subscript(key: ObserverJoin.Key) -> ObserverJoin? { joins[key] }

    /// Adds or replaces a join.
    public mutating func insert(_ join: ObserverJoin) {
        joins[join.key] = join
        byClient[join.client, default: []].insert(join.beacon)
        byBeacon[join.beacon, default: []].insert(join.client)
    }

    @discardableResult
    public mutating func remove(_ key: ObserverJoin.Key) -> ObserverJoin? {
        guard let join = joins.removeValue(forKey: key) else { return nil }
        byClient[key.client]?.remove(key.beacon)
        if byClient[key.client]?.isEmpty == true { byClient[key.client] = nil }
        byBeacon[key.beacon]?.remove(key.client)
        if byBeacon[key.beacon]?.isEmpty == true { byBeacon[key.beacon] = nil }
        return join
    }

    /// Whether `client` has any join.
    public func hasJoins(ofClient client: String) -> Bool { byClient[client] != nil }

    /// Every join of one client, by beacon.
    public func joins(ofClient client: String) -> [ObserverJoin] {
        (byClient[client] ?? []).sorted().compactMap { joins[ObserverJoin.Key(beacon: $0, client: client)] }
    }

    /// Every observer joined to one beacon, by client id.
    public func joins(of beacon: BeaconRef) -> [ObserverJoin] {
        (byBeacon[beacon] ?? []).sorted().compactMap { joins[ObserverJoin.Key(beacon: beacon, client: $0)] }
    }
}

public import BeaconKit

/// What the brain knows about the bridges of stores with a broker of their own
/// (`stores[].broker`): whether each store's presence can be trusted right now.
///
/// Mosquitto publishes `1` on `stores/<major>/bridge` when a store's bridge connects, and the
/// central broker publishes the bridge's will, `0`, when the store's WAN goes quiet. While a
/// store is **unknown** (its bridge down, or never seen up) nothing from it can arrive, so its
/// silence says nothing: its gateways' views do not expire and its visits do not end. When
/// the bridge is back, the store broker replays what changed during the outage and then its
/// retained state, the gateways' statuses last (`BridgePlan`); the store is **reconciling**
/// until every one of its gateways' statuses has come by (or `reconcileLimit` has passed),
/// and then views that the replay did not confirm are dropped. A store whose status the
/// brain has not read at all since it settled is taken as up once a live report of one of its
/// gateways arrives (`heard(fromStore:)`): its bridge is evidently up. A NATS centre sends a
/// new subscription's retained messages apart from its live ones, in no order with the brain's
/// own sync, so a brain starting beside 1,000 stores settled with none of their statuses read
/// and held every store's presence for most of a minute (docs/fleet.md, "1,000 stores,
/// light"). A value owned by the brain's core; time is passed in.
public struct StoreBridges: Sendable {
    public enum State: Sendable, Equatable {
        /// The bridge is up and its replay (if any) is in.
        case up
        /// Down, or not seen up yet.
        case unknown
        /// Up again since `since`; waiting for these gateways' statuses.
        case reconciling(since: CaptureTime, awaiting: Set<String>)
    }

    /// What a status message led to.
    public enum Change: Sendable, Equatable {
        case none
        /// The store became unknown.
        case lost(UInt16)
        /// The store's bridge (re)connected: its replay is coming.
        case healing(UInt16)
        /// Read back after the brain's reconnect: the bridge came back meanwhile.
        case found(UInt16)
        /// The replay is in: drop what it did not confirm since `since`.
        case reconciled(UInt16, since: CaptureTime)
        /// No status read yet, and one of its gateways heard live: the bridge is up.
        case heard(UInt16)
    }

    /// Seconds after a bridge's `1` after which the store is reconciled even if not every
    /// gateway's status came by (a gateway missing from the store broker).
    public static let reconcileLimit = 10.0

    public private(set) var states: [UInt16: State] = [:]
    /// The gateways of each bridged store, from the fleet config.
    private var gateways: [UInt16: Set<String>] = [:]
    /// Statuses seen before settling, and whether they came live (a bridge connecting
    /// meanwhile) rather than from the broker's store.
    private var seen: [UInt16: (connected: Bool, live: Bool)] = [:]
    /// Stores whose status was read back since the brain's reconnect; `nil` when not reading back.
    private var readBack: Set<UInt16>?
    /// Stores no status of which the brain has read since it settled (or since the config
    /// named them): a live report of one of their gateways shows their bridge up.
    private var unheard: Set<UInt16> = []

    public init() {}

    /// The bridged stores and their gateways (from the fleet config, limited to the stores
    /// the brain handles). A store no longer bridged is forgotten; a new one starts unknown.
    public mutating func configure(_ bridged: [UInt16: Set<String>]) {
        gateways = bridged
        for major in states.keys where bridged[major] == nil {
            states[major] = nil
            unheard.remove(major)
        }
        for major in bridged.keys where states[major] == nil {
            states[major] = .unknown
            unheard.insert(major)
        }
    }

    /// The gateways of a bridged store (none for another).
    public func gateways(ofStore major: UInt16) -> Set<String> { gateways[major] ?? [] }

    /// Whether a store's presence is on hold: bridged and not up.
    public func isUnknown(_ major: UInt16) -> Bool {
        guard let state = states[major] else { return false }
        return state != .up
    }

    /// The bridged stores that are not up, sorted.
    public var unknownStores: [UInt16] { states.keys.filter(isUnknown).sorted() }

    /// A status read before the brain settles.
    public mutating func remember(_ major: UInt16, connected: Bool, live: Bool) {
        seen[major] = (connected, live)
    }

    /// Settling: a store whose retained status says `1` is up; one whose bridge connected
    /// meanwhile is reconciling; any other is unknown.
    public mutating func settle(at now: CaptureTime) {
        for major in states.keys.sorted() {
            switch seen[major] {
            case (true, false)?: states[major] = .up
            case (true, true)?: states[major] = .reconciling(since: now, awaiting: gateways[major] ?? [])
            default: states[major] = .unknown
            }
            if seen[major] == nil { unheard.insert(major) } else { unheard.remove(major) }
        }
        seen = [:]
    }

    /// Whether some store's status is still unread (`heard(fromStore:)` has work).
    public var awaitsAnyStatus: Bool { !unheard.isEmpty }

    /// A live report of a gateway of store `major`. For a store whose status the brain has not
    /// read since it settled, its bridge is up (its gateways' reports cross it): up, as if its
    /// retained `1` had been read. A status read later says what it says.
    public mutating func heard(fromStore major: UInt16) -> Change {
        guard unheard.remove(major) != nil, states[major] == .unknown else { return .none }
        states[major] = .up
        return .heard(major)
    }

    /// A status after settling. A live `1` starts a reconciliation (also when the store was
    /// thought up: a bridge that reconnects replays, and the `0` may have been missed). A
    /// retained one, read back after the brain's own reconnect, says the bridge came back
    /// while the brain was away: the broker's retained state, read back with it, is the
    /// store's.
    public mutating func status(_ major: UInt16, connected: Bool, live: Bool = true, at now: CaptureTime) -> Change {
        guard let was = states[major] else { return .none }
        readBack?.insert(major)
        unheard.remove(major)
        guard connected else {
            states[major] = .unknown
            return was == .unknown ? .none : .lost(major)
        }
        guard live else {
            states[major] = .up
            return was == .up ? .none : .found(major)
        }
        states[major] = .reconciling(since: now, awaiting: gateways[major] ?? [])
        return .healing(major)
    }

    /// The brain reconnected to the broker: the statuses it reads back say which stores are up.
    public mutating func reconnected() { readBack = [] }

    /// The read-back is complete: a store whose status did not come back is unknown (the
    /// broker lost its retained messages, and the store's bridge has not said `1` since).
    public mutating func readBackComplete() -> [Change] {
        guard let seen = readBack else { return [] }
        readBack = nil
        var changes: [Change] = []
        for major in states.keys.sorted() where !seen.contains(major) && states[major] != .unknown {
            states[major] = .unknown
            changes.append(.lost(major))
        }
        return changes
    }

    /// A gateway's status arrived: for a reconciling store, that gateway's part of the
    /// replay is in.
    public mutating func gatewayStatus(_ gateway: String, store major: UInt16) -> Change {
        guard case .reconciling(let since, var awaiting)? = states[major] else { return .none }
        awaiting.remove(gateway)
        guard awaiting.isEmpty else {
            states[major] = .reconciling(since: since, awaiting: awaiting)
            return .none
        }
        states[major] = .up
        return .reconciled(major, since: since)
    }

    /// Reconciles the stores whose replay has taken longer than `reconcileLimit`.
    public mutating func advance(to now: CaptureTime) -> [Change] {
        var changes: [Change] = []
        for major in states.keys.sorted() {
            guard case .reconciling(let since, _)? = states[major],
                  now.seconds(since: since) >= Self.reconcileLimit else { continue }
            states[major] = .up
            changes.append(.reconciled(major, since: since))
        }
        return changes
    }
}

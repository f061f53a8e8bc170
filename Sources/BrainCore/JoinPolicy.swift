public import BeaconKit
public import Config

/// Who may join which beacon (`brain.joins`, docs/security.md).
///
/// The broker binds a join to its app (an app writes only `…/observers/<its user name>`);
/// this binds it to a beacon the app has a right to. With `owned-or-near` (the default):
///
/// - a beacon whose registry entry names an `owner` (a customer's key fob or phone) may be
///   joined by that owner only, whether or not it is in the store;
/// - any other beacon (the store's) may be joined by an app one of whose own beacons is in
///   that store now: seen by a gateway of the store (`gateways[].store`; a gateway without
///   one counts for every store). The join lasts while that is so.
///
/// So an app learns of other customers only what the store shows it in person, and a
/// profile cannot be put on a store's roster from outside it. `open` lets any app join any
/// beacon, as a demo does.
public struct JoinPolicy: Sendable {
    public let access: JoinAccess
    /// Each owner's beacons, from the registry.
    public let owned: [String: [BeaconRef]]
    /// Each gateway's store, for those that have one.
    public let gatewayStores: [String: UInt16]

    public init(config: FleetConfig) {
        access = config.brain.joins
        var owned: [String: [BeaconRef]] = [:]
        for entry in config.beacons {
            guard let owner = entry.owner, let id = entry.id, let major = id.major, let minor = id.minor else { continue }
            owned[owner, default: []].append(BeaconRef(major: major, minor: minor))
        }
        self.owned = owned
        gatewayStores = Dictionary(config.gateways.compactMap { g in g.store.map { (g.id, $0) } },
                                   uniquingKeysWith: { first, _ in first })
    }

    /// Why `client` may not join `beacon` now, or `nil` when it may. `owner`: the beacon's
    /// registry owner; `store`: the beacon's store; `presence`: who is where now.
    public func refusal(client: String, beacon: BeaconRef, owner: String?, store: UInt16,
                        presence: FleetPresence) -> String? {
        guard access == .ownedOrNear else { return nil }
        if let owner {
            return owner == client ? nil : "beacon \(beacon) belongs to another customer: only its owner may join it"
        }
        guard let mine = owned[client], !mine.isEmpty else {
            return "beacon \(beacon) is the store's: an app joins it near it, and no beacon in the registry belongs "
                + "to \(client) (beacons[].owner) to tell where it is"
        }
        guard isNear(client, store: store, presence: presence) else {
            return "beacon \(beacon) is the store's: an app joins it near it, and none of \(client)'s beacons is in "
                + "store \(store) now"
        }
        return nil
    }

    /// Whether one of `client`'s own beacons is in `store` now.
    public func isNear(_ client: String, store: UInt16, presence: FleetPresence) -> Bool {
        for ref in owned[client] ?? [] {
            guard let beacon = presence[ref] else { continue }
            if beacon.views.keys.contains(where: { gatewayStores[$0].map { $0 == store } ?? true }) { return true }
        }
        return false
    }

    /// The owner of `beacon`, if the registry gives one.
    public func owner(of beacon: BeaconRef) -> String? {
        for (owner, refs) in owned where refs.contains(beacon) { return owner }
        return nil
    }
}

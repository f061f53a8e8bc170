public import BeaconKit
public import Contract
public import Config

/// Who may join which beacon (`brain.joins`, docs/security.md).
///
/// The broker binds a join to its app (an app writes only `…/observers/<its user name>`);
/// this binds it to a beacon the app has a right to. With `owned-or-near` (the default):
///
/// - a beacon whose registry entry names an `owner` (a customer's key fob or phone) may be
///   joined by that owner only, whether or not it is in the store;
/// - any other beacon (the store's) may be joined by an app one of whose own beacons is in
///   that store now: seen by a gateway of the store (`gateways[].store`, else the own
///   beacon's store, as the brain places every view). The join lasts while that is so. A
///   beacon of no store (an Eddystone beacon without `store`) is joined by nobody but its
///   owner.
///
/// So an app learns of other customers only what the store shows it in person, and a
/// profile cannot be put on a store's roster from outside it. `open` lets any app join any
/// beacon, as a demo does.
///
/// `proof` (the default) is `owned-or-near` plus proof of presence: a store's beacon may also
/// be joined by an app whose join names the store's current rotating value
/// (`PresenceProof`): the beacon it joins is `<major>/<value>`, the minor a gateway of the
/// store advertises now (or advertised in the slot before). The join lasts until the app
/// leaves (or `brain.joinMaxAge`).
public struct JoinPolicy: Sendable {
    public let access: JoinAccess
    /// Each store's proof of presence (`stores[].proof` with its secret read).
    public var proofs: [UInt16: PresenceProof] = [:]
    /// Each owner's beacons, from the registry.
    public let owned: [String: [BeaconRef]]
    /// Each owned beacon's owner.
    private let owners: [BeaconRef: String]

    public init(config: FleetConfig) {
        access = config.brain.joins
        var owned: [String: [BeaconRef]] = [:]
        var owners: [BeaconRef: String] = [:]
        for entry in config.beacons {
            guard let owner = entry.owner, let ref = entry.id?.ref else { continue }
            owned[owner, default: []].append(ref)
            owners[ref] = owners[ref] ?? owner
        }
        self.owned = owned
        self.owners = owners
    }

    /// Why `client` may not join `beacon` now, or `nil` when it may. `store`: the beacon's
    /// store; `presence`: who is where now; `viewStore`: the store a gateway's view of a
    /// beacon comes from; `now`: the wall clock, for proofs of presence.
    public func refusal(client: String, beacon: BeaconRef, store: UInt16?, presence: FleetPresence,
                        viewStore: (BeaconRef, String) -> UInt16?, at now: CaptureTime = .epoch) -> String? {
        guard access != .open else { return nil }
        if let owner = owner(of: beacon) {
            return owner == client ? nil : "beacon \(beacon) belongs to another customer: only its owner may join it"
        }
        guard let store else {
            return "beacon \(beacon) belongs to no store (beacons[].store) and to no customer: nobody may join it"
        }
        if proves(beacon, store: store, at: now) { return nil }
        // Without a proof: as owned-or-near.
        let proof = access == .proof && proofs[beacon.major] != nil && beacon.eddystone == nil
            ? ", nor is its minor store \(beacon.major)'s current proof of presence (stale or forged)" : ""
        guard let mine = owned[client], !mine.isEmpty else {
            return "beacon \(beacon) is the store's: an app joins it near it\(proof), and no beacon in the registry "
                + "belongs to \(client) (beacons[].owner) to tell where it is"
        }
        guard isNear(client, store: store, presence: presence, viewStore: viewStore) else {
            return "beacon \(beacon) is the store's: an app joins it near it\(proof), and none of \(client)'s beacons "
                + "is in store \(store) now"
        }
        return nil
    }

    /// Whether a join of `beacon` proves presence (`proof` access): an iBeacon whose major
    /// is a store with a proof and whose minor is that store's value now.
    public func proves(_ beacon: BeaconRef, store: UInt16?, at now: CaptureTime) -> Bool {
        guard access == .proof, beacon.eddystone == nil, store == beacon.major,
              let proof = proofs[beacon.major] else { return false }
        return proof.accepts(beacon.minor, store: beacon.major, at: now)
    }

    /// Whether one of `client`'s own beacons is in `store` now.
    public func isNear(_ client: String, store: UInt16?, presence: FleetPresence,
                       viewStore: (BeaconRef, String) -> UInt16?) -> Bool {
        guard let store else { return false }
        for ref in owned[client] ?? [] {
            guard let beacon = presence[ref] else { continue }
            if beacon.views.keys.contains(where: { viewStore(ref, $0) == store }) { return true }
        }
        return false
    }

    /// Whether the registry names `client` as the owner of a beacon.
    public func owns(_ client: String) -> Bool { owned[client]?.isEmpty == false }

    /// The owner of `beacon`, if the registry gives one.
    public func owner(of beacon: BeaconRef) -> String? { owners[beacon] }
}

import BeaconKit
import Contract
import Config

// Eddystone-UID beacons in the brain: `BeaconRef` names them by namespace and instance, topics
// and payloads by `eddystone/<namespace>/<instance>` and `{"namespace","instance"}`
// (the Contract module). What else differs is here.

extension RuleEngine.Context {
    /// Whether `rule` concerns this context's beacon: by major/minor and UUID, or by
    /// namespace/instance for an Eddystone beacon.
    func matches(_ rule: Rule) -> Bool {
        if let eddystone = beacon.eddystone {
            return rule.matches(eddystone: .eddystone(namespace: eddystone.namespace, instance: eddystone.instance), entry: entry,
                                zone: zone)
        }
        return rule.matches(major: beacon.major, minor: beacon.minor, uuid: uuid, entry: entry, zone: zone)
    }
}

extension StoreBridges {
    /// Whether the store is cut off; a beacon of no store (an Eddystone beacon without a
    /// registry `store`) never is.
    func isUnknown(_ major: UInt16?) -> Bool { major.map(isUnknown) ?? false }
}

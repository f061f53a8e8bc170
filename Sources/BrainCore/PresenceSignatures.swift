import Contract

/// The signature of each beacon's fleet presence as last computed, by the report it was
/// computed from (`FleetPresenceReport.signatureKey`). The brain checks the presence of every
/// beacon a decision step heard (`BrainCore.finish`), and the zone, views and proximity rarely
/// change between two steps: encoding the signature each time was a tenth of the brain's work
/// at a fleet's scale (docs/PERFORMANCE.md §6). The memo returns exactly what
/// `FleetPresenceReport.signature` would, since the signature is a function of the key.
struct PresenceSignatures: Sendable {
    private var memo: [BeaconRef: (key: FleetPresenceReport, signature: String)] = [:]

    /// `report.signature`, encoded only if the report's key changed since the last call for
    /// its beacon, and then with the payload from the same encoding (`payloadAndSignature`),
    /// since a changed signature is then almost always published; `nil` (the beacon is gone)
    /// forgets it.
    mutating func signature(of report: FleetPresenceReport?, for ref: BeaconRef) -> (signature: String?, json: String?) {
        guard let report else {
            memo[ref] = nil
            return (nil, nil)
        }
        let key = report.signatureKey
        if let known = memo[ref], known.key == key { return (known.signature, nil) }
        let (json, signature) = report.payloadAndSignature
        memo[ref] = (key, signature)
        return (signature, json)
    }
}

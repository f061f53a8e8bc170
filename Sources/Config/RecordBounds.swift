public import BeaconKit

extension FleetConfig {
    /// Bytes of one retained message the brain reads back (`BrainCore.Limits.maxPayload`):
    /// its records (`brain/visits/…`, `brain/answered/…`), the ads, rosters and customer
    /// entries it writes. A config whose names or ads would make one larger is refused, so
    /// the brain never rejects its own record after a restart (a `once` rule firing twice).
    public static let maxRecordBytes = 64 * 1024

    /// Bytes of a record besides the rules' names: `since`, `zone`, `join`, the keys and the
    /// seal (`,"seal":"` + 64 hex digits + `"`), with room to spare.
    static let recordOverhead = 1024

    /// Bytes one rule can take in the record of a visit or a join: its name (as JSON) in
    /// `fired` with a timestamp, and again in `disarmed`.
    static func recordBytes(ofRule name: String) -> Int {
        let quoted = JSONValue.string(name).jsonText.utf8.count
        return 2 * quoted + #":"2026-11-27T12:00:00.000Z","#.utf8.count + 1
    }

    /// Names and ads within what the brain reads back (`maxRecordBytes`).
    static func checkRecordBounds(_ config: FleetConfig, _ r: inout ConfigReader) {
        // A visit's record remembers every beacon rule that fired in it, a join's every
        // join rule: each scope's rules must fit in one record.
        let scopes: [(String, (Rule) -> Bool)] = [
            ("visit", { ![.join, .leave].contains($0.trigger) }),
            ("join", { [.join, .leave].contains($0.trigger) }),
        ]
        for (scope, applies) in scopes {
            let rules = config.rules.enumerated().filter { applies($0.element) }
            let bytes = rules.reduce(recordOverhead) { $0 + recordBytes(ofRule: $1.element.name) }
            guard bytes > maxRecordBytes, let longest = rules.max(by: { $0.element.name.utf8.count < $1.element.name.utf8.count })
            else { continue }
            r.fail("rules", "the names of the \(rules.count) \(scope) rules take \(bytes) bytes in the brain's record of a \(scope) "
                   + "(each name twice, with a timestamp); the brain reads back at most \(maxRecordBytes): shorten the names "
                   + "(rules[\(longest.offset)].name is the longest, \(longest.element.name.utf8.count) bytes) or use fewer rules")
        }
        func checkAd(_ ad: JSONValue?, at path: String) {
            guard let ad else { return }
            let bytes = ad.jsonText.utf8.count
            if bytes > maxRecordBytes - recordOverhead {
                r.fail(path, "is \(bytes) bytes as JSON; the brain publishes it retained and reads back at most "
                       + "\(maxRecordBytes - recordOverhead)")
            }
        }
        for (i, store) in config.stores.enumerated() { checkAd(store.ad, at: "stores[\(i)].ad") }
        for (i, beacon) in config.beacons.enumerated() { checkAd(beacon.ad, at: "beacons[\(i)].ad") }
    }
}

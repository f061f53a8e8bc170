public import BeaconKit
public import Contract
import Config

/// The health of the registry's beacons as the brain tells it: when each was last seen by
/// any gateway, its battery (Eddystone-TLM, mV) and whether it was reported as low on
/// battery or missing (`brain.lowBattery`, `brain.missingAfter`).
///
/// Each record is retained on `brain/beacons/<beacon>` (`Record.json`), written when it
/// changes: at a beacon's arrival and departure, every `refresh` seconds while it stays, on
/// a battery change and on a report. A restarted brain reads its records back, so "last
/// seen" outlives it. The events go once on `brain/events`, re-armed when the beacon is seen
/// again (missing) or reads 100 mV above the threshold (battery).
///
/// Pure: presence, telemetry and time are passed in.
public struct BeaconHealth: Sendable {
    /// `{"beacon","name","lastSeen","present","battery","batteryLow","missing"}`.
    public struct Record: Sendable, Equatable {
        /// When a gateway last saw it (while present: at most `refresh` seconds ago); `nil`: never.
        public var lastSeen: Instant?
        public var present = false
        /// The last Eddystone-TLM battery reading, mV; `nil` when the beacon never said.
        public var battery: Int?
        public var batteryLow = false
        public var missing = false

        public init(lastSeen: Instant? = nil, present: Bool = false, battery: Int? = nil, batteryLow: Bool = false,
                    missing: Bool = false) {
            self.lastSeen = lastSeen
            self.present = present
            self.battery = battery
            self.batteryLow = batteryLow
            self.missing = missing
        }

        public func json(beacon: BeaconRef, name: String?) -> String {
            var writer = JSONWriter(capacity: 200)
            writer.object { o in
                o("beacon", beacon.json)
                o("name", name)
                o("lastSeen", lastSeen.map { JSONValue.string($0.iso8601) } ?? .null)
                o("present", present)
                o("battery", battery)
                o("batteryLow", batteryLow)
                o("missing", missing)
            }
            return writer.text
        }

        public init(parsing value: JSONValue) throws(PayloadError) {
            let r = PayloadReader(path: "")
            let o = try r.object(value)
            if let seen = o["lastSeen"], seen != .null { lastSeen = try r.instant(seen, "lastSeen") }
            if case .bool(let v)? = o["present"] { present = v }
            if let battery = o["battery"], battery != .null {
                let mv = try r.number(battery, "battery")
                guard mv == mv.rounded(), (0...65535).contains(mv) else { throw PayloadError("battery must be mV (0-65535)") }
                self.battery = Int(mv)
            }
            if case .bool(let v)? = o["batteryLow"] { batteryLow = v }
            if case .bool(let v)? = o["missing"] { missing = v }
        }
    }

    /// What happened to one beacon, for `brain/events`.
    public enum Report: Sendable, Equatable {
        case batteryLow(BeaconRef, millivolts: Int, threshold: Int)
        case missing(BeaconRef, lastSeen: Instant?, seconds: Double)
    }

    /// Seconds between two refreshes of a present beacon's `lastSeen`.
    public static let refresh = 600.0

    public private(set) var records: [BeaconRef: Record] = [:]
    /// Since when the brain has been watching (a beacon never seen is missing from then).
    public private(set) var watchingSince: Instant?
    /// Records read back as present, not yet checked against the fleet presence.
    private var restoredPresent: Set<BeaconRef> = []

    public init() {}

    /// A record read back from the broker (only before the brain has one of its own).
    public mutating func restore(_ record: Record, of ref: BeaconRef) {
        guard records[ref] == nil else { return }
        records[ref] = record
        // Present when the last brain stopped: if it is gone at the first check, it was last
        // seen then (at most `refresh` s after `lastSeen`), not now.
        if record.present { restoredPresent.insert(ref) }
    }

    /// Looks at the registry beacons (`beacons`) against the fleet presence (`isPresent`) at
    /// `now`; returns the beacons whose record changed and what to report.
    public mutating func check(_ beacons: [BeaconRef], isPresent: (BeaconRef) -> Bool, missingAfter: Double,
                               at now: Instant) -> (changed: [BeaconRef], reports: [Report]) {
        if watchingSince == nil { watchingSince = now }
        var changed: [BeaconRef] = []
        var reports: [Report] = []
        for ref in beacons {
            let before = records[ref] ?? Record()
            var record = before
            if isPresent(ref) {
                if !record.present || record.lastSeen.map({ now.seconds(since: $0) >= Self.refresh }) ?? true {
                    record.lastSeen = now
                }
                record.present = true
                record.missing = false
            } else {
                if record.present, !restoredPresent.contains(ref) { record.lastSeen = now }
                record.present = false
                let from = record.lastSeen ?? watchingSince ?? now
                let away = now.seconds(since: from)
                if !record.missing, away >= missingAfter {
                    record.missing = true
                    reports.append(.missing(ref, lastSeen: record.lastSeen, seconds: away))
                }
            }
            if record != before || records[ref] == nil {
                records[ref] = record
                changed.append(ref)
            }
        }
        restoredPresent.subtract(beacons)
        return (changed, reports)
    }

    /// A gateway's telemetry of a registry beacon: `millivolts` `nil` when the beacon does
    /// not say. Returns whether the record changed and the report, if any.
    public mutating func telemetry(of ref: BeaconRef, millivolts: Int?, lowBattery: Int) -> (changed: Bool, report: Report?) {
        let before = records[ref] ?? Record()
        var record = before
        var report: Report?
        record.battery = millivolts
        if let mv = millivolts {
            if mv < lowBattery, !record.batteryLow {
                record.batteryLow = true
                report = .batteryLow(ref, millivolts: mv, threshold: lowBattery)
            } else if mv >= lowBattery + 100 {
                record.batteryLow = false
            }
        }
        let isNew = records[ref] == nil
        records[ref] = record
        return (isNew || record != before, report)
    }

    /// Forgets beacons no longer in the registry; returns them (their records are deleted).
    public mutating func keep(only beacons: Set<BeaconRef>) -> [BeaconRef] {
        let gone = records.keys.filter { !beacons.contains($0) }.sorted()
        for ref in gone { records[ref] = nil }
        return gone
    }
}

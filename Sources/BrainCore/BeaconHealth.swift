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
    /// One beacon's record on `brain/beacons/<beacon>` (Contract's `BeaconHealthRecord`).
    public typealias Record = BeaconHealthRecord

    /// What happened to one beacon, for `brain/events`.
    public enum Report: Sendable, Equatable {
        case batteryLow(BeaconRef, millivolts: Int, threshold: Int)
        case missing(BeaconRef, lastSeen: CaptureTime?, seconds: Double)
    }

    /// Seconds between two refreshes of a present beacon's `lastSeen`.
    public static let refresh = 600.0

    public private(set) var records: [BeaconRef: Record] = [:]
    /// Since when the brain has been watching (a beacon never seen is missing from then).
    public private(set) var watchingSince: CaptureTime?
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
                               at now: CaptureTime) -> (changed: [BeaconRef], reports: [Report]) {
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

import BeaconKit
import Contract

/// Gateway presence that belongs to a visit the brain already ended. A broker killed
/// before saving can bring back a delete it had acknowledged, so the retained presence
/// read back after a reconnect may be one the gateway had deleted. The gateway's `since`
/// (its track's enter time, on its own clock) tells: a presence not later than the last one
/// that gateway reported for the beacon is that old track, and must not start a new visit.
/// The gateway deletes it once it reads it back too (`GatewayEngine.inheritedPresence`).
///
/// Bounded: what the brain no longer hears from (a gateway taken out of the fleet config,
/// a beacon it no longer owns) is forgotten when the config changes (`retain`), and past
/// `capacity` (beacon, gateway) pairs the oldest tracks are forgotten a quarter at a time.
/// A forgotten track can only bring back its visit if the broker loses its delete too.
struct StalePresence: Sendable {
    /// The most (beacon, gateway) pairs remembered.
    let capacity: Int
    /// The latest `since` each gateway reported, by beacon.
    private var latest: [BeaconRef: [String: CaptureTime]] = [:]
    /// The (beacon, gateway) pairs in `latest`.
    private(set) var count = 0

    init(capacity: Int = 100_000) {
        self.capacity = max(1, capacity)
    }

    /// A presence the brain took: its track's start is remembered.
    mutating func took(_ report: GatewayPresenceReport) {
        guard let since = report.since else { return }
        let known = latest[report.beacon]?[report.gateway]
        if let known, known >= since { return }
        latest[report.beacon, default: [:]][report.gateway] = since
        if known == nil {
            count += 1
            if count > capacity { forgetOldest(count - capacity * 3 / 4) }
        }
    }

    /// Whether `report`, read back retained while its beacon is absent, is from a track
    /// whose visit has ended.
    func isStale(_ report: GatewayPresenceReport) -> Bool {
        guard let since = report.since, let known = latest[report.beacon]?[report.gateway] else { return false }
        return since <= known
    }

    /// Keeps only the tracks of gateways and beacons that still concern this brain.
    mutating func retain(gateway keepGateway: (String) -> Bool, beacon keepBeacon: (BeaconRef) -> Bool) {
        for (beacon, gateways) in latest {
            let kept = keepBeacon(beacon) ? gateways.filter { keepGateway($0.key) } : [:]
            count -= gateways.count - kept.count
            latest[beacon] = kept.isEmpty ? nil : kept
        }
    }

    /// Forgets the `n` tracks that started first.
    private mutating func forgetOldest(_ n: Int) {
        let oldest = latest.flatMap { beacon, gateways in gateways.map { (beacon, $0.key, $0.value) } }
            .sorted { $0.2 < $1.2 }.prefix(n)
        for (beacon, gateway, _) in oldest {
            latest[beacon]?[gateway] = nil
            if latest[beacon]?.isEmpty == true { latest[beacon] = nil }
            count -= 1
        }
    }
}

import BeaconKit

/// Gateway presence that belongs to a visit the brain already ended. A broker killed
/// before saving can bring back a delete it had acknowledged, so the retained presence
/// read back after a reconnect may be one the gateway had deleted. The gateway's `since`
/// (its track's enter time, on its own clock) tells: a presence not later than the last one
/// that gateway reported for the beacon is that old track, and must not start a new visit.
/// The gateway deletes it once it reads it back too (`GatewayEngine.inheritedPresence`).
struct StalePresence: Sendable {
    /// The latest `since` each gateway reported, by beacon.
    private var latest: [BeaconRef: [String: Instant]] = [:]

    /// A presence the brain took: its track's start is remembered.
    mutating func took(_ report: GatewayPresenceReport) {
        guard let since = report.since else { return }
        if let known = latest[report.beacon]?[report.gateway], known >= since { return }
        latest[report.beacon, default: [:]][report.gateway] = since
    }

    /// Whether `report`, read back retained while its beacon is absent, is from a track
    /// whose visit has ended.
    func isStale(_ report: GatewayPresenceReport) -> Bool {
        guard let since = report.since, let known = latest[report.beacon]?[report.gateway] else { return false }
        return since <= known
    }
}

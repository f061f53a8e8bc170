public import BeaconKit
public import Contract

/// Per-client join rate limit: a token bucket per observer client id. A client may make
/// `burst` joins (new joins or changed profiles) at once and then one every `interval`
/// seconds; a retained join delivered again costs nothing. Buckets that are full again are
/// forgotten, so memory follows the clients active in the last `burst × interval` seconds.
/// Seconds of the brain's running clock (`WallTime`, `BrainCore.runningClock`).
public struct JoinRateLimiter: Sendable {
    public let burst: Int
    /// Seconds to earn one join back.
    public let interval: Double
    private var buckets: [String: (tokens: Double, at: WallTime)] = [:]
    private var lastPrune = WallTime.epoch

    public init(burst: Int, interval: Double) {
        self.burst = max(1, burst)
        self.interval = max(0, interval)
    }

    /// Clients with a bucket that is not full.
    public var tracked: Int { buckets.count }

    /// Takes one join from `client`'s bucket; false when it is empty.
    public mutating func allow(_ client: String, at now: WallTime) -> Bool {
        guard interval > 0 else { return true }
        let tokens = self.tokens(client, at: now)
        guard tokens >= 1 else {
            buckets[client] = (tokens, now)
            return false
        }
        buckets[client] = (tokens - 1, now)
        return true
    }

    private func tokens(_ client: String, at now: WallTime) -> Double {
        guard let bucket = buckets[client] else { return Double(burst) }
        return min(Double(burst), bucket.tokens + max(0, now.seconds(since: bucket.at)) / interval)
    }

    /// Forgets full buckets; scans at most once per `interval` (or every 10 s).
    public mutating func prune(at now: WallTime) {
        guard now.seconds(since: lastPrune) >= max(10, interval) else { return }
        lastPrune = now
        let full = Double(burst)
        buckets = buckets.filter { tokens($0.key, at: now) < full }
    }
}

/// Reports of rejected input on `brain/events`: each oversized, malformed or unexpected
/// message gets one `{"event":"rejected",…}` up to `perSecond` a second; past that they are
/// counted and one `{"event":"rejected","suppressed":n,…}` says how many were not reported
/// one by one. So a flood of bad messages is visible without becoming a flood of events.
/// Dated (`ts`, `since`) by the brain's running clock (`WallTime`): when the brain rejected them.
public struct RejectionReports: Sendable {
    public let perSecond: Int
    private var windowStart = WallTime.epoch
    private var inWindow = 0
    private var suppressed = 0
    private var suppressedSince: WallTime?

    public init(perSecond: Int) { self.perSecond = max(0, perSecond) }

    /// The events to publish for one rejected input (none, one, or a summary and one).
    public mutating func report(kind: String, topic: String, reason: String, bytes: Int, at now: WallTime) -> [BrainEvent] {
        var events = roll(at: now)
        if inWindow < perSecond {
            inWindow += 1
            events.append(.rejected(.init(kind: kind, topic: topic, reason: reason, bytes: bytes, at: now)))
        } else {
            suppressed += 1
            if suppressedSince == nil { suppressedSince = now }
        }
        return events
    }

    /// The summary of what a full second left unreported, once that second is over.
    public mutating func roll(at now: WallTime) -> [BrainEvent] {
        guard now.seconds(since: windowStart) >= 1 || now < windowStart else { return [] }
        windowStart = now
        inWindow = 0
        guard suppressed > 0, let since = suppressedSince else { return [] }
        let summary = BrainEvent.suppressed(count: suppressed, since: since, at: now)
        suppressed = 0
        suppressedSince = nil
        return [summary]
    }
}

public import BeaconKit

/// A visit as the history holds it: one pseudonymous visitor in one store from the enter
/// decision to the exit decision (capture times), and the zones it passed through.
public struct Visit: Sendable, Equatable {
    /// Time in one zone: from the decision that put the visitor there to the next decision
    /// (or the visit's end).
    public struct Segment: Sendable, Equatable {
        public var zone: String
        public var zoneName: String
        public var entered: CaptureTime
        /// `nil` while the visit is open and this is its last segment.
        public var left: CaptureTime?

        public init(zone: String, zoneName: String, entered: CaptureTime, left: CaptureTime?) {
            self.zone = zone
            self.zoneName = zoneName
            self.entered = entered
            self.left = left
        }

        /// Seconds in the zone, counting an open segment up to `now`.
        public func duration(now: CaptureTime) -> Double { max(0, (left ?? now).seconds(since: entered)) }
    }

    /// A decision that put the visitor in a zone (an enter or a zone change).
    public struct Move: Sendable, Equatable {
        public var at: CaptureTime
        public var zone: String
        public var zoneName: String

        public init(at: CaptureTime, zone: String, zoneName: String) {
            self.at = at
            self.zone = zone
            self.zoneName = zoneName
        }
    }

    public var store: UInt16
    /// The pseudonym: a keyed hash of the beacon's id, never the id.
    public var visitor: String
    public var since: CaptureTime
    /// The exit decision's time; `nil` while the visitor is in the store.
    public var ended: CaptureTime?
    /// In time order, without gaps: each ends where the next begins.
    public var segments: [Segment]
    /// Whether this visitor had an earlier visit in the history (before `since`).
    public var returning: Bool

    public init(store: UInt16, visitor: String, since: CaptureTime, ended: CaptureTime?, segments: [Segment],
                returning: Bool = false) {
        self.store = store
        self.visitor = visitor
        self.since = since
        self.ended = ended
        self.segments = segments
        self.returning = returning
    }

    /// A visit from its zone moves in any order (duplicates count once): each segment lasts
    /// until the next move, the last until the exit (`ended`), if any. Moves dated after the
    /// exit are dropped.
    public init(store: UInt16, visitor: String, since: CaptureTime, ended: CaptureTime?, moves: [Move], returning: Bool = false) {
        var sorted = moves.sorted { ($0.at, $0.zone) < ($1.at, $1.zone) }
        if let ended { sorted.removeAll { $0.at > ended } }
        var segments: [Segment] = []
        for move in sorted {
            if let last = segments.last {
                if last.zone == move.zone { continue }
                segments[segments.count - 1].left = move.at
            }
            segments.append(Segment(zone: move.zone, zoneName: move.zoneName, entered: move.at, left: nil))
        }
        if let ended, !segments.isEmpty { segments[segments.count - 1].left = ended }
        self.init(store: store, visitor: visitor, since: since, ended: ended, segments: segments, returning: returning)
    }

    /// Seconds from the enter to the exit (or `now` while open).
    public func duration(now: CaptureTime) -> Double { max(0, (ended ?? now).seconds(since: since)) }

    /// Seconds spent in the zones `matching` (a set of gateway ids or zone names).
    public func time(in zones: Set<String>, now: CaptureTime) -> Double {
        segments.reduce(0) { $0 + (zones.contains($1.zone) || zones.contains($1.zoneName) ? $1.duration(now: now) : 0) }
    }

    /// Whether the visitor was in the store at `time`.
    public func isPresent(at time: CaptureTime) -> Bool { since <= time && (ended.map { time < $0 } ?? true) }
}

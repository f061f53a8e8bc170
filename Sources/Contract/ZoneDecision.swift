public import BeaconKit

/// A decision about a beacon's zone, at the capture time it was made: what
/// `beacons/<major>/<minor>/events` carries.
public struct ZoneDecision: Sendable, Equatable {
    public enum Kind: String, Sendable { case enter, zone, exit }
    public var kind: Kind
    public var beacon: BeaconRef
    /// The zone gateway after the decision (the last one, for an exit).
    public var zone: String
    public var zoneName: String
    /// The zone before (a zone change).
    public var from: String?
    /// When the visit began.
    public var since: CaptureTime
    /// Capture time of the decision.
    public var at: CaptureTime

    /// `{"event","major","minor"|"namespace","instance","zone","zoneName","from"?,"since","ts"}`.
    public var json: String {
        var writer = JSONWriter(capacity: 192)
        writer.object { o in
            o("event", kind.rawValue)
            beacon.write(into: &o)
            o("zone", zone)
            o("zoneName", zoneName)
            if let from { o("from", from) }
            o("since", since)
            o("ts", at)
        }
        return writer.text
    }

    public init(kind: Kind, beacon: BeaconRef, zone: String, zoneName: String, from: String? = nil, since: CaptureTime,
                at: CaptureTime) {
        self.kind = kind
        self.beacon = beacon
        self.zone = zone
        self.zoneName = zoneName
        self.from = from
        self.since = since
        self.at = at
    }

    public init(parsing value: JSONValue, topic beacon: BeaconRef) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        guard let kind = Kind(rawValue: try r.string(o["event"], "event")) else {
            throw PayloadError("event must be enter, zone or exit")
        }
        let ref = try r.beacon(o)
        guard ref == beacon else { throw PayloadError("beacon \(ref) does not match the topic's \(beacon)") }
        self.kind = kind
        self.beacon = ref
        zone = try r.segment(o["zone"], "zone")
        zoneName = try r.string(o["zoneName"], "zoneName", maxLength: 128)
        from = try o["from"].map { value throws(PayloadError) in try r.segment(value, "from") }
        since = try r.instant(o["since"], "since")
        at = try r.instant(o["ts"], "ts")
    }
}

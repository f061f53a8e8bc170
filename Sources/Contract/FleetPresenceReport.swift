public import BeaconKit

/// The brain's retained fleet-wide presence on `beacons/<major>/<minor>/presence`:
///
/// `{"uuid","major","minor","zone","zoneName","gateways":[{"gateway","zone","proximity",
/// "rssiSmoothed","distance"}…],"proximity","since"}`
///
/// - `uuid`: from the gateways' payloads, `null` when none carried one;
/// - `zone`: the id of the gateway holding the zone (strongest smoothed signal, with
///   hysteresis); `zoneName`: that gateway's zone name;
/// - `gateways`: every gateway that sees the beacon, sorted by id; `rssiSmoothed` (dBm, one
///   decimal, `null` without RSSI) and `distance` (m, two decimals) are as of the last
///   publication: the message is republished when the zone, the set of gateways or a
///   proximity changes, not for every RSSI sample;
/// - `proximity`: the zone gateway's proximity; `since`: when the brain saw the visit begin.
public struct FleetPresenceReport: Sendable, Equatable {
    public struct View: Sendable, Equatable {
        public var gateway: String
        public var zone: String
        public var proximity: Proximity
        public var rssiSmoothed: Double?
        public var distance: Double?

        public init(gateway: String, zone: String, proximity: Proximity, rssiSmoothed: Double?, distance: Double?) {
            self.gateway = gateway
            self.zone = zone
            self.proximity = proximity
            self.rssiSmoothed = rssiSmoothed
            self.distance = distance
        }
    }

    public var beacon: BeaconRef
    public var uuid: BeaconUUID?
    public var zone: String
    public var zoneName: String
    public var gateways: [View]
    public var proximity: Proximity
    public var since: CaptureTime

    public init(beacon: BeaconRef, uuid: BeaconUUID?, zone: String, zoneName: String, gateways: [View],
                proximity: Proximity, since: CaptureTime) {
        self.beacon = beacon
        self.uuid = uuid
        self.zone = zone
        self.zoneName = zoneName
        self.gateways = gateways
        self.proximity = proximity
        self.since = since
    }

    public var json: String { encoded(volatile: true).json }

    /// The payload without the per-sample numbers: what decides whether to republish.
    public var signature: String { encoded(volatile: false).json }

    /// `json` and `signature` from one encoding: the signature is the payload without each
    /// view's `,"rssiSmoothed":…,"distance":…`, cut out of the same bytes. The brain needs
    /// both whenever a presence's key changes (`BrainCore.finish`), and encoding it twice was
    /// a tenth of its work per message (docs/PERFORMANCE.md §11).
    public var payloadAndSignature: (json: String, signature: String) {
        let (json, signature) = encoded(volatile: true, signature: true)
        return (json, signature ?? json)
    }

    /// The report without the per-sample numbers (each view's `rssiSmoothed` and `distance`
    /// `nil`): two reports with equal keys have the same `signature`, so a brain that checks
    /// every beacon it heard at every decision step compares keys and encodes a signature only
    /// when the key changed (`PresenceSignatures`).
    public var signatureKey: FleetPresenceReport {
        var key = self
        for i in key.gateways.indices {
            key.gateways[i].rssiSmoothed = nil
            key.gateways[i].distance = nil
        }
        return key
    }

    /// The payload (`volatile`: with each view's numbers), and with `signature` also the text
    /// without them, made from the same bytes.
    ///
    /// Written straight into the writer, key by key as literal bytes: through
    /// `JSONWriter.object` and a closure per view (each view's object handed its buffer and
    /// back) it cost 22,000 instructions a presence, and the brain encodes every presence
    /// whose signature changes (docs/PERFORMANCE.md §11). The same bytes as that encoding
    /// (`FleetPresenceEncodingTests`).
    private func encoded(volatile: Bool, signature: Bool = false) -> (json: String, signature: String?) {
        var writer = JSONWriter(capacity: 128 + 112 * gateways.count)
        // Where each view's numbers are, to leave them out of the signature.
        var cuts: [Range<Int>] = []
        if signature { cuts.reserveCapacity(gateways.count) }
        if let eddystone = beacon.eddystone {
            writer.append("{\"namespace\":")
            writer.writeString(eddystone.namespace.description)
            writer.append(",\"instance\":")
            writer.writeString(eddystone.instance.description)
        } else {
            if let uuid {
                writer.append("{\"uuid\":\"")
                uuid.appendCanonical(to: &writer)
                writer.append("\",\"major\":")
            } else {
                writer.append("{\"uuid\":null,\"major\":")
            }
            writer.appendDecimal(UInt64(beacon.major))
            writer.append(",\"minor\":")
            writer.appendDecimal(UInt64(beacon.minor))
        }
        writer.append(",\"zone\":")
        writer.writeString(zone)
        writer.append(",\"zoneName\":")
        writer.writeString(zoneName)
        writer.append(",\"gateways\":[")
        for (index, view) in gateways.enumerated() {
            writer.append(index == 0 ? "{\"gateway\":" : ",{\"gateway\":")
            writer.writeString(view.gateway)
            writer.append(",\"zone\":")
            writer.writeString(view.zone)
            writer.append(",\"proximity\":")
            Self.write(view.proximity, into: &writer)
            if volatile {
                let start = writer.count
                writer.append(",\"rssiSmoothed\":")
                Self.write(view.rssiSmoothed, places: 1, into: &writer)
                writer.append(",\"distance\":")
                Self.write(view.distance, places: 2, into: &writer)
                if signature { cuts.append(start..<writer.count) }
            }
            writer.append("}")
        }
        writer.append("],\"proximity\":")
        Self.write(proximity, into: &writer)
        writer.append(",\"since\":\"")
        since.appendISO8601(to: &writer)
        writer.append("\"}")
        guard signature else { return (writer.text, nil) }
        let text = writer.withUnsafeBytes { bytes in
            String(unsafeUninitializedCapacity: bytes.count - cuts.reduce(0) { $0 + $1.count }) { out in
                let out = UnsafeMutableRawBufferPointer(out)
                var written = 0, from = 0
                func copy(upTo end: Int) {
                    let part = UnsafeRawBufferPointer(rebasing: bytes[from..<end])
                    UnsafeMutableRawBufferPointer(rebasing: out[written...]).copyMemory(from: part)
                    written += part.count
                }
                for cut in cuts {
                    copy(upTo: cut.lowerBound)
                    from = cut.upperBound
                }
                copy(upTo: bytes.count)
                return written
            }
        }
        return (writer.text, text)
    }

    /// A proximity as its quoted raw value.
    private static func write(_ proximity: Proximity, into writer: inout JSONWriter) {
        switch proximity {
        case .immediate: writer.append("\"immediate\"")
        case .near: writer.append("\"near\"")
        case .far: writer.append("\"far\"")
        case .unknown: writer.append("\"unknown\"")
        }
    }

    /// A number rounded to `places` decimals, `null` when there is none or it is not finite
    /// (as `JSONWriter.ObjectWriter`'s member with `places`).
    private static func write(_ value: Double?, places: Int, into writer: inout JSONWriter) {
        if let value, value.isFinite { writer.writeFixed(value, places: places) } else { writer.append("null") }
    }

    public init(parsing value: JSONValue, topic beacon: BeaconRef) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        let ref = try r.beacon(o)
        guard ref == beacon else { throw PayloadError("beacon \(ref) does not match the topic's \(beacon)") }
        self.beacon = ref
        uuid = ref.eddystone == nil ? try r.uuid(o["uuid"], "uuid") : nil
        zone = try r.segment(o["zone"], "zone")
        zoneName = try r.string(o["zoneName"], "zoneName", maxLength: 128)
        proximity = try r.proximity(o["proximity"], "proximity")
        since = try r.instant(o["since"], "since")
        guard case .array(let list)? = o["gateways"], list.count <= 256 else {
            throw PayloadError("gateways must be an array of at most 256 views")
        }
        var views: [View] = []
        for (i, item) in list.enumerated() {
            let vr = PayloadReader(path: "gateways[\(i)]")
            let v = try vr.object(item)
            views.append(View(gateway: try vr.segment(v["gateway"], "gateway"),
                              zone: try vr.string(v["zone"], "zone", maxLength: 128),
                              proximity: try vr.proximity(v["proximity"], "proximity"),
                              rssiSmoothed: try vr.optionalNumber(v["rssiSmoothed"], "rssiSmoothed"),
                              distance: try vr.optionalNumber(v["distance"], "distance")))
        }
        gateways = views
    }
}

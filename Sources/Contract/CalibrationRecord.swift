public import BeaconKit

/// What the brain learned about one gateway, as published retained on
/// `gateways/<id>/calibration`: `{"gateway","rssiOffset","pathLossExponent","samples","links",
/// "residual","since","pinned","configuredOffset","before":{"rssiOffset","pathLossExponent","since"}|null}`.
/// `rssiOffset` (dB) is what the brain adds to the RSSI the gateway reports (which already
/// carries `configuredOffset`, the config's) before its zone fusion; `pathLossExponent` the
/// store's; `residual` the RMS dB of the gateway's links around the fit; `since` the capture
/// time the values were applied at.
public struct CalibrationRecord: Sendable, Equatable {
    public struct Values: Sendable, Equatable {
        public var rssiOffset: Double
        public var pathLossExponent: Double
        public var since: CaptureTime

        public init(rssiOffset: Double, pathLossExponent: Double, since: CaptureTime) {
            self.rssiOffset = rssiOffset
            self.pathLossExponent = pathLossExponent
            self.since = since
        }
    }

    public var gateway: String
    public var values: Values
    public var samples: Int
    public var links: Int
    public var residual: Double
    /// The config sets this gateway's `rssiOffset`: the brain does not correct it.
    public var pinned: Bool
    public var configuredOffset: Double
    /// What was applied before, if anything.
    public var before: Values?

    public var rssiOffset: Double { values.rssiOffset }
    public var pathLossExponent: Double { values.pathLossExponent }

    public init(gateway: String, values: Values, samples: Int, links: Int, residual: Double, pinned: Bool,
                configuredOffset: Double, before: Values?) {
        self.gateway = gateway
        self.values = values
        self.samples = samples
        self.links = links
        self.residual = residual
        self.pinned = pinned
        self.configuredOffset = configuredOffset
        self.before = before
    }

    public var json: String {
        var writer = JSONWriter(capacity: 256)
        writer.object { o in
            o("gateway", gateway)
            o("rssiOffset", values.rssiOffset, places: 2)
            o("pathLossExponent", values.pathLossExponent, places: 3)
            o("samples", samples)
            o("links", links)
            o("residual", residual, places: 2)
            o("since", values.since)
            o("pinned", pinned)
            o("configuredOffset", configuredOffset, places: 2)
            o("before", before.map { b -> JSONValue in
                .object(["rssiOffset": .number(rounded(b.rssiOffset, 2)), "pathLossExponent": .number(rounded(b.pathLossExponent, 3)),
                         "since": .string(b.since.iso8601)])
            } ?? .null)
        }
        return writer.text
    }

    /// Parses a retained record (read back by a restarted brain); the gateway must be the topic's.
    public init(parsing value: JSONValue, topic gateway: String) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        let named = try r.segment(o["gateway"], "gateway")
        guard named == gateway else { throw PayloadError("gateway \"\(named)\" does not match the topic's") }
        func values(_ o: JSONObject, _ r: PayloadReader) throws(PayloadError) -> Values {
            let offset = try r.number(o["rssiOffset"], "rssiOffset")
            let exponent = try r.number(o["pathLossExponent"], "pathLossExponent")
            guard abs(offset) <= 50, (1...6).contains(exponent) else {
                throw PayloadError("rssiOffset must be within ±50 dB and pathLossExponent 1…6")
            }
            return Values(rssiOffset: offset, pathLossExponent: exponent, since: try r.instant(o["since"], "since"))
        }
        self.gateway = named
        self.values = try values(o, r)
        samples = Int(min(max(try r.number(o["samples"], "samples"), 0), 1e12))
        links = Int(min(max(try r.optionalNumber(o["links"], "links") ?? 0, 0), 1e6))
        residual = try r.optionalNumber(o["residual"], "residual") ?? 0
        pinned = o["pinned"] == .bool(true)
        configuredOffset = try r.optionalNumber(o["configuredOffset"], "configuredOffset") ?? 0
        if case .object(let b)? = o["before"] {
            before = try values(b, PayloadReader(path: "before"))
        } else {
            before = nil
        }
    }
}

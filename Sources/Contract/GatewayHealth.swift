public import BeaconKit

/// What `gateways/<id>/health` carries (README "MQTT contract"; retained, QoS 0): written by
/// the gateway every `healthInterval`, read by beacon-web's fleet page. One type both ways:
/// `json` is the gateway's payload, `init?(parsing:)` reads one leniently, so a figure
/// missing or of another type is absent rather than an error (gateways of other versions
/// may publish more or less). Counts are whole numbers; rates are per second.
public struct GatewayHealth: Sendable, Equatable {
    public var gateway: String?
    public var version: String?
    /// Seconds since the gateway started.
    public var uptime: Double?
    /// The source's URI, e.g. `hci:0`.
    public var source: String?
    /// `running`, `paused`, `retrying`…
    public var sourceState: String?
    public var advertsPerSecond: Double?
    public var decodedPerSecond: Double?
    /// Sightings lost while the broker was away.
    public var dropped: Int?
    /// Inputs skipped as malformed.
    public var malformed: Int?
    public var queueDepth: Int?
    public var tracked: Int?
    /// Messages handed to the broker.
    public var published: Int?
    /// By the gateway's own clock.
    public var ts: WallTime?

    /// Nothing known.
    public init() {}

    /// A gateway's own report: every figure present.
    public init(gateway: String, version: String, uptime: Double, source: String, sourceState: String,
                advertsPerSecond: Double, decodedPerSecond: Double, dropped: Int, malformed: Int,
                queueDepth: Int, tracked: Int, published: Int, ts: WallTime) {
        self.gateway = gateway
        self.version = version
        self.uptime = uptime
        self.source = source
        self.sourceState = sourceState
        self.advertsPerSecond = advertsPerSecond
        self.decodedPerSecond = decodedPerSecond
        self.dropped = dropped
        self.malformed = malformed
        self.queueDepth = queueDepth
        self.tracked = tracked
        self.published = published
        self.ts = ts
    }

    /// A payload read leniently; `nil` when it is not a JSON object.
    public init?(parsing payload: [UInt8]) {
        guard let value = try? JSONParser(maxDepth: 8).parse(payload), case .object(let o) = value else { return nil }
        func count(_ key: String) -> Int? { o[key]?.numberValue.flatMap { Int(exactly: $0) } }
        gateway = o["gateway"]?.stringValue
        version = o["version"]?.stringValue
        uptime = o["uptime"]?.numberValue
        source = o["source"]?.stringValue
        sourceState = o["sourceState"]?.stringValue
        advertsPerSecond = o["advertsPerSecond"]?.numberValue
        decodedPerSecond = o["decodedPerSecond"]?.numberValue
        dropped = count("dropped")
        malformed = count("malformed")
        queueDepth = count("queueDepth")
        tracked = count("tracked")
        published = count("published")
        ts = o["ts"]?.stringValue.flatMap { WallTime(iso8601: $0) }
    }

    /// `{"gateway","version","uptime","source","sourceState","advertsPerSecond",
    /// "decodedPerSecond","dropped","malformed","queueDepth","tracked","published","ts"}`,
    /// uptime and rates to 0.1; a figure not known is `null`.
    public var json: String {
        var writer = JSONWriter()
        writer.object { o in
            o("gateway", gateway)
            o("version", version)
            o("uptime", uptime, places: 1)
            o("source", source)
            o("sourceState", sourceState)
            o("advertsPerSecond", advertsPerSecond, places: 1)
            o("decodedPerSecond", decodedPerSecond, places: 1)
            o("dropped", dropped)
            o("malformed", malformed)
            o("queueDepth", queueDepth)
            o("tracked", tracked)
            o("published", published)
            if let ts { o("ts", ts) } else { o("ts", JSONValue.null) }
        }
        return writer.text
    }
}

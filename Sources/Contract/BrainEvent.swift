public import BeaconKit

/// What the brain says on `brain/events` (QoS 1, not retained), one JSON object each, told
/// apart by `event` (docs/brain.md):
///
/// - `config`: what became of a fleet config (`ConfigReport`, dated by capture time);
/// - `rejected`: one rejected input, `{"event":"rejected","kind","topic","reason","bytes","ts"}`,
///   or, past the brain's rate, how many went unreported since when,
///   `{"event":"rejected","suppressed","since","ts"}` (both dated by the brain's running clock);
/// - `gap`: a span of capture time one gateway's reports never covered,
///   `{"event":"gap","gateway","from","to","seconds"}`;
/// - `battery-low`: `{"event":"battery-low","beacon","name","battery","threshold","ts"}` (mV);
/// - `beacon-missing`: `{"event":"beacon-missing","beacon","name","lastSeen","seconds","ts"}`
///   (`lastSeen` null: never seen);
/// - `calibration`: new values applied for a gateway, the `CalibrationRecord` with `event` first.
public enum BrainEvent: Sendable, Equatable {
    case config(ConfigReport<CaptureClock>)
    case rejected(Rejection)
    /// Rejected inputs past the rate: `count` of them since `since`, summed up at `at`.
    case suppressed(count: Int, since: WallTime, at: WallTime)
    case gap(gateway: String, from: CaptureTime, to: CaptureTime)
    case batteryLow(BeaconRef, name: String?, millivolts: Int, threshold: Int, at: CaptureTime)
    case beaconMissing(BeaconRef, name: String?, lastSeen: CaptureTime?, seconds: Double, at: CaptureTime)
    case calibration(CalibrationRecord)

    /// One input the brain did not take: what it was (`kind`: a topic's kind, `oversized`,
    /// `topic`), its topic, why, and its size.
    public struct Rejection: Sendable, Equatable {
        public var kind: String
        public var topic: String
        public var reason: String
        public var bytes: Int
        public var at: WallTime

        /// `topic` and `reason` are cut to 200 and 300 characters.
        public init(kind: String, topic: String, reason: String, bytes: Int, at: WallTime) {
            self.kind = kind
            self.topic = String(topic.prefix(200))
            self.reason = String(reason.prefix(300))
            self.bytes = bytes
            self.at = at
        }
    }

    public var json: String {
        switch self {
        case .config(let report): return report.json
        case .calibration(let record): return "{\"event\":\"calibration\"," + record.json.dropFirst()
        default: break
        }
        var writer = JSONWriter(capacity: 200)
        writer.object { o in
            switch self {
            case .rejected(let r):
                o("event", "rejected")
                o("kind", r.kind)
                o("topic", r.topic)
                o("reason", r.reason)
                o("bytes", r.bytes)
                o("ts", r.at)
            case .suppressed(let count, let since, let at):
                o("event", "rejected")
                o("suppressed", count)
                o("since", since)
                o("ts", at)
            case .gap(let gateway, let from, let to):
                o("event", "gap")
                o("gateway", gateway)
                o("from", from)
                o("to", to)
                o("seconds", to.seconds(since: from), places: 3)
            case .batteryLow(let ref, let name, let millivolts, let threshold, let at):
                o("event", "battery-low")
                o("beacon", ref.json)
                o("name", name)
                o("battery", millivolts)
                o("threshold", threshold)
                o("ts", at)
            case .beaconMissing(let ref, let name, let lastSeen, let seconds, let at):
                o("event", "beacon-missing")
                o("beacon", ref.json)
                o("name", name)
                o("lastSeen", lastSeen.map { JSONValue.string($0.iso8601) } ?? .null)
                o("seconds", seconds, places: 0)
                o("ts", at)
            case .config, .calibration: break
            }
        }
        return writer.text
    }

    /// The event's name, as its `event` key says it.
    public var name: String {
        switch self {
        case .config: "config"
        case .rejected, .suppressed: "rejected"
        case .gap: "gap"
        case .batteryLow: "battery-low"
        case .beaconMissing: "beacon-missing"
        case .calibration: "calibration"
        }
    }

    /// Reads an event by its `event` key.
    public init(parsing value: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        var o = try r.object(value)
        switch try r.string(o["event"], "event", maxLength: 32) {
        case "config":
            self = .config(try ConfigReport(parsing: value))
        case "rejected" where o["suppressed"] != nil:
            self = .suppressed(count: try r.optionalInteger(o["suppressed"], "suppressed", in: 0...Int(Int32.max)) ?? 0,
                               since: try r.time(o["since"], "since"), at: try r.time(o["ts"], "ts"))
        case "rejected":
            self = .rejected(Rejection(kind: try r.string(o["kind"], "kind", maxLength: 64),
                                       topic: try r.string(o["topic"], "topic", maxLength: 200),
                                       reason: try r.string(o["reason"], "reason", maxLength: 300),
                                       bytes: try r.optionalInteger(o["bytes"], "bytes", in: 0...Int(Int32.max)) ?? 0,
                                       at: try r.time(o["ts"], "ts")))
        case "gap":
            self = .gap(gateway: try r.segment(o["gateway"], "gateway"), from: try r.instant(o["from"], "from"),
                        to: try r.instant(o["to"], "to"))
        case "battery-low":
            self = .batteryLow(try BeaconRef(json: o["beacon"], at: "beacon"), name: try r.optionalString(o["name"], "name"),
                               millivolts: try r.optionalInteger(o["battery"], "battery", in: 0...100_000) ?? 0,
                               threshold: try r.optionalInteger(o["threshold"], "threshold", in: 0...100_000) ?? 0,
                               at: try r.instant(o["ts"], "ts"))
        case "beacon-missing":
            self = .beaconMissing(try BeaconRef(json: o["beacon"], at: "beacon"), name: try r.optionalString(o["name"], "name"),
                                  lastSeen: try r.optionalInstant(o["lastSeen"], "lastSeen"),
                                  seconds: try r.number(o["seconds"], "seconds"), at: try r.instant(o["ts"], "ts"))
        case "calibration":
            o["event"] = nil
            self = .calibration(try CalibrationRecord(parsing: .object(o), topic: try r.segment(o["gateway"], "gateway")))
        default:
            throw PayloadError("event must be config, rejected, gap, battery-low, beacon-missing or calibration")
        }
    }

    /// Reads the bytes of a payload.
    public init(parsing bytes: [UInt8]) throws(PayloadError) {
        let value: JSONValue
        do { value = try JSONParser(maxDepth: 8).parse(bytes) } catch { throw PayloadError(error.description) }
        try self.init(parsing: value)
    }
}

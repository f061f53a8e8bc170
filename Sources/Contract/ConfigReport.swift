public import BeaconKit

/// What became of a fleet config, as a gateway says it on `gateways/<id>/events` (dated by its
/// wall clock, `WallTime`) and the brain on `brain/events` (dated by capture time):
/// `{"event":"config","origin","superseded"?,"status":"applied","needsRestart":[…]?,"ts"}` or
/// `{"event":"config","origin","superseded"?,"status":"rejected","errors":[…],"ts"}`.
/// `superseded` (a gateway's) counts pushes dropped unread because this newer one came first,
/// omitted when 0; `needsRestart` is omitted when empty.
public struct ConfigReport<Time: TimeKind>: Sendable, Equatable {
    public enum Outcome: Sendable, Equatable {
        /// Applied live; the listed parts (`source`, `broker`, …) change only after a restart.
        case applied(needsRestart: [String])
        /// Not applied, and why; the last good config stays.
        case rejected(errors: [String])
    }

    /// Where the config came from: `fleet/config` or the file a gateway reloaded.
    public var origin: String
    public var superseded: Int
    public var outcome: Outcome
    public var at: TimePoint<Time>

    public init(origin: String, superseded: Int = 0, outcome: Outcome, at: TimePoint<Time>) {
        self.origin = origin
        self.superseded = superseded
        self.outcome = outcome
        self.at = at
    }

    public var json: String {
        var writer = JSONWriter()
        writer.object { o in
            o("event", "config")
            o("origin", origin)
            if superseded > 0 { o("superseded", superseded) }
            switch outcome {
            case .applied(let needsRestart):
                o("status", "applied")
                if !needsRestart.isEmpty { o("needsRestart", .array(needsRestart.map(JSONValue.string))) }
            case .rejected(let errors):
                o("status", "rejected")
                o("errors", .array(errors.map(JSONValue.string)))
            }
            o("ts", at)
        }
        return writer.text
    }

    /// Reads an object whose `event` is `config`.
    public init(parsing value: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        guard o["event"] == .string("config") else { throw PayloadError("event must be config") }
        origin = try r.string(o["origin"], "origin", maxLength: 4096)
        superseded = try r.optionalInteger(o["superseded"], "superseded", in: 0...Int(Int32.max)) ?? 0
        switch try r.string(o["status"], "status", maxLength: 16) {
        case "applied": outcome = .applied(needsRestart: try r.strings(o["needsRestart"], "needsRestart") ?? [])
        case "rejected":
            guard let errors = try r.strings(o["errors"], "errors") else { throw PayloadError("errors is required") }
            outcome = .rejected(errors: errors)
        default: throw PayloadError("status must be applied or rejected")
        }
        at = try r.time(o["ts"], "ts")
    }
}

extension PayloadReader {
    /// An array of strings, or `nil` when absent.
    package func strings(_ value: JSONValue?, _ key: String, maxLength: Int = 4096) throws(PayloadError) -> [String]? {
        guard let value else { return nil }
        guard case .array(let items) = value else { throw PayloadError("\(name(key)) must be an array, found \(value.typeName)") }
        var strings: [String] = []
        strings.reserveCapacity(items.count)
        for (i, item) in items.enumerated() { strings.append(try string(item, "\(key)[\(i)]", maxLength: maxLength)) }
        return strings
    }

    /// An ISO-8601 UTC time on either clock (`instant` is capture time's).
    package func time<Kind: TimeKind>(_ value: JSONValue?, _ key: String) throws(PayloadError) -> TimePoint<Kind> {
        let text = try string(value, key, maxLength: 32)
        guard let time = TimePoint<Kind>(iso8601: text) else { throw PayloadError("\(name(key)) is not an ISO-8601 UTC time") }
        return time
    }
}

public import BeaconKit

/// The observers' payloads the brain writes (docs/brain.md, "What it writes"): the inbox
/// messages, and the registry position a location fix carries. `beacon-brain`,
/// `beaconctl observe` and the tests share this one definition of every key.
///
/// Everything parsed here comes from the network and is untrusted: a parser checks the type
/// of every key it uses and throws `PayloadError` with a short reason rather than guessing.

/// What the brain sends to one observer on `observers/<client>/inbox` (not retained):
///
/// - `{"type":"ad","beacon":{"major","minor"},"ad":{…}|null,"rule":name|null,"ts"}`: the
///   beacon's standing offer; the reply to every accepted join (`rule` null, `ad` null when
///   neither the beacon nor its store has one), or a rule's `ad` action;
/// - `{"type":"greeting","beacon":{…},"text","rule","ts"}`: a rule's templated greeting;
/// - `{"type":"locationFix","beacon":{…},"lat","lon","heading","floor","rule","ts"}`: the
///   beacon's registry position (degrees; heading clockwise from north; floor; any of them
///   null when the registry does not give it: a beacon may set only a heading or a floor);
/// - `{"type":"error","beacon":{…}|null,"error":reason,"ts"}`: a rejected join; nothing changed.
public enum InboxMessage: Sendable, Equatable {
    case ad(beacon: BeaconRef, ad: JSONValue?, rule: String?)
    case greeting(beacon: BeaconRef, text: String, rule: String?)
    case locationFix(beacon: BeaconRef, location: Location, rule: String?)
    case error(beacon: BeaconRef?, reason: String)
    /// The brain ended the app's join (the visit ended, the join grew too old): the app is
    /// no longer on the beacon's channel, and its profile left the broker.
    case left(beacon: BeaconRef, reason: String)

    public var type: String {
        switch self {
        case .ad: "ad"
        case .greeting: "greeting"
        case .locationFix: "locationFix"
        case .error: "error"
        case .left: "left"
        }
    }

    public func json(at ts: CaptureTime) -> String {
        var writer = JSONWriter()
        writer.object { o in
            o("type", type)
            switch self {
            case .ad(let beacon, let ad, let rule):
                o("beacon", beacon.json)
                o("ad", ad ?? .null)
                o("rule", rule)
            case .greeting(let beacon, let text, let rule):
                o("beacon", beacon.json)
                o("text", text)
                o("rule", rule)
            case .locationFix(let beacon, let location, let rule):
                o("beacon", beacon.json)
                for member in location.json.objectValue?.members ?? [] { o(member.key, member.value) }
                o("rule", rule)
            case .error(let beacon, let reason):
                o("beacon", beacon?.json ?? .null)
                o("error", reason)
            case .left(let beacon, let reason):
                o("beacon", beacon.json)
                o("reason", reason)
            }
            o("ts", ts)
        }
        return writer.text
    }

    /// Parses an inbox message (for observers); unknown types are errors.
    public init(parsing value: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        let type = try r.string(o["type"], "type", maxLength: 32)
        let rule = try r.optionalString(o["rule"], "rule", maxLength: 1000)
        switch type {
        case "ad":
            self = .ad(beacon: try BeaconRef(json: o["beacon"], at: "beacon"),
                       ad: o["ad"].flatMap { $0 == .null ? nil : $0 }, rule: rule)
        case "greeting":
            self = .greeting(beacon: try BeaconRef(json: o["beacon"], at: "beacon"),
                             text: try r.string(o["text"], "text", maxLength: 100_000), rule: rule)
        case "locationFix":
            let heading = try r.optionalNumber(o["heading"], "heading")
            let floor = try r.optionalNumber(o["floor"], "floor")
            if let floor, floor != floor.rounded() || abs(floor) > 10_000 { throw PayloadError("floor must be an integer") }
            self = .locationFix(beacon: try BeaconRef(json: o["beacon"], at: "beacon"),
                                location: Location(latitude: try r.optionalNumber(o["lat"], "lat"),
                                                   longitude: try r.optionalNumber(o["lon"], "lon"),
                                                   heading: heading, floor: floor.map { Int($0) }),
                                rule: rule)
        case "error":
            let beacon: BeaconRef? = if let value = o["beacon"], value != .null {
                try BeaconRef(json: value, at: "beacon")
            } else {
                nil
            }
            self = .error(beacon: beacon, reason: try r.string(o["error"], "error", maxLength: 10_000))
        case "left":
            self = .left(beacon: try BeaconRef(json: o["beacon"], at: "beacon"),
                         reason: try r.string(o["reason"], "reason", maxLength: 10_000))
        default:
            throw PayloadError("unknown inbox message type \"\(type.prefix(32))\"")
        }
    }
}

/// Where a beacon hangs (navigation beacons). As the navigation library allowed, any part may
/// be missing: a beacon may set only a heading, or only a floor; latitude and longitude go
/// together.
public struct Location: Sendable, Equatable {
    public var latitude: Double?
    public var longitude: Double?
    /// Degrees clockwise from north.
    public var heading: Double?
    public var floor: Int?

    public init(latitude: Double? = nil, longitude: Double? = nil, heading: Double? = nil, floor: Int? = nil) {
        self.latitude = latitude
        self.longitude = longitude
        self.heading = heading
        self.floor = floor
    }

    /// The location-fix payload: `{"lat","lon","heading","floor"}`, `null` for a missing part.
    public var json: JSONValue {
        .object(["lat": latitude.map(JSONValue.number) ?? .null, "lon": longitude.map(JSONValue.number) ?? .null,
                 "heading": heading.map(JSONValue.number) ?? .null,
                 "floor": floor.map { .number(Double($0)) } ?? .null])
    }
}

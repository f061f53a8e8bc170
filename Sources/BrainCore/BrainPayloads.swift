public import BeaconKit
public import Contract
import Tracking
public import Config

/// The payloads only the brain and its observers use (docs/brain.md, "What it reads" and
/// "What it writes"): the inbox messages and the brain's sealed records, as values with a
/// strict parser and a stable encoder each, so `beacon-brain`, `beaconctl observe` and the
/// tests share one definition of every key. What another part reads (fleet presence, roster,
/// joins, calibration, beacon health) is in Contract.
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

    public func json(at ts: Instant) -> String {
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

// MARK: - The brain's own records

/// What rules did in one scope (a beacon's visit, or one observer's join): when each rule
/// last fired (for `once` and `cooldown` seconds) and which are waiting to be re-armed by
/// "after N updates at near", with the updates counted so far.
public struct RuleMemory: Sendable, Equatable {
    public var fired: [String: Instant]
    public var disarmed: [String: Int]

    public init(fired: [String: Instant] = [:], disarmed: [String: Int] = [:]) {
        self.fired = fired
        self.disarmed = disarmed
    }

    public var isEmpty: Bool { fired.isEmpty && disarmed.isEmpty }

    /// `"fired":{"rule":ts…},"disarmed":["rule"…]`, keys sorted. Update counts are not
    /// recorded: they change with every sighting, and a restarted brain counting again from
    /// zero only re-arms a little later.
    func write(into o: inout JSONWriter.ObjectWriter) {
        o("fired", .object(JSONObject(fired.sorted { $0.key < $1.key }.map { (key: $0.key, value: .string($0.value.iso8601)) })))
        o("disarmed", .array(disarmed.keys.sorted().map(JSONValue.string)))
    }

    init(reading o: JSONObject, _ r: PayloadReader) throws(PayloadError) {
        fired = [:]
        disarmed = [:]
        if let value = o["fired"] {
            let fr = PayloadReader(path: r.name("fired"))
            let f = try fr.object(value)
            guard f.members.count <= 1000 else { throw PayloadError("too many rules in fired") }
            for member in f.members { fired[member.key] = try fr.instant(member.value, member.key) }
        }
        if let value = o["disarmed"] {
            guard case .array(let list) = value, list.count <= 1000 else { throw PayloadError("disarmed must be an array") }
            for (i, item) in list.enumerated() { disarmed[try r.string(item, "disarmed[\(i)]", maxLength: 1000)] = 0 }
        }
    }
}

/// `brain/visits/<major>/<minor>` (retained, the brain's own): the visit the brain is
/// handling, its zone (a gateway id) and what rules did in it:
/// `{"since":ts|null,"zone":id|null,"fired":{"rule":ts…},"disarmed":[…]}`.
/// Written at enter, at each zone change and when a rule fires or re-arms; deleted after
/// the exit, or kept with `since` null while a cooldown in seconds still runs. A restarted
/// brain continues the visit with the same `since` (so `once` rules stay fired) and zone
/// (so nobody moves) instead of starting a new one. Sealed (`RecordSeal`), unlike the fleet
/// presence anyone may write, which is why the zone is here too.
public struct VisitRecord: Sendable, Equatable {
    public var since: Instant?
    public var zone: String?
    public var rules: RuleMemory

    public init(since: Instant?, zone: String? = nil, rules: RuleMemory) {
        self.since = since
        self.zone = zone
        self.rules = rules
    }

    public var json: String {
        var writer = JSONWriter()
        writer.object { o in
            o("since", since.map { JSONValue.string($0.iso8601) } ?? .null)
            if let zone { o("zone", zone) }
            rules.write(into: &o)
        }
        return writer.text
    }

    public init(parsing value: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        try r.only(o, ["since", "zone", "fired", "disarmed"])
        since = try r.optionalInstant(o["since"], "since")
        zone = try r.optionalString(o["zone"], "zone", maxLength: 256)
        rules = try RuleMemory(reading: o, r)
    }
}

/// `brain/answered/<major>/<minor>/<client>` (retained, the brain's own): a join the brain
/// has answered: `{"join":fingerprint|null,"since":ts|null,"fired":{…},"disarmed":[…]}`.
/// `join` is `JoinRequest.fingerprint` of the payload answered, so a restarted brain finding
/// the same join does not send the ad again. Deleted when the join ends (kept with `join`
/// null while a join rule's cooldown in seconds still runs).
public struct AnsweredRecord: Sendable, Equatable {
    public var join: String?
    public var since: Instant?
    public var rules: RuleMemory

    public init(join: String?, since: Instant?, rules: RuleMemory) {
        self.join = join
        self.since = since
        self.rules = rules
    }

    public var json: String {
        var writer = JSONWriter()
        writer.object { o in
            o("join", join)
            o("since", since.map { JSONValue.string($0.iso8601) } ?? .null)
            rules.write(into: &o)
        }
        return writer.text
    }

    public init(parsing value: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        try r.only(o, ["join", "since", "fired", "disarmed"])
        join = try r.optionalString(o["join"], "join", maxLength: 32)
        since = try r.optionalInstant(o["since"], "since")
        rules = try RuleMemory(reading: o, r)
    }
}

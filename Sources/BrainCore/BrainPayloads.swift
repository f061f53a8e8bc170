public import BeaconKit
public import Contract
import Tracking
public import Config

/// The payloads the brain reads and writes (docs/brain.md, "What it reads" and "What it
/// writes"), as values with a strict parser and a stable encoder each, so `beacon-brain`, `beaconctl observe` and the tests share one
/// definition of every key.
///
/// Everything parsed here comes from the network and is untrusted: a parser checks the type
/// of every key it uses and throws `PayloadError` with a short reason rather than guessing.

// MARK: - Fleet presence

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
    public var since: Instant

    public init(beacon: BeaconRef, uuid: BeaconUUID?, zone: String, zoneName: String, gateways: [View],
                proximity: Proximity, since: Instant) {
        self.beacon = beacon
        self.uuid = uuid
        self.zone = zone
        self.zoneName = zoneName
        self.gateways = gateways
        self.proximity = proximity
        self.since = since
    }

    public var json: String { encode(volatile: true) }

    /// The payload without the per-sample numbers: what decides whether to republish.
    public var signature: String { encode(volatile: false) }

    func encode(volatile: Bool) -> String {
        var writer = JSONWriter(capacity: 256)
        writer.object { o in
            if beacon.eddystone == nil { o("uuid", uuid?.description) }
            beacon.write(into: &o)
            o("zone", zone)
            o("zoneName", zoneName)
            // Written directly: the signature is computed for every sighting the brain takes in.
            o("gateways", objects: gateways) { g, view in
                g("gateway", view.gateway)
                g("zone", view.zone)
                g("proximity", view.proximity.rawValue)
                if volatile {
                    g("rssiSmoothed", view.rssiSmoothed, places: 1)
                    g("distance", view.distance, places: 2)
                }
            }
            o("proximity", proximity.rawValue)
            o("since", since)
        }
        return writer.text
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

// MARK: - Observers

/// What an observer may tell the shop about themselves. Personal data: it lives in the
/// retained join only while the customer is present.
public struct ObserverProfile: Sendable, Equatable {
    public var name: String?
    /// The usual order ("flat white").
    public var favorite: String?
    /// A JPEG (at most `JoinRequest.maxPhotoBytes`), carried base64-encoded in the join.
    public var photo: [UInt8]?

    public init(name: String? = nil, favorite: String? = nil, photo: [UInt8]? = nil) {
        self.name = name
        self.favorite = favorite
        self.photo = photo
    }
}

/// A join on `beacons/<major>/<minor>/observers/<client>` (retained; an empty payload
/// leaves): `{"state":"joined","profile":{"name","favorite","photo"}}`, `profile` and each
/// of its keys optional, `photo` base64 (RFC 4648, padded) of a JPEG.
public struct JoinRequest: Sendable, Equatable {
    /// Longest accepted name or favorite, characters.
    public static let maxTextLength = 100
    /// Largest accepted photo after base64 decoding, bytes (20 KiB).
    public static let maxPhotoBytes = 20 * 1024
    /// Largest accepted join payload, bytes: room for the photo's base64 and the rest.
    public static let maxPayloadBytes = 64 * 1024
    /// Deepest accepted nesting (the document is two levels deep).
    public static let maxDepth = 4

    public var profile: ObserverProfile?

    public init(profile: ObserverProfile? = nil) { self.profile = profile }

    /// Validates an untrusted join payload; the error's reason goes back to the observer.
    public init(parsing payload: [UInt8]) throws(PayloadError) {
        guard payload.count <= Self.maxPayloadBytes else {
            throw PayloadError("join payload of \(payload.count) bytes exceeds \(Self.maxPayloadBytes)")
        }
        let document: JSONValue
        do {
            document = try JSONParser(maxDepth: Self.maxDepth).parse(payload)
        } catch {
            throw PayloadError("join is not valid JSON: \(error.description)")
        }
        try self.init(parsing: document)
    }

    public init(parsing document: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(document)
        try r.only(o, ["state", "profile"])
        let state = try r.string(o["state"], "state", maxLength: 32)
        guard state == "joined" else {
            throw PayloadError("state must be \"joined\" (leave by deleting the retained join)")
        }
        guard let value = o["profile"], value != .null else {
            profile = nil
            return
        }
        let pr = PayloadReader(path: "profile")
        let p = try pr.object(value)
        try pr.only(p, ["name", "favorite", "photo"])
        var profile = ObserverProfile()
        profile.name = try pr.optionalString(p["name"], "name", maxLength: Self.maxTextLength)
        profile.favorite = try pr.optionalString(p["favorite"], "favorite", maxLength: Self.maxTextLength)
        if let photo = try pr.optionalString(p["photo"], "photo", maxLength: StrictBase64.encodedLength(Self.maxPhotoBytes)) {
            guard let bytes = StrictBase64.decode(photo) else { throw PayloadError("profile.photo is not valid base64") }
            guard bytes.count <= Self.maxPhotoBytes else {
                throw PayloadError("profile.photo is \(bytes.count) bytes; at most \(Self.maxPhotoBytes)")
            }
            guard bytes.count >= 3, bytes[0] == 0xFF, bytes[1] == 0xD8, bytes[2] == 0xFF else {
                throw PayloadError("profile.photo is not a JPEG")
            }
            profile.photo = bytes
        }
        self.profile = profile
    }

    /// The join payload, for observers (`beaconctl observe`).
    public var json: String {
        var writer = JSONWriter()
        writer.object { o in
            o("state", "joined")
            if let profile {
                var object = JSONObject()
                if let name = profile.name { object["name"] = .string(name) }
                if let favorite = profile.favorite { object["favorite"] = .string(favorite) }
                if let photo = profile.photo { object["photo"] = .string(StrictBase64.encode(photo)) }
                o("profile", .object(object))
            }
        }
        return writer.text
    }
}

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

/// The greeter view on `stores/<store>/roster` (retained), a bounded summary:
///
/// `{"store":major,"name":storeName|null,"count":n,"customers":[{"client","name","favorite","photo",
/// "beacon":{"major","minor"},"since"}…],"ts"}`
///
/// `count` is every customer present in the store; `customers` the `limit` (default 50)
/// who arrived last, oldest first, so the message stays small however full the shop is.
/// Every customer also has a retained topic of their own, `stores/<store>/customers/<client>`,
/// holding one `Customer` (see `Roster.Customer.json`): a greeter that needs everyone
/// subscribes to `stores/<store>/customers/+`. `photo` is the topic of the retained join that
/// holds the photo (subscribe to it to show the picture), `null` when the profile has none;
/// `since` is when the client's first join in this store was answered. An empty
/// `customers` list means nobody with a join is inside.
public struct Roster: Sendable, Equatable {
    /// One customer: an entry of the summary and the payload of `stores/<store>/customers/<client>`,
    /// `{"client","name","favorite","photo","beacon":{"major","minor"},"since"}`.
    public struct Customer: Sendable, Equatable {
        public var client: String
        public var name: String?
        public var favorite: String?
        /// The join topic holding the photo.
        public var photo: String?
        public var beacon: BeaconRef
        public var since: Instant

        public init(client: String, name: String?, favorite: String?, photo: String?, beacon: BeaconRef, since: Instant) {
            self.client = client
            self.name = name
            self.favorite = favorite
            self.photo = photo
            self.beacon = beacon
            self.since = since
        }

        public var json: JSONValue {
            .object(["client": .string(client), "name": name.map(JSONValue.string) ?? .null,
                     "favorite": favorite.map(JSONValue.string) ?? .null,
                     "photo": photo.map(JSONValue.string) ?? .null,
                     "beacon": beacon.json, "since": .string(since.iso8601)])
        }

        public init(parsing value: JSONValue, at path: String = "") throws(PayloadError) {
            let r = PayloadReader(path: path)
            let c = try r.object(value)
            client = try r.segment(c["client"], "client")
            name = try r.optionalString(c["name"], "name", maxLength: JoinRequest.maxTextLength)
            favorite = try r.optionalString(c["favorite"], "favorite", maxLength: JoinRequest.maxTextLength)
            photo = try r.optionalString(c["photo"], "photo", maxLength: 1000)
            beacon = try BeaconRef(json: c["beacon"], at: r.name("beacon"))
            since = try r.instant(c["since"], "since")
        }
    }

    public var store: UInt16
    public var name: String?
    /// Every customer present, also those left out of `customers`.
    public var count: Int
    public var customers: [Customer]

    public init(store: UInt16, name: String?, count: Int? = nil, customers: [Customer]) {
        self.store = store
        self.name = name
        self.count = count ?? customers.count
        self.customers = customers
    }

    /// The payload; without `ts` it is the signature that decides whether to republish.
    public func json(at ts: Instant?) -> String {
        var writer = JSONWriter()
        writer.object { o in
            o("store", Int(store))
            o("name", name)
            o("count", count)
            o("customers", .array(customers.map(\.json)))
            if let ts { o("ts", ts) }
        }
        return writer.text
    }

    /// Parses a summary; `count` may be missing (rosters written before it existed).
    public init(parsing value: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        store = try r.u16(o["store"], "store")
        name = try r.optionalString(o["name"], "name", maxLength: 1000)
        guard case .array(let list)? = o["customers"] else { throw PayloadError("customers must be an array") }
        var customers: [Customer] = []
        for (i, item) in list.enumerated() {
            customers.append(try Customer(parsing: item, at: "customers[\(i)]"))
        }
        self.customers = customers
        if let value = o["count"] {
            let total = try r.number(value, "count")
            guard total == total.rounded(), total >= Double(customers.count), total <= 1e9 else {
                throw PayloadError("count must be a whole number of at least the customers listed")
            }
            count = Int(total)
        } else {
            count = customers.count
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

extension JoinRequest {
    /// A short stable digest of a join payload (FNV-1a, 64 bits, hex): equal payloads,
    /// equal fingerprints. Identifies "the join already answered", not a security measure.
    public static func fingerprint(_ payload: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in payload {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return Hex.encode((0..<8).map { UInt8(truncatingIfNeeded: hash >> (56 - 8 * UInt64($0))) })
    }
}

public import BeaconKit

/// The brain's own records (docs/brain.md, "What it writes"), retained and sealed
/// (`RecordSeal`, in BrainCore): each a value with a strict parser and a stable encoder.
/// Read back by a restarted brain, so a parser checks the type of every key it uses and
/// throws `PayloadError` with a short reason rather than guessing.

/// What rules did in one scope (a beacon's visit, or one observer's join): when each rule
/// last fired (for `once` and `cooldown` seconds) and which are waiting to be re-armed by
/// "after N updates at near", with the updates counted so far.
public struct RuleMemory: Sendable, Equatable {
    public var fired: [String: CaptureTime]
    public var disarmed: [String: Int]

    public init(fired: [String: CaptureTime] = [:], disarmed: [String: Int] = [:]) {
        self.fired = fired
        self.disarmed = disarmed
    }

    public var isEmpty: Bool { fired.isEmpty && disarmed.isEmpty }

    /// `"fired":{"rule":ts…},"disarmed":["rule"…]`, keys sorted. Update counts are not
    /// recorded: they change with every sighting, and a restarted brain counting again from
    /// zero only re-arms a little later.
    package func write(into o: inout JSONWriter.ObjectWriter) {
        o("fired", .object(JSONObject(fired.sorted { $0.key < $1.key }.map { (key: $0.key, value: .string($0.value.iso8601)) })))
        o("disarmed", .array(disarmed.keys.sorted().map(JSONValue.string)))
    }

    package init(reading o: JSONObject, _ r: PayloadReader) throws(PayloadError) {
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
    public var since: CaptureTime?
    public var zone: String?
    public var rules: RuleMemory

    public init(since: CaptureTime?, zone: String? = nil, rules: RuleMemory) {
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
    public var since: CaptureTime?
    public var rules: RuleMemory

    public init(join: String?, since: CaptureTime?, rules: RuleMemory) {
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

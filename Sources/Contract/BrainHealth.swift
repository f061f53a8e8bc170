public import BeaconKit

/// What `brain/health/<client>` carries (retained, QoS 0): written by the brain every
/// `healthInterval` once it has settled, read by `beaconctl score` (has the brain settled?).
/// One type both ways, as `GatewayHealth`: `json` is the brain's payload, `init?(parsing:)`
/// reads one leniently, so a figure missing or of another type is absent rather than an
/// error (brains of other versions may publish more or less).
public struct BrainHealth: Sendable, Equatable {
    public var version: String?
    /// Seconds since the brain started.
    public var uptime: Double?
    /// The stores this brain decides for (`--stores`); `nil`: every store (written `null`).
    public var stores: [Int]?
    /// It has read the retained state back and decides (`BrainCore.isSettled`).
    public var settled: Bool?
    /// Stores whose bridge is down (`StoreBridges`): their beacons are held, not let go.
    public var unknownStores: [Int]?
    public var beacons: Int?
    public var joins: Int?
    public var received: Int?
    public var oversized: Int?
    /// Malformed inputs by kind (`BrainCounters.Input`), written in the order of the kinds.
    public var malformed: [String: Int]?
    public var unknownTopics: Int?
    public var foreign: Int?
    public var staleReports: Int?
    public var behindReports: Int?
    public var joinsAccepted: Int?
    public var joinsRejected: Int?
    public var joinsThrottled: Int?
    public var leaves: Int?
    public var rulesFired: Int?
    public var actionsSkipped: Int?
    public var inboxMessages: Int?
    public var configsApplied: Int?
    public var configsRejected: Int?
    /// Messages handed to the broker.
    public var published: Int?
    public var publishFailures: Int?
    /// By the brain's own clock.
    public var ts: WallTime?

    /// Nothing known.
    public init() {}

    /// A payload read leniently; `nil` when it is not a JSON object.
    public init?(parsing payload: [UInt8]) {
        guard let value = try? JSONParser(maxDepth: 8).parse(payload), case .object(let o) = value else { return nil }
        func count(_ key: String) -> Int? { o[key]?.numberValue.flatMap { Int(exactly: $0) } }
        func counts(_ key: String) -> [Int]? {
            o[key]?.arrayValue.flatMap { list in
                let numbers = list.compactMap { $0.numberValue.flatMap { Int(exactly: $0) } }
                return numbers.count == list.count ? numbers : nil
            }
        }
        version = o["version"]?.stringValue
        uptime = o["uptime"]?.numberValue
        stores = counts("stores")
        settled = o["settled"]?.boolValue
        unknownStores = counts("unknownStores")
        beacons = count("beacons")
        joins = count("joins")
        received = count("received")
        oversized = count("oversized")
        malformed = o["malformed"]?.objectValue.map { object in
            var byKind: [String: Int] = [:]
            for (kind, value) in object.members { if let n = value.numberValue.flatMap({ Int(exactly: $0) }) { byKind[kind] = n } }
            return byKind
        }
        unknownTopics = count("unknownTopics")
        foreign = count("foreign")
        staleReports = count("staleReports")
        behindReports = count("behindReports")
        joinsAccepted = count("joinsAccepted")
        joinsRejected = count("joinsRejected")
        joinsThrottled = count("joinsThrottled")
        leaves = count("leaves")
        rulesFired = count("rulesFired")
        actionsSkipped = count("actionsSkipped")
        inboxMessages = count("inboxMessages")
        configsApplied = count("configsApplied")
        configsRejected = count("configsRejected")
        published = count("published")
        publishFailures = count("publishFailures")
        ts = o["ts"]?.stringValue.flatMap { WallTime(iso8601: $0) }
    }

    /// `{"version","uptime","stores","settled","unknownStores","beacons","joins","received",
    /// "oversized","malformed":{kind:count},"unknownTopics","foreign","staleReports",
    /// "behindReports","joinsAccepted","joinsRejected","joinsThrottled","leaves","rulesFired",
    /// "actionsSkipped","inboxMessages","configsApplied","configsRejected","published",
    /// "publishFailures","ts"}`; `uptime` in s to 0.1; a figure not known is `null`.
    public var json: String {
        func numbers(_ list: [Int]?) -> JSONValue { list.map { .array($0.map { .number(Double($0)) }) } ?? .null }
        var writer = JSONWriter()
        writer.object { o in
            o("version", version)
            o("uptime", uptime, places: 1)
            o("stores", numbers(stores))
            if let settled { o("settled", settled) } else { o("settled", JSONValue.null) }
            o("unknownStores", numbers(unknownStores))
            o("beacons", beacons)
            o("joins", joins)
            o("received", received)
            o("oversized", oversized)
            o("malformed", malformed.map { byKind in
                .object(JSONObject(byKind.sorted { $0.key < $1.key }.map { (key: $0.key, value: .number(Double($0.value))) }))
            } ?? .null)
            o("unknownTopics", unknownTopics)
            o("foreign", foreign)
            o("staleReports", staleReports)
            o("behindReports", behindReports)
            o("joinsAccepted", joinsAccepted)
            o("joinsRejected", joinsRejected)
            o("joinsThrottled", joinsThrottled)
            o("leaves", leaves)
            o("rulesFired", rulesFired)
            o("actionsSkipped", actionsSkipped)
            o("inboxMessages", inboxMessages)
            o("configsApplied", configsApplied)
            o("configsRejected", configsRejected)
            o("published", published)
            o("publishFailures", publishFailures)
            if let ts { o("ts", ts) } else { o("ts", JSONValue.null) }
        }
        return writer.text
    }
}

import BeaconKit

/// What `beacon-history` keeps and for how long (the fleet config's `history`, docs/history.md).
public struct HistoryConfig: Sendable, Equatable {
    /// The SQLite file that holds the history (one file, no server).
    public var database: String
    /// The key that turns a beacon's id into the history's pseudonym (a keyed hash): its
    /// first line. Created (32 random bytes, mode 0600) when missing.
    public var keyFile: String?
    /// Days a visit and its zone segments are kept; the daily figures outlive them.
    public var retentionDays: Int
    /// Zones (gateway ids or zone names) that count as reaching the counter: door-to-counter
    /// conversion is the share of visits with a segment in one of them.
    public var counterZones: [String]
    /// Zones where people wait: their dwell is reported as queue time.
    public var queueZones: [String]
    /// The stores' offset from UTC, minutes: hours, days and weeks are the store's.
    public var utcOffsetMinutes: Int

    public init(database: String = "/var/lib/beaconbridge/history.sqlite", keyFile: String? = nil,
                retentionDays: Int = 90, counterZones: [String] = ["counter"], queueZones: [String] = [],
                utcOffsetMinutes: Int = 0) {
        self.database = database
        self.keyFile = keyFile
        self.retentionDays = retentionDays
        self.counterZones = counterZones
        self.queueZones = queueZones
        self.utcOffsetMinutes = utcOffsetMinutes
    }

    /// The key file: `keyFile`, else the database's path with `.key` appended.
    public var resolvedKeyFile: String { keyFile ?? database + ".key" }
}

extension FleetConfig {
    static let historyKeys = ["database", "keyFile", "retentionDays", "counterZones", "queueZones", "utcOffset"]

    static func parseHistory(_ value: JSONValue?, _ r: inout ConfigReader) -> HistoryConfig {
        var config = HistoryConfig()
        guard let o = r.object(value, at: "history", keys: historyKeys) else { return config }
        if let text = r.string(o["database"], at: "history.database", maxLength: 4096) {
            if text.hasPrefix("postgres:") || text.hasPrefix("postgresql:") {
                r.fail("history.database", "PostgreSQL is not supported yet: give the SQLite file's path")
            } else {
                config.database = text.hasPrefix("sqlite:") ? String(text.dropFirst("sqlite:".count)) : text
            }
        }
        if let text = r.string(o["keyFile"], at: "history.keyFile", maxLength: 4096) { config.keyFile = text }
        if let days = r.integer(o["retentionDays"], at: "history.retentionDays", in: 1...3650) { config.retentionDays = days }
        for key in ["counterZones", "queueZones"] {
            guard let items = r.array(o[key], at: "history.\(key)") else { continue }
            var zones: [String] = []
            for (i, item) in items.enumerated() {
                if let zone = r.string(item, at: "history.\(key)[\(i)]", maxLength: maxNameLength) { zones.append(zone) }
            }
            if key == "counterZones" { config.counterZones = zones } else { config.queueZones = zones }
        }
        if let text = r.string(o["utcOffset"], at: "history.utcOffset", maxLength: 6) {
            if let minutes = Self.utcOffsetMinutes(text) {
                config.utcOffsetMinutes = minutes
            } else {
                r.fail("history.utcOffset", "\"\(text)\" is not an offset from UTC like +01:00 or -05:30 (-12:00…+14:00)")
            }
        }
        return config
    }

    /// `+01:00`, `-05:30`, `Z` as minutes east of UTC.
    public static func utcOffsetMinutes(_ text: String) -> Int? {
        if text == "Z" { return 0 }
        let chars = Array(text)
        guard chars.count == 6, chars[0] == "+" || chars[0] == "-", chars[3] == ":",
              let h = Int(String(chars[1...2])), let m = Int(String(chars[4...5])), m < 60 else { return nil }
        let minutes = (chars[0] == "-" ? -1 : 1) * (h * 60 + m)
        guard (-720...840).contains(minutes) else { return nil }
        return minutes
    }
}

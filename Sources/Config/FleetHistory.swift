import BeaconKit

/// What `beacon-history` keeps and for how long (the fleet config's `history`, docs/history.md).
public struct HistoryConfig: Sendable, Equatable {
    /// Where the history is kept: a SQLite file's path (one file, no server), or a
    /// PostgreSQL server for a chain, `postgres://USER@HOST[:PORT]/DATABASE` (`postgres`).
    public var database: String
    /// PostgreSQL's password: the first line of this file (`BEACONBRIDGE_HISTORY_PASSWORD`
    /// comes first); none for a server that trusts the connection.
    public var passwordFile: String?
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
    /// Seconds a visit must spend in the counter zones (in all) to count as having reached
    /// the counter, and in the queue zones to count in the queue time; `nil`: the figures'
    /// default (`HistoryFigures.Options.defaultMinimumStay`).
    public var minimumStaySeconds: Double?

    public init(database: String = "/var/lib/beaconbridge/history.sqlite", passwordFile: String? = nil, keyFile: String? = nil,
                retentionDays: Int = 90, counterZones: [String] = ["counter"], queueZones: [String] = [],
                utcOffsetMinutes: Int = 0) {
        self.database = database
        self.passwordFile = passwordFile
        self.keyFile = keyFile
        self.retentionDays = retentionDays
        self.counterZones = counterZones
        self.queueZones = queueZones
        self.utcOffsetMinutes = utcOffsetMinutes
    }

    /// The key file: `keyFile`, else the SQLite file's path with `.key` appended (PostgreSQL
    /// has no path: the config must name the key file, which the parser checks).
    public var resolvedKeyFile: String { keyFile ?? database + ".key" }

    /// The PostgreSQL server when `database` names one, else `nil` (SQLite).
    public var postgres: PostgresAddress? { try? PostgresAddress.parse(database).get() }

    /// What is wrong with `database` and `keyFile` together (`nil`: nothing), for the parser
    /// and for a `--database` given on the command line.
    public var databaseProblem: String? {
        guard PostgresAddress.names(database) else { return nil }
        if case .failure(let reason) = PostgresAddress.parse(database) { return reason.text }
        if keyFile == nil {
            return "with PostgreSQL, history.keyFile must name the pseudonyms' key (every beacon-history and beaconctl forget of the chain reads the same one)"
        }
        return nil
    }
}

/// A PostgreSQL server and database holding the history: `postgres://USER@HOST[:PORT]/DATABASE`.
/// No password in it: the config is shared and logged; the password is in `passwordFile`.
public struct PostgresAddress: Sendable, Equatable, CustomStringConvertible {
    public var user: String
    public var host: String
    public var port: Int
    public var database: String

    public init(user: String, host: String, port: Int = 5432, database: String) {
        self.user = user
        self.host = host
        self.port = port
        self.database = database
    }

    public struct Problem: Error, Equatable {
        public var text: String
    }

    /// Whether `text` names PostgreSQL at all (`postgres:` or `postgresql:`).
    public static func names(_ text: String) -> Bool { text.hasPrefix("postgres:") || text.hasPrefix("postgresql:") }

    public static func parse(_ text: String) -> Result<PostgresAddress, Problem> {
        func fail(_ why: String) -> Result<PostgresAddress, Problem> {
            .failure(Problem(text: "\"\(text)\" \(why): give postgres://USER@HOST[:PORT]/DATABASE"))
        }
        var rest = Substring(text)
        if rest.hasPrefix("postgresql://") { rest = rest.dropFirst("postgresql://".count) }
        else if rest.hasPrefix("postgres://") { rest = rest.dropFirst("postgres://".count) }
        else { return fail("is not a postgres:// URL") }
        guard let at = rest.lastIndex(of: "@") else { return fail("names no user") }
        let user = rest[..<at]
        if user.contains(":") {
            return .failure(Problem(text: "no password in history.database (the config is shared and logged): put it in the file history.passwordFile names"))
        }
        rest = rest[rest.index(after: at)...]
        guard let slash = rest.firstIndex(of: "/") else { return fail("names no database") }
        var hostPort = rest[..<slash]
        let database = rest[rest.index(after: slash)...]
        guard !user.isEmpty else { return fail("names no user") }
        guard !database.isEmpty, !database.contains("/"), !database.contains("?") else { return fail("names no database (options are not read)") }
        var port = 5432
        if let colon = hostPort.lastIndex(of: ":"), !hostPort.hasSuffix("]") {
            guard let p = Int(hostPort[hostPort.index(after: colon)...]), (1...65535).contains(p) else { return fail("has a bad port") }
            port = p
            hostPort = hostPort[..<colon]
        }
        if hostPort.hasPrefix("["), hostPort.hasSuffix("]") { hostPort = hostPort.dropFirst().dropLast() }
        guard !hostPort.isEmpty else { return fail("names no host") }
        return .success(PostgresAddress(user: String(user), host: String(hostPort), port: port, database: String(database)))
    }

    public var description: String {
        "postgres://\(user)@\(host.contains(":") ? "[\(host)]" : host):\(port)/\(database)"
    }
}

extension FleetConfig {
    static let historyKeys = ["database", "passwordFile", "keyFile", "retentionDays", "counterZones", "queueZones", "utcOffset",
                              "minimumStaySeconds"]

    static func parseHistory(_ value: JSONValue?, _ r: inout ConfigReader) -> HistoryConfig {
        var config = HistoryConfig()
        guard let o = r.object(value, at: "history", keys: historyKeys) else { return config }
        if let text = r.string(o["database"], at: "history.database", maxLength: 4096) {
            config.database = text.hasPrefix("sqlite:") ? String(text.dropFirst("sqlite:".count)) : text
        }
        if let text = r.string(o["passwordFile"], at: "history.passwordFile", maxLength: 4096) { config.passwordFile = text }
        if let text = r.string(o["keyFile"], at: "history.keyFile", maxLength: 4096) { config.keyFile = text }
        if let problem = config.databaseProblem { r.fail("history.database", problem) }
        if let days = r.integer(o["retentionDays"], at: "history.retentionDays", in: 1...3650) { config.retentionDays = days }
        for key in ["counterZones", "queueZones"] {
            guard let items = r.array(o[key], at: "history.\(key)") else { continue }
            var zones: [String] = []
            for (i, item) in items.enumerated() {
                if let zone = r.string(item, at: "history.\(key)[\(i)]", maxLength: maxNameLength) { zones.append(zone) }
            }
            if key == "counterZones" { config.counterZones = zones } else { config.queueZones = zones }
        }
        if let seconds = r.number(o["minimumStaySeconds"], at: "history.minimumStaySeconds", in: 0...3600) {
            config.minimumStaySeconds = seconds
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

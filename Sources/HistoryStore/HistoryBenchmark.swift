public import BeaconKit
import Contract
public import Config
public import History
import GRDB
import Logging
import NIOCore
import PostgresNIO
import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// What `beaconctl bench-history` measures, beside SQLite's own baseline in the same run.
public enum HistoryBenchmark {
    /// A busy chain's decisions: `visits` visits in `stores` stores from `start`, one every
    /// `spacing` seconds per store (`perDay` of them a day, from the day's start), each an
    /// enter, two zone changes and an exit (4 decisions). Visitors come back: `visitors`
    /// distinct beacons per store.
    public static func decisions(visits: Int, stores: Int = 1, visitors: Int = 5_000, start: CaptureTime,
                                 spacing: Double = 60, perDay: Int = .max) -> [HistoryEvent] {
        var out: [HistoryEvent] = []
        out.reserveCapacity(visits * 4)
        let zones = ["door", "queue", "counter", "shelves"]
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            seed ^= seed << 13
            seed ^= seed >> 7
            seed ^= seed << 17
            return seed
        }
        for i in 0..<visits {
            let store = UInt16(100 + i % stores)
            let k = i / stores
            let since = start + Double(k / perDay) * 86_400 + Double(k % perDay) * spacing + Double(next() % 1000) / 1000
            let beacon = BeaconRef(major: store, minor: UInt16(next() % UInt64(visitors)))
            let dwell = [20 + Double(next() % 120), 30 + Double(next() % 300), 10 + Double(next() % 200)]
            let second = zones[1 + Int(next() % 3)]
            out.append(HistoryEvent(kind: .enter, store: store, beacon: beacon, zone: "door", zoneName: "Door", since: since, at: since))
            out.append(HistoryEvent(kind: .zone, store: store, beacon: beacon, zone: second, zoneName: second, since: since,
                                    at: since + dwell[0]))
            out.append(HistoryEvent(kind: .zone, store: store, beacon: beacon, zone: "counter", zoneName: "Counter", since: since,
                                    at: since + dwell[0] + dwell[1]))
            out.append(HistoryEvent(kind: .exit, store: store, beacon: beacon, zone: "counter", zoneName: "Counter", since: since,
                                    at: since + dwell[0] + dwell[1] + dwell[2]))
        }
        return out
    }

    /// SQLite's own floor for the same rows: one plain `INSERT` per decision into a table
    /// without keys or indexes, prepared once, in transactions of `batch` (GRDB, as the
    /// history). What it cost.
    public static func plainInserts(_ events: [HistoryEvent], path: String, batch: Int) throws -> Cost {
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE plain (store INTEGER, beacon TEXT, since INTEGER, at INTEGER, kind TEXT, zone TEXT)")
        }
        let started = Cost.start()
        var index = 0
        while index < events.count {
            let end = min(index + batch, events.count)
            try queue.write { db in
                let insert = try db.cachedStatement(sql: "INSERT INTO plain VALUES (?, ?, ?, ?, ?, ?)")
                for e in events[index..<end] {
                    try insert.execute(arguments: [Int64(e.store), e.beaconKey, e.since.nanoseconds / 1_000_000,
                                                   e.at.nanoseconds / 1_000_000, e.kind.rawValue, e.zone])
                }
            }
            index = end
        }
        return started.end()
    }

    /// What a measured run cost: wall-clock seconds, this process's CPU seconds and, for a
    /// PostgreSQL server on this machine, its session's (the backend process's, from /proc).
    /// On a machine other programs keep busy, the wall clock counts their time too; CPU
    /// seconds count only the work measured.
    public struct Cost: Sendable {
        public var wall: Double
        public var cpu: Double
        /// `nil` when the server's process cannot be read (another machine).
        public var serverCPU: Double?
        /// This process's and the server's CPU seconds.
        public var allCPU: Double { cpu + (serverCPU ?? 0) }

        public init(wall: Double, cpu: Double, serverCPU: Double?) {
            self.wall = wall
            self.cpu = cpu
            self.serverCPU = serverCPU
        }

        /// A measurement under way: `end()` says what it cost since.
        public struct Started: Sendable {
            let wall: Double, cpu: Double, server: Int32?, serverCPU: Double?

            public func end() -> Cost {
                let serverNow = server.flatMap(Cost.cpuSeconds(ofProcess:))
                return Cost(wall: WallClock.monotonic() - wall, cpu: WallClock.processCPU() - cpu,
                            serverCPU: serverCPU.flatMap { before in serverNow.map { $0 - before } })
            }
        }

        /// Starts measuring; `server` is a PostgreSQL session's backend process id.
        public static func start(server: Int32? = nil) -> Started {
            Started(wall: WallClock.monotonic(), cpu: WallClock.processCPU(), server: server,
                    serverCPU: server.flatMap(cpuSeconds(ofProcess:)))
        }

        /// User plus system CPU seconds of a process on this machine, from /proc/PID/stat.
        public static func cpuSeconds(ofProcess pid: Int32) -> Double? {
            guard let text = try? FileSystem.readText("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
            let fields = text[text.index(after: close)...].split(separator: " ")
            // After the command: utime and stime are fields 14 and 15 (1-based, man 5 proc).
            guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
            return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        }
    }
}

// MARK: PostgreSQL

extension HistoryBenchmark {
    /// Databases of the benchmark's own on a PostgreSQL server: made on `address`'s server
    /// (the user needs CREATEDB), dropped by `dropAll`.
    public final class PostgresScratch: Sendable {
        public let address: PostgresAddress
        public let password: String?
        let prefix: String

        public init(_ address: PostgresAddress, password: String?, prefix: String) {
            self.address = address
            self.password = password
            self.prefix = prefix
        }

        func configuration(_ database: String) -> PostgresConnection.Configuration {
            var configuration = PostgresConnection.Configuration(host: address.host, port: address.port, username: address.user,
                                                                 password: password, database: database, tls: .disable)
            configuration.options.connectTimeout = .seconds(10)
            return configuration
        }

        func admin<T: Sendable>(_ database: String? = nil, _ body: (PostgresConnection) async throws -> T) async throws -> T {
            let connection = try await PostgresConnection.connect(configuration: configuration(database ?? address.database), id: 0,
                                                                  logger: Logger(label: "bench-history"))
            do {
                let value = try await body(connection)
                try await connection.close()
                return value
            } catch {
                try? await connection.close()
                throw HistoryStoreError("PostgreSQL \(address): \(PostgresHistory.describe(error))")
            }
        }

        /// A new, empty database `<prefix>_<name>`; its address.
        public func create(_ name: String) async throws -> PostgresAddress {
            let database = "\(prefix)_\(name)"
            try await admin { connection in
                try await connection.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(database)"), logger: Logger(label: "bench-history"))
                try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(database)"), logger: Logger(label: "bench-history"))
            }
            var made = address
            made.database = database
            return made
        }

        /// `ANALYZE` of database `name`: the planner's statistics, which autovacuum keeps on a
        /// server in use, for tables loaded a moment ago.
        public func analyze(_ name: String) async throws {
            try await admin("\(prefix)_\(name)") { connection in
                _ = try await connection.query("ANALYZE", logger: Logger(label: "bench-history"))
            }
        }

        public func drop(_ names: [String]) async {
            _ = try? await admin { connection in
                for name in names {
                    try await connection.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(prefix)_\(name)"),
                                               logger: Logger(label: "bench-history"))
                }
            }
        }

        /// PostgreSQL's own floor for the same rows, in database `name` (made here): one
        /// plain `INSERT` per decision into a table without keys or indexes, in
        /// transactions of `batch`, one round trip each (`arrays` false: the plain INSERT
        /// loop); or (`arrays`) one INSERT of the batch's rows as arrays (`unnest`), as the
        /// history sends them. What it cost.
        public func plainInserts(_ events: [HistoryEvent], batch: Int, arrays: Bool, name: String) async throws -> Cost {
            let target = try await create(name)
            let logger = Logger(label: "bench-history")
            let connection = try await PostgresConnection.connect(configuration: configuration(target.database), id: 1, logger: logger)
            do {
                try await connection.query("CREATE TABLE plain (store integer, beacon text, since bigint, at bigint, kind text, zone text)",
                                           logger: logger)
                let started = Cost.start(server: try await Self.backend(connection))
                var index = 0
                while index < events.count {
                    let slice = events[index..<min(index + batch, events.count)]
                    try await connection.query("BEGIN", logger: logger)
                    if arrays {
                        try await connection.query("""
                            INSERT INTO plain SELECT * FROM unnest(\(slice.map { Int64($0.store) })::int8[], \(slice.map(\.beaconKey))::text[],
                              \(slice.map { $0.since.nanoseconds / 1_000_000 })::int8[], \(slice.map { $0.at.nanoseconds / 1_000_000 })::int8[],
                              \(slice.map(\.kind.rawValue))::text[], \(slice.map(\.zone))::text[])
                            """, logger: logger)
                    } else {
                        for e in slice {
                            try await connection.query("""
                                INSERT INTO plain VALUES (\(Int64(e.store)), \(e.beaconKey), \(e.since.nanoseconds / 1_000_000),
                                                          \(e.at.nanoseconds / 1_000_000), \(e.kind.rawValue), \(e.zone))
                                """, logger: logger)
                        }
                    }
                    try await connection.query("COMMIT", logger: logger)
                    index += batch
                }
                let cost = started.end()
                try await connection.close()
                return cost
            } catch {
                try? await connection.close()
                throw HistoryStoreError("PostgreSQL \(target): \(PostgresHistory.describe(error))")
            }
        }
    }

    /// The history's ingest of the same events in batches of `batch`, into either store. What it cost.
    public static func ingest(_ events: [HistoryEvent], into database: any HistoryKeeping, pseudonyms: Pseudonymizer,
                              batch: Int) async throws -> Cost {
        let started = Cost.start(server: try await serverProcess(of: database))
        var index = 0
        while index < events.count {
            let end = min(index + batch, events.count)
            _ = try await database.ingest(Array(events[index..<end]), pseudonyms: pseudonyms)
            index = end
        }
        return started.end()
    }

    /// The backend process of `database`'s PostgreSQL session (`nil` for SQLite, which runs
    /// in this process).
    public static func serverProcess(of database: any HistoryKeeping) async throws -> Int32? {
        guard let postgres = database as? PostgresHistory else { return nil }
        return try await postgres.backendProcess()
    }
}

extension HistoryBenchmark.PostgresScratch {
    static func backend(_ connection: PostgresConnection) async throws -> Int32? {
        for try await pid in try await connection.query("SELECT pg_backend_pid()", logger: Logger(label: "bench-history")).decode(Int32.self) {
            return pid
        }
        return nil
    }
}

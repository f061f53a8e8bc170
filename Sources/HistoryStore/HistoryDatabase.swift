public import BeaconKit
public import History
import BrainCore
import GRDB

/// The history in one SQLite file (GRDB): visitors (pseudonyms), visits and their zone
/// segments, each kept once by its natural key, so that a replayed decision, a restart or a
/// broker's redelivery neither loses nor doubles anything.
///
/// Tables (docs/history.md):
/// - `visitors(id, pseudonym UNIQUE, firstSeen)`
/// - `visits(id, store, visitor, since, ended)`, unique by `(store, visitor, since)`
/// - `segments(visit, entered, zone, zoneName)`, unique by `(visit, entered, zone)`; a
///   segment lasts until the visit's next one begins, or until the visit's exit
/// - `daily(store, day, footfall, reachedCounter, returningVisits, ...)`: the day's figures, kept
///   after the visits are pruned
/// Times are capture times in milliseconds since 1970.
public final class HistoryDatabase: Sendable {
    let writer: any DatabaseWriter
    public let path: String

    /// What one `ingest` did.
    public struct IngestCount: Sendable, Equatable {
        /// Decisions that changed the history.
        public var stored = 0
        /// Decisions it already held (a replay or redelivery).
        public var duplicates = 0
        public init(stored: Int = 0, duplicates: Int = 0) {
            self.stored = stored
            self.duplicates = duplicates
        }
    }

    /// Opens (creating if needed) the file and brings its schema up to date. `readOnly`
    /// opens an existing file for reading (reports, the web page).
    public init(path: String, readOnly: Bool = false) throws(HistoryStoreError) {
        self.path = path
        var configuration = Configuration()
        configuration.readonly = readOnly
        configuration.busyMode = .timeout(5)
        configuration.label = "history"
        do {
            if readOnly {
                writer = try DatabaseQueue(path: path, configuration: configuration)
            } else {
                let pool = try DatabasePool(path: path, configuration: configuration)
                try Self.migrator.migrate(pool)
                writer = pool
            }
        } catch {
            throw HistoryStoreError("cannot open the history database \(path): \(Self.describe(error))")
        }
    }

    /// The schema's versions, oldest first; a database is migrated from whichever it holds.
    public static let versions = ["v1-visits", "v2-daily"]

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-visits") { db in
            try db.execute(sql: """
                CREATE TABLE visitors (id INTEGER PRIMARY KEY, pseudonym TEXT NOT NULL UNIQUE, firstSeen INTEGER NOT NULL);
                CREATE TABLE visits (
                  id INTEGER PRIMARY KEY,
                  store INTEGER NOT NULL,
                  visitor INTEGER NOT NULL REFERENCES visitors(id) ON DELETE CASCADE,
                  since INTEGER NOT NULL,
                  ended INTEGER,
                  UNIQUE (store, visitor, since));
                CREATE INDEX visitsByStore ON visits(store, since);
                CREATE INDEX visitsByVisitor ON visits(visitor, since);
                CREATE TABLE segments (
                  visit INTEGER NOT NULL REFERENCES visits(id) ON DELETE CASCADE,
                  entered INTEGER NOT NULL,
                  zone TEXT NOT NULL,
                  zoneName TEXT NOT NULL,
                  PRIMARY KEY (visit, entered, zone)) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v2-daily") { db in
            try db.execute(sql: """
                CREATE TABLE daily (
                  store INTEGER NOT NULL,
                  day INTEGER NOT NULL,
                  footfall INTEGER NOT NULL,
                  reachedCounter INTEGER NOT NULL,
                  returningVisits INTEGER NOT NULL,
                  visitMedian REAL NOT NULL,
                  visitP90 REAL NOT NULL,
                  queueMedian REAL NOT NULL,
                  PRIMARY KEY (store, day)) WITHOUT ROWID;
                """)
        }
        return migrator
    }

    /// Migrations this file has applied.
    public func appliedMigrations() throws(HistoryStoreError) -> [String] {
        try read { db in try Self.migrator.appliedIdentifiers(db).sorted() }
    }

    // MARK: Writing

    /// Stores events in one transaction, each by its natural key: the visitor by pseudonym,
    /// the visit by store, visitor and start, a zone segment by visit, time and zone.
    public func ingest(_ events: [HistoryEvent], pseudonyms: Pseudonymizer) throws(HistoryStoreError) -> IngestCount {
        let named = events.map { ($0, pseudonyms.pseudonym(of: $0.beacon)) }
        return try write { db in
            var count = IngestCount()
            let visitor = try db.cachedStatement(sql: """
                INSERT INTO visitors (pseudonym, firstSeen) VALUES (?, ?)
                ON CONFLICT (pseudonym) DO UPDATE SET firstSeen = min(firstSeen, excluded.firstSeen) RETURNING id
                """)
            let visit = try db.cachedStatement(sql: """
                INSERT INTO visits (store, visitor, since, ended) VALUES (?, ?, ?, ?)
                ON CONFLICT (store, visitor, since) DO UPDATE SET ended = coalesce(max(excluded.ended, visits.ended), excluded.ended, visits.ended)
                RETURNING id, ended
                """)
            let before = try db.cachedStatement(sql: "SELECT ended FROM visits WHERE store = ? AND visitor = ? AND since = ?")
            let segment = try db.cachedStatement(sql: """
                INSERT INTO segments (visit, entered, zone, zoneName) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING
                """)
            for (event, pseudonym) in named {
                let since = Self.milliseconds(event.since), at = Self.milliseconds(event.at)
                guard let visitorID = try Int64.fetchOne(visitor, arguments: [pseudonym, since]) else { continue }
                if event.kind == .exit {
                    let old = try Int64?.fetchOne(before, arguments: [Int64(event.store), visitorID, since]) ?? nil
                    _ = try Row.fetchOne(visit, arguments: [Int64(event.store), visitorID, since, at])
                    if let old, old >= at { count.duplicates += 1 } else { count.stored += 1 }
                } else {
                    guard let row = try Row.fetchOne(visit, arguments: [Int64(event.store), visitorID, since, nil as Int64?]) else { continue }
                    let visitID: Int64 = row[0]
                    try segment.execute(arguments: [visitID, at, event.zone, event.zoneName])
                    if db.changesCount > 0 { count.stored += 1 } else { count.duplicates += 1 }
                }
            }
            return count
        }
    }

    /// Erases every visit of one beacon (its pseudonym under `pseudonyms`): the visitor, its
    /// visits and their segments. Returns how many visits were erased.
    public func forget(_ beacon: BeaconRef, pseudonyms: Pseudonymizer) throws(HistoryStoreError) -> Int {
        let pseudonym = pseudonyms.pseudonym(of: beacon)
        return try write { db in
            let visits = try Int.fetchOne(db, sql: """
                SELECT count(*) FROM visits JOIN visitors ON visitors.id = visits.visitor WHERE pseudonym = ?
                """, arguments: [pseudonym]) ?? 0
            try db.execute(sql: "DELETE FROM visitors WHERE pseudonym = ?", arguments: [pseudonym])
            return visits
        }
    }

    /// Keeps each finished day's figures in `daily`, then erases visits begun before
    /// `cutoff` (and visitors left without visits). Returns how many visits were erased.
    public func prune(before cutoff: Instant, options: HistoryFigures.Options, now: Instant) throws(HistoryStoreError) -> Int {
        let offset = Int64(options.utcOffsetMinutes) * 60_000
        let day: Int64 = 86_400_000
        let cutoffMS = Self.milliseconds(cutoff)
        return try write { db in
            // Each whole local day that has visits to erase gets its figures first.
            let days = try Row.fetchAll(db, sql: """
                SELECT DISTINCT store, ((since + ?) / ?) * ? - ? AS day FROM visits WHERE since < ?
                """, arguments: [offset, day, day, offset, cutoffMS])
            for row in days {
                let store: Int64 = row["store"], start: Int64 = row["day"]
                let from = Self.instant(start), to = Self.instant(start + day)
                let visits = try Self.visits(db, store: UInt16(store), from: from, to: to)
                let figures = HistoryFigures(visits: visits, from: from, to: to, now: now, options: options)
                try db.execute(sql: """
                    INSERT INTO daily (store, day, footfall, reachedCounter, returningVisits, visitMedian, visitP90, queueMedian)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
                    """, arguments: [store, start, figures.footfall, figures.reachedCounter, figures.returning,
                                     figures.visitDuration.median, figures.visitDuration.p90, figures.queueTime.median])
            }
            try db.execute(sql: "DELETE FROM visits WHERE since < ?", arguments: [cutoffMS])
            let erased = db.changesCount
            try db.execute(sql: "DELETE FROM visitors WHERE NOT EXISTS (SELECT 1 FROM visits WHERE visits.visitor = visitors.id)")
            return erased
        }
    }

    // MARK: Reading

    /// Visits of `store` (every store when `nil`) that overlap `[from, to)`, with their
    /// segments and whether the visitor had come before. Visits are taken as lasting at most
    /// a day: one begun earlier than a day before `from` is not looked at.
    public func visits(store: UInt16?, from: Instant, to: Instant) throws(HistoryStoreError) -> [Visit] {
        try read { db in try Self.visits(db, store: store, from: from, to: to) }
    }

    static func visits(_ db: Database, store: UInt16?, from: Instant, to: Instant) throws -> [Visit] {
        let rows = try Row.fetchCursor(db, sql: """
            SELECT v.id, v.store, p.pseudonym, v.since, v.ended,
                   EXISTS (SELECT 1 FROM visits e WHERE e.visitor = v.visitor AND e.since < v.since) AS returningVisit,
                   s.entered, s.zone, s.zoneName
            FROM visits v JOIN visitors p ON p.id = v.visitor LEFT JOIN segments s ON s.visit = v.id
            WHERE \(store == nil ? "" : "v.store = ? AND ")v.since >= ? AND v.since < ? AND (v.ended IS NULL OR v.ended > ?)
            ORDER BY v.id, s.entered
            """, arguments: StatementArguments((store.map { [Int64($0)] } ?? [])
                + [milliseconds(from) - 86_400_000, milliseconds(to), milliseconds(from)]))
        var visits: [Visit] = []
        var current: (id: Int64, store: UInt16, visitor: String, since: Instant, ended: Instant?, returning: Bool, moves: [Visit.Move])?
        func finish() {
            guard let c = current else { return }
            visits.append(Visit(store: c.store, visitor: c.visitor, since: c.since, ended: c.ended, moves: c.moves, returning: c.returning))
        }
        while let row = try rows.next() {
            let id: Int64 = row[0]
            if current?.id != id {
                finish()
                current = (id, UInt16(truncatingIfNeeded: row[1] as Int64), row[2], instant(row[3]),
                           (row[4] as Int64?).map(instant), row[5], [])
            }
            if let entered = row[6] as Int64? {
                current!.moves.append(Visit.Move(at: instant(entered), zone: row[7], zoneName: row[8]))
            }
        }
        finish()
        return visits
    }

    /// One day's figures as `prune` kept them (the day's visits may be erased).
    public struct Day: Sendable, Equatable {
        public var store: UInt16
        /// The store's midnight that began the day.
        public var start: Instant
        public var footfall: Int
        public var reachedCounter: Int
        public var returning: Int
        /// Whole visits, s.
        public var visitMedian: Double
        public var visitP90: Double
        public var queueMedian: Double
    }

    /// The kept days of `store` (every store when `nil`) beginning in `[from, to)`.
    public func daily(store: UInt16?, from: Instant, to: Instant) throws(HistoryStoreError) -> [Day] {
        try read { db in
            try Row.fetchAll(db, sql: """
                SELECT * FROM daily WHERE \(store == nil ? "" : "store = ? AND ")day >= ? AND day < ? ORDER BY day, store
                """, arguments: StatementArguments((store.map { [Int64($0)] } ?? []) + [Self.milliseconds(from), Self.milliseconds(to)]))
            .map { row in
                Day(store: UInt16(truncatingIfNeeded: row["store"] as Int64), start: Self.instant(row["day"]),
                    footfall: row["footfall"], reachedCounter: row["reachedCounter"], returning: row["returningVisits"],
                    visitMedian: row["visitMedian"], visitP90: row["visitP90"], queueMedian: row["queueMedian"])
            }
        }
    }

    /// The stores the history has visits of.
    public func stores() throws(HistoryStoreError) -> [UInt16] {
        try read { db in try Int64.fetchAll(db, sql: "SELECT DISTINCT store FROM visits ORDER BY store").map { UInt16(truncatingIfNeeded: $0) } }
    }

    /// Visits and segments held (for health and tests).
    public func counts() throws(HistoryStoreError) -> (visits: Int, segments: Int, visitors: Int) {
        try read { db in
            (try Int.fetchOne(db, sql: "SELECT count(*) FROM visits") ?? 0,
             try Int.fetchOne(db, sql: "SELECT count(*) FROM segments") ?? 0,
             try Int.fetchOne(db, sql: "SELECT count(*) FROM visitors") ?? 0)
        }
    }

    // MARK: Plumbing

    static func milliseconds(_ t: Instant) -> Int64 { t.nanoseconds / 1_000_000 }
    static func instant(_ ms: Int64) -> Instant { Instant(nanoseconds: ms * 1_000_000) }

    func read<T>(_ body: (Database) throws -> T) throws(HistoryStoreError) -> T {
        do { return try writer.read(body) } catch { throw HistoryStoreError("reading the history \(path): \(Self.describe(error))") }
    }

    func write<T>(_ body: (Database) throws -> T) throws(HistoryStoreError) -> T {
        do { return try writer.write(body) } catch { throw HistoryStoreError("writing the history \(path): \(Self.describe(error))") }
    }

    /// SQLite's own words (e.g. "database or disk is full", "attempt to write a readonly database").
    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return error.message ?? "\(error.resultCode)" }
        return "\(error)"
    }
}

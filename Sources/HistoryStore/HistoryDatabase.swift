public import BeaconKit
public import Contract
public import History
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
public final class HistoryDatabase: HistoryKeeping {
    let writer: any DatabaseWriter
    public let path: String
    public var location: String { path }

    public typealias IngestCount = HistoryIngestCount
    public typealias Day = HistoryDay

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
    public static let versions = HistorySchema.versions

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
        migrator.registerMigration("v3-since") { db in
            // The chain's pages (every store) and pruning read visits by start alone.
            try db.execute(sql: "CREATE INDEX visitsBySince ON visits(since)")
        }
        return migrator
    }

    public func appliedMigrations() throws(HistoryStoreError) -> [String] {
        try read { db in try Self.migrator.appliedIdentifiers(db).sorted() }
    }

    // MARK: Writing

    public func ingest(_ events: [HistoryEvent], pseudonyms: Pseudonymizer) throws(HistoryStoreError) -> IngestCount {
        let batch = HistoryBatch(events, pseudonyms: pseudonyms)
        return try write { db in
            let visitor = try db.cachedStatement(sql: """
                INSERT INTO visitors (pseudonym, firstSeen) VALUES (?, ?)
                ON CONFLICT (pseudonym) DO UPDATE SET firstSeen = min(firstSeen, excluded.firstSeen) RETURNING id
                """)
            let visit = try db.cachedStatement(sql: """
                INSERT INTO visits (store, visitor, since, ended) VALUES (?, ?, ?, ?)
                ON CONFLICT (store, visitor, since) DO UPDATE SET ended = coalesce(max(excluded.ended, visits.ended), excluded.ended, visits.ended)
                RETURNING id
                """)
            let before = try db.cachedStatement(sql: "SELECT ended FROM visits WHERE store = ? AND visitor = ? AND since = ?")
            let segment = try db.cachedStatement(sql: """
                INSERT INTO segments (visit, entered, zone, zoneName) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING
                """)
            var visitorIDs: [String: Int64] = [:]
            for (pseudonym, firstSeen) in batch.visitors {
                visitorIDs[pseudonym] = try Int64.fetchOne(visitor, arguments: [pseudonym, firstSeen])
            }
            var visitIDs: [HistoryBatch.VisitKey: Int64] = [:]
            var endedBefore: [HistoryBatch.VisitKey: Int64] = [:]
            for (key, ended) in batch.visits {
                guard let visitorID = visitorIDs[key.pseudonym] else { continue }
                let arguments: StatementArguments = [Int64(key.store), visitorID, key.since]
                // Only an exit's count needs the visit's end as it was.
                if ended != nil, let old = try Int64?.fetchOne(before, arguments: arguments) ?? nil { endedBefore[key] = old }
                visitIDs[key] = try Int64.fetchOne(visit, arguments: arguments + [ended])
            }
            var added = 0
            for (key, zoneName) in batch.segments {
                guard let visitID = visitIDs[key.visit] else { continue }
                try segment.execute(arguments: [visitID, key.entered, key.zone, zoneName])
                added += db.changesCount
            }
            return batch.count(endedBefore: endedBefore, segmentsAdded: added)
        }
    }

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

    public func prune(before cutoff: CaptureTime, options: HistoryFigures.Options, now: CaptureTime) throws(HistoryStoreError) -> Int {
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
                let figures = HistoryDay(store: UInt16(store), start: from,
                                         visits: try Self.visits(db, store: UInt16(store), from: from, to: to), options: options, now: now)
                try db.execute(sql: """
                    INSERT INTO daily (store, day, footfall, reachedCounter, returningVisits, visitMedian, visitP90, queueMedian)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
                    """, arguments: [store, start, figures.footfall, figures.reachedCounter, figures.returning,
                                     figures.visitMedian, figures.visitP90, figures.queueMedian])
            }
            try db.execute(sql: "DELETE FROM visits WHERE since < ?", arguments: [cutoffMS])
            let erased = db.changesCount
            try db.execute(sql: "DELETE FROM visitors WHERE NOT EXISTS (SELECT 1 FROM visits WHERE visits.visitor = visitors.id)")
            // A visitor's first visit is what makes a later one "returning": the erased ones no longer count.
            try db.execute(sql: """
                UPDATE visitors SET firstSeen = (SELECT min(since) FROM visits WHERE visits.visitor = visitors.id) WHERE firstSeen < ?
                """, arguments: [cutoffMS])
            return erased
        }
    }

    // MARK: Reading

    public func visits(store: UInt16?, from: CaptureTime, to: CaptureTime) throws(HistoryStoreError) -> [Visit] {
        try read { db in try Self.visits(db, store: store, from: from, to: to) }
    }

    static func visits(_ db: Database, store: UInt16?, from: CaptureTime, to: CaptureTime) throws -> [Visit] {
        let rows = try Row.fetchCursor(db, sql: """
            SELECT v.id, v.store, p.pseudonym, v.since, v.ended, p.firstSeen < v.since AS returningVisit,
                   s.entered, s.zone, s.zoneName
            FROM visits v JOIN visitors p ON p.id = v.visitor LEFT JOIN segments s ON s.visit = v.id
            WHERE \(store == nil ? "" : "v.store = ? AND ")v.since >= ? AND v.since < ? AND (v.ended IS NULL OR v.ended > ?)
            ORDER BY v.id, s.entered
            """, arguments: StatementArguments((store.map { [Int64($0)] } ?? [])
                + [milliseconds(from) - HistorySchema.longestVisit, milliseconds(to), milliseconds(from)]))
        var assembler = VisitAssembler()
        while let row = try rows.next() {
            assembler.add(id: row[0], store: row[1], visitor: row[2], since: row[3], ended: row[4], returning: row[5],
                          entered: row[6], zone: row[7], zoneName: row[8])
        }
        assembler.finish()
        return assembler.visits
    }

    public func daily(store: UInt16?, from: CaptureTime, to: CaptureTime) throws(HistoryStoreError) -> [Day] {
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

    public func stores() throws(HistoryStoreError) -> [UInt16] {
        try read { db in try Int64.fetchAll(db, sql: "SELECT DISTINCT store FROM visits ORDER BY store").map { UInt16(truncatingIfNeeded: $0) } }
    }

    public func counts() throws(HistoryStoreError) -> HistoryCounts {
        try read { db in
            HistoryCounts(visits: try Int.fetchOne(db, sql: "SELECT count(*) FROM visits") ?? 0,
                          segments: try Int.fetchOne(db, sql: "SELECT count(*) FROM segments") ?? 0,
                          visitors: try Int.fetchOne(db, sql: "SELECT count(*) FROM visitors") ?? 0)
        }
    }

    /// GRDB closes the file when the last reference goes.
    public func close() async {}

    // MARK: Plumbing

    static func milliseconds(_ t: CaptureTime) -> Int64 { HistorySchema.milliseconds(t) }
    static func instant(_ ms: Int64) -> CaptureTime { HistorySchema.instant(ms) }

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

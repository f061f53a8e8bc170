import BeaconKit
import Contract
import BrainCore
import Config
import Foundation
import GRDB
import History
@testable import HistoryStore
import TestSupport
import Testing

@Suite struct HistoryDatabaseTests {
    /// Three visits in store 100, one in 200; the first visitor comes back.
    func day() -> [ZoneDecision] {
        let a = BeaconRef(major: 100, minor: 1), b = BeaconRef(major: 100, minor: 2), c = BeaconRef(major: 200, minor: 3)
        return decisions(a, since: 0, moves: [(0, "door"), (20, "queue"), (80, "counter")], exit: 100)
            + decisions(b, since: 10, moves: [(10, "door"), (40, "counter")], exit: 70)
            + decisions(c, since: 15, moves: [(15, "door-200")], exit: 45)
            + decisions(a, since: 500, moves: [(500, "door")], exit: nil)
    }

    func contents(_ db: any HistoryKeeping) async throws -> [Visit] {
        try await db.visits(store: nil, from: t(-3_600), to: t(3_600)).sorted { ($0.since, $0.visitor) < ($1.since, $1.visitor) }
    }

    @Test(arguments: HistoryBackend.allCases)
    func keepsEachDecisionOnceWhateverTheOrderOrRepetition(_ backend: HistoryBackend) async throws {
        let config = try historyFleet()
        let lab = try await HistoryLab(backend)
        let once = try await lab.open("once")
        let counted = try await once.ingest(events(day(), config: config), pseudonyms: testKey)
        #expect(counted == .init(stored: 10, duplicates: 0))

        // The same decisions shuffled, twice over, in batches of three: the same history.
        let twice = try await lab.open("twice")
        var generator = SystemRandomNumberGenerator()
        let replayed = (events(day(), config: config) + events(day(), config: config)).shuffled(using: &generator)
        var total = HistoryIngestCount()
        for start in stride(from: 0, to: replayed.count, by: 3) {
            let c = try await twice.ingest(Array(replayed[start..<min(start + 3, replayed.count)]), pseudonyms: testKey)
            total.stored += c.stored
            total.duplicates += c.duplicates
        }
        #expect(total.duplicates == 10)
        #expect(try await contents(twice) == contents(once))
        // All of it again in one batch, itself twice over: every decision a duplicate.
        let again = try await twice.ingest(replayed, pseudonyms: testKey)
        #expect(again == .init(stored: 0, duplicates: 20))
        #expect(try await contents(twice) == contents(once))
        let counts = try await once.counts()
        #expect(counts.visits == 4 && counts.segments == 7 && counts.visitors == 3)

        let visits = try await contents(once)
        #expect(visits.map(\.store) == [100, 100, 200, 100])
        #expect(visits[0].segments.map(\.zone) == ["door", "queue", "counter"])
        #expect(visits[0].ended == t(100))
        #expect(visits[3].ended == nil && visits[3].returning && !visits[0].returning)
        #expect(visits[0].visitor == visits[3].visitor)
        // A pseudonym, not the beacon.
        #expect(visits[0].visitor.count == 32 && !visits[0].visitor.contains("100"))
        #expect(try await once.stores() == [100, 200])
        await lab.stop()
    }

    @Test(arguments: HistoryBackend.allCases)
    func forgetErasesOnePersonsVisitsOnly(_ backend: HistoryBackend) async throws {
        let config = try historyFleet()
        let lab = try await HistoryLab(backend)
        let db = try await lab.open("h")
        _ = try await db.ingest(events(day(), config: config), pseudonyms: testKey)
        #expect(try await db.forget(BeaconRef(major: 100, minor: 1), pseudonyms: testKey) == 2)
        let left = try await contents(db)
        #expect(left.count == 2)
        #expect(!left.contains { $0.visitor == testKey.pseudonym(of: BeaconRef(major: 100, minor: 1)) })
        let counts = try await db.counts()
        #expect(counts.segments == 3 && counts.visitors == 2)
        #expect(try await db.forget(BeaconRef(major: 100, minor: 1), pseudonyms: testKey) == 0)
        await lab.stop()
    }

    @Test(arguments: HistoryBackend.allCases)
    func pruneKeepsTheDaysFiguresAndErasesTheVisits(_ backend: HistoryBackend) async throws {
        let config = try historyFleet()
        let lab = try await HistoryLab(backend)
        let db = try await lab.open("h")
        _ = try await db.ingest(events(day(), config: config), pseudonyms: testKey)
        let erased = try await db.prune(before: t(400), options: config.history.figureOptions, now: t(1_000))
        #expect(erased == 3)
        #expect(try await contents(db).count == 1)
        let daily = try await db.daily(store: 100, from: t(-86_400), to: t(86_400))
        #expect(daily.count == 1)
        #expect(daily.first?.footfall == 3)
        #expect(daily.first?.reachedCounter == 2)
        #expect(daily.first?.start == t(-9 * 3600))
        #expect(try await db.daily(store: nil, from: t(-86_400), to: t(86_400)).map(\.store) == [100, 200])
        // The visitor of the kept visit remains; the erased ones' visitors are gone, and
        // their segments (PostgreSQL's have no foreign key: prune erases them itself).
        #expect(try await db.counts() == HistoryCounts(visits: 1, segments: 1, visitors: 1))
        #expect(config.history.figureOptions.minimumStay == HistoryFigures.Options.defaultMinimumStay)
        #expect(try historyFleet(#"{"minimumStaySeconds": 4.5}"#).history.figureOptions.minimumStay == 4.5)
        // Its earlier visit is erased: the kept one is no longer a return.
        #expect(try await contents(db).first?.returning == false)
        // Pruning again keeps the figures once.
        #expect(try await db.prune(before: t(400), options: config.history.figureOptions, now: t(1_000)) == 0)
        #expect(try await db.daily(store: 100, from: t(-86_400), to: t(86_400)) == daily)
        await lab.stop()
    }

    /// Two beacon-history writing the same decisions into one PostgreSQL at once (a
    /// chain's replay racing the live feed): whichever adds a row first, the other finds
    /// it, and a batch that lost a race (a row added by the other since its statement
    /// began, or a deadlock) fails whole and goes in when written again. The history is
    /// what one writer alone makes.
    @Test func twoWritersAtOnceNeitherLoseNorDouble() async throws {
        let lab = try await HistoryLab(.postgres)
        let alone = try await lab.open("alone")
        // Few visitors, so that the writers' batches share visitors and visits.
        let events = HistoryBenchmark.decisions(visits: 1_500, stores: 3, visitors: 40, start: t(0), spacing: 5)
        _ = try await alone.ingest(events, pseudonyms: testKey)
        let url = try await lab.database("shared")
        let writers = [try await HistoryStores.open(HistoryConfig(database: url, keyFile: lab.directory.file("key"))),
                       try await HistoryStores.open(HistoryConfig(database: url, keyFile: lab.directory.file("key")))]
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (n, writer) in writers.enumerated() {
                // Each in its own batches: the second writer's are offset by half a batch.
                let order = n == 0 ? events : Array(events[50...] + events[..<50])
                group.addTask {
                    var failed = 0
                    for start in stride(from: 0, to: order.count, by: 100) {
                        let batch = Array(order[start..<min(start + 100, order.count)])
                        while true {
                            do {
                                _ = try await writer.ingest(batch, pseudonyms: testKey)
                                break
                            } catch {
                                failed += 1
                                try #require(failed < 200, "\(error)")
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let shared = writers[0]
        #expect(try await shared.counts() == alone.counts())
        let all = (t(-3_600), t(86_400))
        #expect(try await shared.visits(store: nil, from: all.0, to: all.1).sorted { ($0.since, $0.visitor) < ($1.since, $1.visitor) }
                == alone.visits(store: nil, from: all.0, to: all.1).sorted { ($0.since, $0.visitor) < ($1.since, $1.visitor) })
        for writer in writers { await writer.close() }
        await alone.close()
        await lab.stop()
    }

    /// A week's page on a big history reads its visits (their segments in their rows) by
    /// index, not the whole table: joined plainly to a table of segments, PostgreSQL hashed
    /// every segment of the year for a week's visits (150 ms a week's page;
    /// docs/PERFORMANCE.md section 8).
    @Test func aWeeksPageOnPostgresReadsVisitsByIndex() async throws {
        let lab = try await HistoryLab(.postgres)
        // Made and migrated, then let go: the migration's own work (validating a foreign key
        // scans its table) is counted when its session ends, before the loading below.
        await (try await lab.open("year")).close()
        let server = lab.server!
        // 200 days of 500 visits (100,000 visits, 300,000 segments), a visit a minute.
        let day: Int64 = 86_400_000
        let origin = HistorySchema.milliseconds(t(0))
        _ = try await server.psql("""
            INSERT INTO visitors (pseudonym, firstSeen) SELECT md5(i::text), 0 FROM generate_series(1, 2000) i;
            INSERT INTO visits (store, visitor, since, ended, entered, zones, names)
              SELECT 100, (SELECT min(id) FROM visitors) + (i * 7919) % 2000, s, s + 400000,
                     ARRAY[s, s + 100000, s + 200000], '{door,queue,counter}', '{Door,Queue,Counter}'
              FROM generate_series(0::int8, 99999) i, LATERAL (SELECT \(origin) + (i / 500) * \(day) + (i % 500) * 60000 AS s) t;
            ANALYZE;
            """, database: "year")
        func scans() async throws -> (seq: Int, index: Int, inserted: Int) {
            let row = try await server.psql("SELECT seq_scan, idx_scan, n_tup_ins FROM pg_stat_user_tables WHERE relname = 'visits'",
                                            database: "year").trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|")
            return row.count == 3 ? (Int(row[0]) ?? -1, Int(row[1]) ?? -1, Int(row[2]) ?? -1) : (-1, -1, -1)
        }
        // The server's counters are published a moment after each session's work: once
        // they show the loading, they are where this starts from.
        #expect(await eventually(timeout: 30, interval: 0.1) { ((try? await scans())?.inserted ?? 0) >= 100_000 })
        let before = try await scans()
        let db = try await HistoryStores.open(HistoryConfig(database: server.url(database: "year"), keyFile: lab.directory.file("key")),
                                              readOnly: true)
        let week = try await db.visits(store: 100, from: t(100 * 86_400), to: t(107 * 86_400))
        #expect(week.count == 3_500 && week.allSatisfy { $0.segments.map(\.zoneName) == ["Door", "Queue", "Counter"] })
        let read = await eventually(timeout: 30, interval: 0.1) { ((try? await scans())?.index ?? 0) > before.index }
        #expect(read)
        let after = try await scans()
        #expect(after.seq == before.seq, "\(before) \(after)")
        await db.close()
        await lab.stop()
    }

    /// PostgreSQL stopped (fast shutdown) while a big batch is being written: the write
    /// fails rather than waits for ever, and the same batch once the server is back is
    /// stored whole, once.
    @Test func postgresStoppedMidBatchFailsTheBatchAndTakesItWholeAfter() async throws {
        let lab = try await HistoryLab(.postgres)
        let db = try await lab.open("h")
        let batch = HistoryBenchmark.decisions(visits: 5_000, stores: 10, start: t(0))
        let writing = Task { try await db.ingest(batch, pseudonyms: testKey) }
        // Once the batch's first statement has reached the server.
        _ = await eventually(timeout: 60, interval: 0.01) {
            (try? await lab.server!.psql("SELECT count(*) FROM pg_stat_activity WHERE datname = 'h' AND state = 'active'",
                                          database: "postgres").trimmingCharacters(in: .whitespacesAndNewlines)) == "1"
        }
        await lab.server!.stop()
        let first = await writing.result
        try await lab.server!.restart()
        let again = try await db.ingest(batch, pseudonyms: testKey)
        let counts = try await db.counts()
        #expect(counts.visits == 5_000 && counts.segments == 15_000, "\(counts)")
        if case .failure = first {
            #expect(again == HistoryIngestCount(stored: 20_000, duplicates: 0))
        } else {
            // It was quicker than the stop.
            #expect(again == HistoryIngestCount(stored: 0, duplicates: 20_000))
        }
        await db.close()
        await lab.stop()
    }

    /// The batch's statement is prepared once on a connection and run by name after: the
    /// server parses it once and settles on one plan (docs/PERFORMANCE.md section 8). A
    /// connection opened after a restart prepares it again. Each session runs without JIT
    /// compilation, which cost seconds on a batch of 5,000 decisions.
    @Test func postgresPreparesTheIngestOnceAConnection() async throws {
        let lab = try await HistoryLab(.postgres)
        let db = try #require(try await lab.open("prepared") as? PostgresHistory)
        let all = events(day(), config: try historyFleet())
        func ingestInBatchesOfThree() async throws -> HistoryIngestCount {
            var total = HistoryIngestCount()
            for start in stride(from: 0, to: all.count, by: 3) {
                var failed = 0
                while true {
                    do {
                        let c = try await db.ingest(Array(all[start..<min(start + 3, all.count)]), pseudonyms: testKey)
                        total.stored += c.stored
                        total.duplicates += c.duplicates
                        break
                    } catch {
                        // Only the first call after the restart: its connection was ended under it.
                        failed += 1
                        try #require(failed < 3, "\(error)")
                    }
                }
            }
            return total
        }
        let batches = (all.count + 2) / 3
        #expect(try await ingestInBatchesOfThree() == .init(stored: 10, duplicates: 0))
        #expect(try await db.preparedIngestRuns() == batches)
        #expect(try await db.setting("jit") == "off")
        try await lab.server!.restart()
        #expect(try await ingestInBatchesOfThree() == .init(stored: 0, duplicates: 10))
        #expect(try await db.preparedIngestRuns() == batches)
        #expect(try await db.setting("jit") == "off")
        await db.close()
        await lab.stop()
    }

    @Test func migratesAPostgresDatabaseOfThePreviousVersion() async throws {
        let lab = try await HistoryLab(.postgres)
        let url = try await lab.server!.createDatabase("v1")
        let address = try PostgresAddress.parse(url).get()
        // A database as the first version left it, with a visit in it.
        let old = try await PostgresHistory(address, password: nil, migrate: false)
        try await old.migrate(upTo: "v1-visits")
        #expect(try await old.appliedMigrations() == ["v1-visits"])
        await old.close()
        try await lab.server!.psql("""
            INSERT INTO visitors (pseudonym, firstSeen) VALUES ('p', 0);
            INSERT INTO visits (store, visitor, since, ended) SELECT 100, id, 0, 5000 FROM visitors;
            INSERT INTO segments (visit, entered, zone, zoneName) SELECT id, 2000, 'counter', 'Counter' FROM visits;
            INSERT INTO segments (visit, entered, zone, zoneName) SELECT id, 0, 'door', 'Entrance' FROM visits;
            """, database: "v1")
        let db = try await PostgresHistory(address, password: nil)
        #expect(try await db.appliedMigrations() == PostgresHistory.versions.sorted())
        let visits = try await db.visits(store: 100, from: CaptureTime(seconds: 0), to: CaptureTime(seconds: 60))
        // Its segments moved into the visit's row (v5), in time order.
        #expect(visits.count == 1 && visits.first?.segments.map(\.zoneName) == ["Entrance", "Counter"]
                && visits.first?.segments.map(\.left) == [CaptureTime(seconds: 2), CaptureTime(seconds: 5)])
        #expect(try await db.counts() == HistoryCounts(visits: 1, segments: 2, visitors: 1))
        #expect(try await db.daily(store: 100, from: CaptureTime(seconds: 0), to: CaptureTime(seconds: 86_400)).isEmpty)
        // The migrated keys still make the decisions' natural keys: once, then duplicates.
        let config = try historyFleet()
        #expect(try await db.ingest(events(day(), config: config), pseudonyms: testKey) == .init(stored: 10, duplicates: 0))
        #expect(try await db.ingest(events(day(), config: config), pseudonyms: testKey) == .init(stored: 0, duplicates: 10))
        await db.close()
        await lab.stop()
    }

    @Test func migratesAFileOfThePreviousVersion() throws {
        let directory = try TemporaryDirectory("history")
        let path = directory.file("v1.sqlite")
        // A file as the first version left it, with a visit in it.
        do {
            let queue = try DatabaseQueue(path: path)
            try HistoryDatabase.migrator.migrate(queue, upTo: "v1-visits")
            try queue.write { db in
                try db.execute(sql: "INSERT INTO visitors (id, pseudonym, firstSeen) VALUES (1, 'p', 0)")
                try db.execute(sql: "INSERT INTO visits (id, store, visitor, since, ended) VALUES (1, 100, 1, 0, 5000)")
                try db.execute(sql: "INSERT INTO segments (visit, entered, zone, zoneName) VALUES (1, 0, 'door', 'Entrance')")
            }
        }
        let db = try HistoryDatabase(path: path)
        #expect(try db.appliedMigrations() == HistoryDatabase.versions.sorted())
        let visits = try db.visits(store: 100, from: CaptureTime(seconds: 0), to: CaptureTime(seconds: 60))
        #expect(visits.count == 1 && visits.first?.segments.first?.left == CaptureTime(seconds: 5))
        #expect(try db.daily(store: 100, from: CaptureTime(seconds: 0), to: CaptureTime(seconds: 86_400)).isEmpty)
    }

    @Test func aReadOnlyFileSaysSoAndLosesNothing() throws {
        let config = try historyFleet()
        let directory = try TemporaryDirectory("history")
        let path = directory.file("h.sqlite")
        _ = try HistoryDatabase(path: path)
        let readOnly = try HistoryDatabase(path: path, readOnly: true)
        do {
            _ = try readOnly.ingest(events(day(), config: config), pseudonyms: testKey)
            Issue.record("a read-only database took a write")
        } catch {
            #expect("\(error)".contains("readonly"), "\(error)")
            #expect("\(error)".contains(path))
        }
    }

    @Test func aFullDiskIsAnErrorAndTheBatchGoesInOnceThereIsRoom() throws {
        let config = try historyFleet()
        let directory = try TemporaryDirectory("history")
        let db = try HistoryDatabase(path: directory.file("h.sqlite"))
        // SQLite's own way of running out of room: no page beyond those in use.
        let pages = try db.writer.read { try Int.fetchOne($0, sql: "PRAGMA page_count") ?? 0 }
        try db.writer.writeWithoutTransaction { try $0.execute(sql: "PRAGMA max_page_count = \(pages)") }
        var many: [ZoneDecision] = []
        for i in 0..<400 {
            let start = Double(i)
            many += decisions(BeaconRef(major: 100, minor: UInt16(i)), since: start, moves: [(start, "door")], exit: start + 30)
        }
        do {
            _ = try db.ingest(events(many, config: config), pseudonyms: testKey)
            Issue.record("a full database took the batch")
        } catch {
            #expect("\(error)".contains("full"), "\(error)")
        }
        #expect(try db.counts().visits == 0)
        try db.writer.writeWithoutTransaction { try $0.execute(sql: "PRAGMA max_page_count = 1073741823") }
        #expect(try db.ingest(events(many, config: config), pseudonyms: testKey).stored == 800)
        #expect(try db.counts().visits == 400)
    }
}

@Suite struct PseudonymTests {
    /// Python's hmac.new(key, b"100/7", hashlib.sha256).hexdigest()[:32] computes the same.
    @Test func aKeyedHashOfTheBeaconsId() {
        #expect(testKey.pseudonym(of: BeaconRef(major: 100, minor: 7)) == "886c90aaba2ddeaf284cb049f2c5a3c7")
        let eddystone = BeaconRef(namespace: EddystoneNamespace(hex: "00112233445566778899")!,
                                  instance: EddystoneInstance(hex: "aabbccddeeff")!)
        #expect(testKey.pseudonym(of: eddystone) == "d6538396aa439a66428f2d6750bbda9f")
        #expect(Pseudonymizer(key: Array("another key".utf8)).pseudonym(of: BeaconRef(major: 100, minor: 7))
                != testKey.pseudonym(of: BeaconRef(major: 100, minor: 7)))
    }

    @Test func aMissingKeyIsCreatedOnceReadableByItsOwnerOnly() throws {
        let directory = try TemporaryDirectory("history")
        let path = directory.file("h.key")
        #expect(throws: HistoryStoreError.self) { try Pseudonymizer.loadKey(at: path) }
        let key = try Pseudonymizer.loadOrCreateKey(at: path)
        #expect(key.count == 64)
        #expect(try Pseudonymizer.loadOrCreateKey(at: path) == key)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }
}

public import BeaconKit
public import Contract
public import Config
public import History
public import Logging
import SystemCalls

/// Where the history is kept: one SQLite file (`HistoryDatabase`, the default) or a chain's
/// PostgreSQL server (`PostgresHistory`). Both hold the same tables under the same versioned
/// migrations, store each decision by its natural key, and answer with the same `Visit`s,
/// from which `HistoryFigures` computes every figure in Swift, whatever the store.
public protocol HistoryKeeping: Sendable {
    /// Where, for logs and messages (never a password).
    var location: String { get }

    /// Stores events in one transaction, each by its natural key: the visitor by pseudonym,
    /// the visit by store, visitor and start, a zone segment by visit, time and zone.
    func ingest(_ events: [HistoryEvent], pseudonyms: Pseudonymizer) async throws(HistoryStoreError) -> HistoryIngestCount

    /// Erases every visit of one beacon (its pseudonym under `pseudonyms`): the visitor, its
    /// visits and their segments. Returns how many visits were erased.
    func forget(_ beacon: BeaconRef, pseudonyms: Pseudonymizer) async throws(HistoryStoreError) -> Int

    /// Keeps each whole day's figures in `daily`, then erases visits begun before `cutoff`
    /// (and visitors left without visits). Returns how many visits were erased.
    func prune(before cutoff: CaptureTime, options: HistoryFigures.Options, now: CaptureTime) async throws(HistoryStoreError) -> Int

    /// Visits of `store` (every store when `nil`) that overlap `[from, to)`, with their
    /// segments and whether the visitor had come before. Visits are taken as lasting at most
    /// a day: one begun earlier than a day before `from` is not looked at.
    func visits(store: UInt16?, from: CaptureTime, to: CaptureTime) async throws(HistoryStoreError) -> [Visit]

    /// The kept days of `store` (every store when `nil`) beginning in `[from, to)`.
    func daily(store: UInt16?, from: CaptureTime, to: CaptureTime) async throws(HistoryStoreError) -> [HistoryDay]

    /// The stores the history has visits of.
    func stores() async throws(HistoryStoreError) -> [UInt16]

    /// Visits, segments and visitors held (for health and tests).
    func counts() async throws(HistoryStoreError) -> HistoryCounts

    /// The migrations applied, sorted (`HistoryDatabase.versions` or `PostgresHistory.versions`
    /// once up to date).
    func appliedMigrations() async throws(HistoryStoreError) -> [String]

    /// Lets go of the file or the connection.
    func close() async
}

/// What one `ingest` did.
public struct HistoryIngestCount: Sendable, Equatable {
    /// Decisions that changed the history.
    public var stored = 0
    /// Decisions it already held (a replay or redelivery).
    public var duplicates = 0
    public init(stored: Int = 0, duplicates: Int = 0) {
        self.stored = stored
        self.duplicates = duplicates
    }
}

/// What the history holds.
public struct HistoryCounts: Sendable, Equatable {
    public var visits: Int
    public var segments: Int
    public var visitors: Int
    public init(visits: Int, segments: Int, visitors: Int) {
        self.visits = visits
        self.segments = segments
        self.visitors = visitors
    }
}

/// One day's figures as `prune` kept them (the day's visits may be erased).
public struct HistoryDay: Sendable, Equatable {
    public var store: UInt16
    /// The store's midnight that began the day.
    public var start: CaptureTime
    public var footfall: Int
    public var reachedCounter: Int
    public var returning: Int
    /// Whole visits, s.
    public var visitMedian: Double
    public var visitP90: Double
    public var queueMedian: Double

    /// The figures of `visits`, the visits of `store` on the day beginning at `start`.
    init(store: UInt16, start: CaptureTime, visits: [Visit], options: HistoryFigures.Options, now: CaptureTime) {
        let figures = HistoryFigures(visits: visits, from: start, to: start + 86_400, now: now, options: options)
        self.init(store: store, start: start, footfall: figures.footfall, reachedCounter: figures.reachedCounter,
                  returning: figures.returning, visitMedian: figures.visitDuration.median, visitP90: figures.visitDuration.p90,
                  queueMedian: figures.queueTime.median)
    }

    init(store: UInt16, start: CaptureTime, footfall: Int, reachedCounter: Int, returning: Int, visitMedian: Double,
         visitP90: Double, queueMedian: Double) {
        self.store = store
        self.start = start
        self.footfall = footfall
        self.reachedCounter = reachedCounter
        self.returning = returning
        self.visitMedian = visitMedian
        self.visitP90 = visitP90
        self.queueMedian = queueMedian
    }
}

/// Both stores' schema versions and time columns.
enum HistorySchema {
    /// The schema's versions, oldest first; a database is migrated from whichever it holds.
    static let versions = ["v1-visits", "v2-daily", "v3-since"]

    /// Times are capture times in milliseconds since 1970.
    static func milliseconds(_ t: CaptureTime) -> Int64 { t.nanoseconds / 1_000_000 }
    static func instant(_ ms: Int64) -> CaptureTime { CaptureTime(nanoseconds: ms * 1_000_000) }

    /// A visit read before `from` is looked at only if it began less than this before, ms.
    static let longestVisit: Int64 = 86_400_000

    /// The `(store, day start)` a visit begun at `since` (ms) belongs to, days beginning at
    /// the stores' midnight `offset` ms east of UTC.
    static func day(of since: Int64, offset: Int64) -> Int64 {
        let day: Int64 = 86_400_000
        let local = since + offset
        return (local >= 0 ? local / day : (local - day + 1) / day) * day - offset
    }
}

/// Rows of visits joined with their segments, in visit order then segment order, into
/// `Visit`s (SQLite's reading; PostgreSQL sends a row per visit with its segments as arrays).
struct VisitAssembler {
    private var current: (id: Int64, store: UInt16, visitor: String, since: CaptureTime, ended: CaptureTime?, returning: Bool,
                          moves: [Visit.Move])?
    private(set) var visits: [Visit] = []

    mutating func add(id: Int64, store: Int64, visitor: String, since: Int64, ended: Int64?, returning: Bool,
                      entered: Int64?, zone: String?, zoneName: String?) {
        if current?.id != id {
            finish()
            current = (id, UInt16(truncatingIfNeeded: store), visitor, HistorySchema.instant(since),
                       ended.map(HistorySchema.instant), returning, [])
        }
        if let entered, let zone, let zoneName {
            current!.moves.append(Visit.Move(at: HistorySchema.instant(entered), zone: zone, zoneName: zoneName))
        }
    }

    mutating func finish() {
        guard let c = current else { return }
        visits.append(Visit(store: c.store, visitor: c.visitor, since: c.since, ended: c.ended, moves: c.moves, returning: c.returning))
        current = nil
    }
}

/// Opening the history the config names.
public enum HistoryStores {
    /// The SQLite file or the PostgreSQL server `config.database` names, its schema brought up
    /// to date unless `readOnly`. PostgreSQL's password is `BEACONBRIDGE_HISTORY_PASSWORD`
    /// or the first line of `config.passwordFile`.
    public static func open(_ config: HistoryConfig, readOnly: Bool = false,
                            logger: Logger = Logger(label: "history")) async throws(HistoryStoreError) -> any HistoryKeeping {
        if let problem = config.databaseProblem { throw HistoryStoreError("history.database: \(problem)") }
        guard let address = config.postgres else { return try HistoryDatabase(path: config.database, readOnly: readOnly) }
        return try await PostgresHistory(address, password: try password(config), migrate: !readOnly, logger: logger)
    }

    static func password(_ config: HistoryConfig) throws(HistoryStoreError) -> String? {
        if let value = Environment.value("BEACONBRIDGE_HISTORY_PASSWORD") { return value }
        guard let file = config.passwordFile else { return nil }
        do {
            let text = try FileSystem.readText(file)
            return String(text.prefix { $0 != "\n" && $0 != "\r" })
        } catch {
            throw HistoryStoreError("cannot read history.passwordFile \(file): \(error)")
        }
    }
}

/// A batch of events grouped by their natural keys, as both stores write them: each visitor,
/// visit and segment once (a visit's row is upserted once per batch, not once per decision),
/// and then each decision counted as new or already held, in the batch's order.
struct HistoryBatch {
    struct VisitKey: Hashable {
        var store: UInt16, pseudonym: String, since: Int64
    }

    struct SegmentKey: Hashable {
        var visit: VisitKey, entered: Int64, zone: String
    }

    /// Each pseudonym once, with the earliest visit start the batch has of it.
    private(set) var visitors: [(pseudonym: String, firstSeen: Int64)] = []
    /// Each visit once, with the latest exit the batch has of it (`nil`: none).
    private(set) var visits: [(key: VisitKey, ended: Int64?)] = []
    /// Each zone segment once, with its zone's name.
    private(set) var segments: [(key: SegmentKey, zoneName: String)] = []
    /// The exit decisions, in order.
    private var exits: [(visit: VisitKey, at: Int64)] = []
    /// Segment decisions the batch itself repeats.
    private var repeated = 0

    /// `events` with each beacon's pseudonym computed once.
    init(_ events: [HistoryEvent], pseudonyms: Pseudonymizer) {
        var names: [BeaconRef: String] = [:]
        var visitorIndex: [String: Int] = [:]
        var visitIndex: [VisitKey: Int] = [:]
        var seen: Set<SegmentKey> = []
        for event in events {
            let pseudonym: String
            if let known = names[event.beacon] {
                pseudonym = known
            } else {
                pseudonym = pseudonyms.pseudonym(of: event.beacon)
                names[event.beacon] = pseudonym
            }
            let since = HistorySchema.milliseconds(event.since), at = HistorySchema.milliseconds(event.at)
            if let index = visitorIndex[pseudonym] {
                visitors[index].firstSeen = min(visitors[index].firstSeen, since)
            } else {
                visitorIndex[pseudonym] = visitors.count
                visitors.append((pseudonym, since))
            }
            let visit = VisitKey(store: event.store, pseudonym: pseudonym, since: since)
            let index: Int
            if let known = visitIndex[visit] {
                index = known
            } else {
                index = visits.count
                visitIndex[visit] = index
                visits.append((visit, nil))
            }
            if event.kind == .exit {
                visits[index].ended = max(visits[index].ended ?? at, at)
                exits.append((visit, at))
            } else {
                let segment = SegmentKey(visit: visit, entered: at, zone: event.zone)
                if seen.insert(segment).inserted {
                    segments.append((segment, event.zoneName))
                } else {
                    repeated += 1
                }
            }
        }
    }

    /// What the batch did, given each visit's exit before it (`endedBefore`) and how many of
    /// its segments were new (`segmentsAdded`): an exit is new if it ends its visit later than
    /// the history (and the batch before it) did.
    func count(endedBefore: [VisitKey: Int64], segmentsAdded: Int) -> HistoryIngestCount {
        var count = HistoryIngestCount(stored: segmentsAdded, duplicates: segments.count - segmentsAdded + repeated)
        var ended = endedBefore
        for (visit, at) in exits {
            if let before = ended[visit], before >= at { count.duplicates += 1 } else { count.stored += 1 }
            ended[visit] = max(ended[visit] ?? at, at)
        }
        return count
    }
}

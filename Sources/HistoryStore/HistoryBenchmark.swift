public import BeaconKit
import BrainCore
public import History
import GRDB
import SystemCalls

/// What `beaconctl bench-history` measures, beside SQLite's own baseline in the same run.
public enum HistoryBenchmark {
    /// A busy chain's decisions: `visits` visits in `stores` stores from `start`, one every
    /// `spacing` seconds per store (`perDay` of them a day, from the day's start), each an
    /// enter, two zone changes and an exit (4 decisions). Visitors come back: `visitors`
    /// distinct beacons per store.
    public static func decisions(visits: Int, stores: Int = 1, visitors: Int = 5_000, start: Instant,
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
    /// history). Seconds taken.
    public static func plainInserts(_ events: [HistoryEvent], path: String, batch: Int) throws -> Double {
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE plain (store INTEGER, beacon TEXT, since INTEGER, at INTEGER, kind TEXT, zone TEXT)")
        }
        let started = WallClock.monotonic()
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
        return WallClock.monotonic() - started
    }

    /// The history's ingest of the same events in batches of `batch`. Seconds taken.
    public static func ingest(_ events: [HistoryEvent], into database: HistoryDatabase, pseudonyms: Pseudonymizer,
                              batch: Int) throws -> Double {
        let started = WallClock.monotonic()
        var index = 0
        while index < events.count {
            let end = min(index + batch, events.count)
            _ = try database.ingest(Array(events[index..<end]), pseudonyms: pseudonyms)
            index = end
        }
        return WallClock.monotonic() - started
    }
}

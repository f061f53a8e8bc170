import BeaconKit
import Contract
import BrainCore
import Config
import History
import Testing

@Suite struct VisitTests {
    @Test func segmentsFromMovesInAnyOrderWithDuplicates() {
        let moves = [Visit.Move(at: t(30), zone: "counter", zoneName: "Counter"),
                     Visit.Move(at: t(0), zone: "door", zoneName: "Entrance"),
                     Visit.Move(at: t(30), zone: "counter", zoneName: "Counter"),
                     Visit.Move(at: t(10), zone: "queue", zoneName: "Queue")]
        let visit = Visit(store: 100, visitor: "v", since: t(0), ended: t(50), moves: moves)
        #expect(visit.segments.map(\.zone) == ["door", "queue", "counter"])
        #expect(visit.segments.map(\.entered) == [t(0), t(10), t(30)])
        #expect(visit.segments.map(\.left) == [t(10), t(30), t(50)])
        #expect(visit.time(in: ["queue"], now: t(100)) == 20)
        #expect(visit.time(in: ["Counter"], now: t(100)) == 20)
    }

    @Test func anOpenVisitsLastSegmentRunsToNow() {
        let visit = Visit(store: 100, visitor: "v", since: t(0), ended: nil,
                          moves: [Visit.Move(at: t(0), zone: "door", zoneName: "Entrance")])
        #expect(visit.segments.first?.left == nil)
        #expect(visit.duration(now: t(42)) == 42)
        #expect(visit.isPresent(at: t(42)))
    }
}

@Suite struct FiguresTests {
    func visit(_ visitor: String, _ since: Double, _ ended: Double?, _ moves: [(Double, String)], returning: Bool = false,
               store: UInt16 = 100) -> Visit {
        Visit(store: store, visitor: visitor, since: t(since), ended: ended.map(t),
              moves: moves.map { Visit.Move(at: t($0.0), zone: $0.1, zoneName: $0.1) }, returning: returning)
    }

    @Test func footfallDwellConversionQueueReturningAndOccupancy() {
        let visits = [
            visit("a", 0, 100, [(0, "door"), (20, "queue"), (80, "counter")]),
            visit("b", 10, 60, [(10, "door")], returning: true),
            visit("c", 3_700, 3_900, [(3_700, "door"), (3_720, "queue"), (3_760, "counter")]),
            visit("d", 3_800, nil, [(3_800, "door")]),
            visit("e", 90_000, 90_100, [(90_000, "door")]),
        ]
        let options = HistoryFigures.Options(counterZones: ["counter"], queueZones: ["queue"])
        let f = HistoryFigures(visits: visits, from: t(0), to: t(86_400), now: t(4_000), options: options)
        #expect(f.footfall == 4)
        #expect(f.hourly.count == 24)
        #expect(f.hourly.first(where: { $0.start == t(0) })?.visits == 2)
        #expect(f.hourly.first(where: { $0.start == t(3_600) })?.visits == 2)
        #expect(f.daily.map(\.visits) == [4, 0])
        #expect(f.reachedCounter == 2)
        #expect(f.conversion == 0.5)
        // Queue: a waited 60 s, c 40 s.
        #expect(f.queueTime.count == 2)
        #expect(f.queueTime.median == 50)
        #expect(f.queueTime.p90 == 58)
        #expect(f.returning == 1)
        // Whole visits (closed): 100, 50, 200.
        #expect(f.visitDuration.median == 100)
        let door = f.zones.first { $0.zone == "door" }
        #expect(door?.dwell.count == 3)
        #expect(door?.dwell.median == 20)
        // a and b together in the first quarter hour; c and d in the one from 3 600 s.
        #expect(f.occupancy.first?.peak == 2)
        #expect(f.occupancy.first(where: { $0.start == t(3_600) })?.peak == 2)
        #expect(f.occupancy.first(where: { $0.start == t(7_200) })?.peak == 0)
        #expect(HistoryFigures.occupancy(of: visits, at: t(3_850)) == 2)
    }

    @Test func walkingPastTheCounterIsNotReachingIt() {
        // a is served for 30 s; b walks past the counter in 4 s; c stands there 4 s, then 7 s: 11 s in all.
        let visits = [
            visit("a", 0, 100, [(0, "door"), (50, "counter"), (80, "door")]),
            visit("b", 0, 100, [(0, "door"), (40, "counter"), (44, "shelves")]),
            visit("c", 0, 100, [(0, "door"), (20, "counter"), (24, "door"), (60, "counter"), (67, "door")]),
            visit("d", 0, 100, [(0, "door")]),
        ]
        func figures(_ minimumStay: Double) -> HistoryFigures {
            HistoryFigures(visits: visits, from: t(0), to: t(3_600), now: t(200),
                           options: .init(counterZones: ["counter"], queueZones: ["counter"], minimumStay: minimumStay))
        }
        let f = figures(10)
        #expect(f.reachedCounter == 2)
        #expect(f.conversion == 0.5)
        // Queue: a 30 s, c 11 s; b's 4 s was not queueing.
        #expect(f.queueTime.count == 2 && f.queueTime.median == 20.5)
        let any = figures(0)
        #expect(any.reachedCounter == 3 && any.queueTime.count == 3)
        #expect(HistoryFigures.Options().minimumStay == HistoryFigures.Options.defaultMinimumStay)
    }

    @Test func theChainAndEachStoreInOnePass() {
        let visits = [visit("a", 0, 100, [(0, "door"), (50, "counter")], store: 200),
                      visit("b", 10, 60, [(10, "door")]),
                      visit("c", 20, 90, [(20, "door"), (30, "counter")], store: 200)]
        let all = HistoryFigures.chain(visits: visits, from: t(0), to: t(3_600), now: t(200))
        #expect(all.chain == HistoryFigures(visits: visits, from: t(0), to: t(3_600), now: t(200)))
        #expect(all.stores.map(\.store) == [100, 200])
        #expect(all.stores.map(\.figures.footfall) == [1, 2])
        #expect(all.stores[1].figures == HistoryFigures(visits: [visits[0], visits[2]], from: t(0), to: t(3_600), now: t(200)))
    }

    @Test func bucketsFollowTheStoresClock() {
        // 23:30 UTC is 00:30 the next day at +01:00.
        let visits = [visit("a", 86_400 - 1_800 - 9 * 3_600, 86_400 - 1_700 - 9 * 3_600, [])]
        let options = HistoryFigures.Options(utcOffsetMinutes: 60)
        let f = HistoryFigures(visits: visits, from: t(-9 * 3_600 - 3_600), to: t(-9 * 3_600 - 3_600 + 2 * 86_400), now: t(90_000),
                               options: options)
        #expect(f.daily.count == 2)
        #expect(f.daily.map(\.visits) == [0, 1])
    }

    @Test func weeksBeginOnMonday() {
        // t(0) is Saturday 2026-11-21; Monday 2026-11-23 begins a week.
        let f = HistoryFigures(visits: [visit("a", 86_400 * 2 - 9 * 3_600 + 60, nil, [])], from: t(-9 * 3_600),
                               to: t(-9 * 3_600 + 14 * 86_400), now: t(0))
        #expect(f.weekly.first?.start == t(-9 * 3_600 - 5 * 86_400))
        #expect(f.weekly.map(\.visits) == [0, 1, 0])
    }

    @Test func distributionQuantiles() {
        let d = HistoryFigures.Distribution([10, 20, 30, 40, 50, 60, 70, 80, 90, 100])
        #expect(d.median == 55)
        #expect(abs(d.p90 - 91) < 1e-9)
        #expect(d.mean == 55)
        #expect(HistoryFigures.Distribution([]) == .empty)
    }
}

@Suite struct DecisionReaderTests {
    @Test func readsEnterZoneAndExitOfBothFamilies() throws {
        let config = try historyFleet()
        let reader = DecisionReader(config: config)
        let beacon = BeaconRef(major: 100, minor: 7)
        let d = decisions(beacon, since: 0, moves: [(0, "door"), (5, "counter")], exit: 9)
        let read = events(d, config: config)
        #expect(read.map(\.kind) == [.enter, .zone, .exit])
        #expect(read.allSatisfy { $0.store == 100 && $0.since == t(0) })
        #expect(reader.beacon(ofDecisionTopic: "eddystone/00112233445566778899/aabbccddeeff/events")?.eddystone != nil)
        #expect(reader.beacon(ofDecisionTopic: "beacons/100/7/presence") == nil)
        #expect(reader.filters == ["beacons/+/+/events", "eddystone/+/+/events"])
    }

    @Test func malformedUnknownStoreAndBackwardsTimeAreSkipped() throws {
        let config = try historyFleet()
        let reader = DecisionReader(config: config)
        #expect(reader.read(topic: "beacons/100/7/events", payload: Array("not json".utf8)) == .failure(.malformed))
        #expect(reader.read(topic: "beacons/100/7/events", payload: Array(#"{"event":"enter"}"#.utf8)) == .failure(.malformed))
        let other = decisions(BeaconRef(major: 100, minor: 8), since: 0, moves: [(0, "door")], exit: nil)[0]
        #expect(reader.read(topic: "beacons/100/7/events", payload: Array(other.json.utf8)) == .failure(.malformed))
        let unknown = decisions(BeaconRef(major: 300, minor: 1), since: 0, moves: [(0, "door")], exit: nil)[0]
        #expect(reader.read(topic: message(unknown).topic, payload: message(unknown).payload) == .failure(.unknownStore))
        var backwards = decisions(BeaconRef(major: 100, minor: 1), since: 10, moves: [(10, "door")], exit: nil)[0]
        backwards.at = t(5)
        #expect(reader.read(topic: message(backwards).topic, payload: message(backwards).payload) == .failure(.implausibleTime))
        // A fleet that lists no stores takes every store.
        let open = try FleetConfig.parse(#"{"broker": {"url": "mqtt://127.0.0.1"}}"#)
        #expect((try? DecisionReader(config: open).read(topic: message(unknown).topic, payload: message(unknown).payload).get())?.store == 300)
    }
}

@Suite struct HistoryConfigTests {
    @Test func defaultsAndValues() throws {
        let config = try historyFleet()
        #expect(config.history == HistoryConfig())
        #expect(config.history.resolvedKeyFile == "/var/lib/beaconbridge/history.sqlite.key")
        let set = try historyFleet(#"{"database": "sqlite:/tmp/h.sqlite", "retentionDays": 30, "queueZones": ["queue"], "utcOffset": "-05:30"}"#)
        #expect(set.history.database == "/tmp/h.sqlite")
        #expect(set.history.retentionDays == 30)
        #expect(set.history.queueZones == ["queue"])
        #expect(set.history.utcOffsetMinutes == -330)
        #expect(set.history.minimumStaySeconds == nil)
        #expect(try historyFleet(#"{"minimumStaySeconds": 4.5}"#).history.minimumStaySeconds == 4.5)
        #expect(set.history.postgres == nil)

        let chain = try historyFleet(#"{"database": "postgres://history@[::1]:6543/beaconbridge", "passwordFile": "/p", "keyFile": "/k"}"#)
        #expect(chain.history.postgres == PostgresAddress(user: "history", host: "::1", port: 6543, database: "beaconbridge"))
        #expect(chain.history.postgres?.description == "postgres://history@[::1]:6543/beaconbridge")
        #expect(chain.history.passwordFile == "/p" && chain.history.resolvedKeyFile == "/k")
        #expect(try historyFleet(#"{"database": "postgresql://h@db.lan/b", "keyFile": "/k"}"#).history.postgres
                == PostgresAddress(user: "h", host: "db.lan", port: 5432, database: "b"))
    }

    @Test(arguments: [
        (#"{"retention": 30}"#, "history.retention: unknown key"),
        (#"{"retentionDays": 0}"#, "history.retentionDays: 0 is out of range"),
        (#"{"utcOffset": "+1"}"#, "history.utcOffset: \"+1\" is not an offset"),
        (#"{"minimumStaySeconds": -1}"#, "history.minimumStaySeconds: -1 is out of range"),
        (#"{"database": "postgresql://h/db", "keyFile": "/k"}"#, "history.database: \"postgresql://h/db\" names no user"),
        (#"{"database": "postgres://u:pw@h/db", "keyFile": "/k"}"#, "history.database: no password in history.database"),
        (#"{"database": "postgres://u@h/db"}"#, "history.database: with PostgreSQL, history.keyFile must name"),
    ])
    func badValuesAreErrorsWithTheirPath(history: String, expected: String) {
        #expect(throws: (any Error).self) { try historyFleet(history) }
        do { _ = try historyFleet(history) } catch { #expect("\(error)".contains(expected), "\(error)") }
    }
}

import BeaconKit
import Contract
import BrainCore
import Config
import Foundation
import History
import HistoryStore
import MQTT
import TestSupport
import Testing

/// beacon-history against a real Mosquitto: the same decisions published once, cleanly, and
/// once through every fault the service is meant to survive must leave the same history.
@Suite(.serialized) struct HistoryServiceTests {
    /// `visits` visits over two stores (and one Eddystone beacon of store 100), a few zone changes each.
    static func workload(visits: Int = 40) -> [ZoneDecision] {
        var out: [ZoneDecision] = []
        for i in 0..<visits {
            let store: UInt16 = i % 4 == 3 ? 200 : 100
            let zones = store == 100 ? ["door", "queue", "counter", "door"] : ["door-200", "counter-200"]
            let start = Double(i * 20)
            let moves = zones.prefix(1 + i % zones.count).enumerated().map { (start + Double($0.offset * 7), $0.element) }
            out += decisions(BeaconRef(major: store, minor: UInt16(i % 25)), since: start, moves: Array(moves),
                             exit: i % 10 == 9 ? nil : start + Double(moves.count * 7 + 5))
        }
        let eddystone = BeaconRef(namespace: EddystoneNamespace(hex: "00112233445566778899")!,
                                  instance: EddystoneInstance(hex: "aabbccddeeff")!)
        out += decisions(eddystone, since: 5, moves: [(5, "door"), (9, "counter")], exit: 30)
        return out
    }

    /// A probe decision (its own visit): once it is stored, everything published before it is too.
    static func probe(_ n: Int) -> ZoneDecision {
        decisions(BeaconRef(major: 100, minor: UInt16(1_000 + n)), since: 5_000 + Double(n), moves: [(5_000 + Double(n), "door")],
                  exit: nil)[0]
    }

    struct Rig {
        let directory: TemporaryDirectory
        let broker: MosquittoBroker
        let configPath: String
        /// `history.database`: a SQLite file or a PostgreSQL database.
        let database: String
        let key: String
        let publisher: MQTTClient

        /// `database`: where the history goes (default: a SQLite file in the rig's directory).
        static func start(_ label: String, key: String, database: String? = nil) async throws -> Rig {
            let directory = try TemporaryDirectory("history-\(label)")
            // The broker keeps what a persistent session misses, however much (the default keeps 1000).
            let broker = try await MosquittoBroker.start(in: directory, extraConfig: "max_queued_messages 0")
            let databasePath = database ?? directory.file("history.sqlite")
            let configPath = try directory.write("fleet.json", """
            {
              "broker": {"url": "\(broker.url)", "keepalive": 5},
              "gateways": [{"id": "door", "store": 100}, {"id": "queue", "store": 100}, {"id": "counter", "store": 100},
                           {"id": "door-200", "store": 200}, {"id": "counter-200", "store": 200}],
              "stores": [{"major": 100}, {"major": 200}],
              "beacons": [{"namespace": "00112233445566778899", "instance": "aabbccddeeff", "store": 100}],
              "history": {"database": "\(databasePath)", "keyFile": "\(key)"}
            }
            """)
            let publisher = try MQTTClient(MQTTClientOptions(broker: broker.brokerURL, clientID: "test-brain-\(label)"))
            try publisher.start()
            return Rig(directory: directory, broker: broker, configPath: configPath, database: databasePath, key: key,
                       publisher: publisher)
        }

        func startHistory(logLevel: String = "warning") throws -> ChildProcess {
            let path = Programs.built("beacon-history")
            return try ChildProcess(path, ["--config", configPath, "--log-level", logLevel], in: directory, name: "beacon-history")
        }

        /// The history, opened to read (`nil` while there is none yet).
        func open() async -> (any HistoryKeeping)? {
            if !database.hasPrefix("postgres"), !FileManager.default.fileExists(atPath: database) { return nil }
            return try? await HistoryStores.open(HistoryConfig(database: database, keyFile: key), readOnly: true)
        }

        func publish(_ decisions: [ZoneDecision]) async throws {
            for decision in decisions {
                try publisher.publish(MQTTMessage(topic: Topics().zoneEvents(of: decision.beacon), text: decision.json, qos: 1))
            }
            #expect(await publisher.waitUntilPublished(timeout: 30))
        }

        /// Publishes probe `n` until the history holds it (the first time, until the service
        /// has subscribed).
        func waitForProbe(_ n: Int, history: ChildProcess) async throws {
            let probe = HistoryServiceTests.probe(n)
            let stored = await eventually(timeout: 90, interval: 0.5) {
                try? await publish([probe])
                guard let db = await open() else { return false }
                defer { Task { await db.close() } }
                guard let visits = try? await db.visits(store: 100, from: probe.since, to: probe.since + 1) else { return false }
                return visits.contains { $0.since == probe.since }
            }
            #expect(stored, "probe \(n) not stored: \(history.stderr.suffix(2000))")
        }

        /// Every visit, in the order of its natural key (store, start, visitor).
        func history() async throws -> [Visit] {
            let db = try await HistoryStores.open(HistoryConfig(database: database, keyFile: key), readOnly: true)
            let visits = try await db.visits(store: nil, from: t(-3_600), to: t(86_400))
            await db.close()
            return visits.sorted { ($0.store, $0.since, $0.visitor) < ($1.store, $1.since, $1.visitor) }
        }

        func stop() async {
            await publisher.stop()
            await broker.stop()
        }
    }

    /// On both stores: PostgreSQL's one-statement batches keep the same exactly-once.
    @Test(arguments: HistoryBackend.allCases)
    func restartsRedeliveryReplaysAndABrokerRestartNeitherLoseNorDouble(_ backend: HistoryBackend) async throws {
        let keys = try TemporaryDirectory("history-key")
        let key = try keys.write("history.key", "the same key for both runs\n")
        let server = backend == .postgres ? try await PostgresServer.start(in: keys, settings: ["fsync=off"]) : nil
        let all = Self.workload()
        let third = all.count / 3

        // Without a fault.
        let clean = try await Rig.start("clean", key: key, database: try await server?.createDatabase("clean"))
        var history = try clean.startHistory()
        try await clean.waitForProbe(0, history: history)
        try await clean.publish(all)
        try await clean.waitForProbe(1, history: history)
        try await clean.waitForProbe(2, history: history)
        #expect(await history.stop() == 0)
        let expected = try await clean.history()
        await clean.stop()

        // With faults.
        let faulty = try await Rig.start("faulty", key: key, database: try await server?.createDatabase("faulty"))
        history = try faulty.startHistory()
        try await faulty.waitForProbe(0, history: history)
        try await faulty.publish(Array(all[..<third]))
        // Killed without a goodbye while decisions arrive; the broker keeps the session's.
        history.signal(SIGKILL)
        _ = await history.waitForExit()
        try await faulty.publish(Array(all[third..<(2 * third)]))
        history = try faulty.startHistory()
        // The middle third reaches it only through the session the broker kept. The rest
        // comes shuffled with a replay of the first third (stored, or caught in the kill).
        var generator = SystemRandomNumberGenerator()
        try await faulty.publish((Array(all[(2 * third)...]) + Array(all[..<third])).shuffled(using: &generator))
        try await faulty.waitForProbe(1, history: history)
        // The broker goes away and comes back (without its sessions): the service reconnects and subscribes again.
        await faulty.broker.kill()
        try await faulty.broker.restart()
        try await faulty.waitForProbe(2, history: history)
        #expect(await history.stop() == 0)
        let got = try await faulty.history()
        await faulty.stop()

        #expect(got.count == expected.count)
        #expect(got == expected)
        #expect(expected.count == 44)
        #expect(expected.filter { $0.ended == nil }.count == 4 + 3)
        await server?.stop()
    }

    /// PostgreSQL stopped (its fast shutdown, by PID) while beacon-history writes a busy
    /// stream of decisions, and started again: the writes fail, are retried, and the history
    /// is the one a run without the fault leaves, visit for visit.
    @Test func postgresGoingAwayMidIngestLosesAndDoublesNothing() async throws {
        let keys = try TemporaryDirectory("history-key")
        let key = try keys.write("history.key", "the same key for both runs\n")
        let server = try await PostgresServer.start(in: keys, settings: ["fsync=off"])
        let all = Self.workload(visits: 2_000)
        let third = all.count / 3

        let clean = try await Rig.start("pg-clean", key: key, database: try await server.createDatabase("clean"))
        var history = try clean.startHistory()
        try await clean.waitForProbe(0, history: history)
        try await clean.publish(all)
        try await clean.waitForProbe(1, history: history)
        #expect(await history.stop() == 0)
        let expected = try await clean.history()
        await clean.stop()

        let faulty = try await Rig.start("pg-faulty", key: key, database: try await server.createDatabase("faulty"))
        history = try faulty.startHistory(logLevel: "notice")
        try await faulty.waitForProbe(0, history: history)
        try await faulty.publish(Array(all[..<third]))
        // Gone while the first third is being written; the rest comes while it is away.
        await server.stop()
        try await faulty.publish(Array(all[third...]))
        let noticed = await eventually(timeout: 60) { history.stderr.contains("cannot write the history") }
        #expect(noticed, "\(history.stderr.suffix(2000))")
        try await server.restart()
        try await faulty.waitForProbe(1, history: history)
        #expect(await history.stop() == 0)
        let log = history.stderr
        let got = try await faulty.history()
        await faulty.stop()

        #expect(log.contains("cannot write the history; keeping"), "\(log.suffix(2000))")
        #expect(log.contains("writing the history again"), "\(log.suffix(2000))")
        #expect(got.count == expected.count)
        #expect(got == expected)
        #expect(expected.count == 2_000 + 1 + 2)

        // beaconctl forget reaches the same database through the config.
        let forget = try ChildProcess(Programs.built("beaconctl"), ["forget", "--config", faulty.configPath, "--beacon", "100/1"],
                                      in: faulty.directory, name: "beaconctl-forget")
        #expect(await forget.waitForExit(timeout: 60) == 0, "\(forget.diagnostics)")
        let pseudonym = Pseudonymizer(key: try Pseudonymizer.loadKey(at: key)).pseudonym(of: BeaconRef(major: 100, minor: 1))
        let erased = expected.filter { $0.visitor == pseudonym }.count
        #expect(erased > 0 && forget.stdout.contains("erased \(erased) visits"), "\(forget.diagnostics)")
        #expect(try await faulty.history().count == expected.count - erased)
        await server.stop()
    }

    /// Another process holds the SQLite file's write lock (`BEGIN EXCLUSIVE`) while decisions
    /// arrive: the writes fail past the 5 s busy timeout, are retried, and once the lock is
    /// let go the history is the one a run without the fault leaves.
    @Test func aLockedSQLiteFileLosesAndDoublesNothing() async throws {
        let keys = try TemporaryDirectory("history-key")
        let key = try keys.write("history.key", "the same key for both runs\n")
        let all = Self.workload(visits: 200)
        let half = all.count / 2

        let clean = try await Rig.start("lock-clean", key: key)
        var history = try clean.startHistory()
        try await clean.waitForProbe(0, history: history)
        try await clean.publish(all)
        try await clean.waitForProbe(1, history: history)
        #expect(await history.stop() == 0)
        let expected = try await clean.history()
        await clean.stop()

        let faulty = try await Rig.start("lock-faulty", key: key)
        history = try faulty.startHistory(logLevel: "notice")
        try await faulty.waitForProbe(0, history: history)
        try await faulty.publish(Array(all[..<half]))
        // Python's sqlite3, holding the write lock until it is stopped by its PID.
        let locker = try ChildProcess("/usr/bin/env", ["python3", "-c", """
            import signal, sqlite3, sys
            db = sqlite3.connect(sys.argv[1], timeout=60, isolation_level=None)
            db.execute("BEGIN EXCLUSIVE")
            print("locked", flush=True)
            signal.pause()
            """, faulty.database], in: faulty.directory, name: "sqlite-locker")
        #expect(await eventually(timeout: 60) { locker.stdout.contains("locked") }, "\(locker.diagnostics)")
        try await faulty.publish(Array(all[half...]))
        let noticed = await eventually(timeout: 60) { history.stderr.contains("cannot write the history") }
        #expect(noticed, "\(history.stderr.suffix(2000))")
        #expect(history.stderr.contains("database is locked"), "\(history.stderr.suffix(2000))")
        _ = await locker.stop()
        try await faulty.waitForProbe(1, history: history)
        #expect(await history.stop() == 0)
        #expect(history.stderr.contains("writing the history again"), "\(history.stderr.suffix(2000))")
        let got = try await faulty.history()
        await faulty.stop()

        #expect(got.count == expected.count)
        #expect(got == expected)
    }
}

import BeaconKit
import Contract
import BrainCore
import Config
import History
import HistoryStore
import TestSupport
import Testing

/// Seconds after a fixed test epoch (2026-11-21T09:00:00Z, a Saturday).
func t(_ seconds: Double) -> CaptureTime { CaptureTime(seconds: 1_795_251_600 + seconds) }

/// Store 100 with a door, a queue and a counter; store 200 beside it.
func historyFleet(_ history: String = "", broker: String = "mqtt://127.0.0.1:1883") throws -> FleetConfig {
    try FleetConfig.parse("""
    {
      "broker": {"url": "\(broker)", "keepalive": 5},
      "gateways": [
        {"id": "door", "zone": "Entrance", "store": 100},
        {"id": "queue", "zone": "Queue", "store": 100},
        {"id": "counter", "zone": "Counter", "store": 100},
        {"id": "door-200", "zone": "Entrance", "store": 200},
        {"id": "counter-200", "zone": "Counter", "store": 200}
      ],
      "stores": [{"major": 100, "name": "Main Street"}, {"major": 200, "name": "Harbour"}]\(history.isEmpty ? "" : ",\n  \"history\": " + history)
    }
    """)
}

/// The decisions of one visit: enter at `enter` in the first zone, a zone change at each
/// later move, an exit at `exit` (when given).
func decisions(_ beacon: BeaconRef, since enter: Double, moves: [(Double, String)], exit: Double?) -> [ZoneDecision] {
    var out: [ZoneDecision] = []
    var previous: String?
    for (time, zone) in moves {
        out.append(ZoneDecision(kind: previous == nil ? .enter : .zone, beacon: beacon, zone: zone, zoneName: zone.capitalized,
                                from: previous, since: t(enter), at: t(time)))
        previous = zone
    }
    if let exit, let previous {
        out.append(ZoneDecision(kind: .exit, beacon: beacon, zone: previous, zoneName: previous.capitalized, since: t(enter), at: t(exit)))
    }
    return out
}

extension String {
    var capitalized: String { prefix(1).uppercased() + dropFirst() }
}

/// Topic and payload of a decision, as the brain publishes it.
func message(_ decision: ZoneDecision, topics: Topics = Topics()) -> (topic: String, payload: [UInt8]) {
    (topics.zoneEvents(of: decision.beacon), Array(decision.json.utf8))
}

/// Decisions read as the service reads them.
func events(_ decisions: [ZoneDecision], config: FleetConfig) -> [HistoryEvent] {
    let reader = DecisionReader(config: config)
    return decisions.compactMap { decision in
        let m = message(decision, topics: config.topics)
        return try? reader.read(topic: m.topic, payload: m.payload).get()
    }
}

let testKey = Pseudonymizer(key: Array("a test key, not a secret one".utf8))

/// The two places the history can be kept; the same tests run on both.
enum HistoryBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }
}

/// Fresh, empty histories on one backend: SQLite files in a temporary directory, or
/// databases on a PostgreSQL server of the test's own (started here, stopped by `stop`).
final class HistoryLab: Sendable {
    let backend: HistoryBackend
    let directory: TemporaryDirectory
    let server: PostgresServer?

    init(_ backend: HistoryBackend) async throws {
        self.backend = backend
        directory = try TemporaryDirectory("history")
        // Durability is not what these tests are about.
        server = backend == .postgres ? try await PostgresServer.start(in: directory, settings: ["fsync=off"]) : nil
    }

    /// `history.database` for a new history named `name`.
    func database(_ name: String) async throws -> String {
        guard let server else { return directory.file(name + ".sqlite") }
        return try await server.createDatabase(name)
    }

    /// A new, empty history named `name`.
    func open(_ name: String) async throws -> any HistoryKeeping {
        try await HistoryStores.open(HistoryConfig(database: try await database(name), keyFile: directory.file("key")))
    }

    func stop() async { await server?.stop() }
}

import BeaconKit
import Contract
import BrainCore
import CommandLineSupport
import Config
import History
import HistoryStore
import LiveClock
import MQTT
import Simulation
import SystemCalls

/// `beaconctl score --history`: the history's figures on a simulated store against the same
/// figures from the brain's decisions (what the history was given: the difference should be
/// none) and from the simulator's ground truth (what really happened).
struct HistoryAccuracy {
    /// The store's counter is both the conversion's target and, for this benchmark, the
    /// zone marked as a queue (the simulator has no queue of its own). The history's default
    /// minimum stay applies to the truth as to the history: a customer who walked past the
    /// counter did not reach it, in either.
    static let options = HistoryFigures.Options(counterZones: ["counter"], queueZones: ["counter"])

    var kept: HistoryFigures
    var decided: HistoryFigures
    var truth: HistoryFigures

    init(simulation: FloorSimulation, decisions: [ZoneDecision], config: FleetConfig, configText: String, directory: String,
         process: Bool) async throws {
        let from = simulation.start - 3600, to = simulation.start + simulation.crowd.duration + 3600
        let now = to + 86_400
        let keptVisits = try await Self.kept(decisions, config: config, configText: configText, window: (from, to),
                                             directory: directory, process: process)
        kept = HistoryFigures(visits: keptVisits, from: from, to: to, now: now, options: Self.options)
        decided = HistoryFigures(visits: Self.visits(of: decisions, store: simulation.store), from: from, to: to, now: now,
                                 options: Self.options)
        truth = HistoryFigures(visits: Self.visits(of: simulation.truth, store: simulation.store), from: from, to: to, now: now,
                               options: Self.options)
    }

    /// Each figure: (name, key, value of a set of figures, places, how an error is measured).
    enum Error { case count, relative, points }
    static let figures: [(name: String, key: String, value: @Sendable (HistoryFigures) -> Double, places: Int, error: Error)] = [
        ("footfall", "footfall", { Double($0.footfall) }, 0, .count),
        ("visit median s", "visitMedian", { $0.visitDuration.median }, 1, .relative),
        ("visit p90 s", "visitP90", { $0.visitDuration.p90 }, 1, .relative),
        ("queue median s", "queueMedian", { $0.queueTime.median }, 1, .relative),
        ("queue p90 s", "queueP90", { $0.queueTime.p90 }, 1, .relative),
        ("conversion %", "conversion", { ($0.conversion ?? 0) * 100 }, 2, .points),
    ]

    /// An error: visits apart (count), % of the truth (relative) or percentage points.
    static func error(_ error: Error, _ got: Double, _ want: Double) -> Double {
        switch error {
        case .count, .points: got - want
        case .relative: want == 0 ? (got == 0 ? 0 : 100) : 100 * (got - want) / want
        }
    }

    /// Per zone, the dwell median's and p90's error against the truth, % (the largest).
    static func zoneErrors(_ got: HistoryFigures, _ want: HistoryFigures) -> (median: Double, p90: Double) {
        var median = 0.0, p90 = 0.0
        for zone in want.zones {
            let g = got.zones.first { $0.zone == zone.zone }?.dwell ?? .empty
            let m = error(.relative, g.median, zone.dwell.median), p = error(.relative, g.p90, zone.dwell.p90)
            if abs(m) > abs(median) { median = m }
            if abs(p) > abs(p90) { p90 = p }
        }
        return (median, p90)
    }

    /// Largest difference of any figure between the history and the decisions it was given.
    var keptAgainstDecided: Double {
        var worst = Self.figures.map { abs($0.value(kept) - $0.value(decided)) }.max() ?? 0
        for zone in decided.zones {
            let k = kept.zones.first { $0.zone == zone.zone }?.dwell ?? .empty
            worst = max(worst, abs(k.median - zone.dwell.median), abs(k.p90 - zone.dwell.p90))
        }
        return worst
    }

    /// The simulator's visits as the history would hold them.
    static func visits(of truth: GroundTruth, store: UInt16) -> [Visit] {
        truth.visits.map { v in
            Visit(store: store, visitor: "\(v.major)/\(v.minor)", since: truth.start + v.enter, ended: truth.start + v.exit,
                  segments: v.zones.map { Visit.Segment(zone: $0.zone, zoneName: $0.zone, entered: truth.start + $0.from,
                                                        left: truth.start + $0.to) })
        }
    }

    /// The brain's decisions as visits, read directly (the reference the history must match).
    static func visits(of decisions: [ZoneDecision], store: UInt16) -> [Visit] {
        var moves: [String: (since: CaptureTime, ended: CaptureTime?, moves: [Visit.Move])] = [:]
        for d in decisions {
            let key = "\(d.beacon) \(d.since.nanoseconds)"
            var entry = moves[key] ?? (d.since, nil, [])
            if d.kind == .exit { entry.ended = d.at } else { entry.moves.append(Visit.Move(at: d.at, zone: d.zone, zoneName: d.zoneName)) }
            moves[key] = entry
        }
        return moves.map { key, value in
            Visit(store: store, visitor: String(key.split(separator: " ")[0]), since: value.since, ended: value.ended, moves: value.moves)
        }
    }

    /// What a history holds: visits, their segments, and the visits that ended.
    struct Held: Equatable, CustomStringConvertible {
        var visits = 0, segments = 0, ended = 0
        var description: String { "\(visits) visits, \(segments) segments, \(ended) ended" }
    }

    /// Stores the decisions in a new history in `directory` and reads it back: in this
    /// process, or (`process`) through a real `beacon-history` subscribed to a Mosquitto of
    /// its own, to which the decisions are published as the brain publishes them.
    static func kept(_ decisions: [ZoneDecision], config: FleetConfig, configText: String, window: (CaptureTime, CaptureTime),
                     directory: String, process: Bool) async throws -> [Visit] {
        try FileSystem.makeDirectories(directory)
        var fleet = config
        fleet.history.database = directory + "/history.sqlite"
        if !process {
            let reader = DecisionReader(config: fleet)
            let events = decisions.compactMap { d in
                try? reader.read(topic: fleet.topics.zoneEvents(of: d.beacon), payload: Array(d.json.utf8)).get()
            }
            let database = try HistoryDatabase(path: fleet.history.database)
            _ = try database.ingest(events, pseudonyms: Pseudonymizer(key: Array("history-score".utf8)))
            return try database.visits(store: nil, from: window.0, to: window.1)
        }
        guard let program = Programs.sibling("beacon-history") else {
            throw CommandFailure("beacon-history must be beside beaconctl (the same build)", status: .failure)
        }
        let broker = try await BenchBroker.start(in: directory)
        var history: RunningProgram?
        do {
            // The brain's config, pointed at this broker and this history.
            let configPath = directory + "/history-fleet.json"
            guard case .object(var o)? = try? JSONParser().parse(Array(configText.utf8)) else {
                throw CommandFailure("internal: fleet config", status: .failure)
            }
            o["broker"] = .object(["url": .string(broker.url)])
            o["history"] = .object(["database": .string(fleet.history.database)])
            try FileSystem.write(configPath, Array(JSONValue.object(o).jsonText.utf8))
            history = try RunningProgram(program, ["--config", configPath, "--log-level", "error"], name: "beacon-history",
                                       in: directory)
            let client = try MQTTClient(MQTTClientOptions(broker: try BrokerURL(parsing: broker.url),
                                                          clientID: "beaconctl-history-\(ProcessInfo.id)"))
            try client.start()
            defer { Task { await client.stop() } }
            // Its subscription is made once it has connected: until it holds the first
            // decision, that one is sent again.
            let first = decisions.sorted { $0.at < $1.at }
            // Done when it holds every visit, every segment and every end: an exit adds no
            // row, so counting rows alone can stop while the last exits are still on the way.
            let expected = Held(visits: Set(first.map { "\($0.beacon) \($0.since)" }).count,
                                segments: Set(first.filter { $0.kind != .exit }.map { "\($0.beacon) \($0.since) \($0.at) \($0.zone)" }).count,
                                ended: Set(first.filter { $0.kind == .exit }.map { "\($0.beacon) \($0.since)" }).count)
            var opened: HistoryDatabase?
            func counts() -> Held {
                if opened == nil, FileSystem.exists(fleet.history.database) {
                    opened = try? HistoryDatabase(path: fleet.history.database, readOnly: true)
                }
                guard let rows = try? opened?.counts(), let visits = try? opened?.visits(store: nil, from: window.0, to: window.1)
                else { return Held() }
                return Held(visits: rows.visits, segments: rows.segments, ended: visits.count { $0.ended != nil })
            }
            let deadline = WallClock.monotonic() + 60
            while counts().visits == 0 {
                guard WallClock.monotonic() < deadline, history?.poll() == nil else {
                    throw CommandFailure("beacon-history did not store a decision: \(history?.errors.suffix(2000) ?? "")",
                                         status: .failure)
                }
                // Not connected yet is what this loop waits out.
                if let d = first.first { try? client.publish(MQTTMessage(topic: fleet.topics.zoneEvents(of: d.beacon), text: d.json, qos: 1)) }
                try await Task.sleep(nanoseconds: 200_000_000)
            }
            for d in first { try client.publish(MQTTMessage(topic: fleet.topics.zoneEvents(of: d.beacon), text: d.json, qos: 1)) }
            while counts() != expected {
                guard WallClock.monotonic() < deadline + 120, history?.poll() == nil else {
                    throw CommandFailure("beacon-history holds \(counts()) of \(expected): "
                                         + (history?.errors.suffix(2000) ?? ""), status: .failure)
                }
                try await Task.sleep(nanoseconds: 50_000_000)
            }
            let visits = try opened!.visits(store: nil, from: window.0, to: window.1)
            await history?.stop()
            await broker.stop()
            return visits
        } catch {
            await history?.stop()
            await broker.stop()
            throw error
        }
    }
}

/// The history figures of a set of runs: per seed, and their distribution over the seeds.
struct HistoryReport {
    var results: [(seed: UInt64, accuracy: HistoryAccuracy)]

    var rows: [(name: String, key: String, values: [Double], places: Int)] {
        var out: [(String, String, [Double], Int)] = []
        for figure in HistoryAccuracy.figures {
            out.append((figure.name + " (truth)", figure.key + "Truth", results.map { figure.value($0.accuracy.truth) }, figure.places))
            let unit = figure.error == .relative ? " %" : ""
            out.append(("  history - truth" + unit, figure.key + "Error",
                        results.map { HistoryAccuracy.error(figure.error, figure.value($0.accuracy.kept), figure.value($0.accuracy.truth)) },
                        figure.error == .count ? 0 : 2))
        }
        out.append(("zone dwell median, worst zone - truth %", "zoneMedianError",
                    results.map { HistoryAccuracy.zoneErrors($0.accuracy.kept, $0.accuracy.truth).median }, 2))
        out.append(("zone dwell p90, worst zone - truth %", "zoneP90Error",
                    results.map { HistoryAccuracy.zoneErrors($0.accuracy.kept, $0.accuracy.truth).p90 }, 2))
        out.append(("history - decisions, largest", "againstDecisions", results.map(\.accuracy.keptAgainstDecided), 3))
        return out
    }

    var table: String {
        func pad(_ text: String, _ width: Int) -> String { text + String(repeating: " ", count: max(0, width - text.count)) }
        func left(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }
        var lines = ["", "history (counter = conversion target and queue zone, reached after "
                     + "\(decimal(HistoryAccuracy.options.minimumStay, places: 0)) s there) over \(results.count) seed\(results.count == 1 ? "" : "s")",
                     pad("", 40) + ["median", "min", "p10", "max"].map { left($0, 10) }.joined()]
        for row in rows {
            let s = Summary(row.values)
            lines.append(pad(row.name, 40) + [s.median, s.min, s.p10, s.max].map { left(decimal($0, places: row.places), 10) }.joined())
        }
        return lines.joined(separator: "\n")
    }

    var json: JSONValue {
        .object(JSONObject(rows.map { row in
            let s = Summary(row.values)
            return (key: row.key, value: .object([
                "seeds": .array(row.values.map { .number(rounded($0, 4)) }), "min": .number(rounded(s.min, 4)),
                "p10": .number(rounded(s.p10, 4)), "median": .number(rounded(s.median, 4)), "max": .number(rounded(s.max, 4)),
            ]))
        }))
    }
}

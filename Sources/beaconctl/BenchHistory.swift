import ArgumentParser
import BeaconKit
import CommandLineSupport
import History
import HistoryStore
import LiveClock
import SystemCalls

/// `beaconctl bench-history`: the history's speed (docs/PERFORMANCE.md, section "history").
struct BenchHistory: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-history",
        abstract: "Measure the history: ingest into SQLite beside a plain INSERT loop, and page queries on a year of a busy store.",
        discussion: """
        In one run, on one core (this process), in a temporary directory:

          1. ingest: --decisions decisions (enter, two zone changes, exit per visit; visitors
             coming back) stored by the history in transactions of --batch, beside SQLite's
             own floor: the same rows as plain INSERTs (prepared once, no keys, no indexes)
             in the same transactions. Decisions/s of each and their ratio; the history's
             rate must be at least 20,000/s.
          2. a year of one busy store: --days days of --per-day visits ingested, then each
             page's query (a day, a week, the year's busiest day) read and turned into the
             figures --runs times: median and worst ms (each must be under 100 ms).

        Use a release build: swift build -c release --product beaconctl.

        Example:
          beaconctl bench-history --json
        """)

    @Option(name: .long, help: "Decisions for the ingest rate.")
    var decisions = 200_000

    @Option(name: .long, help: "Decisions per transaction.")
    var batch = 1_000

    @Option(name: .long, help: "Days of the busy store.")
    var days = 365

    @Option(name: .long, help: "Visits a day in the busy store.")
    var perDay = 500

    @Option(name: .long, help: "Times each page query is run.")
    var runs = 20

    @Flag(name: .long, help: "Print one JSON object.")
    var json = false

    func run() throws {
        let directory = try FileSystem.temporaryDirectory(prefix: "beaconctl-bench-history")
        defer { try? FileSystem.removeTree(directory) }
        let start = Instant(iso8601: "2025-11-24T08:00:00.000Z")!
        let pseudonyms = Pseudonymizer(key: Array("bench-history".utf8))
        func say(_ text: String) { if !json { printLine(text) } }
        do {
            // 1. Ingest against the plain INSERT loop.
            let events = HistoryBenchmark.decisions(visits: decisions / 4, stores: 10, start: start)
            let plain = try HistoryBenchmark.plainInserts(events, path: directory + "/plain.sqlite", batch: batch)
            let history = try HistoryDatabase(path: directory + "/ingest.sqlite")
            let kept = try HistoryBenchmark.ingest(events, into: history, pseudonyms: pseudonyms, batch: batch)
            let again = try HistoryBenchmark.ingest(events, into: history, pseudonyms: pseudonyms, batch: batch)
            let rate = Double(events.count) / kept, plainRate = Double(events.count) / plain
            say("ingest, \(events.count) decisions in transactions of \(batch):")
            say("  plain INSERT loop      \(Int(plainRate)) decisions/s")
            say("  history (upserts)      \(Int(rate)) decisions/s  (\(decimal(rate / plainRate * 100, places: 1)) % of plain)")
            say("  history, all again     \(Int(Double(events.count) / again)) decisions/s (every one a duplicate)")

            // 2. A year of one busy store.
            // Open 14 hours a day.
            let year = HistoryBenchmark.decisions(visits: days * perDay, stores: 1, visitors: 20_000,
                                                  start: start, spacing: 14 * 3600 / Double(perDay), perDay: perDay)
            let busy = try HistoryDatabase(path: directory + "/year.sqlite")
            let loaded = try HistoryBenchmark.ingest(year, into: busy, pseudonyms: pseudonyms, batch: batch)
            say("a year: \(days * perDay) visits (\(year.count) decisions) loaded in \(decimal(loaded, places: 1)) s")
            let options = HistoryFigures.Options(counterZones: ["counter"], queueZones: ["queue"])
            let midnight = start - 8 * 3600
            let end = midnight + Double(days) * 86_400
            var pages: [(name: String, median: Double, worst: Double, visits: Int)] = []
            for (name, from, length) in [("a day", midnight + Double(days / 2) * 86_400, 86_400.0),
                                         ("a week", midnight + Double(days / 3) * 86_400, 7 * 86_400.0),
                                         ("the last day", end - 86_400, 86_400.0)] {
                var times: [Double] = []
                var count = 0
                for _ in 0..<runs {
                    let t0 = WallClock.monotonic()
                    let visits = try busy.visits(store: 100, from: from, to: from + length)
                    let figures = HistoryFigures(visits: visits, from: from, to: from + length, now: end, options: options)
                    times.append((WallClock.monotonic() - t0) * 1000)
                    count = figures.footfall
                }
                times.sort()
                pages.append((name, times[times.count / 2], times.last ?? 0, count))
                say("  \(name): \(count) visits, median \(decimal(times[times.count / 2], places: 1)) ms, worst \(decimal(times.last ?? 0, places: 1)) ms")
            }
            if json {
                printLine(JSONValue.object([
                    "ingest": .object(["decisions": .number(Double(events.count)), "batch": .number(Double(batch)),
                                       "plainPerSecond": .number(rounded(plainRate, 0)), "historyPerSecond": .number(rounded(rate, 0)),
                                       "duplicatesPerSecond": .number(rounded(Double(events.count) / again, 0))]),
                    "year": .object(["visits": .number(Double(days * perDay)), "loadSeconds": .number(rounded(loaded, 2)),
                                     "pages": .array(pages.map { p in .object(["page": .string(p.name), "visits": .number(Double(p.visits)),
                                                                               "medianMs": .number(rounded(p.median, 2)),
                                                                               "worstMs": .number(rounded(p.worst, 2))]) })]),
                ]).jsonText)
            }
        } catch {
            throw CommandFailure("\(error)", status: .failure)
        }
    }
}

import ArgumentParser
import BeaconKit
import CommandLineSupport
import Config
import History
import HistoryStore
import LiveClock
import SystemCalls

/// `beaconctl bench-history`: the history's speed (docs/PERFORMANCE.md, section "history").
struct BenchHistory: AsyncParsableCommand {
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

        With --postgres postgres://USER@HOST[:PORT]/DATABASE, the same on that PostgreSQL
        server (its password: BEACONBRIDGE_HISTORY_PASSWORD), each in a database of its
        own made and dropped here (the user needs CREATEDB):

          3. ingest beside PostgreSQL's floors on the same server in the same run: the
             plain INSERT loop (one INSERT per decision, one round trip each, in the same
             transactions) and the same rows as one array INSERT per transaction; the
             history's rate must be at least 50,000/s.
          4. a year of one busy store, as 2.
          5. a chain's day: --chain-stores stores of --chain-per-day visits each, read
             for the whole chain and turned into the chain's and every store's figures
             (what /analytics shows): under 1 s.
        The loaded databases are ANALYZEd first (what autovacuum does on a server in use).

        Use a release build: swift build -c release --product beaconctl.

        Examples:
          beaconctl bench-history --json
          beaconctl bench-history --postgres postgres://beaconbridge@127.0.0.1:5432/postgres
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

    @Option(name: .long, help: ArgumentHelp("Measure PostgreSQL too, on this server (postgres://USER@HOST[:PORT]/DATABASE).",
                                            valueName: "URL"))
    var postgres: String?

    @Option(name: .long, help: "Stores in the chain's day (PostgreSQL).")
    var chainStores = 1_000

    @Option(name: .long, help: "Visits a store in the chain's day (PostgreSQL).")
    var chainPerDay = 200

    @Flag(name: .long, help: "Print one JSON object.")
    var json = false

    func validate() throws {
        if let postgres, case .failure(let problem) = PostgresAddress.parse(postgres) {
            throw ValidationError("--postgres: \(problem.text)")
        }
    }

    struct Page {
        /// Wall-clock ms; CPU ms (this process's and, for PostgreSQL here, the server's) per run.
        var name: String, median: Double, worst: Double, cpu: Double, visits: Int
    }

    typealias Cost = HistoryBenchmark.Cost

    /// Decisions per second of wall clock and per CPU second (this process's and the server's).
    static func rates(_ count: Int, _ cost: Cost) -> (wall: Double, cpu: Double) {
        (Double(count) / cost.wall, Double(count) / max(cost.allCPU, 1e-9))
    }

    static func costJSON(_ count: Int, _ cost: Cost) -> JSONValue {
        let (wall, cpu) = rates(count, cost)
        return .object(["perSecond": .number(rounded(wall, 0)), "perCPUSecond": .number(rounded(cpu, 0)),
                        "seconds": .number(rounded(cost.wall, 3)), "cpuSeconds": .number(rounded(cost.cpu, 3)),
                        "serverCPUSeconds": cost.serverCPU.map { .number(rounded($0, 3)) } ?? .null])
    }

    static func pageText(_ p: Page) -> String {
        "\(p.name): \(p.visits) visits, median \(decimal(p.median, places: 1)) ms, worst \(decimal(p.worst, places: 1)) ms, "
            + "CPU \(decimal(p.cpu, places: 1)) ms a run"
    }

    /// `12345 decisions/s, 23456 per CPU second`.
    static func rateText(_ count: Int, _ cost: Cost) -> String {
        let (wall, cpu) = rates(count, cost)
        return "\(Int(wall)) decisions/s, \(Int(cpu)) per CPU second"
            + (cost.serverCPU.map { " (server \(decimal($0 / cost.allCPU * 100, places: 0)) % of it)" } ?? "")
    }

    /// Each page's query (a day, a week, the last day) on a year of one store, `runs` times.
    func pages(_ busy: any HistoryKeeping, start: CaptureTime) async throws -> [Page] {
        let options = HistoryFigures.Options(counterZones: ["counter"], queueZones: ["queue"])
        let midnight = start - 8 * 3600
        let end = midnight + Double(days) * 86_400
        var pages: [Page] = []
        for (name, from, length) in [("a day", midnight + Double(days / 2) * 86_400, 86_400.0),
                                     ("a week", midnight + Double(days / 3) * 86_400, 7 * 86_400.0),
                                     ("the last day", end - 86_400, 86_400.0)] {
            var times: [Double] = []
            var count = 0
            let server = try await HistoryBenchmark.serverProcess(of: busy)
            let all = Cost.start(server: server)
            for _ in 0..<runs {
                let t0 = WallClock.monotonic()
                let visits = try await busy.visits(store: 100, from: from, to: from + length)
                let figures = HistoryFigures(visits: visits, from: from, to: from + length, now: end, options: options)
                times.append((WallClock.monotonic() - t0) * 1000)
                count = figures.footfall
            }
            let cost = all.end()
            times.sort()
            pages.append(Page(name: name, median: times[times.count / 2], worst: times.last ?? 0,
                              cpu: cost.allCPU * 1000 / Double(runs), visits: count))
        }
        return pages
    }

    func run() async throws {
        let directory = try FileSystem.temporaryDirectory(prefix: "beaconctl-bench-history")
        defer { try? FileSystem.removeTree(directory) }
        let start = CaptureTime(iso8601: "2025-11-24T08:00:00.000Z")!
        let pseudonyms = Pseudonymizer(key: Array("bench-history".utf8))
        func say(_ text: String) { if !json { printLine(text) } }
        do {
            // 1. Ingest against the plain INSERT loop.
            let events = HistoryBenchmark.decisions(visits: decisions / 4, stores: 10, start: start)
            let plain = try HistoryBenchmark.plainInserts(events, path: directory + "/plain.sqlite", batch: batch)
            let history = try HistoryDatabase(path: directory + "/ingest.sqlite")
            let kept = try await HistoryBenchmark.ingest(events, into: history, pseudonyms: pseudonyms, batch: batch)
            let again = try await HistoryBenchmark.ingest(events, into: history, pseudonyms: pseudonyms, batch: batch)
            let n = events.count
            say("ingest, \(n) decisions in transactions of \(batch):")
            say("  plain INSERT loop      \(Self.rateText(n, plain))")
            say("  history (upserts)      \(Self.rateText(n, kept))")
            say("                         \(decimal(Self.rates(n, kept).wall / Self.rates(n, plain).wall, places: 2))× the plain loop's rate, "
                + "\(decimal(Self.rates(n, kept).cpu / Self.rates(n, plain).cpu, places: 2))× per CPU second")
            say("  history, all again     \(Self.rateText(n, again)) (every one a duplicate)")

            // 2. A year of one busy store.
            // Open 14 hours a day.
            let year = HistoryBenchmark.decisions(visits: days * perDay, stores: 1, visitors: 20_000,
                                                  start: start, spacing: 14 * 3600 / Double(perDay), perDay: perDay)
            let busy = try HistoryDatabase(path: directory + "/year.sqlite")
            let loaded = try await HistoryBenchmark.ingest(year, into: busy, pseudonyms: pseudonyms, batch: batch)
            say("a year: \(days * perDay) visits (\(year.count) decisions) loaded in \(decimal(loaded.wall, places: 1)) s: "
                + Self.rateText(year.count, loaded))
            let pages = try await pages(busy, start: start)
            for p in pages { say("  " + Self.pageText(p)) }
            func pagesJSON(_ pages: [Page]) -> JSONValue {
                .array(pages.map { p in .object(["page": .string(p.name), "visits": .number(Double(p.visits)),
                                                  "medianMs": .number(rounded(p.median, 2)), "worstMs": .number(rounded(p.worst, 2)),
                                                  "cpuMs": .number(rounded(p.cpu, 2))]) })
            }
            var postgresJSON: JSONValue = .null
            if let postgres, let address = try? PostgresAddress.parse(postgres).get() {
                postgresJSON = try await measurePostgres(address, events: events, year: year, start: start, pseudonyms: pseudonyms,
                                                         say: say, pagesJSON: pagesJSON)
            }
            if json {
                printLine(JSONValue.object([
                    "ingest": .object(["decisions": .number(Double(n)), "batch": .number(Double(batch)),
                                       "plain": Self.costJSON(n, plain), "history": Self.costJSON(n, kept),
                                       "duplicates": Self.costJSON(n, again)]),
                    "year": .object(["visits": .number(Double(days * perDay)), "load": Self.costJSON(year.count, loaded),
                                     "pages": pagesJSON(pages)]),
                    "postgres": postgresJSON,
                ]).jsonText)
            }
        } catch {
            throw CommandFailure("\(error)", status: .failure)
        }
    }

    /// Sections 3 to 5 on PostgreSQL.
    func measurePostgres(_ address: PostgresAddress, events: [HistoryEvent], year: [HistoryEvent], start: CaptureTime,
                         pseudonyms: Pseudonymizer, say: (String) -> Void,
                         pagesJSON: ([Page]) -> JSONValue) async throws -> JSONValue {
        let password = Environment.value("BEACONBRIDGE_HISTORY_PASSWORD")
        let scratch = HistoryBenchmark.PostgresScratch(address, password: password, prefix: "bench_history_\(ProcessInfo.id)")
        let names = ["plain", "arrays", "ingest", "year", "chain"]
        do {
            let plain = try await scratch.plainInserts(events, batch: batch, arrays: false, name: "plain")
            let arrays = try await scratch.plainInserts(events, batch: batch, arrays: true, name: "arrays")
            let history = try await PostgresHistory(try await scratch.create("ingest"), password: password)
            let kept = try await HistoryBenchmark.ingest(events, into: history, pseudonyms: pseudonyms, batch: batch)
            let again = try await HistoryBenchmark.ingest(events, into: history, pseudonyms: pseudonyms, batch: batch)
            await history.close()
            let n = events.count
            say("PostgreSQL \(address), ingest, \(n) decisions in transactions of \(batch) (CPU: this process's and the server's):")
            say("  plain INSERT loop      \(Self.rateText(n, plain))")
            say("  one array INSERT       \(Self.rateText(n, arrays))")
            say("  history (upserts)      \(Self.rateText(n, kept))")
            say("                         \(decimal(Self.rates(n, kept).wall / Self.rates(n, plain).wall, places: 2))× the INSERT loop's rate, "
                + "\(decimal(Self.rates(n, kept).wall / Self.rates(n, arrays).wall, places: 2))× the array INSERT's; per CPU second "
                + "\(decimal(Self.rates(n, kept).cpu / Self.rates(n, plain).cpu, places: 2))× and "
                + "\(decimal(Self.rates(n, kept).cpu / Self.rates(n, arrays).cpu, places: 2))×")
            say("  history, all again     \(Self.rateText(n, again)) (every one a duplicate)")

            let busy = try await PostgresHistory(try await scratch.create("year"), password: password)
            let loaded = try await HistoryBenchmark.ingest(year, into: busy, pseudonyms: pseudonyms, batch: batch)
            say("  a year: \(days * perDay) visits loaded in \(decimal(loaded.wall, places: 1)) s: " + Self.rateText(year.count, loaded))
            try await scratch.analyze("year")
            let pages = try await pages(busy, start: start)
            await busy.close()
            for p in pages { say("    " + Self.pageText(p)) }

            // A chain's day: every store open 14 hours.
            let chain = try await PostgresHistory(try await scratch.create("chain"), password: password)
            let day = HistoryBenchmark.decisions(visits: chainStores * chainPerDay, stores: chainStores, visitors: 5_000, start: start,
                                                 spacing: 14 * 3600 / Double(chainPerDay), perDay: chainPerDay)
            let chainLoaded = try await HistoryBenchmark.ingest(day, into: chain, pseudonyms: pseudonyms, batch: batch)
            try await scratch.analyze("chain")
            let options = HistoryFigures.Options(counterZones: ["counter"], queueZones: ["queue"])
            let midnight = start - 8 * 3600
            var times: [Double] = []
            var footfall = 0
            let chainRuns = max(3, runs / 4)
            let all = Cost.start(server: try await HistoryBenchmark.serverProcess(of: chain))
            for _ in 0..<chainRuns {
                let t0 = WallClock.monotonic()
                let visits = try await chain.visits(store: nil, from: midnight, to: midnight + 86_400)
                let whole = HistoryFigures.chain(visits: visits, from: midnight, to: midnight + 86_400, now: midnight + 86_400,
                                                 options: options)
                times.append((WallClock.monotonic() - t0) * 1000)
                footfall = whole.chain.footfall
            }
            let chainCPU = all.end().allCPU * 1000 / Double(chainRuns)
            await chain.close()
            times.sort()
            say("  a chain's day: \(chainStores) stores, \(footfall) visits (loaded in \(decimal(chainLoaded.wall, places: 1)) s): "
                + "median \(decimal(times[times.count / 2], places: 0)) ms, worst \(decimal(times.last ?? 0, places: 0)) ms, "
                + "CPU \(decimal(chainCPU, places: 0)) ms a run")
            await scratch.drop(names)
            return .object([
                "server": .string(address.description),
                "ingest": .object(["plain": Self.costJSON(n, plain), "arrays": Self.costJSON(n, arrays),
                                   "history": Self.costJSON(n, kept), "duplicates": Self.costJSON(n, again)]),
                "year": .object(["load": Self.costJSON(year.count, loaded), "pages": pagesJSON(pages)]),
                "chainDay": .object(["stores": .number(Double(chainStores)), "visits": .number(Double(footfall)),
                                     "medianMs": .number(rounded(times[times.count / 2], 1)), "worstMs": .number(rounded(times.last ?? 0, 1)),
                                     "cpuMs": .number(rounded(chainCPU, 1))]),
            ])
        } catch {
            await scratch.drop(names)
            throw error
        }
    }
}

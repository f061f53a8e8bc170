import BeaconKit
import Foundation
import TestSupport
import Testing

/// `beaconctl bench-history --postgres`, small, against a PostgreSQL of the test's own: every
/// section runs, answers in its JSON, and leaves no database behind. (The figures
/// themselves are in docs/PERFORMANCE.md, from full-size runs.)
@Suite("history: bench-history on SQLite and PostgreSQL")
struct HistoryBenchTests {
    @Test func everySectionRunsAndCleansUp() async throws {
        let directory = try TemporaryDirectory("bench-history")
        let server = try await PostgresServer.start(in: directory, settings: ["fsync=off"])
        let bench = try ChildProcess(Programs.built("beaconctl"), [
            "bench-history", "--decisions", "400", "--days", "3", "--per-day", "20", "--runs", "2",
            "--chain-stores", "5", "--chain-per-day", "4", "--postgres", server.url(), "--json",
        ], in: directory, name: "bench-history")
        let status = await bench.waitForExit(timeout: 300)
        #expect(status == 0, "\(bench.diagnostics)")
        guard case .object(let root)? = try? JSONParser().parse(Array(bench.stdout.utf8)),
              case .object(let postgres)? = root["postgres"],
              case .object(let ingest)? = postgres["ingest"], case .object(let chain)? = postgres["chainDay"],
              case .object(let year)? = postgres["year"], case .array(let pages)? = year["pages"] else {
            Issue.record("no PostgreSQL section: \(bench.stdout)")
            await server.stop()
            return
        }
        for key in ["plain", "arrays", "history", "duplicates"] {
            guard case .object(let cost)? = ingest[key], case .number(let rate)? = cost["perSecond"],
                  case .number(let perCPU)? = cost["perCPUSecond"] else { Issue.record("ingest.\(key) missing: \(ingest)"); continue }
            #expect(rate > 0 && perCPU > 0, "\(key)")
            // The server's own CPU time, read from /proc: it runs on this machine.
            if case .number(let server)? = cost["serverCPUSeconds"] { #expect(server >= 0) } else { Issue.record("\(key): no server CPU") }
        }
        #expect(chain["visits"] == .number(20) && chain["stores"] == .number(5), "\(chain)")
        #expect(pages.count == 3)
        // Its databases are dropped.
        let left = try await server.psql("SELECT count(*) FROM pg_database WHERE datname LIKE 'bench_history_%'")
        #expect(left.trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        await server.stop()
    }
}

import ArgumentParser
import BeaconKit
import Contract
import CommandLineSupport
import Config
import History
import HistoryStore
import LiveClock
import SystemCalls

/// The store's memory on the command line: `beaconctl report` and `beaconctl forget`.
struct HistoryOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The fleet config (its history section: the database, the key, the zones).",
                                            valueName: "FLEET.json"))
    var config: String

    @Option(name: .long, help: ArgumentHelp("Override the config's history.database (a SQLite file or postgres://USER@HOST[:PORT]/DATABASE).",
                                            valueName: "FILE|URL"))
    var database: String?

    func load() throws -> FleetConfig {
        var fleet = try ConfigLoading.load(config)
        if let database {
            fleet.history.database = database
            if let problem = fleet.history.databaseProblem { throw ValidationError("--database: \(problem)") }
        }
        guard fleet.history.postgres != nil || FileSystem.exists(fleet.history.database) else {
            throw CommandFailure("no history at \(fleet.history.database): is beacon-history running with this config?",
                                 status: .failure)
        }
        return fleet
    }
}

struct Report: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Footfall, dwell, conversion, queue time and occupancy from the history (beacon-history).",
        discussion: """
        Figures of the visits begun from --from up to (not including) --to, in the
        stores' clock (history.utcOffset). Dates are YYYY-MM-DD (the store's midnight)
        or ISO-8601 times; the default is today. Without --store: the chain (every
        store together), then each store.

          footfall      visits begun
          conversion    share of visits that reached a counter zone
                        (history.counterZones, default "counter")
          returning     visits by a visitor seen before (a pseudonym, docs/history.md)
          visit         enter to exit, median and p90 (finished visits)
          queue         time in history.queueZones, per visit that queued
          zones         time in each zone, per visit that went there
          hourly        footfall per hour, and the most people in at once

        --json prints one object: {"stores":[{"store",…figures}],"chain":{…}}
        (keys: docs/history.md); --csv one row per store and hour.

        Examples:
          beaconctl report --config fleet.json --store 100 --from 2026-11-21
          beaconctl report --config fleet.json --from 2026-11-16 --to 2026-11-23 --json
        """)

    @OptionGroup var options: HistoryOptions

    @Option(name: .long, help: ArgumentHelp("The store (major); default: every store and the chain.", valueName: "N"))
    var store: UInt16?

    @Option(name: .long, help: ArgumentHelp("First day or time (default: today).", valueName: "DATE"))
    var from: String?

    @Option(name: .long, help: ArgumentHelp("Day or time after the last (default: a day after --from).", valueName: "DATE"))
    var to: String?

    @Flag(name: .long, help: "One JSON object.")
    var json = false

    @Flag(name: .long, help: "CSV: store,hour,footfall,peakOccupancy.")
    var csv = false

    func validate() throws {
        if json && csv { throw ValidationError("--json and --csv: choose one") }
    }

    func run() async throws {
        let fleet = try options.load()
        let offset = fleet.history.utcOffsetMinutes
        // "Today" and open visits by the operator's clock, over decisions dated by capture
        // time: live, the gateways' clocks are the wall clock.
        let now = WallClock.now().asCaptureTime()
        let start = try from.map { try Self.time($0, offset: offset, option: "--from") } ?? Self.midnight(of: now, offset: offset)
        let end = try to.map { try Self.time($0, offset: offset, option: "--to") } ?? start + 86_400
        guard end > start else { throw ValidationError("--to must be after --from") }
        let database: any HistoryKeeping
        do { database = try await HistoryStores.open(fleet.history, readOnly: true) } catch {
            throw CommandFailure("\(error)", status: .failure)
        }
        let figureOptions = fleet.history.figureOptions
        var sections: [(label: String, store: UInt16?, figures: HistoryFigures)] = []
        do {
            let read = await Self.visits(database, store: store, from: start, to: end)
            await database.close()
            let visits = try read.get()
            let stores = store.map { [$0] } ?? Array(Set(visits.map(\.store))).sorted()
            if store == nil {
                sections.append(("chain (\(stores.count) store\(stores.count == 1 ? "" : "s"))", nil,
                                 HistoryFigures(visits: visits, from: start, to: end, now: now, options: figureOptions)))
            }
            for s in stores {
                let name = fleet.storeEntry(s)?.name.map { " (\($0))" } ?? ""
                sections.append(("store \(s)\(name)", s, HistoryFigures(visits: visits.filter { $0.store == s }, from: start,
                                                                        to: end, now: now, options: figureOptions)))
            }
        } catch {
            throw CommandFailure("\(error)", status: .failure)
        }
        if json {
            var stores: [JSONValue] = []
            var chain: JSONValue = .null
            for section in sections {
                guard case .object(var o) = section.figures.json else { continue }
                if let s = section.store {
                    o.members.insert((key: "store", value: .number(Double(s))), at: 0)
                    stores.append(.object(o))
                } else {
                    chain = .object(o)
                }
            }
            printLine(JSONValue.object(["stores": .array(stores), "chain": chain]).jsonText)
        } else if csv {
            printLine(HistoryFigures.csvHeader)
            for section in sections {
                for row in section.figures.csvRows(store: section.store.map(String.init) ?? "chain") { printLine(row) }
            }
        } else {
            printLine("from \(start.iso8601) to \(end.iso8601) (store clock UTC\(Self.offsetText(offset)))")
            for section in sections { printLine(Self.table(section.label, section.figures, offset: offset)) }
        }
    }

    /// The visits, or why not (the database is closed before either is used).
    static func visits(_ database: any HistoryKeeping, store: UInt16?, from: CaptureTime, to: CaptureTime) async -> Result<[Visit], HistoryStoreError> {
        do { return .success(try await database.visits(store: store, from: from, to: to)) } catch { return .failure(error) }
    }

    static func table(_ label: String, _ f: HistoryFigures, offset: Int) -> String {
        func percent(_ v: Double?) -> String { v.map { decimal($0 * 100, places: 1) + " %" } ?? "-" }
        func spread(_ d: HistoryFigures.Distribution) -> String {
            d.count == 0 ? "-" : "median \(humanDuration(d.median)), p90 \(humanDuration(d.p90)) (\(d.count))"
        }
        var lines = ["", label,
                     "  footfall     \(f.footfall)",
                     "  conversion   \(percent(f.conversion)) (\(f.reachedCounter) reached the counter)",
                     "  returning    \(f.returning)",
                     "  visit        \(spread(f.visitDuration))",
                     "  queue        \(spread(f.queueTime))"]
        for zone in f.zones {
            lines.append("  zone \(zone.zoneName == zone.zone ? zone.zone : "\(zone.zone) (\(zone.zoneName))"): \(spread(zone.dwell))")
        }
        let busy = f.hourly.filter { $0.visits > 0 }
        if !busy.isEmpty {
            lines.append("  hour (local)  visits  most in at once")
            for bucket in busy {
                let local = bucket.start + Double(offset * 60)
                let peak = f.occupancy.filter { $0.start >= bucket.start && $0.start < bucket.start + 3600 }.map(\.peak).max() ?? 0
                lines.append("  \(String(local.iso8601.prefix(16)).replacingT())  \(pad(bucket.visits, 6))  \(pad(peak, 15))")
            }
        }
        return lines.joined(separator: "\n")
    }

    static func pad(_ n: Int, _ width: Int) -> String {
        let text = String(n)
        return String(repeating: " ", count: max(0, width - text.count)) + text
    }

    static func offsetText(_ minutes: Int) -> String {
        let m = abs(minutes)
        return (minutes < 0 ? "-" : "+") + (m / 60 < 10 ? "0" : "") + "\(m / 60):" + (m % 60 < 10 ? "0" : "") + "\(m % 60)"
    }

    /// The store's midnight that began the day `t` is in.
    static func midnight(of t: CaptureTime, offset: Int) -> CaptureTime {
        let local = t.seconds + Double(offset * 60)
        return CaptureTime(seconds: (local / 86_400).rounded(.down) * 86_400 - Double(offset * 60))
    }

    /// `YYYY-MM-DD` (the store's midnight) or an ISO-8601 time.
    static func time(_ text: String, offset: Int, option: String) throws -> CaptureTime {
        if text.count == 10, let day = CaptureTime(iso8601: text + "T00:00:00Z") { return day - Double(offset * 60) }
        if let time = CaptureTime(iso8601: text) { return time }
        throw ValidationError("\(option) \"\(text)\" is not a date (YYYY-MM-DD) or an ISO-8601 time (2026-11-21T09:00:00Z)")
    }
}

private extension String {
    func replacingT() -> String { String(map { $0 == "T" ? " " : $0 }) }
}

struct Forget: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Erase every visit of one beacon from the history (a person's right to be forgotten).",
        discussion: """
        The history holds no beacon ids, only their pseudonyms (a keyed hash under
        history.keyFile): the beacon's pseudonym is computed with the same key and
        every visit, zone segment and the visitor itself are deleted. The days'
        figures kept beyond the retention hold no one's id and stay.
        Run it where beacon-history runs (it needs the key and the file), or
        anywhere with the key and PostgreSQL's password for a chain's history.

        --beacon MAJOR/MINOR, or eddystone/NAMESPACE/INSTANCE for an Eddystone-UID beacon.

        Example:
          beaconctl forget --config fleet.json --beacon 100/7
        """)

    @OptionGroup var options: HistoryOptions

    @Option(name: .long, help: ArgumentHelp("The beacon: MAJOR/MINOR or eddystone/NAMESPACE/INSTANCE.", valueName: "ID"))
    var beacon: String

    func run() async throws {
        let fleet = try options.load()
        guard let ref = BeaconRef(recordLevels: beacon) else {
            throw ValidationError("--beacon \"\(beacon)\" is not MAJOR/MINOR (e.g. 100/7) or eddystone/NAMESPACE/INSTANCE "
                                  + "(20 and 12 lower-case hex digits)")
        }
        do {
            let pseudonyms = Pseudonymizer(key: try Pseudonymizer.loadKey(at: fleet.history.resolvedKeyFile))
            let database = try await HistoryStores.open(fleet.history)
            let erased = try await database.forget(ref, pseudonyms: pseudonyms)
            await database.close()
            printLine("erased \(erased) visit\(erased == 1 ? "" : "s") of \(ref) from \(database.location)")
        } catch {
            throw CommandFailure("\(error)", status: .failure)
        }
    }
}

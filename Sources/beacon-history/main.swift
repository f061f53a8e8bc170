import ArgumentParser
import BeaconKit
import CommandLineSupport
import Config
import History
import HistoryStore
import LiveClock
import Logging
import ServiceLifecycle
import SystemCalls
import Telemetry

struct BeaconHistory: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "beacon-history",
        abstract: "Keep every visit the brain decides: the store's memory (footfall, dwell, conversion, queue time).",
        discussion: """
        Reads (QoS 1, a persistent session: the broker keeps what comes while
        beacon-history is down):
          beacons/<major>/<minor>/events           the brain's decisions:
          eddystone/<namespace>/<instance>/events  {"event":"enter"|"zone"|"exit",
                                                   "zone","zoneName","from"?,
                                                   "since","ts"} (capture times)

        Keeps, in one SQLite file (the config's history.database, or --database) or,
        for a chain, in PostgreSQL (history.database postgres://USER@HOST[:PORT]/DB,
        its password in history.passwordFile or BEACONBRIDGE_HISTORY_PASSWORD):
          visits     store, visitor, enter and exit capture times
          segments   each zone a visit passed through, from when
          daily      each day's figures, kept after its visits are erased
        The visitor is a pseudonym: a keyed hash (HMAC-SHA-256) of the beacon's id
        under the key in history.keyFile (default for SQLite: the database's path +
        ".key", created on first start, mode 0600; PostgreSQL needs it named). Names, profiles and photos are never
        read. Visits older than history.retentionDays (90) are erased hourly.

        Each decision is stored by its natural key (store, visitor, visit start;
        a segment by visit, time and zone): a redelivered, replayed or re-read
        decision is stored once. Malformed decisions and decisions about stores
        the config does not list are skipped and counted; a write that fails (a
        full disk, a read-only or locked file, PostgreSQL restarting or out of
        reach) is retried with back-off, keeping what waits.

        --metrics HOST:PORT serves, every 15 s, beaconbridge_history_footfall_today
        and beaconbridge_history_occupancy per store (label store), and the counters
        (stored, duplicates, write_failures, skipped by reason).

        Figures: beaconctl report --store N --from … --to …   (docs/history.md)
        Erasing one person: beaconctl forget --beacon MAJOR/MINOR

        Exit status: 0 after a clean shutdown (SIGTERM, SIGINT), 1 on a runtime
        failure, 2 for bad usage or a bad config.

        Example:
          beacon-history --config fleet.json --broker mqtt://localhost
        """)

    @Option(name: .long, help: ArgumentHelp("The fleet config (JSON).", valueName: "FLEET.json"))
    var config: String

    @Option(name: .long, help: ArgumentHelp("Override the config's broker: mqtt://[user@]host[:port] or mqtts://…; several hosts, comma-separated, for a cluster's nodes",
                                            valueName: "URL"))
    var broker: String?

    @Option(name: .long, help: ArgumentHelp("Override the config's history.database: a SQLite file, or postgres://USER@HOST[:PORT]/DATABASE.",
                                            valueName: "FILE|URL"))
    var database: String?

    @Option(name: .long, help: ArgumentHelp("The MQTT client id (default beacon-history); the broker keeps its session.",
                                            valueName: "ID"))
    var clientId: String = "beacon-history"

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: LogLevelOption = .info

    @Option(name: .long, help: ArgumentHelp(
        "Serve today's footfall, the occupancy per store and the counters as Prometheus metrics on http://HOST:PORT/metrics (off by default; docs/metrics.md).",
        valueName: "HOST:PORT"))
    var metrics: String?

    func validate() throws {
        if let metrics, case .failure(let error) = MetricsEndpoint.parse(address: metrics) {
            throw ValidationError("--metrics: \(error)")
        }
    }

    func run() async throws {
        bootstrapLogging(logLevel)
        var fleet = try ConfigLoading.load(config)
        try ConfigLoading.override(&fleet, broker: broker)
        if let database {
            fleet.history.database = database
            if let problem = fleet.history.databaseProblem { throw ValidationError("--database: \(problem)") }
        }
        let password = try ConfigLoading.password(for: fleet.broker)
        let logger = Logger(label: "beacon-history")
        for risk in fleet.broker.risks(hasPassword: password != nil) { logger.warning("\(risk)") }
        let store: any HistoryKeeping
        let pseudonyms: Pseudonymizer
        do {
            pseudonyms = Pseudonymizer(key: try Pseudonymizer.loadOrCreateKey(at: fleet.history.resolvedKeyFile))
            store = try await HistoryStores.open(fleet.history, logger: Logger(label: "beacon-history.postgres"))
        } catch {
            throw CommandFailure("\(error)", status: .failure)
        }
        var options = HistoryService.Options()
        options.clientID = clientId
        let service: HistoryService
        do {
            service = try HistoryService(config: fleet, password: password, database: store, pseudonyms: pseudonyms,
                                         logger: logger, options: options)
        } catch {
            throw CommandFailure("cannot set up the MQTT client: \(error)", status: .failure)
        }
        let telemetry = try MetricsSetup(address: metrics, label: ("history", clientId),
                                         info: [("program", "beacon-history"), ("version", HistoryService.version)], logger: logger)
        // At every scrape: the counters, and today's footfall and occupancy read from the database.
        telemetry.collect(history: {
            var figures = HistoryMetricFigures()
            let c = service.counters
            (figures.stored, figures.duplicates, figures.dropped, figures.writeFailures) = (c.stored, c.duplicates, c.dropped, c.writeFailures)
            for reason in HistorySkip.allCases { figures.skipped[reason.rawValue] = c.skipped[reason] ?? 0 }
            figures.connected = service.isConnected
            figures.stores = service.latestStoreFigures?.map {
                HistoryMetricFigures.Store(store: String($0.store), footfallToday: $0.footfallToday, occupancy: $0.occupancy)
            }
            return figures
        })
        do {
            try await runService(service, also: telemetry.services, logger: logger)
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }
}

await runMain(BeaconHistory.self)

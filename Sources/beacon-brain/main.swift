import ArgumentParser
import Brain
import BrainCore
import CommandLineSupport
import Logging
import ServiceLifecycle
import Telemetry
import Config

struct BeaconBrain: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "beacon-brain",
        abstract: "Decide who is where across a fleet of beacon gateways, and answer observers.",
        discussion: """
        Reads (every topic under the config's topicPrefix):
          beacons/<major>/<minor>                  sightings, from every gateway
          beacons/<major>/<minor>/presence/<gw>    each gateway's retained view
          gateways/<gw>/status                     "offline" (last will): drop
                                                   that gateway's views 3 s later
                                                   unless it is back (a broker
                                                   that stops sends every will)
          beacons/<major>/<minor>/observers/<id>   retained joins:
              {"state":"joined","profile":{"name","favorite","photo"}}
              (profile optional; photo a base64 JPEG of at most 20 KiB);
              an empty payload leaves
          observers/<id>/status                    "offline" (last will): end
                                                   every join of that observer
          fleet/config                             applied live when valid;
                                                   reported when not
          stores/<major>/bridge                    a store broker's bridge: "0"
                                                   holds that store's presence as
                                                   it was until "1" and its replay
                                                   (docs/fleet.md)
          brain/visits/#, brain/answered/#         its own records (restarts)

        Writes:
          beacons/<major>/<minor>/presence   retained: zone (the strongest
                                             smoothed signal, with hysteresis),
                                             every gateway, proximity, since;
                                             deleted when no gateway sees it
          beacons/<major>/<minor>/ad         retained standing offer
          observers/<id>/inbox               {"type":"ad"|"greeting"|
                                             "locationFix"|"error",...}: the ad
                                             on every join, rule actions, and
                                             errors for rejected joins
          stores/<store>/customers/<id>      retained greeter view, one customer
                                             each: name, favorite, photo topic
          stores/<store>/roster              retained summary: count and the 50
                                             latest arrivals, at most 1/s
          brain/status                       retained "online"; "offline" as
                                             last will and on shutdown
          brain/visits/<major>/<minor>       retained records of what was
          brain/answered/<major>/<minor>/<id>  answered, so a restarted brain
                                             answers nothing twice
          brain/health/<client id>           counters, retained, every 30 s
          brain/events                       reports on fleet/config and on
                                             rejected input (rate-limited)
          brain/sync/<client id>             a marker to itself: the retained
                                             state has been read
          and whatever the config's rules publish ("do": "publish").

        --stores 12,13 handles only the beacons of those stores (majors) and
        subscribes to their topics only, so several brains can split a fleet;
        each gets a client id of its own (beacon-brain-12-13, or --client-id).
        --shard NAME takes its stores from the config's brain.shards and keeps
        brain/shards/NAME/status (online; "offline" as its will): when another
        shard's brain dies, the next shard in the list stands in for it until it
        is back, rebuilding that shard's state from the retained messages
        (brain/shards/<other>/holder says who). docs/fleet.md.

        It logs in as user "brain" (--broker mqtts://NAME@host for another, e.g.
        one per shard); the password comes from BEACONBRIDGE_MQTT_PASSWORD,
        systemd's credential mqtt-password ($CREDENTIALS_DIRECTORY) or the
        config's passwordFile (beaconctl provision writes them). Connecting
        anonymously, in plaintext or with tls.insecure is warned about at start.
        Its records (brain/visits/…, brain/answered/…) are sealed with the key in
        systemd's credential brain-secret, or the file --record-key names
        (beaconctl provision writes it): a restarted brain trusts only records it
        sealed, so forged ones cannot make it run exit or leave rules. Without a
        key it warns and trusts whatever the broker holds under brain/.

        Exit status: 0 after a clean shutdown (SIGTERM, SIGINT), 1 on a runtime
        failure, 2 for bad usage or a bad config.

        Every payload's keys, the records and the counters: docs/brain.md.

        Example:
          beacon-brain --config fleet.json --broker mqtt://localhost --stores 100
        """)

    @Option(name: .long, help: ArgumentHelp("The fleet config (JSON).", valueName: "FLEET.json"))
    var config: String

    @Option(name: .long, help: ArgumentHelp("Override the config's broker: mqtt://[user@]host[:port] or mqtts://…; several hosts, comma-separated, for a cluster's nodes",
                                            valueName: "URL"))
    var broker: String?

    @Option(name: .long, help: ArgumentHelp("Handle only these stores (majors), comma-separated.", valueName: "12,13"))
    var stores: String?

    @Option(name: .long, help: ArgumentHelp(
        "Answer for this shard of the config's brain.shards, and stand in for a shard whose brain is gone.",
        valueName: "NAME"))
    var shard: String?

    @Option(name: .long, help: ArgumentHelp(
        "The MQTT client id (default beacon-brain, or beacon-brain-12-13 with --stores); unique per brain.",
        valueName: "ID"))
    var clientId: String?

    @Option(name: .long, help: ArgumentHelp(
        "The key that seals the brain's records (first line; default: the credential brain-secret).",
        valueName: "FILE"))
    var recordKey: String?

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: LogLevelOption = .info

    @Option(name: .long, help: ArgumentHelp("Serve Prometheus metrics on http://HOST:PORT/metrics (off by default; docs/metrics.md).",
                                            valueName: "HOST:PORT"))
    var metrics: String?

    func validate() throws {
        if let metrics, case .failure(let error) = MetricsEndpoint.parse(address: metrics) {
            throw ValidationError("--metrics: \(error)")
        }
        _ = try parseStores()
        if shard != nil && stores != nil { throw ValidationError("--shard takes its stores from the config: give --shard or --stores") }
        if let clientId, clientId.isEmpty || clientId.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value > 0x7E }) {
            throw ValidationError("--client-id \"\(clientId)\" must be printable ASCII without spaces")
        }
    }

    /// The record key: `--record-key FILE`, else the credential `brain-secret`.
    func readRecordKey() throws -> String? {
        guard let recordKey else { return try ConfigLoading.credential("brain-secret") }
        return try ConfigLoading.secret(file: recordKey, option: "--record-key")
    }

    func parseStores() throws -> Set<UInt16> {
        guard let stores else { return [] }
        var set: Set<UInt16> = []
        for part in stores.split(separator: ",", omittingEmptySubsequences: false) {
            let text = String(part.trimmingBlanks)
            guard let value = UInt16(text), String(value) == text else {
                throw ValidationError("--stores: \"\(text)\" is not a store number (0-65535); expected e.g. 12,13")
            }
            set.insert(value)
        }
        return set
    }

    func run() async throws {
        bootstrapLogging(logLevel)
        let storeSet = try parseStores()
        var fleet = try ConfigLoading.load(config)
        try ConfigLoading.override(&fleet, broker: broker)
        let password = try ConfigLoading.password(for: fleet.broker)
        let logger = Logger(label: "beacon-brain")
        for risk in fleet.broker.risks(hasPassword: password != nil) { logger.warning("\(risk)") }
        if let shard {
            guard fleet.brain.shards.contains(where: { $0.name == shard }) else {
                let known = fleet.brain.shards.map(\.name)
                throw CommandFailure("--shard \(shard): \(config) has no such shard in brain.shards"
                                     + (known.isEmpty ? " (it lists none)" : "; it has: \(known.joined(separator: ", "))"))
            }
        }
        var options = BrainService.Options(clientID: clientId ?? BrainService.defaultClientID(stores: storeSet))
        options.recordKey = try readRecordKey().map { Array($0.utf8) }
        options.proofSecrets = try ConfigLoading.proofSecrets(fleet)
        if options.recordKey == nil {
            logger.warning("no record key (--record-key or the credential brain-secret): the brain's records are not sealed, so whoever may write brain/# on this broker can forge them (beaconctl provision writes brain.secret)")
        }
        let telemetry = try MetricsSetup(address: metrics, label: ("brain", options.clientID),
                                         info: [("program", "beacon-brain"), ("version", BrainService.version)], logger: logger)
        let service: any Service
        let brains: @Sendable () -> [BrainService]
        do {
            if let shard {
                let supervisor = try ShardSupervisor(config: fleet, shard: shard, password: password, logger: logger,
                                                     options: ShardSupervisor.Options(brain: options))
                service = supervisor
                brains = { supervisor.brains }
            } else {
                let brain = try BrainService(config: fleet, stores: storeSet, password: password, logger: logger, options: options)
                service = brain
                brains = { [brain] }
            }
        } catch {
            throw CommandFailure("cannot set up the MQTT client: \(error)", status: .failure)
        }
        // At every scrape: the figures of this process's brains (a shard's brain and those it covers, summed).
        telemetry.collect(brain: { BrainFigures(brains()) })
        try await runService(service, also: telemetry.services, logger: logger)
    }
}

await runMain(BeaconBrain.self)


extension BrainFigures {
    init(_ brains: [BrainService]) {
        self.init()
        settled = !brains.isEmpty
        connected = !brains.isEmpty
        for brain in brains {
            let s = brain.statistics, c = s.counters
            received += c.received
            oversized += c.oversized
            for (input, count) in c.malformed { malformed[input.rawValue, default: 0] += count }
            joinsAccepted += c.joinsAccepted
            joinsRejected += c.joinsRejected
            rulesFired += c.rulesFired
            inboxMessages += c.inboxMessages
            published += s.published
            publishFailures += s.publishFailures
            beacons += s.beacons
            joins += s.joins
            settled = settled && s.settled
            connected = connected && s.connected
            for (store, zones) in brain.occupancy {
                for (zone, count) in zones { occupancy[Zone(store: store, zone: zone), default: 0] += count }
            }
        }
    }
}

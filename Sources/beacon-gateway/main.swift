import ArgumentParser
import BeaconKit
import Config
import CommandLineSupport
import Gateway
import GatewayCore
import HCI
import LiveClock
import SystemCalls
import Logging
import Telemetry
import Wire

struct BeaconGateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "beacon-gateway",
        abstract: "Scan BLE beacons through BlueZ and publish them to MQTT.",
        discussion: """
        Takes its own section of the fleet config (--id) and publishes:
          beacons/<major>/<minor>
              sightings (at most one per beacon per publishInterval, at once on a
              proximity change; every advert with "raw")
          beacons/<major>/<minor>/presence/<gateway>
              retained while the beacon is in range, deleted on exit
          gateways/<gateway>/status
              retained online/offline (offline is the last will)
          gateways/<gateway>/health
              every healthInterval seconds
        and obeys gateways/<gateway>/cmd ({"scan":"pause"|"resume"}, {"reload":true},
        {"advertise":{"uuid":…,"major":…,"minor":…,"power":-59,"intervalMs":100}} to advertise as an iBeacon
        from its own controller, {"advertise":true} for the config's beacon, {"advertise":false} to stop)
        and a retained fleet/config. A gateway whose config has "advertise" is a beacon while it scans.

        Sources: hci:0 (kernel adapter), h4:unix:/path, h4:tcp:host:port, h4:tty:/dev/ttyAMA0@115200,
        btsnoop:/path/capture.log (replay; --speed, --loop, --start-at: gateways replaying captures that
        begin at the same instant, as beaconctl simulate's do, with the same --start-at stay in step).

        Exit status: 0 after a clean shutdown (SIGTERM/SIGINT), 1 on a runtime failure, 2 for bad usage or config.

        Privileges: hci:N needs CAP_NET_RAW; bringing a down adapter up needs CAP_NET_ADMIN as well, which
        `--adapter-up` does on its own (the systemd unit runs it as root before every start).

        The broker: the gateway's store's broker when the config gives the store one (gateways[].store,
        stores[].broker: a chain's in-store broker, bridged to the centre), else the fleet's broker. It
        logs in as its id (user name GATEWAY, client id beacon-gateway-GATEWAY); the password comes from
        BEACONBRIDGE_MQTT_PASSWORD, systemd's credential mqtt-password ($CREDENTIALS_DIRECTORY) or that
        broker's passwordFile (beaconctl provision writes them). Connecting anonymously, in plaintext or
        with tls.insecure is warned about at start.

        Example:
          beacon-gateway --config deploy/fleet.example.json --id door \\
            --source btsnoop:/tmp/store/door.log --loop
        """)

    @Option(name: .long, help: ArgumentHelp("The fleet config (JSON).", valueName: "FLEET.json"))
    var config: String

    @Option(name: .long, help: ArgumentHelp("This gateway's id in the fleet config.", valueName: "GATEWAY"))
    var id: String

    @Option(name: .long, help: ArgumentHelp("Override the config's source.", valueName: "URI"))
    var source: String?

    @Option(name: .long, help: ArgumentHelp("Override the gateway's broker: mqtt://[user@]host[:port] or mqtts://…; several hosts, comma-separated, for a cluster's nodes",
                                            valueName: "URL"))
    var broker: String?

    @Option(name: .long, help: "Replay speed for btsnoop sources (0 = as fast as possible).")
    var speed: Double?

    @Flag(name: .long, help: "Replay a btsnoop source in a loop.")
    var loop = false

    @Option(name: .long, help: ArgumentHelp(
        "Replay: play the capture's first frame at this wall-clock time (ISO-8601 UTC), not at once.",
        valueName: "TIME"))
    var startAt: String?

    @Option(name: .long, help: ArgumentHelp(
        "Replay: the capture time that plays at --start-at (default: the capture's first frame). Gateways given "
        + "the same --start-at and --replay-origin replay captures that begin at different times on one timeline.",
        valueName: "TIME"))
    var replayOrigin: String?

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: LogLevelOption = .info

    @Option(name: .long, help: ArgumentHelp("Serve Prometheus metrics on http://HOST:PORT/metrics (off by default; docs/metrics.md).",
                                            valueName: "HOST:PORT"))
    var metrics: String?

    @Flag(name: .long, help: ArgumentHelp(
        "Bring this gateway's kernel adapter (hci:N) up if it is down, and exit: this needs CAP_NET_ADMIN, so the "
        + "systemd unit runs it as root (ExecStartPre=+) and the gateway itself keeps only CAP_NET_RAW. "
        + "Other sources: nothing to do."))
    var adapterUp = false

    func validate() throws {
        if let metrics, case .failure(let error) = MetricsEndpoint.parse(address: metrics) {
            throw ValidationError("--metrics: \(error)")
        }
    }

    func run() async throws {
        bootstrapLogging(logLevel)
        var fleet = try ConfigLoading.load(config)
        try ConfigLoading.override(&fleet, broker: broker, gateway: id)
        guard let gateway = fleet.gateway(id: id) else {
            let known = fleet.gateways.map(\.id)
            throw CommandFailure("\(config) has no gateway \"\(id)\"" +
                                 (known.isEmpty ? " (it lists none)" : "; it has: \(known.joined(separator: ", "))"))
        }
        var uri = gateway.source
        if let source {
            do { uri = try SourceURI(parsing: source) } catch { throw CommandFailure("--source: \(error.reason)") }
        }
        guard var uri else {
            throw CommandFailure("gateway \"\(id)\" has no source in \(config); pass --source URI")
        }
        if adapterUp {
            guard case .hci(let adapter) = uri else {
                print("gateway \(id): source \(uri) is no kernel adapter; nothing to bring up")
                return
            }
            do { try KernelHCISource.bringUp(adapter: adapter) } catch {
                throw CommandFailure("\(error)", status: .failure)
            }
            print("hci\(adapter) is up")
            return
        }
        if case .btsnoop(let path, let configuredSpeed, let configuredLoop) = uri {
            uri = .btsnoop(path: path, speed: speed ?? configuredSpeed, loop: loop || configuredLoop)
        } else if speed != nil || loop || startAt != nil || replayOrigin != nil {
            throw CommandFailure("--speed, --loop, --start-at and --replay-origin apply to btsnoop: sources only")
        }
        func instant<Kind>(_ text: String?, _ option: String) throws -> TimePoint<Kind>? {
            try text.map { text in
                guard let instant = TimePoint<Kind>(iso8601: text) else {
                    throw CommandFailure("\(option): \"\(text)\" is not an ISO-8601 UTC time such as 2026-11-21T09:00:00Z")
                }
                return instant
            }
        }
        let startsAt: WallTime? = try instant(startAt, "--start-at")
        let origin: CaptureTime? = try instant(replayOrigin, "--replay-origin")
        if origin != nil, startsAt == nil { throw CommandFailure("--replay-origin needs --start-at") }
        let password = try ConfigLoading.password(for: fleet.broker(forGateway: id))
        let logger = Logger(label: "beacon-gateway.\(id)")
        for risk in fleet.broker(forGateway: id).risks(hasPassword: password != nil) { logger.warning("\(risk)") }

        // A gateway that advertises its store's proof of presence reads the store's secret.
        var proof: PresenceProof?
        if let advertise = gateway.advertise, advertise.proof,
           let store = fleet.stores.first(where: { $0.major == advertise.beacon.major }), let settings = store.proof {
            let secret = try ConfigLoading.proofSecret(settings, store: store.major)
            proof = PresenceProof(secret: secret, slotSeconds: settings.slotSeconds)
        }
        let advertisingSource: any AdvertisingSource
        do {
            advertisingSource = try makeSource(uri, scan: gateway.scan, advertise: gateway.advertise?.at(WallClock.now(), proof: proof),
                                               replayStartsAt: startsAt, replayOrigin: origin)
        } catch {
            throw CommandFailure("source \(uri): \(error)")
        }
        let telemetry = try MetricsSetup(address: metrics, label: ("gateway", gateway.id),
                                         info: [("program", "beacon-gateway"), ("version", GatewayService.version),
                                                ("source", advertisingSource.name)], logger: logger)
        let service: GatewayService
        do {
            service = try GatewayService(config: fleet, gateway: gateway, source: advertisingSource,
                                         sourceHasOwnTime: uri.isReplay, password: password, configPath: config,
                                         logger: logger, proof: proof,
                                         brokerFromCommandLine: broker != nil)
        } catch {
            throw CommandFailure("cannot set up the MQTT client: \(error)", status: .failure)
        }
        telemetry.collect(gateway: {
            let s = service.statistics, engine = s.engine
            var figures = GatewayFigures()
            (figures.adverts, figures.decoded, figures.malformed) = (engine.decode.reports, engine.decode.beacons, engine.decode.malformed)
            (figures.dropped, figures.queueDepth, figures.tracked) = (engine.dropped, engine.queueDepth, engine.tracked)
            (figures.published, figures.connected) = (s.published, engine.connected)
            figures.sourceRunning = engine.sourceState == .running
            return figures
        })
        try await runService(service, also: telemetry.services, logger: logger)
    }
}

await runMain(BeaconGateway.self)

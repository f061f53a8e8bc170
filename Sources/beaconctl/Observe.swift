import ArgumentParser
import BeaconKit
import Contract
import Config
import BrainCore
import CommandLineSupport
import HCI
import Logging
import MQTT
import Synchronization
import SystemCalls
import Tracking
import UnixSignals

struct Observe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Be a customer's app: join a beacon (or range and join the nearest) and print what the brain sends.",
        discussion: """
        The reference observer client. It says online on observers/<ID>/status (last will: offline),
        joins by publishing a retained {"state":"joined","profile":{…}} on
        beacons/<major>/<minor>/observers/<ID>, and prints every message of observers/<ID>/inbox as
        one JSON line: the beacon's ad on joining, greetings, location fixes, an error when the
        brain rejects the join, or {"type":"left",…,"reason":…} when the brain ends it (the visit
        ended, or brain.joinMaxAge passed); with --major/--minor it then exits (0). Ctrl-C leaves cleanly: the join is deleted (the profile disappears
        from the broker) and the status turns offline.

        The profile is personal data: over MQTT 5 (the default; --mqtt-version 3.1.1 for a broker without
        it, and the default when the fleet's centre is a NATS cluster, which speaks 3.1.1 only) the join
        carries a message expiry of the fleet's brain.joinMaxAge (default 14400 s), so the broker drops
        it after that even if this app never leaves (docs/security.md, "Privacy"). Over 3.1.1 the brain
        deletes it at joinMaxAge; only while no brain runs does it outlive that.

        Ways to choose the beacon:
          --major M --minor m   join that beacon and stay until Ctrl-C (or --count).
          --namespace N --instance I
                                the same for an Eddystone-UID beacon (eddystone/<N>/<I>/observers/<ID>).
          --source URI          a radio of its own, as the phone of the original smart-iBeacon app:
                                it ranges the iBeacons it hears (as beaconctl range does; --uuid keeps
                                one UUID), joins the nearest one that reaches immediate, prints the
                                ad, and leaves once the ad is in (or when the beacon drops to far, is
                                gone, or no answer comes within --answer-timeout). With --stay it is
                                the storefront greeter's app: it stays joined after the ad while it
                                ranges the beacon, so the shop shows the profile the whole visit, and
                                leaves at far (--leave-at near|far|gone). A beacon it left is
                                joined again only after it has been far or gone: walk away and back.
                                A store beacon whose minor is the store's rotating proof of presence
                                (a gateway advertising with "proof": true) is joined as heard: the
                                join names the value, which tells the brain the phone is near
                                (docs/security.md, "Proof of presence").
                                Over and over, until Ctrl-C, --count, or the end of a replayed
                                capture. Joins and leaves are reported on stderr.
        Controllers that report no signal strength (RSSI 127: BlueZ's emulator) never give
        immediate; --join-on sighting joins on any sighting instead (the nearest heard first).

        The profile file is JSON: {"name":"Ana","favorite":"flat white"}; --photo adds a JPEG,
        re-encoded (libjpeg-turbo: lower quality, then half the size, and so on) when it is
        over the 20 KiB a join allows. The same with the Mosquitto clients:
          mosquitto_pub -t observers/ana/status -m online -r -q 1
          mosquitto_sub -t observers/ana/inbox &
          mosquitto_pub -V 5 -D publish message-expiry-interval 14400 \\
            -t beacons/100/1/observers/ana -r -q 1 \\
            -m '{"state":"joined","profile":{"name":"Ana","favorite":"flat white"}}'
          mosquitto_pub -t beacons/100/1/observers/ana -r -q 1 -n     # leave

        Examples:
          beaconctl observe --broker mqtt://broker.lan --client ana --major 100 \\
            --minor 1 --profile ana.json
          beaconctl observe --broker mqtt://broker.lan --client ana --source hci:0 \\
            --profile ana.json
          beaconctl observe --config fleet.json --client ana \\
            --source btsnoop:walk.log --speed 1

        Exit status: 0 after leaving (Ctrl-C, SIGTERM, --count reached or a replay's end), 1 when
        --timeout passes without a message or the broker or the radio cannot be reached, 2 for bad usage.
        """)

    @Option(name: .long, help: ArgumentHelp("mqtt://[user@]host[:port] or mqtts://…; several hosts, comma-separated, for a cluster's nodes", valueName: "URL"))
    var broker: String?

    @Option(name: .long, help: ArgumentHelp("Take the broker, TLS, credentials and topic prefix from a fleet config.",
                                            valueName: "FLEET.json"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("This observer's id (a topic level).", valueName: "ID"))
    var client: String

    @Option(name: .long, help: "The beacon's major (with --minor; or use --source).")
    var major: UInt16?

    @Option(name: .long, help: "The beacon's minor.")
    var minor: UInt16?

    @Option(name: .long, help: ArgumentHelp("An Eddystone-UID beacon's namespace (20 hex digits; with --instance).",
                                            valueName: "HEX"))
    var namespace: String?

    @Option(name: .long, help: ArgumentHelp("An Eddystone-UID beacon's instance (12 hex digits).", valueName: "HEX"))
    var instance: String?

    @Option(name: .long, help: ArgumentHelp("A radio of its own to range with: hci:N, h4:… or btsnoop:FILE.",
                                            valueName: "URI"))
    var source: String?

    @Option(name: .long, help: ArgumentHelp("With --source: only beacons with this proximity UUID.", valueName: "UUID"))
    var uuid: String?

    @Option(name: .long, help: ArgumentHelp("With --source: join on immediate (default) or on any sighting (controllers "
                                            + "without RSSI).", valueName: "immediate|sighting"),
            transform: { text in
                guard let trigger = AutoObserver.JoinTrigger(rawValue: text) else {
                    throw ValidationError("--join-on: \"\(text)\" is neither immediate nor sighting")
                }
                return trigger
            })
    var joinOn: AutoObserver.JoinTrigger = .immediate

    @Option(name: .long, help: ArgumentHelp("With --source: seconds to wait for the ad before leaving anyway.", valueName: "S"))
    var answerTimeout = 10.0

    @Flag(name: .long, help: ArgumentHelp("With --source: stay joined after the ad while the beacon is ranged (the "
                                          + "storefront greeter's app: the shop sees the profile the whole visit), "
                                          + "leaving at --leave-at."))
    var stay = false

    @Option(name: .long, help: ArgumentHelp("With --stay: leave at near (the greeter's code), far (its text, the default; "
                                            + "also unknown) or only when gone (controllers without RSSI).",
                                            valueName: "near|far|gone"),
            transform: { text in
                guard let at = AutoObserver.LeaveAt(rawValue: text) else {
                    throw ValidationError("--leave-at: \"\(text)\" is not near, far or gone")
                }
                return at
            })
    var leaveAt: AutoObserver.LeaveAt?

    @Option(name: .long, help: ArgumentHelp("With --source: seconds without a sighting after which a beacon is gone.",
                                            valueName: "S"))
    var exitTimeout = 10.0

    @Option(name: .long, help: "With --source: path-loss exponent n, 2.0 open space … 3.5 cluttered rooms.")
    var pathLoss = 2.0

    @Option(name: .long, help: "With a btsnoop: source: replay speed (0 = as fast as possible).")
    var speed: Double?

    @Option(name: .long, help: ArgumentHelp("A JSON profile: {\"name\",\"favorite\"}.", valueName: "FILE"))
    var profile: String?

    @Option(name: .long, help: ArgumentHelp("A JPEG to show the shop; over 20 KiB it is re-encoded smaller until it fits.", valueName: "FILE"))
    var photo: String?

    @Option(name: .long, help: "Leave and exit after this many inbox messages.")
    var count: Int?

    @Option(name: .long, help: "Give up (exit 1) after this many seconds without an inbox message.")
    var timeout: Double?

    @Option(name: .long, help: ArgumentHelp("MQTT 5 (default: the join carries a message expiry of brain.joinMaxAge) "
                                            + "or 3.1.1 (no expiry: only the brain deletes the join; the default "
                                            + "with centre.kind \"nats\").",
                                            valueName: "5|3.1.1"),
            transform: { text in
                guard let version = MQTTVersion(rawValue: text) else {
                    throw ValidationError("--mqtt-version: \"\(text)\" is neither 5 nor 3.1.1")
                }
                return version
            })
    var mqttVersion: MQTTVersion?

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: LogLevelOption = .warning

    func validate() throws {
        if let problem = Topics.problem(withSegment: client) {
            throw ValidationError("--client \"\(client)\" \(problem)")
        }
        if broker == nil && config == nil { throw ValidationError("give --broker URL (or --config FLEET.json)") }
        let numbers = major != nil || minor != nil
        let eddystone = namespace != nil || instance != nil
        switch (numbers, eddystone, source != nil) {
        case (true, false, false):
            guard major != nil, minor != nil else { throw ValidationError("--major and --minor go together") }
        case (false, true, false):
            guard namespace != nil, instance != nil else { throw ValidationError("--namespace and --instance go together") }
            if let namespace, EddystoneNamespace(hex: namespace.lowercased()) == nil {
                throw ValidationError("--namespace \"\(namespace)\" is not 20 hex digits")
            }
            if let instance, EddystoneInstance(hex: instance.lowercased()) == nil {
                throw ValidationError("--instance \"\(instance)\" is not 12 hex digits")
            }
        case (false, false, true): break
        case (_, _, true): throw ValidationError("--source ranges for the beacon to join: leave out the beacon's ids")
        case (false, false, false):
            throw ValidationError("give --major and --minor (or --namespace and --instance) of the beacon to join, "
                                  + "or --source URI (a radio to range with)")
        default: throw ValidationError("give either --major and --minor or --namespace and --instance")
        }
        if source == nil {
            for (option, given) in [("--uuid", uuid != nil), ("--speed", speed != nil)] where given {
                throw ValidationError("\(option) applies to --source only")
            }
        }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let timeout, timeout <= 0 { throw ValidationError("--timeout must be positive") }
        if !(answerTimeout > 0) { throw ValidationError("--answer-timeout must be positive") }
        if (stay || leaveAt != nil) && source == nil { throw ValidationError("--stay and --leave-at go with --source") }
        if leaveAt != nil && !stay { throw ValidationError("--leave-at goes with --stay") }
        if !(exitTimeout > 0) { throw ValidationError("--exit-timeout must be positive") }
        if !(1.0...6.0).contains(pathLoss) { throw ValidationError("--path-loss: \(pathLoss) is outside 1…6") }
        if let speed, !(speed >= 0) { throw ValidationError("--speed must not be negative") }
    }

    /// The beacon named by --major/--minor or --namespace/--instance.
    var beacon: BeaconRef? {
        if let major, let minor { return BeaconRef(major: major, minor: minor) }
        guard let namespace = namespace.flatMap({ EddystoneNamespace(hex: $0.lowercased()) }),
              let instance = instance.flatMap({ EddystoneInstance(hex: $0.lowercased()) }) else { return nil }
        return BeaconRef(namespace: namespace, instance: instance)
    }

    func join() throws -> JoinRequest {
        var profileValue: ObserverProfile?
        if let profile {
            let text: String
            do { text = try FileSystem.readText(profile) } catch { throw CommandFailure("--profile: \(error)") }
            let value: JSONValue
            do { value = try JSONParser(maxDepth: 4).parse(text) } catch { throw CommandFailure("--profile \(profile): \(error)") }
            do {
                profileValue = try JoinRequest(parsing: .object(["state": .string("joined"), "profile": value])).profile
            } catch {
                throw CommandFailure("--profile \(profile): \(error.reason)")
            }
        }
        if let photo {
            var bytes: [UInt8]
            do { bytes = try FileSystem.read(photo, limit: 1 << 20) } catch { throw CommandFailure("--photo: \(error)") }
            if bytes.count > JoinRequest.maxPhotoBytes {
                // As the greeter's app did: made smaller until it fits.
                let fitted: PhotoFit.Fitted
                do { fitted = try PhotoFit.fit(bytes) } catch {
                    throw CommandFailure("--photo \(photo): \(bytes.count) bytes, more than the \(JoinRequest.maxPhotoBytes) a join "
                                         + "allows, and cannot be made smaller: \(error)")
                }
                writeStandardError("--photo \(photo): \(bytes.count) bytes re-encoded to \(fitted.bytes.count) "
                           + "(\(fitted.width)x\(fitted.height), JPEG quality \(fitted.quality)) to fit the \(JoinRequest.maxPhotoBytes) a join allows\n")
                bytes = fitted.bytes
            }
            var withPhoto = profileValue ?? ObserverProfile()
            withPhoto.photo = bytes
            profileValue = withPhoto
        }
        let request = JoinRequest(profile: profileValue)
        // Check it the way the brain will, so a bad photo is reported here, not in the inbox.
        do { _ = try JoinRequest(parsing: Array(request.json.utf8)) } catch { throw CommandFailure(error.reason) }
        return request
    }

    func run() async throws {
        bootstrapLogging(logLevel)
        var fleet: FleetConfig
        if let config {
            fleet = try ConfigLoading.load(config)
        } else {
            fleet = try FleetConfig.parse(#"{}"#)
        }
        try ConfigLoading.override(&fleet, broker: broker)
        fleet.broker.mqttVersion = mqttVersion ?? (fleet.centre.kind == .nats ? .v311 : .v5)
        let request = try join()
        let radio = try source.map { try ObserverRadio(self, text: $0) }
        let password = try ConfigLoading.password(for: fleet.broker)
        ConfigLoading.warnAboutRisks(of: fleet.broker, hasPassword: password != nil)
        let session = try ObserverSession(fleet: fleet, client: client, request: request, password: password)
        let outcome: ExitStatus
        if let radio {
            outcome = await radio.run(session, count: count, timeout: timeout)
        } else if let beacon {
            session.setJoined(beacon)
            outcome = await session.run(count: count, timeout: timeout)
        } else {
            outcome = .usage
        }
        if outcome == .failure, let timeout {
            writeStandardError("no inbox message within \(timeout) s\n")
        }
        await session.finish()
        if outcome != .success { throw ExitCode(outcome.rawValue) }
    }
}

/// The observer's connection: its status with a last will, its join, its inbox.
final class ObserverSession: Sendable {
    let mqtt: MQTTClient
    let topics: Topics
    let client: String
    let request: JoinRequest
    let brokerURL: BrokerURL
    /// Seconds the broker keeps the retained join (MQTT 5): the brain's `joinMaxAge`.
    let joinExpiry: UInt32
    /// The beacon joined now, if any (republished on every reconnect).
    private let joined = Mutex<BeaconRef?>(nil)

    var statusTopic: String { topics.status(ofObserver: client) }
    var inboxTopic: String { topics.inbox(of: client) }

    init(fleet: FleetConfig, client: String, request: JoinRequest, password: String?) throws {
        topics = fleet.topics
        self.client = client
        self.request = request
        brokerURL = fleet.broker.url
        joinExpiry = UInt32(fleet.brain.joinMaxAge.rounded(.up))
        var options = MQTTClientOptions(fleet.broker, identity: client, clientID: client, password: password)
        options.will = MQTTMessage(topic: topics.status(ofObserver: client), text: "offline", qos: 1, retain: true)
        do { mqtt = try MQTTClient(options) } catch { throw CommandFailure("\(error)", status: .failure) }
        try? mqtt.subscribe([topics.inbox(of: client)], qos: 1)
        do { try mqtt.start() } catch { throw CommandFailure("\(error)", status: .failure) }
    }

    var current: BeaconRef? { joined.withLock { $0 } }

    /// Records the join without publishing it (it goes out once connected).
    func setJoined(_ beacon: BeaconRef?) { joined.withLock { $0 = beacon } }

    /// Joins `beacon`: a retained join with the profile (sent now, or on connecting).
    func join(_ beacon: BeaconRef) {
        setJoined(beacon)
        try? mqtt.publish(MQTTMessage(topic: topics.observer(client, of: beacon), text: request.json, qos: 1, retain: true,
                                      expiry: joinExpiry))
    }

    /// Leaves the beacon joined: its retained join, with the profile, is deleted.
    func leave() {
        guard let beacon = joined.withLock({ value in defer { value = nil }; return value }) else { return }
        try? mqtt.publish(MQTTMessage(topic: topics.observer(client, of: beacon), payload: [], qos: 1, retain: true))
    }

    /// Prints the inbox, says online (and joins again) on every connection, until `count`
    /// messages, `timeout` seconds without one, a stop signal, or one of `tasks` returns a status.
    /// When the brain ends the join (its inbox says `left`: the visit ended, the join grew
    /// too old) the join is gone: said on stderr, and with `exitWhenEnded` the run ends (0).
    func run(count: Int?, timeout: Double?, onInbox: @escaping @Sendable (MQTTMessage) -> Void = { _ in },
             exitWhenEnded: Bool = true, tasks: [@Sendable () async -> ExitStatus?] = []) async -> ExitStatus {
        await withTaskGroup(of: ExitStatus?.self) { group in
            group.addTask {
                var received = 0
                var announced = false
                for await event in self.mqtt.events {
                    switch event {
                    case .connected:
                        try? self.mqtt.publish(MQTTMessage(topic: self.statusTopic, text: "online", qos: 1, retain: true))
                        if let beacon = self.current { self.join(beacon) }
                        if !announced {
                            let what = self.current.map { "joined beacon \($0)" } ?? "online"
                            writeStandardError("\(what) as \(self.client) on \(self.brokerURL)\n")
                            announced = true
                        }
                    case .disconnected(let reason):
                        writeStandardError("broker: \(reason); retrying\n")
                    case .message(let message) where message.topic == self.inboxTopic:
                        printLine(message.text)
                        let ended = self.ended(by: message)
                        onInbox(message)
                        received += 1
                        if let count, received >= count { return .success }
                        if ended, exitWhenEnded { return .success }
                    case .message:
                        break
                    }
                }
                return nil
            }
            group.addTask {
                for await _ in await UnixSignalsSequence(trapping: .sigint, .sigterm) { return .success }
                return nil
            }
            if let timeout {
                group.addTask {
                    try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9))
                    return Task.isCancelled ? nil : .failure
                }
            }
            for task in tasks { group.addTask(operation: task) }
            var result = ExitStatus.failure
            for await status in group {
                if let status {
                    result = status
                    break
                }
            }
            group.cancelAll()
            return result
        }
    }

    /// Whether `message` says the brain ended the current join; then it is no longer joined.
    private func ended(by message: MQTTMessage) -> Bool {
        guard let value = try? JSONParser(maxDepth: 8).parse(message.payload),
              case .left(let beacon, let reason)? = try? InboxMessage(parsing: value),
              joined.withLock({ current in
                  guard current == beacon else { return false }
                  current = nil
                  return true
              }) else { return false }
        writeStandardError("the brain ended the join of beacon \(beacon): \(reason)\n")
        return true
    }

    /// Leaves: the join and its profile disappear from the broker, the status says offline.
    func finish() async {
        if mqtt.isConnected {
            let beacon = current
            leave()
            try? mqtt.publish(MQTTMessage(topic: statusTopic, text: "offline", qos: 1, retain: true))
            _ = await mqtt.waitUntilPublished(timeout: 3)
            if let beacon { writeStandardError("left beacon \(beacon)\n") }
        }
        await mqtt.stop(timeout: 2)
    }
}

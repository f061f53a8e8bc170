import ArgumentParser
import BeaconKit
import Config
import BrainCore
import CommandLineSupport
import MQTT
import SystemCalls
import UnixSignals

struct Observe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Join a beacon as an observer and print what the brain sends to your inbox.",
        discussion: """
        The reference observer client. It says online on observers/<ID>/status (last will: offline),
        joins by publishing a retained {"state":"joined","profile":{…}} on
        beacons/<major>/<minor>/observers/<ID>, and prints every message of observers/<ID>/inbox as
        one JSON line: the beacon's ad on joining, greetings, location fixes, or an error when the
        brain rejects the join. Ctrl-C leaves cleanly: the join is deleted (the profile disappears
        from the broker) and the status turns offline.

        The profile file is JSON: {"name":"Ana","favorite":"flat white"}; --photo adds a JPEG
        (at most 20 KiB). The same with the Mosquitto clients:
          mosquitto_pub -t observers/ana/status -m online -r -q 1
          mosquitto_sub -t observers/ana/inbox &
          mosquitto_pub -t beacons/100/1/observers/ana -r -q 1 \\
            -m '{"state":"joined","profile":{"name":"Ana","favorite":"flat white"}}'
          mosquitto_pub -t beacons/100/1/observers/ana -r -q 1 -n     # leave

        Exit status: 0 after leaving (Ctrl-C, SIGTERM or --count reached), 1 when --timeout passes
        without a message or the broker cannot be reached, 2 for bad usage.
        """)

    @Option(name: .long, help: ArgumentHelp("mqtt://[user@]host[:port] or mqtts://…", valueName: "URL"))
    var broker: String?

    @Option(name: .long, help: ArgumentHelp("Take the broker, TLS, credentials and topic prefix from a fleet config.",
                                            valueName: "FLEET.json"))
    var config: String?

    @Option(name: .long, help: ArgumentHelp("This observer's id (a topic level).", valueName: "ID"))
    var client: String

    @Option(name: .long, help: "The beacon's major.")
    var major: UInt16

    @Option(name: .long, help: "The beacon's minor.")
    var minor: UInt16

    @Option(name: .long, help: ArgumentHelp("A JSON profile: {\"name\",\"favorite\"}.", valueName: "FILE"))
    var profile: String?

    @Option(name: .long, help: ArgumentHelp("A JPEG to show the shop (at most 20 KiB).", valueName: "FILE"))
    var photo: String?

    @Option(name: .long, help: "Leave after this many inbox messages.")
    var count: Int?

    @Option(name: .long, help: "Give up (exit 1) after this many seconds without an inbox message.")
    var timeout: Double?

    func validate() throws {
        if let problem = Topics.problem(withSegment: client) {
            throw ValidationError("--client \"\(client)\" \(problem)")
        }
        if broker == nil && config == nil { throw ValidationError("give --broker URL (or --config FLEET.json)") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let timeout, timeout <= 0 { throw ValidationError("--timeout must be positive") }
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
            let bytes: [UInt8]
            do { bytes = try FileSystem.read(photo, limit: 1 << 20) } catch { throw CommandFailure("--photo: \(error)") }
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
        var fleet: FleetConfig
        if let config {
            fleet = try ConfigLoading.load(config)
        } else {
            fleet = try FleetConfig.parse(#"{}"#)
        }
        try ConfigLoading.override(&fleet, broker: broker)
        let request = try join()
        let topics = fleet.topics
        let beacon = BeaconID(uuid: BeaconUUID(high: 0, low: 0), major: major, minor: minor)
        let joinTopic = topics.observer(client, of: beacon)
        let statusTopic = topics.status(ofObserver: client)
        let inboxTopic = topics.inbox(of: client)

        let password = try ConfigLoading.password(for: fleet.broker)
        ConfigLoading.warnAboutRisks(of: fleet.broker, hasPassword: password != nil)
        var options = MQTTClientOptions(fleet.broker, identity: client, clientID: client, password: password)
        options.will = MQTTMessage(topic: statusTopic, text: "offline", qos: 1, retain: true)
        let mqtt: MQTTClient
        do { mqtt = try MQTTClient(options) } catch { throw CommandFailure("\(error)", status: .failure) }
        try? mqtt.subscribe([inboxTopic], qos: 1)
        do { try mqtt.start() } catch { throw CommandFailure("\(error)", status: .failure) }

        let (count, timeout, client, major, minor) = (count, timeout, client, major, minor)
        let brokerURL = fleet.broker.url
        let outcome: ExitStatus = await withTaskGroup(of: ExitStatus?.self) { group in
            group.addTask {
                var received = 0
                var announced = false
                for await event in mqtt.events {
                    switch event {
                    case .connected:
                        try? mqtt.publish(MQTTMessage(topic: statusTopic, text: "online", qos: 1, retain: true))
                        try? mqtt.publish(MQTTMessage(topic: joinTopic, text: request.json, qos: 1, retain: true))
                        if !announced {
                            writeStandardError("joined beacon \(major)/\(minor) as \(client) on \(brokerURL)\n")
                            announced = true
                        }
                    case .disconnected(let reason):
                        writeStandardError("broker: \(reason); retrying\n")
                    case .message(let message) where message.topic == inboxTopic:
                        printLine(message.text)
                        received += 1
                        if let count, received >= count { return .success }
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
        if outcome == .failure, let timeout {
            writeStandardError("no inbox message within \(timeout) s\n")
        }
        // Leave: the join and its profile disappear from the broker, the status says offline.
        if mqtt.isConnected {
            try? mqtt.publish(MQTTMessage(topic: joinTopic, payload: [], qos: 1, retain: true))
            try? mqtt.publish(MQTTMessage(topic: statusTopic, text: "offline", qos: 1, retain: true))
            _ = await mqtt.waitUntilPublished(timeout: 3)
            writeStandardError("left beacon \(major)/\(minor)\n")
        }
        await mqtt.stop(timeout: 2)
        if outcome != .success { throw ExitCode(outcome.rawValue) }
    }
}

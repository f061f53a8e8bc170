import ArgumentParser
import CommandLineSupport
import MQTT
import SystemCalls
import BeaconKit
import Contract
import Config

struct Config: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate or publish a fleet config.",
        subcommands: [Check.self, Push.self])

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate a fleet config and list every problem with its JSON path.",
            discussion: """
            Prints a one-line summary and exits 0 for a valid config; otherwise prints each problem as
              FLEET.json: gateways[2].uuids[0]: "xyz" is not a UUID
            on stderr and exits 2. Unknown keys are errors. A valid config may still get warnings
            on stderr, such as a rule's text using a value that may be missing when it fires:
              warning: FLEET.json: rules[1] ("barista").then[0].text: {customer}, {favorite} may have no value; ...
            (the brain skips such a message rather than send "Hello ! A  is on its way.").
            """)

        @Argument(help: ArgumentHelp("The fleet config.", valueName: "FLEET.json"))
        var path: String

        func run() throws {
            let config = try ConfigLoading.load(path)
            let sources = config.gateways.filter { $0.source == nil }.map(\.id)
            printLine("\(path): ok: \(config.gateways.count) gateway\(config.gateways.count == 1 ? "" : "s"), "
                      + "\(config.beacons.count) beacon\(config.beacons.count == 1 ? "" : "s"), "
                      + "\(config.stores.count) store\(config.stores.count == 1 ? "" : "s"), "
                      + "\(config.rules.count) rule\(config.rules.count == 1 ? "" : "s"); broker \(config.broker.url)")
            let bridged = config.bridgedStores.map(\.major)
            if !bridged.isEmpty {
                printLine("\(bridged.count) store broker\(bridged.count == 1 ? "" : "s") bridged to \(config.bridgeURL) "
                          + "(stores \(bridged.map(String.init).joined(separator: ", "))): beaconctl bridge \(path) --store N")
            }
            for note in config.rosterNotes { printLine(note) }
            for note in config.calibrationNotes { printLine(note) }
            for warning in config.templateWarnings + config.zoneWarnings {
                writeStandardError("warning: \(path): \(warning)\n")
            }
            if !sources.isEmpty {
                printLine("note: no source set for \(sources.joined(separator: ", ")) (pass --source to beacon-gateway)")
            }
            // Whether a password is found is known only where each part runs.
            for risk in config.broker.risks(hasPassword: nil) { writeStandardError("warning: \(risk)\n") }
        }
    }
}

extension Config {
    struct Push: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate a fleet config and publish it, retained, on fleet/config.",
            discussion: """
            Gateways and brains apply a valid config live and report on gateways/<id>/events and
            brain/events; an invalid one is never pushed (exit 2). Source and broker changes need a
            restart of the gateway, which its event says. Waits until the broker acknowledges.

            Example:
              beaconctl config push fleet.json --broker mqtts://operator@broker.store.lan
            """)

        @Argument(help: ArgumentHelp("The fleet config.", valueName: "FLEET.json"))
        var path: String

        @Option(name: .long, help: ArgumentHelp("The broker (default: the config's).", valueName: "URL"))
        var broker: String?

        func run() async throws {
            var config = try ConfigLoading.load(path)
            let text: String
            do { text = try FileSystem.readText(path) } catch { throw CommandFailure("cannot read \(path): \(error)") }
            try ConfigLoading.override(&config, broker: broker)
            let password = try ConfigLoading.password(for: config.broker)
            ConfigLoading.warnAboutRisks(of: config.broker, hasPassword: password != nil)
            let options = MQTTClientOptions(config.broker, identity: BrokerIdentity.operatorUser,
                                            clientID: "beaconctl-push-\(ProcessInfo.id)", password: password)
            let client: MQTTClient
            do {
                client = try MQTTClient(options)
                try client.start()
            } catch {
                throw CommandFailure("\(error)", status: .failure)
            }
            let topic = config.topics.fleetConfig
            let message = MQTTMessage(topic: topic, text: text, qos: 1, retain: true)
            let pushed = await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    for await event in client.events {
                        switch event {
                        case .connected:
                            guard (try? client.publish(message)) != nil else { return false }
                            return await client.waitUntilPublished(timeout: 5)
                        case .disconnected(let reason):
                            writeStandardError("broker: \(reason); retrying\n")
                        case .message:
                            break
                        }
                    }
                    return false
                }
                group.addTask {
                    try? await Task.sleep(nanoseconds: 15_000_000_000)
                    return false
                }
                let first = await group.next() ?? false
                group.cancelAll()
                return first
            }
            await client.stop()
            guard pushed else { throw CommandFailure("could not push to \(config.broker.url)", status: .failure) }
            printLine("pushed \(path) (\(text.utf8.count) bytes) to \(topic) on \(config.broker.url)")
        }
    }
}

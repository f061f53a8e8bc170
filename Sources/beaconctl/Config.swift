import ArgumentParser
import BeaconKit
import CommandLineSupport

struct Config: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate or publish a fleet config.",
        subcommands: [Check.self])

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate a fleet config and list every problem with its JSON path.",
            discussion: """
            Prints a one-line summary and exits 0 for a valid config; otherwise prints each problem as
              FLEET.json: gateways[2].uuids[0]: "xyz" is not a UUID
            on stderr and exits 2. Unknown keys are errors.
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
            if !sources.isEmpty {
                printLine("note: no source set for \(sources.joined(separator: ", ")) (pass --source to beacon-gateway)")
            }
        }
    }
}

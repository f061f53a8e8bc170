import ArgumentParser
import CommandLineSupport

struct BeaconCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "beaconctl",
        abstract: "The BeaconBridge operator's and developer's tool.",
        discussion: """
        Exit status: 0 success, 1 runtime failure, 2 bad usage or bad config.
        """,
        subcommands: [Decode.self, Config.self, Simulate.self, Score.self, Observe.self, Advertise.self, RangeCommand.self,
                      Bench.self, Bridge.self, Provision.self, Report.self, Forget.self, BenchHistory.self])
}

await runMain(BeaconCtl.self)

import ArgumentParser
import BeaconKit
import Config
import CommandLineSupport
import HCI
import Logging

struct Advertise: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Advertise as an iBeacon from a Bluetooth controller until stopped.",
        discussion: """
        Turns a controller into an iBeacon (non-connectable advertising, AD type 0xFF, Apple's
        company id 0x004C): on a kernel adapter (hci:N; needs CAP_NET_RAW and CAP_NET_ADMIN) the
        adapter is brought up if needed and not reset; on an H4 stream (h4:unix:, h4:tcp:,
        h4:tty:) the controller is reset first. Prints one line once advertising runs, then
        keeps advertising until SIGINT or SIGTERM (or --duration), and turns advertising off
        before it exits.

        BlueZ's emulator (btvirt) hands scanners one report per advertising enable rather than
        one per interval: --retrigger 1 re-enables advertising every second so that scanners on
        emulated controllers keep hearing the beacon. A real controller needs no retrigger.

        Examples:
          beaconctl advertise --source hci:0 \\
            --uuid E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 --major 1 --minor 2
          beaconctl advertise --source h4:unix:/tmp/bt-server-le --uuid … \\
            --major 1 --minor 2 --retrigger 1
        """)

    @Option(name: .long, help: ArgumentHelp("The controller: hci:N or h4:….", valueName: "URI"))
    var source: String

    @Option(name: .long, help: ArgumentHelp("Proximity UUID.", valueName: "UUID"))
    var uuid: String

    @Option(name: .long, help: "Major (0–65535).")
    var major: UInt16

    @Option(name: .long, help: "Minor (0–65535).")
    var minor: UInt16

    // `.unconditional`: `--power -59` is a value, not an option named -59.
    @Option(name: .long, parsing: .unconditional, help: "Measured power: the RSSI at 1 m, dBm (-127…20).")
    var power = -59

    @Option(name: .customLong("interval-ms"), help: "Advertising interval, ms (100…10240).")
    var intervalMs = 100

    @Option(name: .long, help: ArgumentHelp("Re-enable advertising every S seconds (for emulated controllers).",
                                            valueName: "S"))
    var retrigger: Double?

    @Option(name: .long, help: ArgumentHelp("Stop after S seconds.", valueName: "S"))
    var duration: Double?

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: LogLevelOption = .warning

    func run() async throws {
        bootstrapLogging(logLevel)
        let uri = try parseSource(source)
        if case .btsnoop = uri { throw CommandFailure("--source: a capture cannot advertise; use hci:N or h4:…") }
        let uuid = try parseUUID(uuid)
        guard (-127...20).contains(power) else { throw CommandFailure("--power: \(power) dBm is outside -127…20") }
        guard (100...10240).contains(intervalMs) else { throw CommandFailure("--interval-ms: \(intervalMs) is outside 100…10240") }
        if let retrigger, !(retrigger > 0) { throw CommandFailure("--retrigger: must be a positive number of seconds") }
        if let duration, !(duration >= 0) { throw CommandFailure("--duration: must not be negative") }

        let signals = await trapStopSignals()
        let beacon = IBeacon(uuid: uuid, major: major, minor: minor, txPower: Int8(power))
        let logger = Logger(label: "beaconctl.advertise")
        let advertiser: Advertiser
        do {
            advertiser = try await Advertiser.start(uri, beacon: beacon, intervalMs: intervalMs, retrigger: retrigger,
                                                    logger: logger)
        } catch {
            throw CommandFailure("\(error)", status: .failure)
        }
        printLine("advertising \(uuid) major \(major) minor \(minor) (\(power) dBm at 1 m) every \(intervalMs) ms "
                  + "from \(advertiser.address) on \(uri)")
        let duration = duration
        var failure: (any Error)?
        do {
            _ = try await runUntilSignal(signals) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        // wait() ends when the advertiser stops; cancellation stops it.
                        try await withTaskCancellationHandler {
                            try await advertiser.wait()
                        } onCancel: {
                            Task { await advertiser.stop() }
                        }
                    }
                    if let duration {
                        group.addTask { try await Task.sleep(nanoseconds: UInt64(duration * 1e9)) }
                    }
                    try await group.next()
                    group.cancelAll()
                }
            }
        } catch is CancellationError {
        } catch {
            failure = error
        }
        await advertiser.stop()
        if let failure { throw CommandFailure("advertising on \(uri) stopped: \(failure)", status: .failure) }
        printLine("stopped advertising on \(uri)")
    }
}

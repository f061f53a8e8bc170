import BeaconKit
import Wire
import Foundation
import Contract
import HCI
import TestSupport
import Testing
import Config

/// `beaconctl advertise`, `beaconctl range` and the gateway as an emitter, against
/// btvirt's emulated controllers over H4 and generated captures (the kernel path is
/// KernelPathTests).
@Suite("radios: beaconctl advertise and range, the gateway as a beacon")
struct RadioToolTests {
    static let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!

    @Test("beaconctl advertise is heard by a scanner, and turns advertising off on SIGINT")
    func advertiseUntilInterrupted() async throws {
        let dir = try TemporaryDirectory("beaconctl-advertise")
        let btvirt = try await BtvirtServer.start(in: dir)
        let scanner = try H4Source(.h4Unix(path: btvirt.lePath))
        let sightings = SightingLog()
        let scan = Task { try await scanner.run { sightings.take($0) } }
        #expect(await eventually { sightings.isScanning }, "the scanner never said it was running")

        let advertise = try startProgram("beaconctl", [
            "advertise", "--source", btvirt.sourceURI, "--uuid", Self.uuid.description,
            "--major", "4660", "--minor", "22136", "--power", "-61", "--interval-ms", "200", "--retrigger", "0.3",
        ], in: dir)
        let ready = await eventually(timeout: 10) { advertise.stdout.hasPrefix("advertising ") }
        try #require(ready, "\(advertise.diagnostics)")
        #expect(advertise.stdoutLines.first?.hasPrefix(
            "advertising \(Self.uuid) major 4660 minor 22136 (-61 dBm at 1 m) every 200 ms from ") == true)
        #expect(await eventually(timeout: 10) { sightings.beacons.count >= 3 }, "\(advertise.diagnostics)")
        #expect(sightings.beacons.first == IBeacon(uuid: Self.uuid, major: 4660, minor: 22136, txPower: -61))

        advertise.signal(SIGINT)
        #expect(await advertise.waitForExit(timeout: 10) == 0, "\(advertise.diagnostics)")
        #expect(advertise.stdoutLines.last == "stopped advertising on \(btvirt.sourceURI)")
        // Off means off: no report after the retrigger period (0.3 s) has passed several times.
        // Another advertiser, re-enabled every 0.3 s on its own controller, is the clock: the
        // emulator sends the stopped one's reports in order with its, and from its first
        // report on (after the stop was answered) through its fifth (>= 1.2 s) none may come.
        let marker = IBeacon(uuid: Self.uuid, major: 4660, minor: 1, txPower: -59)
        let clock = try await Advertiser.start(try SourceURI(parsing: btvirt.sourceURI), beacon: marker, retrigger: 0.3)
        #expect(await eventually(timeout: 30) { sightings.beacons.filter { $0 == marker }.count >= 5 }, "\(sightings.beacons)")
        let afterStop = sightings.beacons.drop { $0 != marker }
        #expect(!afterStop.contains { $0.minor == 22136 }, "reports after the stop: \(afterStop)")
        await clock.stop()
        scan.cancel()
        _ = try? await scan.value
        await btvirt.stop()
    }

    @Test("beaconctl advertise: bad arguments are usage errors", arguments: [
        (["--source", "btsnoop:/x.log"], "a capture cannot advertise"),
        (["--source", "hci:0", "--uuid", "nope"], "--uuid: \"nope\" is not a UUID"),
        (["--source", "hci:0", "--power", "40"], "--power: 40 dBm is outside -127…20"),
        (["--source", "hci:0", "--interval-ms", "20"], "--interval-ms: 20 is outside 100…10240"),
        (["--source", "tcp:1"], "--source:"),
    ])
    func advertiseUsage(arguments: [String], message: String) async throws {
        let dir = try TemporaryDirectory("beaconctl-advertise-usage")
        var all = ["advertise", "--uuid", Self.uuid.description, "--major", "1", "--minor", "2"]
        all += arguments
        let tool = try startProgram("beaconctl", all, in: dir)
        #expect(await tool.waitForExit(timeout: 10) == 2)
        #expect(tool.stderr.contains(message), "\(tool.diagnostics)")
    }

    @Test("beaconctl range on an emulated controller: plain lines, and no signal strength said so")
    func rangeOnEmulator() async throws {
        let dir = try TemporaryDirectory("beaconctl-range-btvirt")
        let btvirt = try await BtvirtServer.start(in: dir)
        let advertiser = try await Advertiser.start(.h4Unix(path: btvirt.lePath),
                                                    beacon: IBeacon(uuid: Self.uuid, major: 1, minor: 2, txPower: -59),
                                                    retrigger: 0.3)
        let range = try startProgram("beaconctl", ["range", "--source", btvirt.sourceURI, "--uuid", Self.uuid.description],
                                     in: dir)
        let heard = "  \(Self.uuid) major 1 minor 2  rssi n/a (the controller reports no signal strength)  distance n/a  unknown  ?"
        // On a loaded machine the emulated link can stall for longer than the exit timeout:
        // then a `gone` line comes between, which is right, so wait for two heard lines.
        #expect(await eventually(timeout: 30) { range.stdoutLines.filter { $0.dropFirst(8).hasPrefix(heard) }.count >= 2 },
                "\(range.diagnostics)")
        range.signal(SIGINT)
        #expect(await range.waitForExit(timeout: 10) == 0, "\(range.diagnostics)")
        let lines = range.stdoutLines
        #expect(!lines.isEmpty)
        for line in lines {
            // hh:mm:ss, then the fixed fields.
            let fields = line.dropFirst(8)
            #expect(fields.hasPrefix(heard) || fields.hasPrefix("  \(Self.uuid) major 1 minor 2  gone (not heard for "),
                    "\(line)")
            #expect(!line.contains("\u{1B}"), "no colours when stdout is no terminal")
        }
        #expect(range.stderr.contains("running: scanning (passive)"))
        await advertiser.stop()
        await btvirt.stop()
    }

    @Test("beaconctl range on a capture with known RSSI: the numbers, the words and the last line")
    func rangeOnCapture() async throws {
        let dir = try TemporaryDirectory("beaconctl-range-capture")
        let start = CaptureTime(iso8601: "2026-11-21T10:00:00.000Z")!
        var writer = BtsnoopWriter(datalink: .h4)
        // A customer walks up to the counter: -79 dBm (10 m with n = 2, P1m -59) to -40
        // dBm, four advertisements a second, then leaves; another UUID is filtered out.
        let steps: [Int8] = [-79, -79, -79, -79, -75, -75, -75, -75, -70, -70, -70, -70, -62, -62, -62, -62,
                             -40, -40, -40, -40, -40, -40, -40, -40]
        for (i, rssi) in steps.enumerated() {
            let time = start + 0.1 + Double(i) * 0.25
            writer.appendEvent(advertisingEvent(IBeacon(uuid: Self.uuid, major: 7, minor: 1, txPower: -59),
                                                address: 0xD0_00_00_00_00_01, rssi: rssi), at: time)
            writer.appendEvent(advertisingEvent(IBeacon(uuid: BeaconUUID("B9407F30-F5F8-466E-AFF9-25556B57FE6D")!,
                                                        major: 7, minor: 2, txPower: -59),
                                                address: 0xD0_00_00_00_00_02, rssi: -50), at: time)
        }
        let capture = try dir.write("walk.log", bytes: writer.bytes)
        let range = try startProgram("beaconctl", ["range", "--source", "btsnoop:\(capture)", "--speed", "0",
                                                   "--uuid", Self.uuid.description, "--exit-timeout", "3"], in: dir)
        #expect(await range.waitForExit(timeout: 20) == 0, "\(range.diagnostics)")
        let lines = range.stdoutLines
        let prefix = "\(Self.uuid) major 7 minor 1  "
        #expect(lines.allSatisfy { $0.dropFirst(10).hasPrefix(prefix) }, "\(lines)")
        #expect(lines.first?.hasPrefix("10:00:01  ") == true, "\(lines)")
        let words = lines.map { $0.split(separator: " ").last.map(String.init) ?? "" }
        #expect(Array(words.prefix(5)) == ["Freezing", "Warmer", "Warmer", "Warmer", "HOT!"], "\(lines)")
        #expect(lines.first?.contains("rssi -79 dBm  smoothed -79.0 dBm  ~10.00 m  far  Freezing") == true, "\(lines)")
        #expect(lines.last?.hasSuffix("gone (not heard for 3 s)") == true, "\(lines)")
        #expect(!lines.contains { $0.contains("minor 2") })

        // On a terminal (util-linux `script` gives it one): redrawn in place, in colour.
        if let script = Programs.system("script") {
            let command = "\(Programs.built("beaconctl")) range --source btsnoop:\(capture) --speed 0 --exit-timeout 3"
            let tty = try ChildProcess(script, ["-qc", command, "/dev/null"], in: dir, name: "script")
            #expect(await tty.waitForExit(timeout: 20) == 0, "\(tty.diagnostics)")
            #expect(tty.stdout.contains("\u{1B}[H\u{1B}[2J\u{1B}[1mbeaconctl range\u{1B}[0m"), "\(tty.diagnostics)")
            #expect(tty.stdout.contains("\u{1B}[1;34m\(Self.uuid) major 7 minor 1  rssi -79 dBm"), "Freezing in blue")
            #expect(tty.stdout.contains("immediate  HOT!\u{1B}[0m"), "\(tty.diagnostics)")
        }
    }

    @Test("the gateway advertises from its config while it scans, on command (replaced, stopped, bad ones rejected), and from a new config")
    func gatewayAsBeacon() async throws {
        let dir = try TemporaryDirectory("gateway-beacon")
        let broker = try await MosquittoBroker.start(in: dir)
        let btvirt = try await BtvirtServer.start(in: dir)
        // A scanner that is already scanning hears one report per advertising enable.
        let scanner = try H4Source(.h4Unix(path: btvirt.lePath))
        let sightings = SightingLog()
        let scan = Task { try await scanner.run { sightings.take($0) } }
        #expect(await eventually { sightings.isScanning }, "the scanner never said it was running")

        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "till", "source": "\#(btvirt.sourceURI)", "advertise": {"uuid": "\#(Self.uuid)", "major": 100, "minor": 900, "power": -60}}"#,
        ])
        let subscriber = try await MosquittoSubscriber.start(broker: broker, filters: ["gateways/till/#"], in: dir)
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "till"], in: dir)
        #expect(await subscriber.waitFor(topic: "gateways/till/status", text: "online", timeout: 15) != nil)
        #expect(await eventually(timeout: 10) { sightings.beacons.contains { $0.minor == 900 } }, "\(gateway.diagnostics)")
        #expect(sightings.beacons.first { $0.minor == 900 } == IBeacon(uuid: Self.uuid, major: 100, minor: 900, txPower: -60))

        func send(_ payload: String) async throws {
            let pub = try ChildProcess(Programs.system("mosquitto_pub")!, [
                "-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-t", "gateways/till/cmd", "-m", payload,
            ], in: dir)
            #expect(await pub.waitForExit(timeout: 5) == 0)
        }
        // The gateway's answers to `advertise`, read as Contract's `CommandReply`.
        func replies() -> [CommandReply] {
            subscriber.records.compactMap { record in
                guard record.topic == "gateways/till/events", case .command(let reply)? = record.gatewayEvent,
                      reply.command == "advertise" else { return nil }
                return reply
            }
        }
        func reply(_ index: Int) async -> CommandReply? {
            _ = await eventually(timeout: 10) { replies().count > index }
            return replies().dropFirst(index).first
        }

        try await send(#"{"advertise": {"uuid": "\#(Self.uuid)", "major": 100, "minor": 901}}"#)
        let replaced = await reply(0)
        #expect(replaced?.status == .ok, "\(subscriber.records)")
        #expect(replaced?.detail == "advertising \(Self.uuid) major 100 minor 901, -59 dBm at 1 m, every 100 ms")
        #expect(await eventually(timeout: 10) { sightings.beacons.contains { $0.minor == 901 } })

        try await send(#"{"advertise": false}"#)
        #expect(await reply(1)?.detail == "advertising stopped")

        try await send(#"{"advertise": {"uuid": "nope", "major": 1}}"#)
        let bad = await reply(2)
        #expect(bad?.status == .rejected)
        #expect(bad?.detail?.contains("advertise.uuid: \"nope\" is not a UUID") == true, "\(String(describing: bad))")
        #expect(bad?.detail?.contains("advertise.minor") == true)

        try await send(#"{"advertise": true}"#)
        #expect(await reply(3)?.detail == "advertising \(Self.uuid) major 100 minor 900, -60 dBm at 1 m, every 100 ms")

        // A new fleet config that changes this gateway's advertise applies at once.
        let pushed = try ChildProcess(Programs.system("mosquitto_pub")!, [
            "-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-r", "-t", "fleet/config", "-m",
            #"{"broker": {"url": "\#(broker.url)"}, "gateways": [{"id": "till", "source": "\#(btvirt.sourceURI)", "advertise": {"uuid": "\#(Self.uuid)", "major": 100, "minor": 902}}]}"#,
        ], in: dir)
        #expect(await pushed.waitForExit(timeout: 5) == 0)
        #expect(await eventually(timeout: 10) { sightings.beacons.contains { $0.minor == 902 } }, "\(gateway.diagnostics)")

        #expect(gateway.isRunning)
        #expect(await gateway.stop() == 0, "\(gateway.diagnostics)")
        scan.cancel()
        _ = try? await scan.value
        await subscriber.stop()
        await btvirt.stop()
        await broker.stop()
    }
}

/// iBeacons a test's own scanner heard, in order.
final class SightingLog: @unchecked Sendable {
    private let lock = NSLock()
    private var heard: [IBeacon] = []

    private var running = false

    /// What the scanner delivers: its frames' beacons, and whether it has said it is running.
    func take(_ output: SourceOutput) {
        switch output {
        case .frame(let frame): add(frame)
        case .state(.running, _): lock.withLock { running = true }
        default: break
        }
    }

    /// The scanner has said `.running`: its controller scans, so reports from now on reach it.
    var isScanning: Bool { lock.withLock { running } }

    func add(_ frame: HCIFrame) {
        var decoder = AdvertisementDecoder()
        var found: [IBeacon] = []
        frame.event.withUnsafeBytes { raw in
            decoder.decodeBeacons(event: raw) { _, beacon in
                if case .iBeacon(let b) = beacon { found.append(b) }
            }
        }
        lock.withLock { heard += found }
    }

    var beacons: [IBeacon] { lock.withLock { heard } }
}

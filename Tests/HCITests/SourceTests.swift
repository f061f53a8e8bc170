import BeaconKit
import Wire
import Config
import Foundation
import HCI
import SystemCalls
import TestSupport
import Testing

/// What the emulator cannot show: a controller that sends line noise or refuses a
/// command (a fake one on a Unix socket), and a kernel without Bluetooth sockets.
@Suite("HCI sources: init sequence, bad streams, errors", .capturingLogs)
struct SourceTests {
    @Test("an H4 source resets and configures its controller, one checked command at a time, and restores it")
    func initSequence() async throws {
        let directory = try TemporaryDirectory("hci-init")
        let fake = try FakeController(path: directory.file("fake.sock"))
        let scan = ScanConfig(active: false, intervalMs: 100, windowMs: 50)
        let scanner = SourceRecorder.start(try H4Source(fake.uri, scan: scan))
        #expect(await scanner.wait { $0.count(.running) == 1 }, "\(scanner.summary)")
        #expect(scanner.states.last?.detail == "scanning (passive) on \(fake.uri) (BD_ADDR 11:22:33:44:55:66)")
        #expect(await scanner.cancel() == nil)
        await fake.stop()

        let expected: [(HCIOpcode, [UInt8])] = [
            (.reset, []),
            (.setEventMask, HCICommand.setEventMask.parameters),
            (.leSetEventMask, HCICommand.leSetEventMask.parameters),
            (.readBDAddr, []),
            (.leSetScanEnable, [0x00, 0x00]),
            // Passive, interval 160 × 0.625 ms, window 80 × 0.625 ms, public address, accept all.
            (.leSetScanParameters, [0x00, 0xA0, 0x00, 0x50, 0x00, 0x00, 0x00]),
            // Enable, duplicates not filtered: every advertisement counts for RSSI.
            (.leSetScanEnable, [0x01, 0x00]),
            (.leSetScanEnable, [0x00, 0x00]),
        ]
        let sent = fake.commands
        #expect(sent.map(\.opcode) == expected.map(\.0.rawValue))
        #expect(sent.map(\.parameters) == expected.map(\.1))
    }

    @Test("line noise is skipped and counted; the advertising report after it is delivered",
          arguments: [1, 2, 3] as [UInt64])
    func lineNoise(seed: UInt64) async throws {
        let directory = try TemporaryDirectory("hci-noise")
        let report = [H4PacketType.event.rawValue] + HCIEventBuilder.legacyReport([
            .init(address: BluetoothAddress("C0:FF:EE:00:00:01")!, data: AdvertisingData.iBeacon(testBeacon), rssi: -61),
        ])
        let fake = try FakeController(path: directory.file("fake.sock")) { client, stop in
            var random = SeededBytes(state: seed)
            guard (try? sendAll(client, random.bytes(8192))) != nil else { return }
            // Repeated, as a beacon would be: a garbage header may swallow the first ones
            // until the source gives up on the packet it announced.
            while !stop.isSet {
                usleep(200_000)
                guard (try? sendAll(client, report)) != nil else { return }
            }
        }
        let source = try H4Source(fake.uri)
        let scanner = SourceRecorder.start(source)
        #expect(await scanner.wait(timeout: 15) { !$0.sightings.isEmpty }, "\(scanner.summary)")
        let sighting = try #require(scanner.sightings.first)
        #expect(sighting.beacon == testBeacon)
        #expect(sighting.rssi == -61)
        let statistics = source.statistics
        #expect(statistics.skippedBytes + statistics.discardedBytes > 0, "\(statistics)")
        #expect(scanner.count(.retrying) == 0, "\(scanner.summary)")
        #expect(await scanner.cancel() == nil)
        await fake.stop()
    }

    @Test("a refused command is reported by name and status, and retried")
    func refusedCommand() async throws {
        let directory = try TemporaryDirectory("hci-refused")
        let fake = try FakeController(path: directory.file("fake.sock"), failing: [.leSetScanParameters: 0x12])
        let scanner = SourceRecorder.start(try H4Source(fake.uri))
        // Each wait counts from the event before it: the first refusal, then the retry's.
        #expect(await scanner.wait { $0.count(.retrying) >= 1 }, "\(scanner.summary)")
        #expect(await scanner.wait { $0.count(.retrying) >= 2 }, "\(scanner.summary)")
        let details = scanner.states.filter { $0.state == .retrying }.map(\.detail)
        #expect(details.first == "\(fake.uri): LE Set Scan Parameters failed: invalid HCI command parameters (0x12); retrying in 0.5 s")
        #expect(details.dropFirst().first?.hasSuffix("retrying in 1 s") == true, "\(details)")
        #expect(scanner.count(.running) == 0)
        #expect(await scanner.cancel() == nil)
        await fake.stop()
    }

    @Test("hci:0 on a kernel without Bluetooth sockets fails at once with a message that says so",
          .enabled(if: kernelLacksBluetoothSockets(), "this kernel has Bluetooth sockets"))
    func kernelWithoutBluetooth() async throws {
        let scanner = SourceRecorder.start(try makeLiveSource(.hci(adapter: 0), scan: ScanConfig()))
        let error = await scanner.finish()
        #expect(error as? HCIError == .noBluetoothSockets(adapter: 0))
        #expect("\(error.map { "\($0)" } ?? "")".hasPrefix("hci:0: this kernel has no Bluetooth sockets"))
        #expect(scanner.count(.retrying) == 0)

        await #expect(throws: HCIError.noBluetoothSockets(adapter: 0)) {
            _ = try await Advertiser.start(.hci(adapter: 0), beacon: testBeacon)
        }
    }

    @Test("errors name what failed")
    func errorMessages() {
        #expect("\(HCIError.command(.leSetScanEnable, status: 0x0C))" == "LE Set Scan Enable failed: command disallowed (0x0C)")
        #expect("\(HCIError.timeout(.reset, seconds: 2))" == "Reset: no answer from the controller within 2 s")
        let denied = HCIError.permissionDenied(adapter: 0, SystemError(call: "write", errno: EPERM, subject: "hci:0"))
        #expect("\(denied)".contains("needs CAP_NET_RAW and CAP_NET_ADMIN"))
        #expect("\(denied)".contains("setcap cap_net_raw,cap_net_admin+eip"))
        #expect("\(denied)".contains("AmbientCapabilities=CAP_NET_RAW in the unit"))
        // The shipped unit gives CAP_NET_RAW only: a down adapter is brought up as root (--adapter-up).
        let down = HCIError.permissionDenied(adapter: 1, SystemError(call: "ioctl(HCIDEVUP)", errno: EPERM, subject: "hci1"))
        #expect("\(down)".hasPrefix("hci:1: the adapter is down and bringing it up needs CAP_NET_ADMIN"))
        #expect("\(down)".contains("--adapter-up`, which the systemd unit runs before every start"))
        #expect("\(down)".contains("hciconfig hci1 up"))
        #expect(down.isPermanent, "the gateway exits; systemd's restart runs --adapter-up again")
        #expect(denied.isPermanent)
        #expect(!HCIError.closed(source: "h4:unix:/x").isPermanent)
    }

    @Test("the factory picks the source by scheme and refuses captures")
    func factory() throws {
        #expect(try makeLiveSource(.hci(adapter: 1), scan: ScanConfig()) is KernelHCISource)
        #expect(try makeLiveSource(.h4Unix(path: "/tmp/x"), scan: ScanConfig()) is H4Source)
        #expect(try makeLiveSource(.h4TCP(host: "127.0.0.1", port: 45550), scan: ScanConfig()).name == "h4:tcp:127.0.0.1:45550")
        #expect(try makeLiveSource(.h4TTY(path: "/dev/ttyAMA0", baud: 115200), scan: ScanConfig()) is H4Source)
        #expect(throws: HCIError.self) { try makeLiveSource(.btsnoop(path: "/x.log", speed: 1, loop: false), scan: ScanConfig()) }
        #expect(throws: HCIError.self) { try H4Source(.hci(adapter: 0)) }
    }
}

/// True when `socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI)` fails with EAFNOSUPPORT.
func kernelLacksBluetoothSockets() -> Bool {
    let fd = socket(31, Int32(SOCK_RAW.rawValue), 1)
    if fd >= 0 {
        close(fd)
        return false
    }
    return errno == EAFNOSUPPORT
}

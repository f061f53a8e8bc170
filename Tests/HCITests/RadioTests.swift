import BeaconKit
import Wire
import Config
import Foundation
@testable import HCI
import SystemCalls
import TestSupport
import Testing

/// What a real radio does that the emulator does not: refuse legacy scanning, go quiet,
/// hand the kernel socket a short packet; and advertising on request while scanning.
@Suite("HCI sources on real radios: extended fallback, stall watchdog, advertising while scanning", .capturingLogs)
struct RadioTests {
    static let advertised = AdvertiseConfig(beacon: IBeacon(uuid: BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!,
                                                            major: 100, minor: 900, txPower: -59), intervalMs: 200)
    /// Seconds to wait for the controller's answer to an advertising change: far more than
    /// it takes, even with hundreds of tests starting at once.
    static let answer = 60.0

    @Test("a controller that refuses legacy scanning (Command Disallowed) is scanned with the extended commands")
    func extendedFallback() async throws {
        let directory = try TemporaryDirectory("hci-extended")
        let fake = try FakeController(path: directory.file("fake.sock"), failing: [.leSetScanParameters: 0x0C])
        let scan = ScanConfig(active: false, intervalMs: 100, windowMs: 50)
        let scanner = SourceRecorder.start(try H4Source(fake.uri, scan: scan))
        #expect(await scanner.wait { $0.count(.running) == 1 }, "\(scanner.summary)")
        #expect(scanner.states.last?.detail == "scanning (passive, extended) on \(fake.uri) (BD_ADDR 11:22:33:44:55:66)")
        #expect(scanner.count(.retrying) == 0)
        #expect(await scanner.cancel() == nil)
        await fake.stop()

        let expected: [(HCIOpcode, [UInt8])] = [
            (.reset, []),
            (.setEventMask, HCICommand.setEventMask.parameters),
            (.leSetEventMask, HCICommand.leSetEventMask.parameters),
            (.readBDAddr, []),
            (.leSetScanEnable, [0x00, 0x00]),
            (.leSetScanParameters, [0x00, 0xA0, 0x00, 0x50, 0x00, 0x00, 0x00]),
            // Refused: the same off/parameters/on in the extended set, on the LE 1M PHY.
            (.leSetExtendedScanEnable, [0x00, 0x00, 0x00, 0x00, 0x00, 0x00]),
            (.leSetExtendedScanParameters, [0x00, 0x00, 0x01, 0x00, 0xA0, 0x00, 0x50, 0x00]),
            (.leSetExtendedScanEnable, [0x01, 0x00, 0x00, 0x00, 0x00, 0x00]),
            // Restored on the way out with the command set it scanned with.
            (.leSetExtendedScanEnable, [0x00, 0x00, 0x00, 0x00, 0x00, 0x00]),
        ]
        #expect(fake.commands.map(\.opcode) == expected.map(\.0.rawValue))
        #expect(fake.commands.map(\.parameters) == expected.map(\.1))
    }

    @Test("extended advertising reports from the fallback are delivered like legacy ones")
    func extendedReportsDelivered() async throws {
        let directory = try TemporaryDirectory("hci-extended-reports")
        let report = [H4PacketType.event.rawValue] + HCIEventBuilder.extendedReport([
            .init(address: BluetoothAddress("C0:FF:EE:00:00:02")!, data: AdvertisingData.iBeacon(testBeacon), rssi: -70),
        ])
        let fake = try FakeController(path: directory.file("fake.sock"), failing: [.leSetScanParameters: 0x0C]) { client, stop in
            while !stop.isSet {
                usleep(100_000)
                guard (try? sendAll(client, report)) != nil else { return }
            }
        }
        // A report every 0.1 s; the watchdog would restart after 3 s without one.
        let source = try H4Source(fake.uri, scan: ScanConfig(stallTimeout: 3))
        let scanner = SourceRecorder.start(source)
        #expect(await scanner.wait { $0.sightings.count >= 10 }, "\(scanner.summary)")
        #expect(scanner.sightings.first?.beacon == testBeacon)
        #expect(scanner.sightings.first?.rssi == -70)
        // Extended reports count as reports for the watchdog too.
        #expect(source.scanRestarts == 0)
        #expect(await scanner.cancel() == nil)
        await fake.stop()
    }

    @Test("no advertising reports for stallTimeout: the scan is restarted, not the connection")
    func stallWatchdog() async throws {
        let directory = try TemporaryDirectory("hci-stall")
        let fake = try FakeController(path: directory.file("fake.sock"))
        let source = try H4Source(fake.uri, scan: ScanConfig(stallTimeout: 0.5))
        let scanner = SourceRecorder.start(source)
        #expect(await scanner.wait { _ in source.scanRestarts >= 2 }, "\(scanner.summary)")
        #expect(scanner.count(.retrying) == 0, "\(scanner.summary)")
        #expect(scanner.count(.running) == 1)
        #expect(await scanner.cancel() == nil)
        await fake.stop()
        // After the first enable: off/on pairs.
        let enables = fake.commands.filter { $0.opcode == HCIOpcode.leSetScanEnable.rawValue }.map { $0.parameters[0] }
        #expect(Array(enables.prefix(6)) == [0, 1, 0, 1, 0, 1], "\(enables)")
    }

    @Test("reports keep the watchdog quiet")
    func watchdogQuietWhileReporting() async throws {
        let directory = try TemporaryDirectory("hci-stall-quiet")
        let report = [H4PacketType.event.rawValue] + HCIEventBuilder.legacyReport([
            .init(address: BluetoothAddress("C0:FF:EE:00:00:01")!, data: AdvertisingData.iBeacon(testBeacon), rssi: -61),
        ])
        let fake = try FakeController(path: directory.file("fake.sock")) { client, stop in
            while !stop.isSet {
                usleep(100_000)
                guard (try? sendAll(client, report)) != nil else { return }
            }
        }
        // A report every 0.1 s for twice the stall timeout: no restart. The timeout is 2 s
        // rather than less so that a busy machine holding the fake controller's thread back
        // for a moment does not look like a stall.
        let source = try H4Source(fake.uri, scan: ScanConfig(stallTimeout: 2))
        let scanner = SourceRecorder.start(source)
        #expect(await scanner.wait { $0.sightings.count >= 40 }, "\(scanner.summary)")
        #expect(source.scanRestarts == 0)
        #expect(await scanner.cancel() == nil)
        await fake.stop()
    }

    @Test("advertising while scanning: started, replaced and stopped on request, the scan untouched")
    func advertisingOnRequest() async throws {
        let directory = try TemporaryDirectory("hci-advertise")
        let fake = try FakeController(path: directory.file("fake.sock"))
        let source = try H4Source(fake.uri)
        let scanner = SourceRecorder.start(source)
        #expect(await scanner.wait { $0.count(.running) == 1 }, "\(scanner.summary)")

        // A generous wait for the controller's answer: `.pending` would mean none came.
        #expect(try await source.setAdvertising(Self.advertised, timeout: Self.answer) == .started)
        var replaced = Self.advertised
        replaced.beacon.minor = 901
        #expect(try await source.setAdvertising(replaced, timeout: Self.answer) == .started)
        #expect(try await source.setAdvertising(nil, timeout: Self.answer) == .stopped)
        #expect(scanner.count(.retrying) == 0)
        #expect(await scanner.cancel() == nil)
        await fake.stop()

        let data = fake.commands.filter { $0.opcode == HCIOpcode.leSetAdvertisingData.rawValue }.map(\.parameters)
        #expect(data == [HCICommand.leSetAdvertisingData(AdvertisingData.iBeacon(Self.advertised.beacon))!.parameters,
                         HCICommand.leSetAdvertisingData(AdvertisingData.iBeacon(replaced.beacon))!.parameters])
        let parameters = fake.commands.first { $0.opcode == HCIOpcode.leSetAdvertisingParameters.rawValue }
        // 200 ms = 320 × 0.625 ms, non-connectable.
        #expect(parameters?.parameters.prefix(5) == [0x40, 0x01, 0x40, 0x01, 0x03])
        let enables = fake.commands.filter { $0.opcode == HCIOpcode.leSetAdvertiseEnable.rawValue }.map { $0.parameters[0] }
        #expect(enables == [0, 1, 0, 1, 0], "\(enables)")
        // Scanning was enabled once and turned off only on the way out.
        let scans = fake.commands.filter { $0.opcode == HCIOpcode.leSetScanEnable.rawValue }.map { $0.parameters[0] }
        #expect(scans == [0, 1, 0])
    }

    @Test("a controller that refuses to advertise fails the request, not the scan")
    func advertisingRefused() async throws {
        let directory = try TemporaryDirectory("hci-advertise-refused")
        let fake = try FakeController(path: directory.file("fake.sock"), failing: [.leSetAdvertisingParameters: 0x12])
        let source = try H4Source(fake.uri)
        let scanner = SourceRecorder.start(source)
        #expect(await scanner.wait { $0.count(.running) == 1 }, "\(scanner.summary)")
        await #expect(throws: HCIError.command(.leSetAdvertisingParameters, status: 0x12)) {
            _ = try await source.setAdvertising(Self.advertised, timeout: Self.answer)
        }
        // Pausing the scan is the marker: the same session loop that took the refusal says
        // `.paused` next; had the refusal ended the session, `.retrying` would come first.
        await scanner.source.setScanning(false)
        #expect(await scanner.wait { $0.count(.paused) == 1 }, "\(scanner.summary)")
        #expect(scanner.count(.retrying) == 0, "\(scanner.summary)")
        #expect(await scanner.cancel() == nil)
        await fake.stop()
    }

    @Test("advertising configured up front starts with the scan and stops on the way out")
    func advertisingFromConfig() async throws {
        let directory = try TemporaryDirectory("hci-advertise-config")
        let fake = try FakeController(path: directory.file("fake.sock"))
        let scanner = SourceRecorder.start(try H4Source(fake.uri, advertise: Self.advertised))
        #expect(await scanner.wait { $0.count(.running) == 1 }, "\(scanner.summary)")
        #expect(await scanner.cancel() == nil)
        await fake.stop()
        let enables = fake.commands.filter { $0.opcode == HCIOpcode.leSetAdvertiseEnable.rawValue }.map { $0.parameters[0] }
        #expect(enables == [0, 1, 0])
    }

    @Test("a replay cannot advertise, and says so")
    func replayCannotAdvertise() async throws {
        let directory = try TemporaryDirectory("hci-replay-advertise")
        let capture = try directory.write("empty.log", bytes: BtsnoopWriter(datalink: .h4).bytes)
        let source = try BtsnoopSource(path: capture)
        await #expect(throws: HCIError.self) { _ = try await source.setAdvertising(Self.advertised) }
    }

    @Test("a kernel socket's short packet is dropped and counted, and the next one is read whole")
    func truncatedKernelPacket() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &fds) == 0)
        let link = HCILink(name: "hci:9", fd: FileDescriptor(rawValue: fds[0]), isSocket: true, packetPerRead: true,
                           mapError: { .system(source: "hci:9", $0) })
        defer {
            link.close()
            close(fds[1])
        }
        let good = HCIEventBuilder.legacyReport([
            .init(address: BluetoothAddress("C0:FF:EE:00:00:03")!, data: AdvertisingData.iBeacon(testBeacon), rssi: -50),
        ])
        // An LE Meta event announcing 43 parameter bytes, cut after 3 of them.
        let truncated: [UInt8] = [0x04, 0x3E, 0x2B, 0x02, 0x01, 0x03]
        for packet in [truncated, [0x04] + good] {
            #expect(packet.withUnsafeBytes { send(fds[1], $0.baseAddress, $0.count, 0) } == packet.count)
        }
        let event = try link.nextEvent(timeout: 2)
        #expect(event == good)
        #expect(link.statistics.truncatedPackets == 1)
        #expect(link.statistics.discardedBytes == truncated.count)
        #expect(link.statistics.events == 1)
    }

    @Test("a missing capability is named in the message")
    func capabilityMessage() {
        let denied = HCIError.permissionDenied(adapter: 0, SystemError(call: "send", errno: EPERM, subject: "hci:0"))
        let text = "\(denied)"
        if let missing = HCIError.missingCapabilities {
            #expect(text.contains("this process lacks \(missing)"))
        } else {
            #expect(!text.contains("lacks"))
        }
        #expect(text.contains("AmbientCapabilities=CAP_NET_RAW in the unit"))
    }
}

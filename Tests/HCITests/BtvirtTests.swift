import Wire
import Config
import Foundation
import HCI
import SystemCalls
import TestSupport
import Testing
import BeaconKit

/// The live sources and the advertiser against BlueZ's emulated controllers (`btvirt -s`
/// with the AF_ALG shim), each test with a btvirt of its own.
@Suite("HCI against btvirt", .capturingLogs)
struct BtvirtTests {
    @Test("the shim makes btvirt serve controllers: Reset gets its Command Complete")
    func shimLetsBtvirtServe() async throws {
        try await withBtvirt("hci-shim") { server, _ in
            let path = server.lePath
            let status = try await BlockingThread.run { () throws -> UInt8? in
                let fd = try Connect.unix(path: path)
                defer { fd.close() }
                var reader = PacketReader(fd)
                return try reader.execute(HCICommand(.reset))
            }
            #expect(status == 0, "no Command Complete for Reset\n\(server.process.diagnostics)")
        }
    }

    enum Order: String, CaseIterable, Sendable {
        case advertiseFirst, scanFirst
    }

    @Test("an iBeacon advertised on one emulated controller is heard by a scanner on another",
          arguments: Order.allCases)
    func advertiserIsHeard(order: Order) async throws {
        try await withBtvirt("hci-e2e") { server, _ in
            let uri = try SourceURI(parsing: server.sourceURI)
            var advertiser: Advertiser?
            if order == .advertiseFirst { advertiser = try await Advertiser.start(uri, beacon: testBeacon) }
            let scanner = SourceRecorder.start(try H4Source(uri))
            #expect(await scanner.wait { $0.count(.running) == 1 }, "\(scanner.summary)")
            if order == .scanFirst { advertiser = try await Advertiser.start(uri, beacon: testBeacon) }
            #expect(await scanner.wait { !$0.sightings.isEmpty }, "\(scanner.summary)\n\(server.process.diagnostics)")

            let sighting = try #require(scanner.sightings.first)
            #expect(sighting.beacon == testBeacon)
            #expect(sighting.rssi == nil, "btvirt reports RSSI 127, not available")
            #expect(sighting.address == advertiser?.address)
            #expect(sighting.addressType == 0x00, "btvirt advertises from its public address")
            #expect(sighting.eventType == 0x03, "ADV_NONCONN_IND")
            let running = try #require(scanner.states.first { $0.state == .running })
            #expect(running.detail.hasPrefix("scanning (passive) on \(server.sourceURI) (BD_ADDR "))

            #expect(await scanner.cancel() == nil)
            await advertiser?.stop()
        }
    }

    @Test("btvirt reports once per advertising enable; retrigger keeps the beacon heard")
    func reportsPerEnable() async throws {
        try await withBtvirt("hci-retrigger") { server, _ in
            let uri = try SourceURI(parsing: server.sourceURI)
            let scanner = SourceRecorder.start(try H4Source(uri))
            #expect(await scanner.wait { $0.count(.running) == 1 }, "\(scanner.summary)")

            let steady = try await Advertiser.start(uri, beacon: testBeacon, intervalMs: 100)
            #expect(await scanner.wait { $0.sightings.count == 1 })

            // A second advertiser beside it, re-enabled every 0.2 s, is the clock: its eighth
            // report comes at least 1.4 s later through the same emulator and the same scanner,
            // so a repeat of the steady one (every 100 ms on a radio) would be in the stream first.
            var pulsing = testBeacon
            pulsing.minor = 2
            let retriggered = try await Advertiser.start(uri, beacon: pulsing, intervalMs: 100, retrigger: 0.2)
            #expect(await scanner.wait(timeout: 30) { $0.sightings.filter { $0.beacon == pulsing }.count >= 8 },
                    "\(scanner.sightings.count) sightings")
            #expect(scanner.sightings.filter { $0.beacon == testBeacon }.count == 1,
                    "a radio would repeat every 100 ms; the emulator does not")
            await steady.stop()
            await retriggered.stop()
            #expect(await scanner.cancel() == nil)
        }
    }

    @Test("setScanning(false) pauses the controller's scanning; setScanning(true) resumes it")
    func pauseAndResume() async throws {
        try await withBtvirt("hci-pause") { server, _ in
            let uri = try SourceURI(parsing: server.sourceURI)
            let scanner = SourceRecorder.start(try H4Source(uri))
            #expect(await scanner.wait { $0.count(.running) == 1 }, "\(scanner.summary)")
            await scanner.source.setScanning(false)
            #expect(await scanner.wait { $0.count(.paused) == 1 }, "\(scanner.summary)")

            let advertiser = try await Advertiser.start(uri, beacon: testBeacon)

            // Enabling scanning makes the emulator report the advertiser that is on, after it
            // answered the command: whatever it had sent the paused scanner (when the advertiser
            // was enabled) is before that answer on the same socket, so before `.running`.
            await scanner.source.setScanning(true)
            #expect(await scanner.wait { $0.count(.running) == 2 }, "\(scanner.summary)")
            #expect(await scanner.wait { $0.sightings.first?.beacon == testBeacon })
            let outputs = scanner.all
            let resumed = try #require(outputs.indices.filter { outputs[$0].isState(.running) }.last)
            #expect(SourceRecorder.sightings(in: outputs[..<resumed]).isEmpty, "a paused scanner heard an advertisement")
            #expect(SourceRecorder.sightings(in: outputs[resumed...]).first?.beacon == testBeacon)
            #expect(await scanner.cancel() == nil)
            await advertiser.stop()
        }
    }

    /// btvirt destroys a controller when its connection closes, and its monitor socket
    /// (`bt-server-mon`) sends nothing, so neither shows what state a source left its
    /// controller in. A proxy between the source and btvirt does: it records the commands
    /// and answers, and when the source hangs up keeps the controller's connection open so
    /// the test can ask that same controller.
    @Test("cancelling a scanner turns its controller's scanning off before it hangs up")
    func cancellationRestoresController() async throws {
        try await withBtvirt("hci-restore") { server, directory in
            let proxy = try RecordingProxy(path: directory.file("proxy.sock"), upstream: server.lePath)
            defer { proxy.stop() }
            let scanner = SourceRecorder.start(try H4Source(proxy.uri))
            #expect(await scanner.wait { $0.count(.running) == 1 }, "\(scanner.summary)")
            #expect(await scanner.cancel() == nil)
            #expect(await eventually { proxy.upstream != nil })

            // The last command was LE Set Scan Enable(0) and the controller accepted it:
            // it was scanning, and stopped.
            let scanEnable = HCIOpcode.leSetScanEnable.rawValue
            #expect(proxy.commands.last == [UInt8(scanEnable & 0xFF), UInt8(scanEnable >> 8), 2, 0x00, 0x00])
            let lastAnswer = proxy.events.last { $0.withUnsafeBytes { HCICommandResponse(event: $0)?.opcode } == scanEnable }
            #expect(lastAnswer.flatMap { $0.withUnsafeBytes { HCICommandResponse(event: $0)?.status } } == 0)

            // The controller itself: an advertiser is not heard there, and turning scanning
            // off again is "command disallowed" because it is off already.
            let upstream = try #require(proxy.upstream)
            let advertiser = try await Advertiser.start(try SourceURI(parsing: server.sourceURI), beacon: testBeacon)
            let (reports, status) = try await BlockingThread.run { () throws -> (Int, UInt8?) in
                var reader = PacketReader(upstream)
                var reports = 0
                while let packet = try reader.next(timeout: 1) {
                    if packet.bytes.first == HCIEvent.leMetaEvent { reports += 1 }
                }
                return (reports, try reader.execute(.leSetScanEnable(false)))
            }
            #expect(reports == 0)
            #expect(status == 0x0C)
            await advertiser.stop()
        }
    }

    @Test("losing btvirt gives .retrying; a new btvirt at the same socket brings the source back")
    func lossAndRecovery() async throws {
        let directory = try TemporaryDirectory("hci-loss")
        let first = try await BtvirtServer.start(in: directory)
        let uri = try SourceURI(parsing: first.sourceURI)
        let scanner = SourceRecorder.start(try H4Source(uri))
        #expect(await scanner.wait { $0.count(.running) == 1 }, "\(scanner.summary)")

        await first.stop()
        #expect(await scanner.wait { $0.count(.retrying) >= 1 }, "\(scanner.summary)")
        let retrying = scanner.states.first { $0.state == .retrying }
        #expect(retrying?.detail.hasPrefix("\(uri): the controller's stream was closed; retrying in 0.5 s") == true,
                "\(retrying?.detail ?? "none")")

        let second = try await BtvirtServer.start(in: directory)
        #expect(await scanner.wait(timeout: 20) { $0.count(.running) == 2 }, "\(scanner.summary)")
        #expect(await scanner.cancel() == nil)
        await second.stop()
    }
}

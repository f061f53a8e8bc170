import BeaconKit
import Wire
import Foundation
import TestSupport
import Testing

/// The four original apps end to end (issue 13): the range words, the ranging observer.
@Suite("the original apps end to end")
struct OriginalAppsTests {
    static let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!

    @Test("beaconctl range --words original says the original app's words for each proximity class")
    func originalWords() async throws {
        let dir = try TemporaryDirectory("beaconctl-range-words")
        let start = Instant(iso8601: "2026-11-21T10:00:00.000Z")!
        var writer = BtsnoopWriter(datalink: .h4)
        // From 10 m (-79 dBm with n = 2 and P1m -59) to 0.1 m, four advertisements a second.
        let steps: [Int8] = [-79, -79, -79, -79, -62, -62, -62, -62, -62, -62, -62, -62, -40, -40, -40, -40, -40, -40, -40, -40]
        for (i, rssi) in steps.enumerated() {
            writer.appendEvent(advertisingEvent(IBeacon(uuid: Self.uuid, major: 7, minor: 1, txPower: -59),
                                                address: 0xD0_00_00_00_00_01, rssi: rssi), at: start + 0.1 + Double(i) * 0.25)
        }
        let capture = try dir.write("walk.log", bytes: writer.bytes)
        let range = try startProgram("beaconctl", ["range", "--source", "btsnoop:\(capture)", "--speed", "0",
                                                   "--exit-timeout", "3", "--words", "original"], in: dir)
        #expect(await range.waitForExit(timeout: 20) == 0, "\(range.diagnostics)")
        let words = range.stdoutLines.filter { !$0.contains("gone") }.map { $0.split(separator: " ").suffix(2).joined(separator: " ") }
        #expect(words.first == "far Cold!", "\(range.stdoutLines)")
        #expect(words.contains("near Warm!"), "\(range.stdoutLines)")
        #expect(words.contains("immediate Hot!"), "\(range.stdoutLines)")
        #expect(words.last == "unknown Freezing!", "stale at the end: \(range.stdoutLines)")

        let bad = try startProgram("beaconctl", ["range", "--source", "btsnoop:\(capture)", "--words", "tepid"], in: dir)
        #expect(await bad.waitForExit(timeout: 20) == 2)
        #expect(bad.stderr.contains("--words: \"tepid\" is neither game nor original"), "\(bad.diagnostics)")
    }

    @Test("a gateway names a beacon by its UUID-only registry entry: name, a heading alone, the UUID's calibration")
    func uuidOnlyEntryInSightings() async throws {
        let dir = try TemporaryDirectory("gateway-uuid-entry")
        let broker = try await MosquittoBroker.start(in: dir)
        let marker = BeaconUUID("B9407F30-F5F8-466E-AFF9-25556B57FE6D")!
        var writer = BtsnoopWriter(datalink: .h4)
        let start = Instant(iso8601: "2026-11-21T10:00:00.000Z")!
        for i in 0..<20 {
            writer.appendEvent(advertisingEvent(IBeacon(uuid: marker, major: 7, minor: 42, txPower: -59),
                                                address: 0xD0_00_00_00_00_2A, rssi: -70), at: start + Double(i) * 0.25)
        }
        let capture = try dir.write("stairs.log", bytes: writer.bytes)
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "hall", "source": "btsnoop:\#(capture)?loop"}"#],
                                    extra: #""beacons": [{"uuid": "\#(marker)", "name": "stairs", "heading": 180, "measuredPower": -70}]"#)
        let subscriber = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/7/42"], in: dir)
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "hall"], in: dir)
        let sighting = await subscriber.waitFor(topic: "beacons/7/42", timeout: 20)
        let payload = try #require(sighting?.json, "\(gateway.diagnostics)")
        #expect(payload["name"] == .string("stairs"))
        #expect(payload["location"] == .object(["lat": .null, "lon": .null, "heading": .number(180), "floor": .null]))
        #expect(payload["distance"] == .number(1), "-70 dBm with the UUID's calibration of -70 dBm at 1 m")
        #expect(await gateway.stop() == 0, "\(gateway.diagnostics)")
        await subscriber.stop()
        await broker.stop()
    }
}

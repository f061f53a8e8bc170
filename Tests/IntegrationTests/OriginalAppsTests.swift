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
}

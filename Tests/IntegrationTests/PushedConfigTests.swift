import BeaconKit
import Contract
import Foundation
import Wire
import TestSupport
import Testing

/// Issue 18: "A pushed fleet config is forgotten: after `beaconctl config push` is applied, a
/// restarted gateway runs its file config again; the gateway's retained presence kept the old
/// zone name; a good push reported a spurious "needsRestart":["broker"] because the gateway
/// was started with --broker."
@Suite("a pushed config survives a restart")
struct PushedConfigTests {
    @Test("a pushed zone name reaches the retained presence, live and after a restart; --broker needs no restart")
    func pushedZoneName() async throws {
        let dir = try TemporaryDirectory("pushed-config")
        let broker = try await MosquittoBroker.start(in: dir)
        var writer = BtsnoopWriter(datalink: .h4)
        let start = CaptureTime(iso8601: "2026-11-21T10:00:00.000Z")!
        let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
        for i in 0..<40 {
            writer.appendEvent(advertisingEvent(IBeacon(uuid: uuid, major: 100, minor: 1, txPower: -59),
                                                address: 0xD0_00_00_00_00_01, rssi: -60), at: start + Double(i) * 0.25)
        }
        let capture = try dir.write("door.log", bytes: writer.bytes)
        let file = try writeFleet(dir, broker: broker, gateways: [#"{"id": "door", "source": "btsnoop:\#(capture)?loop", "zone": "Entrance"}"#])
        let pushed = try dir.write("pushed.json", try String(contentsOfFile: file, encoding: .utf8)
            .replacingOccurrences(of: #""zone": "Entrance""#, with: #""zone": "Front door""#))
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/100/1/presence/door", "gateways/door/events"],
                                                        in: dir)
        func zone(_ record: MosquittoSubscriber.Record) -> String? { record.json?["zone"]?.stringValue }

        let gateway = try startProgram("beacon-gateway", ["--config", file, "--id", "door", "--broker", broker.url], in: dir)
        #expect(await watch.waitFor(timeout: 20) { zone($0) == "Entrance" } != nil, "\(gateway.diagnostics)")
        let push = try startProgram("beaconctl", ["config", "push", pushed, "--broker", broker.url], in: dir)
        #expect(await push.waitForExit(timeout: 20) == 0, "\(push.diagnostics)")
        // Live: the retained presence says the new name at once, and nothing asks for a restart.
        #expect(await watch.waitFor(timeout: 20) { zone($0) == "Front door" } != nil, "\(watch.records)\n\(gateway.diagnostics)")
        let applied = await watch.waitFor(timeout: 10) { $0.topic == "gateways/door/events" && Self.applied($0) != nil }
        #expect(applied.flatMap(Self.applied) == [], "\(String(describing: applied))")
        #expect(await gateway.stop() == 0, "\(gateway.diagnostics)")

        // Restarted from the same file: the retained, pushed config is applied again.
        let marker = watch.records.count
        let again = try startProgram("beacon-gateway", ["--config", file, "--id", "door", "--broker", broker.url], in: dir)
        // Applied once it arrives (the event).
        let reapplied = await eventually(timeout: 20) {
            watch.records.dropFirst(marker).contains { $0.topic == "gateways/door/events" && Self.applied($0) != nil }
        }
        #expect(reapplied, "\(Array(watch.records.dropFirst(marker)))\n\(again.diagnostics)")
        // The presence it publishes once the push is applied says the pushed name. The
        // "applied" event and the republished presence are separate messages on separate
        // topics, which may reach a subscriber in either order: the check is on the
        // presence alone, not on its place after the event.
        func presences() -> [String?] {
            watch.records.dropFirst(marker).filter { $0.topic == "beacons/100/1/presence/door" }.map(zone)
        }
        let renamed = await eventually(timeout: 20) { presences().last == "Front door" }
        #expect(renamed, "\(Array(watch.records.dropFirst(marker)))\n\(again.diagnostics)")
        let seen = presences()
        let pushedName = seen.firstIndex(of: "Front door")
        #expect(pushedName.map { !seen[$0...].contains("Entrance") } == true,
                "once the pushed name is out, nothing says the file's name again: \(seen)")
        #expect(await again.stop() == 0, "\(again.diagnostics)")
        await watch.stop()
        await broker.stop()
    }

    /// What a gateway's config report (Contract's `GatewayEvent`) says needs a restart, if it says applied.
    static func applied(_ record: MosquittoSubscriber.Record) -> [String]? {
        guard case .config(let report)? = record.gatewayEvent, case .applied(let needsRestart) = report.outcome else { return nil }
        return needsRestart
    }
}

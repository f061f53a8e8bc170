import BeaconKit
import Wire
import Simulation
import Foundation
import TestSupport
import Testing

/// A store whose greeter roster is driven by proximity, on real processes: two
/// `beacon-gateway`s replaying a customer's walk to the counter and away, `beacon-brain`,
/// Mosquitto. No app joins anything.
@Suite("proximity roster: gateways, brain, no app")
struct ProximityRosterLoopTests {
    static let uuid = StoreSimulation.defaultUUID

    /// Ada's key fob 900/1 as one gateway hears it: every 0.25 s, at `rssi(t)` dBm (`nil`:
    /// not heard), for `seconds`.
    static func capture(seconds: Double, _ rssi: (Double) -> Int8?) -> [UInt8] {
        var writer = BtsnoopWriter(datalink: .h4)
        let start = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
        var i = 0
        while Double(i) * 0.25 < seconds {
            let t = Double(i) * 0.25
            if let level = rssi(t) {
                let jitter = Int8((i * 7) % 5) - 2
                writer.appendEvent(advertisingEvent(IBeacon(uuid: uuid, major: 900, minor: 1, txPower: -59),
                                                    address: 0xC0_00_00_90_00_01, rssi: level + jitter), at: start + t)
            }
            i += 1
        }
        return writer.bytes
    }

    @Test("a registry customer walks to the counter: on stores/100/roster at immediate, off again at far, before the exit")
    func walkToTheCounter() async throws {
        let dir = try TemporaryDirectory("proximity-roster-loop")
        let broker = try await MosquittoBroker.start(in: dir)
        // The door hears her near the whole time; the counter far, then at arm's length
        // (0.2 m) from 4 s to 12 s, then far again; both lose her at 20 s.
        let door = try dir.write("door.log", bytes: Self.capture(seconds: 20) { _ in -68 })
        let counter = try dir.write("counter.log", bytes: Self.capture(seconds: 20) { t in (4..<12).contains(t) ? -45 : -82 })
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "source": "btsnoop:\#(door)", "zone": "Entrance", "store": 100}"#,
            #"{"id": "counter", "source": "btsnoop:\#(counter)", "zone": "Counter", "store": 100}"#,
        ], extra: """
        "stores": [{"major": 100, "name": "Main Street", "roster": {"from": "proximity", "gateways": ["counter"]}}],
        "beacons": [{"uuid": "\(Self.uuid)", "major": 900, "minor": 1, "owner": "ada",
                     "profile": {"name": "Ada", "favorite": "flat white"}}]
        """)
        let check = try startProgram("beaconctl", ["config", "check", config], in: dir)
        #expect(await check.waitForExit(timeout: 30) == 0, "\(check.diagnostics)")
        #expect(check.stdout.contains("store 100's roster (proximity): 1 customer beacon at immediate at counter"),
                "\(check.stdout)")

        let watch = try await MosquittoSubscriber.start(broker: broker, filters: [
            "stores/100/customers/+", "stores/100/roster", "beacons/900/1/presence", "brain/status",
        ], in: dir)
        var processes = [try startProgram("beacon-brain", ["--config", config], in: dir)]
        // The gateways start replaying once the brain listens.
        #expect(await watch.waitFor(topic: "brain/status", text: "online", timeout: 30) != nil, "\(processes[0].diagnostics)")
        for id in ["door", "counter"] {
            processes.append(try startProgram("beacon-gateway", ["--config", config, "--id", id], in: dir))
        }
        func diagnostics() -> String { processes.map(\.diagnostics).joined(separator: "\n") + "\n\(watch.records)" }

        let customer = "stores/100/customers/ada"
        let entry = await watch.waitFor(timeout: 60) { $0.topic == customer && !$0.payload.isEmpty }
        let json = try #require(entry?.json, "\(diagnostics())")
        #expect(json["name"] == .string("Ada"))
        #expect(json["favorite"] == .string("flat white"))
        #expect(json["photo"] == .null)
        #expect(json["beacon"] == .object(["major": .number(900), "minor": .number(1)]))
        let roster = await watch.waitFor(timeout: 30) { $0.topic == "stores/100/roster" && $0.json?["count"] == .number(1) }
        #expect(roster?.json?["customers"]?.arrayValue?.first?["client"] == .string("ada"), "\(diagnostics())")

        // She walks away from the counter: off the roster while the door still sees her…
        let deleted = await watch.waitFor(timeout: 60) { $0.topic == customer && $0.payload.isEmpty }
        #expect(deleted != nil, "\(diagnostics())")
        let records = watch.records
        let deletion = records.firstIndex { $0.topic == customer && $0.payload.isEmpty }
        let exit = records.firstIndex { $0.topic == "beacons/900/1/presence" && $0.payload.isEmpty }
        #expect(exit == nil || deletion.map { $0 < exit! } == true, "at far, before the exit: \(records)")
        #expect(records.filter { $0.topic == customer && !$0.payload.isEmpty }.count == 1, "no flap: \(records)")
        // …then out of the store.
        let exited = await watch.waitFor(timeout: 60) { $0.topic == "beacons/900/1/presence" && $0.payload.isEmpty }
        #expect(exited != nil, "\(diagnostics())")
        let emptied = await watch.waitFor(timeout: 30) { $0.topic == "stores/100/roster" && $0.json?["count"] == .number(0) }
        #expect(emptied != nil, "\(diagnostics())")

        for process in processes.reversed() { await process.stop() }
        await watch.stop()
        await broker.stop()
    }
}

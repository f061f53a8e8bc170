import BeaconKit
import Wire
import Simulation
import Foundation
import TestSupport
import Testing

/// The whole product on real processes: a replayed store through two `beacon-gateway`s,
/// `beacon-brain`, and `beaconctl observe` as the customer's app.
@Suite("store loop: gateways, brain, observer")
struct StoreLoopTests {
    static let uuid = StoreSimulation.defaultUUID

    /// A capture of beacon 100/1 heard every 0.25 s for `seconds`, at about `rssi` dBm.
    static func capture(rssi: Int8, seconds: Double = 20) -> [UInt8] {
        var writer = BtsnoopWriter(datalink: .h4)
        let start = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
        var t = 0.0
        var i = 0
        while t < seconds {
            let jitter = Int8((i * 7) % 5) - 2
            writer.appendEvent(advertisingEvent(IBeacon(uuid: uuid, major: 100, minor: 1, txPower: -59),
                                                address: 0xC0_00_00_64_00_01, rssi: rssi + jitter), at: start + t)
            t += 0.25
            i += 1
        }
        return writer.bytes
    }

    struct Store {
        let dir: TemporaryDirectory
        let broker: MosquittoBroker
        let config: String
        var processes: [ChildProcess] = []

        func stop() async {
            for process in processes.reversed() { await process.stop() }
            await broker.stop()
        }
    }

    /// Starts the broker, the door gateway (strong signal: the customer is at the door),
    /// the counter gateway (weak) and the brain.
    func startStore(_ label: String) async throws -> Store {
        let dir = try TemporaryDirectory(label)
        let broker = try await MosquittoBroker.start(in: dir)
        let door = try dir.write("door.log", bytes: Self.capture(rssi: -50))
        let counter = try dir.write("counter.log", bytes: Self.capture(rssi: -80))
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "source": "btsnoop:\#(door)?loop", "zone": "Entrance"}"#,
            #"{"id": "counter", "source": "btsnoop:\#(counter)?loop", "zone": "Counter"}"#,
        ], extra: """
        "stores": [{"major": 100, "name": "Main Street", "ad": {"title": "Deal of the day", "text": "Two coffees for one"}}],
        "beacons": [{"uuid": "\(Self.uuid)", "major": 100, "minor": 1, "name": "customer-1",
                     "latitude": 52.52, "longitude": 13.405, "heading": 90, "floor": 0}],
        "rules": [{"name": "welcome", "when": "join", "then": [{"do": "greeting", "text": "Hello {customer}! Your usual {favorite}?"}]}]
        """)
        var store = Store(dir: dir, broker: broker, config: config)
        for id in ["door", "counter"] {
            store.processes.append(try startProgram("beacon-gateway", ["--config", config, "--id", id], in: dir))
        }
        store.processes.append(try startProgram("beacon-brain", ["--config", config], in: dir))
        return store
    }

    @Test("a replayed store reaches an observer's inbox: the ad on joining, then the greeting")
    func joinToInbox() async throws {
        let store = try await startStore("loop-inbox")
        let watch = try await MosquittoSubscriber.start(broker: store.broker, filters: ["beacons/100/1/presence"], in: store.dir)
        // Fleet presence: both gateways hear the customer; whichever is heard first is the
        // zone at first, and the door, 30 dB louder, takes over after a few updates.
        let presence = await watch.waitFor(timeout: 20) {
            $0.topic == "beacons/100/1/presence" && $0.json?["zone"] == .string("door")
                && $0.json?["gateways"]?.arrayValue?.count == 2
        }
        let diagnostics = store.processes.map(\.diagnostics).joined(separator: "\n")
        let fleet = try #require(presence?.json, "\(watch.records)\n\(diagnostics)")
        #expect(fleet["zoneName"] == .string("Entrance"))

        let profile = try store.dir.write("ana.json", #"{"name": "Ana", "favorite": "flat white"}"#)
        let observer = try startProgram("beaconctl", [
            "observe", "--broker", store.broker.url, "--client", "ana", "--major", "100", "--minor", "1",
            "--profile", profile, "--count", "2", "--timeout", "20",
        ], in: store.dir)
        let status = await observer.waitForExit(timeout: 30)
        #expect(status == 0, "\(observer.diagnostics)")
        let inbox = observer.stdoutLines.compactMap { try? JSONParser().parse($0).objectValue }
        try #require(inbox.count == 2, "\(observer.diagnostics)")
        #expect(inbox[0]["type"] == .string("ad"))
        #expect(inbox[0]["ad"]?["title"] == .string("Deal of the day"))
        #expect(inbox[1]["type"] == .string("greeting"))
        #expect(inbox[1]["text"] == .string("Hello Ana! Your usual flat white?"))
        await watch.stop()
        await store.stop()
    }

    @Test("the greeter roster lists a customer while joined and forgets the profile when they leave")
    func roster() async throws {
        let store = try await startStore("loop-roster")
        let watch = try await MosquittoSubscriber.start(broker: store.broker, filters: ["stores/100/roster", "beacons/100/1/observers/+"],
                                                        in: store.dir)
        let profile = try store.dir.write("ben.json", #"{"name": "Ben", "favorite": "chai"}"#)
        let observer = try startProgram("beaconctl", [
            "observe", "--broker", store.broker.url, "--client", "ben", "--major", "100", "--minor", "1", "--profile", profile,
        ], in: store.dir)
        let listed = await watch.waitFor(timeout: 20) { record in
            record.topic == "stores/100/roster"
                && record.json?["customers"]?.arrayValue?.contains { $0["name"] == .string("Ben") } == true
        }
        let customer = try #require(listed?.json?["customers"]?.arrayValue?.first, "\(observer.diagnostics)")
        #expect(customer["favorite"] == .string("chai"))
        #expect(customer["photo"] == .null)

        // Ctrl-C: the app leaves; the roster empties and the join (with the profile) is gone.
        observer.signal(SIGINT)
        #expect(await observer.waitForExit(timeout: 10) == 0, "\(observer.diagnostics)")
        let emptied = await watch.waitFor(timeout: 10) { record in
            record.topic == "stores/100/roster" && record.json?["customers"]?.arrayValue?.isEmpty == true
        }
        #expect(emptied != nil)
        let late = try await MosquittoSubscriber.start(broker: store.broker, filters: ["beacons/100/1/observers/+",
                                                                                     "beaconbridge-test/caught-up"], in: store.dir)
        #expect(await late.caughtUp(on: store.broker))
        #expect(!late.records.contains { $0.topic.hasPrefix("beacons/") }, "no profile may stay on the broker: \(late.records)")
        await late.stop()
        await watch.stop()
        await store.stop()
    }
}

import BeaconKit
import Wire
import Foundation
import HCI
import TestSupport
import Testing
import Config

/// The gateway against real parts: mosquitto on a free loopback port, btvirt's
/// emulated controllers over H4, and the built `beacon-gateway` executable.
@Suite("beacon-gateway end to end")
struct GatewayTests {
    static let uuid = BeaconUUID("B9407F30-F5F8-466E-AFF9-25556B57FE6D")!

    @Test("an iBeacon advertised by one emulated controller reaches mosquitto_sub through the gateway on another")
    func emulatedControllerToBroker() async throws {
        let dir = try TemporaryDirectory("gateway-btvirt")
        let broker = try await MosquittoBroker.start(in: dir)
        let btvirt = try await BtvirtServer.start(in: dir)
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "lab", "source": "\#(btvirt.sourceURI)", "zone": "Lab bench"}"#,
        ], defaults: #"{"exitTimeout": 30}"#)
        let subscriber = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/#", "gateways/#"], in: dir)
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "lab"], in: dir)

        let online = await subscriber.waitFor(topic: "gateways/lab/status", text: "online", timeout: 15)
        try #require(online != nil, "the gateway never said online\n\(gateway.diagnostics)")
        let running = await eventually(timeout: 10) { gateway.stderr.contains("scanning") }
        try #require(running, "the gateway never started scanning\n\(gateway.diagnostics)")

        // Our own HCI commands over H4 on a second emulated controller.
        let beacon = IBeacon(uuid: Self.uuid, major: 4660, minor: 22136, txPower: -59)
        let advertiser = try await Advertiser.start(.h4Unix(path: btvirt.lePath), beacon: beacon, intervalMs: 100,
                                                    retrigger: 0.5)
        let sighting = await subscriber.waitFor(topic: "beacons/4660/22136", timeout: 10)
        let payload = try #require(sighting?.json, "no sighting arrived\n\(gateway.diagnostics)")
        #expect(payload["uuid"] == .string(Self.uuid.description))
        #expect(payload["major"] == .number(4660))
        #expect(payload["minor"] == .number(22136))
        #expect(payload["gateway"] == .string("lab"))
        #expect(payload["txPower"] == .number(-59))
        // The emulator reports RSSI 127, "not available": present, but no distance.
        #expect(payload["rssi"] == .null)
        #expect(payload["distance"] == .null)
        #expect(payload["proximity"] == .string("unknown"))
        #expect(payload["address"] == .string(advertiser.address.description))
        #expect(sighting?.retained == false)

        // A subscriber arriving later gets the presence as a retained message.
        let late = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/4660/22136/presence/+"], in: dir)
        let presence = await late.waitFor(topic: "beacons/4660/22136/presence/lab", timeout: 5)
        #expect(presence?.retained == true)
        #expect(presence?.json?["zone"] == .string("Lab bench"))
        #expect(presence?.json?["gateway"] == .string("lab"))

        // SIGTERM: presence withdrawn, offline said, controller restored.
        let status = await gateway.stop()
        #expect(status == 0, "\(gateway.diagnostics)")
        let withdrawn = await subscriber.waitFor(timeout: 5) {
            $0.topic == "beacons/4660/22136/presence/lab" && $0.payload.isEmpty
        }
        #expect(withdrawn != nil)
        #expect(await subscriber.waitFor(topic: "gateways/lab/status", text: "offline", timeout: 5) != nil)

        await advertiser.stop()
        await late.stop()
        await subscriber.stop()
        await btvirt.stop()
        await broker.stop()
    }

    @Test("a gateway killed with SIGKILL is declared offline by the broker (last will)")
    func lastWill() async throws {
        let dir = try TemporaryDirectory("gateway-will")
        let broker = try await MosquittoBroker.start(in: dir)
        let capture = try dir.write("quiet.log", bytes: Self.capture(beacons: [(1, 0...3)], step: 0.5).bytes)
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "source": "btsnoop:\#(capture)?loop"}"#,
        ])
        let subscriber = try await MosquittoSubscriber.start(broker: broker, filters: ["gateways/door/status"], in: dir)
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "door"], in: dir)
        let online = await subscriber.waitFor(topic: "gateways/door/status", text: "online", timeout: 15)
        try #require(online != nil, "\(gateway.diagnostics)")

        gateway.signal(SIGKILL)
        _ = await gateway.waitForExit(timeout: 5)
        let offline = await subscriber.waitFor(topic: "gateways/door/status", text: "offline", timeout: 10)
        #expect(offline != nil, "the broker did not publish the will\n\(broker.diagnostics)")

        // The will is retained: a newcomer learns the gateway is offline.
        let late = try await MosquittoSubscriber.start(broker: broker, filters: ["gateways/door/status"], in: dir)
        let retained = await late.waitFor(topic: "gateways/door/status", timeout: 5)
        #expect(retained?.text == "offline" && retained?.retained == true)
        await late.stop()
        await subscriber.stop()
        await broker.stop()
    }

    /// A capture with iBeacons of the given minors seen over time ranges (seconds), one
    /// advertisement every `step`, RSSI walking so that proximity changes.
    static func capture(beacons: [(minor: UInt16, seen: ClosedRange<Double>)], step: Double,
                        start: CaptureTime = CaptureTime(iso8601: "2026-11-21T10:00:00.000Z")!) -> BtsnoopWriter {
        var writer = BtsnoopWriter(datalink: .h4)
        var t = 0.0
        var tick = 0
        while t <= beacons.map(\.seen.upperBound).max()! {
            for beacon in beacons where beacon.seen.contains(t) {
                let rssi = Int8(-50 - (tick * 3 + Int(beacon.minor) * 7) % 30)
                writer.appendEvent(advertisingEvent(IBeacon(uuid: uuid, major: 7, minor: beacon.minor, txPower: -59),
                                                    address: 0xD0_00_00_00_00_00 | UInt64(beacon.minor), rssi: rssi),
                                   at: start + t)
            }
            t += step
            tick += 1
        }
        return writer
    }

    @Test("a replayed capture gives the same enter and exit sequence at full speed and at 20×",
          arguments: [0.0, 20.0])
    func replayTiming(speed: Double) async throws {
        // Beacon 1 leaves at 3 s (exit due at 5 s), beacon 2 is seen 10…12 s (exit at 14 s),
        // beacon 3 stays until 11 s (exit at 13 s).
        let records = try await replay(speed: speed)
        let presence = records.filter { $0.topic.contains("/presence/") }
        func index(_ predicate: (MosquittoSubscriber.Record) -> Bool) -> Int? { records.firstIndex(where: predicate) }
        let exit1 = try #require(index { $0.topic == "beacons/7/1/presence/door" && $0.payload.isEmpty })
        let enter2 = try #require(index { $0.topic == "beacons/7/2" })
        let exit3 = try #require(index { $0.topic == "beacons/7/3/presence/door" && $0.payload.isEmpty })
        let lastSighting2 = try #require(records.lastIndex { $0.topic == "beacons/7/2" })
        // Exits are decided on capture time: beacon 1 is gone before beacon 2 arrives,
        // beacon 3 only after beacon 2's last sighting.
        #expect(exit1 < enter2)
        #expect(exit3 > lastSighting2)
        // Each beacon entered once and exited once.
        for minor in 1...3 {
            let mine = presence.filter { $0.topic == "beacons/7/\(minor)/presence/door" }
            #expect(mine.first.map { !$0.payload.isEmpty } == true)
            #expect(mine.filter(\.payload.isEmpty).count == 1)
            #expect(mine.last?.payload.isEmpty == true)
        }
        // Sightings carry capture time, rate-limited to one a second per beacon (plus
        // proximity changes), never more often than the advertisements.
        let sightings1 = records.filter { $0.topic == "beacons/7/1" }.compactMap { $0.json?["ts"]?.stringValue }
        #expect(sightings1.first == "2026-11-21T10:00:00.000Z")
        #expect(sightings1.count >= 4 && sightings1.count <= 7)
    }

    @Test("replays at different speeds publish exactly the same messages in the same order")
    func replayDeterminism() async throws {
        let fast = try await replay(speed: 0).map { "\($0.topic) \($0.text)" }
        let paced = try await replay(speed: 25).map { "\($0.topic) \($0.text)" }
        #expect(fast == paced)
        #expect(fast.count > 20)
    }

    /// Replays the three-beacon capture through a gateway and returns what a subscriber
    /// saw on `beacons/#`, up to the last exit (beacon 2's).
    func replay(speed: Double) async throws -> [MosquittoSubscriber.Record] {
        let dir = try TemporaryDirectory("gateway-replay")
        // Unlimited in-flight QoS 1 so the broker forwards QoS 0 and 1 in arrival order.
        let broker = try await MosquittoBroker.start(in: dir, extraConfig: "max_inflight_messages 0\n")
        let capture = try dir.write("store.log", bytes: Self.capture(
            beacons: [(1, 0...3), (2, 10...12), (3, 0...11)], step: 0.25).bytes)
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "source": "btsnoop:\#(capture)"}"#,
        ], defaults: #"{"exitTimeout": 2, "staleAfter": 1, "publishInterval": 1}"#)
        let subscriber = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/#"], in: dir)
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "door", "--speed", String(speed)],
                                       in: dir)
        let done = await subscriber.waitFor(timeout: 30) {
            $0.topic == "beacons/7/2/presence/door" && $0.payload.isEmpty
        }
        try #require(done != nil, "beacon 2 never exited\n\(gateway.diagnostics)")
        await gateway.stop()
        let records = subscriber.records
        await subscriber.stop()
        await broker.stop()
        let end = records.firstIndex { $0.topic == "beacons/7/2/presence/door" && $0.payload.isEmpty }!
        return Array(records[...end])
    }
}

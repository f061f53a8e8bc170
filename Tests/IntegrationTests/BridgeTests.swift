import BeaconKit
import Foundation
import TestSupport
import Testing

/// `beaconctl bridge`'s configuration on real Mosquitto brokers (loopback): what crosses,
/// which way, and the notification that tells the brain whether a store is reachable.
@Suite("store broker bridged to the centre")
struct BridgeTests {
    /// Writes a fleet with store 100 on a broker of its own (port `storePort`) bridged to
    /// `central`, and runs `beaconctl bridge` for it; the generated configuration.
    static func bridgeConfiguration(_ dir: TemporaryDirectory, central: MosquittoBroker, storePort: UInt16) async throws -> String {
        let fleet = try dir.write("fleet.json", """
        {
          "broker": { "url": "\(central.url)" },
          "bridge": { "keepalive": 5 },
          "gateways": [ { "id": "door", "store": 100 }, { "id": "elsewhere", "store": 200 } ],
          "stores": [ { "major": 100, "broker": { "url": "mqtt://127.0.0.1:\(storePort)" } }, { "major": 200 } ],
          "rules": [ { "name": "barista", "when": "enter",
                       "then": [ { "do": "publish", "topic": "displays/{store}/barista", "text": "{name}" } ] } ]
        }
        """)
        let tool = try startProgram("beaconctl", ["bridge", fleet, "--store", "100", "--out", dir.file("bridges")], in: dir)
        try #require(await tool.waitForExit(timeout: 30) == 0, "\(tool.diagnostics)")
        #expect(tool.stderr.contains("warning: the bridges reach \(central.url) without TLS"))
        #expect(tool.stderr.contains("warning: store 100's bridge has no credentials"))
        return try String(contentsOfFile: dir.file("bridges/bridge-100.conf"), encoding: .utf8)
    }

    @Test("each topic crosses its way, nothing echoes back, and the bridge says 1 and, as its will, 0")
    func directions() async throws {
        let dir = try TemporaryDirectory("bridge")
        let central = try await MosquittoBroker.start(in: dir)
        let storePort = try FreePort.allocate()
        let configuration = try await Self.bridgeConfiguration(dir, central: central, storePort: storePort)
        let centre = try await MosquittoSubscriber.start(broker: central, filters: ["#"], in: dir)
        let store = try await MosquittoBroker.start(in: dir, extraConfig: configuration, port: storePort)
        let local = try await MosquittoSubscriber.start(broker: store, filters: ["#"], in: dir)
        defer { _ = (centre, local) }
        #expect(await centre.waitFor(topic: "stores/100/bridge", text: "1", timeout: 30) != nil,
                "\(store.diagnostics)\n\(central.diagnostics)")

        // Out: what the store's gateway and an app in the store publish.
        let outgoing: [(String, String, Bool)] = [
            ("beacons/100/1", #"{"gateway":"door"}"#, false), ("beacons/100/1/presence/door", #"{"gateway":"door"}"#, true),
            ("beacons/100/1/observers/ana", #"{"state":"joined"}"#, true), ("observers/ana/status", "online", true),
            ("gateways/door/status", "online", true),
        ]
        for (topic, payload, retain) in outgoing {
            #expect(await store.publish(topic, payload, retain: retain, qos: topic == "beacons/100/1" ? 0 : 1))
        }
        for (topic, payload, _) in outgoing {
            #expect(await centre.waitFor(topic: topic, text: payload, timeout: 15) != nil, "\(topic) reaches the centre")
        }

        // In: what the brain and the operator publish for this store, and what must stay out.
        let incoming = [("beacons/100/1/presence", #"{"zone":"door"}"#), ("beacons/100/1/ad", #"{"title":"x"}"#),
                        ("observers/ana/inbox", #"{"type":"ad"}"#), ("gateways/door/cmd", #"{"scan":"pause"}"#),
                        ("fleet/config", "{}"), ("stores/100/roster", #"{"customers":[]}"#)]
        let foreign = [("beacons/200/1/presence", "{}"), ("stores/200/roster", "{}"), ("gateways/elsewhere/cmd", "{}"),
                       ("beacons/100/2", "a sighting at the centre")]
        for (topic, payload) in foreign + incoming { #expect(await central.publish(topic, payload)) }
        #expect(await central.publish("displays/100/barista", "last"))
        #expect(await local.waitFor(topic: "displays/100/barista", text: "last", timeout: 15) != nil)
        let arrived = local.records
        for (topic, payload) in incoming {
            #expect(arrived.contains { $0.topic == topic && $0.text == payload }, "\(topic) reaches the store")
        }
        for (topic, _) in foreign { #expect(!arrived.contains { $0.topic == topic }, "\(topic) stays at the centre") }
        #expect(arrived.filter { $0.topic == "beacons/100/1/observers/ana" }.count == 1, "a join is not echoed back")
        #expect(centre.records.filter { $0.topic == "beacons/100/1/observers/ana" }.count == 1)

        // The store broker dies: its bridge's will tells the centre.
        await store.kill()
        #expect(await centre.waitFor(topic: "stores/100/bridge", text: "0", timeout: 30) != nil, "\(central.diagnostics)")
        await local.stop()
        await centre.stop()
        await central.stop()
    }
}

import BeaconKit
import Contract
import Brain
import BrainCore
import Config
import Foundation
import TestSupport
import Testing
import Tracking

/// A store whose greeter roster is driven by proximity, against a real Mosquitto: the
/// gateways' RSSI reports of a customer walking in, to the counter, away and out.
@Suite("proximity roster with a real broker", .serialized, .capturingLogs)
struct ProximityRosterBrokerTests {
    @Test("a registry customer who walks to the counter appears on the roster, and leaves it at far and at the exit")
    func walkToTheCounter() async throws {
        let directory = try TemporaryDirectory("brain-proximity-roster")
        let broker = try await MosquittoBroker.start(in: directory)
        // No leaveAfter: a step to near would show at once if it took her off.
        var config = ProximityRosterTests.config(roster: #"{ "from": "proximity", "gateways": ["till"], "leaveAfter": 0 }"#)
        config.brain.exitMinimum = 2
        let brain = try await RunningBrain.start(config, broker: broker)
        let customer = "stores/100/customers/ada"
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["stores/100/#", "beacons/900/1/presence"],
                                                        in: directory)
        let gateways = try await Peer(broker)
        let fob = ProximityRosterTests.adasFob

        // Both gateways of store 100 report every half second of capture time; `till` and `door`
        // are the RSSI (and class) each hears Ada's key fob at, `nil` when it hears nothing.
        var window = 0
        func walk(_ windows: Int, till: (Double, Proximity)?, door: (Double, Proximity)?) throws {
            for _ in 0..<windows {
                let from = t(Double(window) / 2)
                for (gateway, heard) in [("till", till), ("door", door)] {
                    try gateways.publish("gateways/\(gateway)/rssi",
                                         rssiReport(gateway, from: from, to: from + 0.5, heard.map { [(fob, $0.0)] } ?? [],
                                                    heard?.1 ?? .far).json)
                }
                window += 1
            }
        }

        // In at the door, then near the counter: in the store, not on the roster.
        try walk(6, till: (-82, .far), door: (-62, .near))
        try walk(6, till: (-66, .near), door: (-75, .far))
        #expect(await watch.waitForJSON(on: "beacons/900/1/presence", timeout: 30) != nil, "\(broker.diagnostics)")
        // At the counter: on the roster, with the registry's profile.
        try walk(8, till: (-48, .immediate), door: (-80, .far))
        let entry = await watch.waitForJSON(on: customer, timeout: 30)
        #expect(entry?["name"] == .string("Ada"), "\(watch.records)")
        #expect(entry?["favorite"] == .string("flat white"))
        #expect(entry?["photo"] == .null)
        #expect(entry?["beacon"] == fob.json)
        let roster = await watch.waitForJSON(on: "stores/100/roster", timeout: 30) { $0["count"] == .number(1) }
        #expect(roster?["customers"]?.arrayValue?.first?["client"] == .string("ada"))
        #expect(watch.json(on: customer).count == 1)

        // She steps back to near and forth: she stays. Then walks off to the far end of the shop.
        try walk(4, till: (-64, .near), door: (-80, .far))
        try walk(2, till: (-50, .immediate), door: (-80, .far))
        try walk(4, till: (-86, .far), door: (-70, .far))
        #expect(await watch.waitForDeletion(of: customer, timeout: 30), "\(watch.records)")
        let empty = await watch.waitForJSON(on: "stores/100/roster", timeout: 30) { $0["count"] == .number(0) }
        #expect(empty?["customers"] == .array([]))
        #expect(watch.json(on: customer).count == 1, "no flap while she stood between immediate and near")

        // Back at the counter, then out of the shop: no gateway hears her and she exits.
        try walk(6, till: (-47, .immediate), door: (-80, .far))
        #expect(await watch.waitForJSON(on: customer, timeout: 30) { _ in watch.json(on: customer).count == 2 } != nil)
        let deletions = watch.records.filter { $0.topic == customer && $0.payload.isEmpty }.count
        try walk(12, till: nil, door: nil)
        #expect(await watch.waitForDeletion(of: "beacons/900/1/presence", timeout: 30), "\(watch.records)")
        #expect(await eventually(timeout: 30) {
            watch.records.filter { $0.topic == customer && $0.payload.isEmpty }.count == deletions + 1
        }, "the entry goes with the exit")
        #expect(brain.statistics.beacons == 0)

        // Nothing about her is left retained: a greeter that connects now gets the empty
        // summary and no customer (customers are subscribed first, so they would come first).
        let late = try await MosquittoSubscriber.start(broker: broker, filters: ["stores/100/customers/+", "stores/100/roster"],
                                                       in: directory)
        #expect(await late.waitForJSON(on: "stores/100/roster", timeout: 30) != nil)
        #expect(late.records.filter { $0.topic.hasPrefix("stores/100/customers/") }.isEmpty, "\(late.records)")

        await late.stop()
        await gateways.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }
}

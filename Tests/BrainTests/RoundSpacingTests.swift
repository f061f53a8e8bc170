import Brain
import BrainCore
import Foundation
import TestSupport
import Testing
import BeaconKit

/// `BrainService.Options.roundSpacing` (`MQTTClientOptions.roundSpacing`): the network thread
/// lets the stores' gateway traffic gather between its rounds, never a request whose sender
/// waits for the answer, and reads all of what gathered.
@Suite("The brain's round spacing", .serialized, .capturingLogs)
struct RoundSpacingTests {
    @Test("with a spacing of 5 s, joins sent one after another's answer are answered at once, and a burst of gateway statuses is read whole")
    func joinsDoNotWaitAndABurstIsReadWhole() async throws {
        let directory = try TemporaryDirectory("brain-spacing")
        let broker = try await MosquittoBroker.start(in: directory)
        let brain = try await RunningBrain.start(testConfig(rules: BrainCoreTests.rules), broker: broker, roundSpacing: 5)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["observers/#"], in: directory)
        let phone = try await Peer(broker)
        // The subscription is in place once a first join's answer arrives.
        try phone.publish("beacons/100/1/observers/first", joinJSON(), retain: true)
        #expect(await watch.waitForJSON(on: "observers/first/inbox", timeout: 10) { $0["type"] == .string("ad") } != nil,
                "\(broker.diagnostics)")
        try phone.publish("beacons/100/1/observers/first", "", retain: true)

        // Eight joins, each sent once the last was answered, each left at once (the join
        // bench's pattern). Had a round of joins, leaves or acknowledgements paused, each join
        // after the first would have waited for the spacing: 35 s or more in all. Alone they
        // take some tens of milliseconds; at load 28 (the whole suite beside benchmarks) they
        // took 10.9 s, which a spacing of 1 s and a bound of 3.5 s could not tell from a pause.
        let began = ContinuousClock.now
        for i in 0..<8 {
            try phone.publish("beacons/100/1/observers/ada\(i)", joinJSON(), retain: true)
            let reply = await watch.waitForJSON(on: "observers/ada\(i)/inbox", timeout: 10) { $0["type"] == .string("ad") }
            #expect(reply != nil, "join \(i)")
            try phone.publish("beacons/100/1/observers/ada\(i)", "", retain: true)
        }
        let elapsed = began.duration(to: .now)
        #expect(elapsed < .seconds(25), "8 joins took \(elapsed) s: a round that was not the stores' stream paused")

        // A burst of the stores' traffic: more than a round reads before it leaves the rest to
        // the drain task; every message is received, none dropped.
        let before = brain.statistics.counters.received
        let gateway = try await Peer(broker)
        let count = 600
        for i in 0..<count { try gateway.publish("gateways/g\(i % 4)/status", "online") }
        await gateway.flush()
        // (`before` may have been read before the last leave arrived: at least `count` more.)
        // (A round that reads fewer than 16 packets pauses 5 s: a few such pauses at most.)
        #expect(await eventually(timeout: 60) { brain.statistics.counters.received - before >= count })
        #expect(brain.statistics.droppedEvents == 0)

        await gateway.stop()
        await phone.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }
}

import BeaconKit
import Brain
import MQTT
import Synchronization
import TestSupport
import Testing

/// The brain's priority lane against a real Mosquitto (`InboundLanes`, docs/PERFORMANCE.md,
/// section 4): asserted on the order of the replies, not on time.
@Suite("Brain under a join flood, with a real broker", .serialized, .capturingLogs)
struct FloodLaneTests {
    @Test("a registry owner's join published after a flood of joins is answered before the brain has finished the flood")
    func anOwnerGoesAheadOfAFlood() async throws {
        let floodJoins = 3_000
        let directory = try TemporaryDirectory("brain-flood-lane")
        // No limit on what the broker queues for a client: every reply reaches the watcher.
        let broker = try await MosquittoBroker.start(in: directory, extraConfig: "max_queued_messages 0\n")
        let brain = try await RunningBrain.start(JoinPolicyTests.config(), broker: broker)

        // Every reply on an inbox, in the order the broker delivers them.
        let watcher = try MQTTClient(MQTTClientOptions(broker: broker.brokerURL, clientID: "inbox-watch"))
        try watcher.subscribe(["observers/+/inbox"], qos: 1)
        try watcher.start()
        let replies = Mutex<[String]>([])
        let collecting = Task {
            for await event in watcher.events {
                if case .message(let message) = event { replies.withLock { $0.append(message.topic) } }
            }
        }
        let apps = try await Peer(broker, id: "flood-and-ana")
        // The watcher subscribes once it is connected, which a loaded machine may delay past
        // one probe (a CI rehearsal waited 120 s for a probe sent too early): probe until one
        // arrives, then start from no replies.
        #expect(try await eventually(timeout: 20, interval: 0.5) {
            try apps.publish("observers/probe/inbox", "subscribed?")
            try await Task.sleep(nanoseconds: 200_000_000)
            return replies.withLock { $0.contains("observers/probe/inbox") }
        }, "\(broker.diagnostics)")
        replies.withLock { $0.removeAll() }

        // One connection, so the broker hands the brain Ana's join after every flood join. The
        // flood's names own no registry beacon: each is refused. Ana owns 100/50.
        for i in 0..<floodJoins {
            try apps.publish("beacons/100/1/observers/flood-\(i)", joinJSON(name: "Flood"), retain: true)
        }
        try apps.publish("beacons/100/50/observers/ana", joinJSON(name: "Ana"), retain: true)
        // A probe still on its way may come after; it is not a reply.
        let all = await eventually(timeout: 240) {
            replies.withLock { $0.filter { $0 != "observers/probe/inbox" }.count } == floodJoins + 1
        }
        let order = replies.withLock { $0.filter { $0 != "observers/probe/inbox" } }
        #expect(all, "\(order.count) replies; \(brain.statistics)")

        let floodReplies = order.filter { $0.hasPrefix("observers/flood-") }
        #expect(floodReplies.count == floodJoins && Set(floodReplies).count == floodJoins, "each flood join answered once")
        let ana = try #require(order.firstIndex(of: "observers/ana/inbox"), "Ana's join was answered")
        let lastFlood = try #require(order.lastIndex { $0.hasPrefix("observers/flood-") })
        #expect(ana < lastFlood, "Ana's reply came after all \(floodJoins) flood replies: she waited behind the flood")
        #expect(brain.statistics.droppedEvents == 0)

        collecting.cancel()
        await apps.stop()
        await watcher.stop()
        await brain.stop()
        await broker.stop()
    }
}

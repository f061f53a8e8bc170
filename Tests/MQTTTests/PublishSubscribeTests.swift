import Foundation
import MQTT
import TestSupport
import Testing
import BeaconKit

/// Publishing and subscribing against a real Mosquitto, observed by `mosquitto_sub`.
@Suite("Publish and subscribe")
struct PublishSubscribeTests {
    @Test("QoS 0 and QoS 1 publishes reach an independent subscriber")
    func publishQoS0And1() async throws {
        let directory = try TemporaryDirectory("mqtt-publish")
        let broker = try await MosquittoBroker.start(in: directory)
        let observer = try await MosquittoSubscriber.start(broker: broker, filters: ["shop/#"], in: directory)
        let (client, log) = try startedClient(options(broker))
        #expect(await log.waitForConnection(), "\(broker.diagnostics)")
        #expect(client.isConnected)

        try client.publish(MQTTMessage(topic: "shop/zero", text: "hello", qos: 0))
        try client.publish(MQTTMessage(topic: "shop/one", text: "world", qos: 1))
        #expect(await client.waitUntilPublished(timeout: 5))

        let zero = await observer.waitFor(topic: "shop/zero")
        let one = await observer.waitFor(topic: "shop/one")
        #expect(zero?.text == "hello", "\(observer.process.diagnostics)")
        #expect(one?.text == "world")
        #expect(zero?.retained == false && one?.retained == false)
        if case .connected(let sessionPresent) = log.all.first { #expect(!sessionPresent) }

        await client.stop()
        await observer.stop()
        await broker.stop()
    }

    /// select(2), which libmosquitto's own loop uses, cannot watch descriptor 1024 or above;
    /// a process with many files open (a busy server, a whole test run) gets such numbers,
    /// and a client on select would never connect.
    @Test("a client whose socket is numbered above 1023 connects, publishes and receives")
    func highDescriptor() async throws {
        let directory = try TemporaryDirectory("mqtt-high-fd")
        let broker = try await MosquittoBroker.start(in: directory)
        let client = try MQTTClient(options(broker))
        let log = EventLog(client)
        try client.subscribe(["high/#"], qos: 1)
        // Every descriptor number below 1100 taken just while start() makes the socket, so it
        // gets a higher one. The other tests of this process run meanwhile: the limit leaves
        // them thousands more, and close-on-exec keeps these out of the programs they start.
        try allowDescriptors(1100 + 4096, needed: 1100 + 256)
        var held: [Int32] = []
        while true {
            let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { break }
            if fd >= 1100 {
                close(fd)
                break
            }
            held.append(fd)
        }
        do {
            defer { for fd in held { close(fd) } }
            try client.start()
        }
        #expect(await log.waitForConnection(), "\(broker.diagnostics)")
        #expect(await awaitSubscription(client, log, topic: "high/probe"))
        try client.publish(MQTTMessage(topic: "high/echo", text: "from above 1023", qos: 1))
        #expect(await log.waitForMessage(topic: "high/echo")?.text == "from above 1023")
        await client.stop()
        await broker.stop()
    }

    /// nats-server 2.9 writes a client's whole MQTT session to JetStream after each SUBSCRIBE
    /// and UNSUBSCRIBE packet, before it reads the next: with a packet per filter, a brain of
    /// 250 stores (2,500 filters) took 9-19 s to subscribe (docs/fleet.md). The broker's log
    /// counts the packets; what each delivers shows every filter is in them.
    @Test("many filters go out a thousand to a packet: at the first connection, when connected, and again at the next")
    func manyFiltersFewPackets() async throws {
        let directory = try TemporaryDirectory("mqtt-many-filters")
        let broker = try await MosquittoBroker.start(in: directory)
        let id = "many-\(UUID().uuidString.prefix(8))"
        let client = try MQTTClient(options(broker, id: id))
        let log = EventLog(client)
        func packets(_ kind: String) -> Int { broker.log.components(separatedBy: "Received \(kind) from \(id)").count - 1 }
        let filters = (0..<2_500).map { "shop/\($0)/+" }
        try client.subscribe(filters, qos: 1)
        try client.start()
        #expect(await log.waitForConnection())
        #expect(await awaitSubscription(client, log, topic: "shop/0/probe"))
        #expect(await awaitSubscription(client, log, topic: "shop/2499/probe"))
        #expect(packets("SUBSCRIBE") == 3, "\(broker.diagnostics)")

        // Connected: 2,000 of them unsubscribed, 10 more at QoS 0.
        try client.unsubscribe(Array(filters.prefix(2_000)))
        try client.subscribe((0..<10).map { "till/\($0)" }, qos: 0)
        #expect(await awaitSubscription(client, log, topic: "till/9"))
        // Published in this order by one client, delivered in it: past till/0, shop/0 was not.
        try client.publish(MQTTMessage(topic: "shop/0/gone", text: "unsubscribed"))
        try client.publish(MQTTMessage(topic: "till/0", text: "after"))
        #expect(await log.waitForMessage(topic: "till/0")?.text == "after")
        #expect(!log.messages.contains { $0.topic == "shop/0/gone" })
        #expect(packets("UNSUBSCRIBE") == 2, "\(broker.diagnostics)")
        #expect(packets("SUBSCRIBE") == 4)

        // The next connection subscribes to what is left, a packet for each QoS.
        await broker.kill()
        _ = await log.waitForDisconnection()
        try await broker.restart()
        #expect(await log.waitForConnection(number: 2), "\(log.all)\n\(broker.diagnostics)")
        #expect(await awaitSubscription(client, log, topic: "shop/2000/again"))
        #expect(await awaitSubscription(client, log, topic: "till/5"))
        #expect(packets("SUBSCRIBE") == 6, "\(broker.diagnostics)")
        try client.publish(MQTTMessage(topic: "shop/2000/qos", text: "1", qos: 1))
        let qos = await log.waitForMessage(topic: "shop/2000/qos")?.qos
        #expect(qos == 1, "the filters subscribed at QoS 1 are again")

        await client.stop()
        await broker.stop()
    }

    @Test("a subscription made before start receives messages from another client, bytes intact")
    func subscribeReceives() async throws {
        let directory = try TemporaryDirectory("mqtt-subscribe")
        let broker = try await MosquittoBroker.start(in: directory)
        let client = try MQTTClient(options(broker))
        let log = EventLog(client)
        try client.subscribe(["inbox/#"], qos: 1)
        try client.start()
        #expect(await log.waitForConnection())
        #expect(await awaitSubscription(client, log, topic: "inbox/probe"))

        try await run("mosquitto_pub", ["-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1",
                                        "-t", "inbox/greeting", "-m", "hi there"], in: directory)
        let greeting = await log.waitForMessage(topic: "inbox/greeting")
        #expect(greeting == MQTTMessage(topic: "inbox/greeting", text: "hi there", qos: 1, retain: false))

        let bytes = (0...255).map { UInt8($0) }
        try client.publish(MQTTMessage(topic: "inbox/binary", payload: bytes, qos: 1))
        #expect(await log.waitForMessage(topic: "inbox/binary")?.payload == bytes)

        try client.publish(MQTTMessage(topic: "inbox/empty", payload: [], qos: 0))
        #expect(await log.waitForMessage(topic: "inbox/empty")?.payload == [])

        await client.stop()
        #expect(await eventually(timeout: 30) { log.isFinished }, "events finishes after stop()")
        await broker.stop()
    }

    @Test("unsubscribe stops delivery; a later subscribe while connected takes effect at once")
    func unsubscribe() async throws {
        let directory = try TemporaryDirectory("mqtt-unsubscribe")
        let broker = try await MosquittoBroker.start(in: directory)
        let (client, log) = try startedClient(options(broker))
        #expect(await log.waitForConnection())
        try client.subscribe(["news/#", "marker"])
        #expect(await awaitSubscription(client, log, topic: "news/probe"))

        try client.unsubscribe(["news/#"])
        #expect(await eventually { broker.log.contains("Sending UNSUBACK") }, "\(broker.diagnostics)")
        // In-order delivery: once the marker published after it arrives, news/late would have too.
        try client.publish(MQTTMessage(topic: "news/late", text: "x", qos: 1))
        try client.publish(MQTTMessage(topic: "marker", text: "m", qos: 1))
        #expect(await log.waitForMessage(topic: "marker") != nil)
        #expect(!log.messages.contains { $0.topic == "news/late" })

        await client.stop()
        await broker.stop()
    }

    @Test("retained publish reaches a later subscriber; an empty retained payload deletes it")
    func retainedPublishAndDelete() async throws {
        let directory = try TemporaryDirectory("mqtt-retained")
        let broker = try await MosquittoBroker.start(in: directory)
        let (client, log) = try startedClient(options(broker))
        #expect(await log.waitForConnection())

        try client.publish(MQTTMessage(topic: "beacons/1/2/presence", text: "{\"zone\":\"door\"}", qos: 1, retain: true))
        #expect(await client.waitUntilPublished(timeout: 5))
        let late = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/#"], in: directory)
        let stored = await late.waitFor(topic: "beacons/1/2/presence")
        #expect(stored?.retained == true, "\(late.process.diagnostics)")
        #expect(stored?.text == "{\"zone\":\"door\"}")

        try client.publish(MQTTMessage(topic: "beacons/1/2/presence", payload: [], qos: 1, retain: true))
        try client.publish(MQTTMessage(topic: "beacons/marker", text: "m", qos: 1, retain: true))
        #expect(await client.waitUntilPublished(timeout: 5))
        // The live subscriber sees the deletion as an empty message.
        #expect(await late.waitFor { $0.topic == "beacons/1/2/presence" && $0.payload.isEmpty } != nil)

        let fresh = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/#"], in: directory)
        #expect(await fresh.waitFor(topic: "beacons/marker")?.retained == true)
        #expect(await fresh.caughtUp(on: broker, marker: "beacons/caught-up"))
        #expect(!fresh.records.contains { $0.topic == "beacons/1/2/presence" }, "\(fresh.records)")

        await client.stop()
        await late.stop()
        await fresh.stop()
        await broker.stop()
    }

    @Test("waitUntilPublished is true once every QoS 1 message is acknowledged")
    func waitUntilPublished() async throws {
        let directory = try TemporaryDirectory("mqtt-acks")
        let broker = try await MosquittoBroker.start(in: directory)
        let observer = try await MosquittoSubscriber.start(broker: broker, filters: ["bulk/#"], in: directory)
        let (client, log) = try startedClient(options(broker))
        #expect(await log.waitForConnection())
        #expect(await client.waitUntilPublished(timeout: 0), "nothing outstanding yet")

        for index in 0..<200 {
            try client.publish(MQTTMessage(topic: "bulk/\(index % 7)", text: "\(index)", qos: index % 2))
        }
        #expect(await client.waitUntilPublished(timeout: 5))
        #expect(await eventually(timeout: 5) { observer.records.count == 200 }, "\(observer.records.count) of 200")
        #expect(Set(observer.records.map(\.text)) == Set((0..<200).map(String.init)))
        // QoS 0 may overtake QoS 1 messages waiting for an in-flight slot, but each QoS keeps its order.
        let qos1 = observer.records.compactMap { Int($0.text) }.filter { $0 % 2 == 1 }
        #expect(qos1 == Array(stride(from: 1, to: 200, by: 2)))

        await client.stop()
        await observer.stop()
        await broker.stop()
    }

    @Test("MQTT 5 connects, publishes and subscribes")
    func mqtt5() async throws {
        let directory = try TemporaryDirectory("mqtt-v5")
        let broker = try await MosquittoBroker.start(in: directory)
        var settings = options(broker)
        settings.version = .v5
        let (client, log) = try startedClient(settings)
        #expect(await log.waitForConnection(), "\(broker.diagnostics)")
        try client.subscribe(["five/#"])
        #expect(await awaitSubscription(client, log, topic: "five/probe"))
        try client.publish(MQTTMessage(topic: "five/hello", text: "v5", qos: 1))
        #expect(await log.waitForMessage(topic: "five/hello")?.text == "v5")
        #expect(await client.waitUntilPublished(timeout: 5))
        #expect(broker.log.contains("(p5, c1, k5)"), "the broker saw protocol level 5")

        await client.stop()
        await broker.stop()
    }
}

@Suite("Event buffering")
struct EventBufferingTests {
    @Test("a consumer that does not keep up loses the oldest events, counted; the network thread never waits")
    func boundedBuffer() async throws {
        let directory = try TemporaryDirectory("mqtt-flood")
        // No queue limit at the broker (its default is 1,000 messages a client): every message
        // dropped is then dropped in the client's buffer, where this test counts.
        let broker = try await MosquittoBroker.start(in: directory, extraConfig: "max_queued_messages 0\n")
        // The broker's PINGRESP waits behind every message queued for this client, and
        // libmosquitto closes a connection whose PINGRESP is a keepalive late ("keepalive
        // timeout"): with the tests' 5 s, a client starved of CPU (a loaded CI machine; a
        // test process stopped 500 ms in every 510) reconnected mid-flood, its clean session
        // lost the broker's queue, and nothing was dropped. Ten minutes covers any drain here.
        var settings = options(broker)
        settings.keepalive = 600
        let client = try MQTTClient(settings)
        try client.subscribe(["flood"], qos: 0)
        try client.start()
        #expect(await eventually { client.isConnected })
        // Nobody reads `events`, so the broker's log tells when the subscription is in place.
        #expect(await eventually { broker.log.contains("Sending SUBACK") }, "\(broker.diagnostics)")

        let total = MQTTClient.eventBufferLimit + 5_000
        for index in 0..<total {
            try client.publish(MQTTMessage(topic: "flood", text: "\(index)"))
        }
        // 1 connected event + `total` messages, of which the buffer keeps the newest.
        let expectedDrops = 1 + total - MQTTClient.eventBufferLimit
        // 70,000 messages through the broker and back: 1.3 s alone, 59 s in the full suite,
        // more than 120 s in a CI rehearsal with the package building beside it. The wait
        // ends when they are in; only a failing run waits it out.
        #expect(await eventually(timeout: 90) { client.droppedEvents >= expectedDrops },
                "\(client.droppedEvents) dropped, expected \(expectedDrops)")
        #expect(client.droppedEvents == expectedDrops)

        var iterator = client.events.makeAsyncIterator()
        let oldest = await iterator.next()
        #expect(oldest == .message(MQTTMessage(topic: "flood", text: "\(expectedDrops - 1)")), "the oldest went first")
        await client.stop()
        await broker.stop()
    }

    @Test("a newest-only topic holds one message for a consumer that does not read: the newest, the others counted")
    func newestOnly() async throws {
        let directory = try TemporaryDirectory("mqtt-newest")
        let broker = try await MosquittoBroker.start(in: directory)
        var settings = options(broker)
        settings.newestOnly = ["config"]
        let (client, log) = try startedClient(settings)
        try client.subscribe(["config", "other"], qos: 1)
        #expect(await log.waitForConnection())
        #expect(await eventually { broker.log.contains("Sending SUBACK") }, "\(broker.diagnostics)")

        // Nobody reads `newest(on: "config")` while 500 pushes come; then a message on
        // another topic, which the broker delivers after them, so all 500 have arrived.
        for index in 0..<500 {
            try client.publish(MQTTMessage(topic: "config", text: "\(index)", qos: 1))
        }
        try client.publish(MQTTMessage(topic: "other", text: "after", qos: 1))
        #expect(await log.waitForMessage(topic: "other") != nil)
        #expect(client.supersededMessages == 499)
        #expect(!log.messages.contains { $0.topic == "config" }, "newest-only messages stay off `events`")
        var pushes = client.newest(on: "config").makeAsyncIterator()
        #expect(await pushes.next() == MQTTMessage(topic: "config", text: "499", qos: 1))

        // A consumer that reads gets each in turn.
        try client.publish(MQTTMessage(topic: "config", text: "again", qos: 1))
        #expect(await pushes.next() == MQTTMessage(topic: "config", text: "again", qos: 1))
        #expect(client.supersededMessages == 499)
        await client.stop()
        #expect(await pushes.next() == nil, "finished with the client")
        await broker.stop()
    }
}

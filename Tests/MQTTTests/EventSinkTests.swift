import Foundation
import MQTT
import TestSupport
import Testing
import BeaconKit
import Synchronization

/// `MQTTClient.start(deliveringTo:)`: events handed over on the network thread, and what the
/// sink's owner publishes from `roundEnded` written in the same round (the brain's path).
@Suite("Event sink")
struct EventSinkTests {
    /// What the sink saw: every event in order, and on which thread.
    final class Record: Sendable {
        let events = Mutex<[MQTTEvent]>([])
        /// Messages not yet answered by `roundEnded`.
        let unanswered = Mutex<[MQTTMessage]>([])
        let threads = Mutex<Set<UInt>>([])
        let eventsAlsoOnStream = Atomic<Int>(0)

        var messages: [MQTTMessage] {
            events.withLock { $0.compactMap { if case .message(let m) = $0 { m } else { nil } } }
        }
    }

    @Test("events arrive in order on one thread, none on `events`, and replies published in roundEnded reach a subscriber")
    func deliversInOrderAndWritesReplies() async throws {
        let directory = try TemporaryDirectory("mqtt-sink")
        let broker = try await MosquittoBroker.start(in: directory)
        let observer = try await MosquittoSubscriber.start(broker: broker, filters: ["replies/#"], in: directory)
        let record = Record()
        let client = try MQTTClient(options(broker))
        // The stream stays empty when a sink takes the events.
        let stream = client.events
        let streamReader = Task {
            for await _ in stream { record.eventsAlsoOnStream.add(1, ordering: .relaxed) }
        }
        try client.subscribe(["orders/#"], qos: 1)
        try client.start(deliveringTo: EventSink(
            receive: { event in
                record.threads.withLock { _ = $0.insert(UInt(pthread_self())) }
                record.events.withLock { $0.append(event) }
                if case .message(let message) = event { record.unanswered.withLock { $0.append(message) } }
            },
            roundEnded: { _ in
                record.threads.withLock { _ = $0.insert(UInt(pthread_self())) }
                // Each order answered from the network thread, as the brain answers.
                let orders = record.unanswered.withLock { unanswered in
                    defer { unanswered = [] }
                    return unanswered
                }
                for message in orders {
                    try? client.publish(MQTTMessage(topic: "replies/" + message.topic.dropFirst("orders/".count),
                                                    text: message.text, qos: 1))
                }
            }))
        #expect(await eventually(timeout: 5, interval: 0.01) {
            record.events.withLock { $0.contains { if case .connected = $0 { true } else { false } } }
        }, "\(broker.diagnostics)")

        let (sender, senderLog) = try startedClient(options(broker))
        #expect(await senderLog.waitForConnection())
        // Wait until the subscription is in place: the first order comes back.
        #expect(await eventually(timeout: 5, interval: 0.02) {
            try? sender.publish(MQTTMessage(topic: "orders/probe", text: "probe", qos: 1))
            return await observer.waitFor(topic: "replies/probe", timeout: 0.2) != nil
        })
        let count = 200
        for i in 0..<count { try sender.publish(MQTTMessage(topic: "orders/\(i)", text: "order \(i)", qos: 1)) }
        #expect(await sender.waitUntilPublished(timeout: 10))

        // Every order reached the sink once, in the order sent.
        #expect(await eventually(timeout: 10, interval: 0.02) { record.messages.count { $0.topic != "orders/probe" } == count })
        let orders = record.messages.filter { $0.topic != "orders/probe" }
        #expect(orders.map(\.topic) == (0..<count).map { "orders/\($0)" })
        // Every reply reached an independent subscriber (published on the network thread, no wake-up).
        for i in [0, count / 2, count - 1] {
            #expect(await observer.waitFor(topic: "replies/\(i)")?.text == "order \(i)", "\(observer.process.diagnostics)")
        }
        #expect(await client.waitUntilPublished(timeout: 10))
        // One thread did all of it, and the stream saw nothing.
        #expect(record.threads.withLock { $0.count } == 1)
        #expect(record.eventsAlsoOnStream.load(ordering: .relaxed) == 0)

        await client.stop()
        await sender.stop()
        streamReader.cancel()
        await observer.stop()
        await broker.stop()
    }
}

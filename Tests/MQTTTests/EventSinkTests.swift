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
        /// Rounds that ended with messages to answer, and the rounds that said more was waiting.
        let roundsWithMessages = Atomic<Int>(0)
        let backlogRounds = Atomic<Int>(0)

        var messages: [MQTTMessage] {
            events.withLock { $0.compactMap { if case .message(let m) = $0 { m } else { nil } } }
        }
    }

    /// With a `roundSpacing` (the brain's) the same, and a burst is read in a few rounds: the
    /// pause lets it gather and a round reads until the socket is empty.
    @Test("events arrive in order on one thread, none on `events`, and replies published in roundEnded reach a subscriber",
          arguments: [0, 0.005])
    func deliversInOrderAndWritesReplies(roundSpacing: Double) async throws {
        let directory = try TemporaryDirectory("mqtt-sink")
        let broker = try await MosquittoBroker.start(in: directory)
        let observer = try await MosquittoSubscriber.start(broker: broker, filters: ["replies/#"], in: directory)
        let record = Record()
        var clientOptions = options(broker)
        clientOptions.roundSpacing = roundSpacing
        let client = try MQTTClient(clientOptions)
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
            roundEnded: { moreWaiting in
                record.threads.withLock { _ = $0.insert(UInt(pthread_self())) }
                // Each order answered from the network thread, as the brain answers.
                let orders = record.unanswered.withLock { unanswered in
                    defer { unanswered = [] }
                    return unanswered
                }
                if !orders.isEmpty { record.roundsWithMessages.add(1, ordering: .relaxed) }
                if moreWaiting { record.backlogRounds.add(1, ordering: .relaxed) }
                for message in orders {
                    try? client.publish(MQTTMessage(topic: "replies/" + message.topic.dropFirst("orders/".count),
                                                    text: message.text, qos: 1))
                }
                // Orders are a stream: the next may gather (`roundSpacing`).
                return !orders.isEmpty
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
        // A burst: more than a round with a `roundSpacing` reads (`readAhead`) if it all came at once.
        let count = 2_000
        let roundsBefore = record.roundsWithMessages.load(ordering: .relaxed)
        for i in 0..<count { try sender.publish(MQTTMessage(topic: "orders/\(i)", text: "order \(i)", qos: 1)) }
        #expect(await sender.waitUntilPublished(timeout: 30))

        // Every order reached the sink once, in the order sent.
        #expect(await eventually(timeout: 30, interval: 0.02) { record.messages.count { $0.topic != "orders/probe" } == count })
        let orders = record.messages.filter { $0.topic != "orders/probe" }
        #expect(orders.map(\.topic) == (0..<count).map { "orders/\($0)" })
        let rounds = record.roundsWithMessages.load(ordering: .relaxed) - roundsBefore
        if roundSpacing > 0 {
            // Gathered: far fewer rounds than messages (each round reads what came during the pause).
            #expect(rounds < count / 4, "\(rounds) rounds for \(count) orders")
        }
        // Every reply reached an independent subscriber (published on the network thread, no wake-up).
        for i in [0, count / 2, count - 1] {
            #expect(await observer.waitFor(topic: "replies/\(i)")?.text == "order \(i)", "\(observer.process.diagnostics)")
        }
        #expect(await client.waitUntilPublished(timeout: 30))
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

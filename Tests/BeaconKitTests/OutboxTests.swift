import BeaconKit
import Testing

/// What the gateway and the brain keep while their broker is away.
@Suite("Outbox")
struct OutboxTests {
    static func state(_ topic: String, _ text: String) -> MQTTMessage { MQTTMessage(topic: topic, text: text, qos: 1, retain: true) }
    static func event(_ text: String) -> MQTTMessage { MQTTMessage(topic: "beacons/100/1/events", text: text, qos: 1, retain: false) }

    @Test("retained state is kept latest per topic and never dropped; the rest in order, the oldest dropped first")
    func onePolicy() {
        var outbox = Outbox(limit: 3)
        outbox.queue(Self.state("beacons/100/1/presence", "counter"))
        for n in 1...5 { outbox.queue(Self.event("\(n)")) }
        outbox.queue(Self.state("brain/visits/100/2", "sealed"))
        outbox.queue(Self.state("beacons/100/1/presence", ""))   // deleted: the visit ended
        #expect(outbox.depth == 5)
        #expect(outbox.dropped == 2)
        let sent = outbox.drain()
        // The others first (older than the latest state), then state in the order first kept.
        #expect(sent.map(\.text) == ["3", "4", "5", "", "sealed"])
        #expect(sent.map(\.topic).suffix(2) == ["beacons/100/1/presence", "brain/visits/100/2"])
        #expect(outbox.depth == 0 && outbox.drain().isEmpty)
        #expect(outbox.dropped == 2, "the count of dropped messages stays for health")
    }
}

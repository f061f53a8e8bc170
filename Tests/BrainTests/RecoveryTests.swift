import BeaconKit
import Contract
import Testing
import BrainCore

/// The brain across broker outages, in memory (docs/brain.md "Broker outages"): after a
/// reconnect it answers nothing twice and closes what ended while it was away, once.
@Suite struct RecoveryTests {
    static let rules = """
    [
      { "name": "hello", "when": "join", "then": [ { "do": "greeting", "text": "Hello {customer}" } ] },
      { "name": "arrive", "when": "enter",
        "then": [ { "do": "publish", "topic": "displays/enter/{minor}", "text": "in" }, { "do": "greeting", "text": "at {zone}" } ] },
      { "name": "depart", "when": "exit", "then": [ { "do": "publish", "topic": "displays/exit/{minor}", "text": "out" } ] },
      { "name": "bye", "when": "leave", "then": [ { "do": "publish", "topic": "displays/bye/{client}", "text": "bye" } ] }
    ]
    """

    /// Effects: inbox messages without their time, and rule publishes.
    static func effects(_ messages: ArraySlice<MQTTMessage>) -> [String] {
        messages.compactMap { message in
            if message.topic.hasPrefix("displays/") { return message.topic + " " + message.text }
            guard message.topic.hasSuffix("/inbox"), var json = message.json?.objectValue else { return nil }
            json["ts"] = nil
            return message.topic + " " + JSONValue.object(json).jsonText
        }
    }

    /// A store with Ana joined to 100/2, beacons 100/1 and 100/2 at the door.
    func store() -> Harness {
        var h = Harness(config: testConfig(rules: Self.rules))
        h.publish("gateways/door/status", "online", retain: true, at: t(1))
        h.publish("observers/ana/status", "online", retain: true, at: t(1))
        h.join("ana", window, at: t(1))
        h.announce(counter, by: "door", rssi: -60, at: t(2))
        h.announce(window, by: "door", rssi: -60, at: t(2))
        return h
    }

    /// The broker comes back (with or without its retained state); the brain reconnects and
    /// reads the retained state back.
    func reconnect(_ h: inout Harness, persistence: Bool, at now: CaptureTime) {
        if !persistence { h.retained = [:] }
        h.apply(h.core.reconnect(at: now))
        for (topic, payload) in h.retained.sorted(by: { $0.key < $1.key }) {
            h.apply(h.core.receive(topic: topic, payload: Array(payload.utf8), retained: true, at: now))
        }
        h.apply(h.core.settle(at: now))
    }

    @Test(arguments: [false, true])
    func anOutageAnswersNothingTwiceAndLosesNoExit(persistence: Bool) throws {
        var h = store()
        let start = h.sent.count
        let before = Self.effects(h.sent[...])
        #expect(before.count == 5, "\(before)")
        // While the broker is away, 100/2 leaves the door; the broker comes back.
        reconnect(&h, persistence: persistence, at: t(20))
        #expect(Self.effects(h.sent[start...]).isEmpty, "nothing before the clients are back")
        // The door gateway reconnects: online, the presence it still holds, the deletion it queued.
        h.publish("gateways/door/status", "online", retain: true, at: t(21))
        h.announce(counter, by: "door", rssi: -60, at: t(21))
        h.withdraw(window, by: "door", at: t(21))
        // Ana's app reconnects: online and the same join.
        h.publish("observers/ana/status", "online", retain: true, at: t(22))
        h.join("ana", window, at: t(22))
        h.advance(to: t(30))
        #expect(Self.effects(h.sent[start...]) == ["displays/exit/2 out"])
        // Without persistence the broker lost the brain's records: they are written again.
        #expect(h.retained[h.topics.visitRecord(of: counter)] != nil)
        #expect(h.retained[h.topics.answeredRecord(of: window, client: "ana")] != nil)
        #expect(h.retainedJSON(h.topics.presence(of: counter))?["since"] == .string(t(2).iso8601))
        #expect(h.retained[h.topics.presence(of: window)] == nil)
        #expect(h.retained[h.topics.customer("ana", ofStore: 100)] != nil)
        #expect(h.core.counters.leaves == 0)
    }

    /// The door gateway is back before the brain's marker returns and sends the deletion it
    /// queued: the visit ends while the retained state is still being read, and the broker,
    /// without persistence, holds no presence for it. The fleet presence subscribers saw
    /// before the outage is deleted all the same (the outage fault test saw it stay).
    /// A gateway back from its own outage sends its reports only when the brain asks, so its
    /// deletion waits for them for `resendWait` (10 s, FleetPresence.gatewayPresenceDeleted);
    /// this door sends none, so the visit ends then, and the read-back meanwhile wrote the
    /// fleet presence the brain still held.
    @Test func aVisitEndingWhileReadingBackDeletesItsPresence() throws {
        var h = store()
        let start = h.sent.count
        h.retained = [:]
        h.apply(h.core.reconnect(at: t(20)))
        h.publish("gateways/door/status", "online", retain: true, at: t(21))
        h.announce(counter, by: "door", rssi: -60, at: t(21))
        h.withdraw(window, by: "door", at: t(21))
        h.apply(h.core.settle(at: t(21)))
        h.publish("observers/ana/status", "online", retain: true, at: t(22))
        h.join("ana", window, at: t(22))
        h.advance(to: t(30))
        #expect(Self.effects(h.sent[start...]) == ["displays/exit/2 out"])
        let deletions = h.sent[start...].filter { $0.topic == h.topics.presence(of: window) }
        #expect(deletions.map(\.payload.isEmpty) == [false, true], "\(deletions)")
        #expect(h.retainedJSON(h.topics.presence(of: counter))?["since"] == .string(t(2).iso8601))
    }

    /// The door's delete of 100/2 reached the brain, and the broker acknowledged it but was
    /// killed before saving it: it comes back holding the old presence. Read back after the
    /// reconnect, that presence (its `since` no later than the visit that ended) starts no
    /// new visit; the door deletes it once it reads it back too.
    @Test func staleRetainedPresenceOfAVisitThatEndedDoesNotEnterAgain() throws {
        var h = store()
        h.withdraw(window, by: "door", at: t(5))
        let start = h.sent.count
        let stale = h.topics.presence(of: window, seenBy: "door")
        h.retained[stale] = presenceJSON(window, "door", rssi: -60)
        reconnect(&h, persistence: true, at: t(20))
        h.publish("gateways/door/status", "online", retain: true, at: t(21))
        h.announce(counter, by: "door", rssi: -60, at: t(21))
        h.withdraw(window, by: "door", at: t(21))
        h.advance(to: t(30))
        #expect(Self.effects(h.sent[start...]).isEmpty, "no enter (nor exit) for 100/2 again")
        #expect(h.retained[h.topics.presence(of: window)] == nil)
        // A new visit of the same gateway (a later `since`) enters as ever.
        h.publish(stale, presenceJSON(window, "door", rssi: -60, since: t(40)), retain: true, at: t(40))
        #expect(Self.effects(h.sent[start...]).filter { $0.hasPrefix("displays/") } == ["displays/enter/2 in"])
    }

    /// The same with the zone fusion deciding: the door's RSSI reports make 100/2's visit and
    /// their silence ends it, while the door's presence (since t(0)) stays behind retained, its
    /// delete lost. Read back after a reconnect it starts no second visit (the fusion takes a
    /// retained presence as a visit its reports missed); a later track's presence does.
    @Test func staleRetainedPresenceDoesNotStartAgainAVisitTheReportsEnded() throws {
        var h = Harness(config: testConfig(rules: Self.rules))
        h.publish("gateways/door/status", "online", retain: true, at: t(1))
        let start = h.sent.count
        h.announce(window, by: "door", rssi: -60, at: t(1))
        for i in 1...3 { h.see(window, by: "door", rssi: -60, at: t(Double(i))) }
        h.quiet("door", from: t(3), until: t(30))
        #expect(Self.effects(h.sent[start...]) == ["displays/enter/2 in", "displays/exit/2 out"])
        let stale = h.topics.presence(of: window, seenBy: "door")
        #expect(h.retained[stale] != nil, "the door's delete was lost")
        let after = h.sent.count
        reconnect(&h, persistence: true, at: t(31))
        h.quiet("door", from: t(30), until: t(45))
        #expect(Self.effects(h.sent[after...]).isEmpty, "no enter for 100/2 again")
        #expect(h.retained[h.topics.presence(of: window)] == nil)
        h.retained[stale] = presenceJSON(window, "door", rssi: -60, since: t(40))
        reconnect(&h, persistence: true, at: t(46))
        #expect(Self.effects(h.sent[after...]) == ["displays/enter/2 in"])
    }

    @Test func theMassWillOfABrokerShutdownIsNotEveryClientDying() throws {
        var h = store()
        let start = h.sent.count
        // A graceful broker stop: every will, then the brain's own connection drops.
        h.publish("gateways/door/status", "offline", retain: true, at: t(10))
        h.publish("observers/ana/status", "offline", retain: true, at: t(10))
        // The broker persisted the wills; everyone comes back 10 s later.
        reconnect(&h, persistence: true, at: t(20))
        h.advance(to: t(21))
        #expect(Self.effects(h.sent[start...]).isEmpty)
        #expect(h.core.presence[counter] != nil)
        h.publish("gateways/door/status", "online", retain: true, at: t(24))
        h.announce(counter, by: "door", rssi: -60, at: t(24))
        h.announce(window, by: "door", rssi: -60, at: t(24))
        h.publish("observers/ana/status", "online", retain: true, at: t(25))
        h.join("ana", window, at: t(25))
        h.advance(to: t(80))
        #expect(Self.effects(h.sent[start...]).isEmpty)
        #expect(h.retained[h.topics.observer("ana", of: window)] != nil, "Ana's profile was not deleted")
        #expect(h.core.observers.count == 1)
        #expect(h.core.presence.beacons.count == 2)
    }

    /// The same, with the brain's clock running through the outage: the wills' grace runs
    /// out while the brain is disconnected, and they must not be acted on then either
    /// (BrokerOutageTests, graceful stop: 100/9's exit dated when the will's grace ended,
    /// 2.5 s, not by its reports, 3.5 s).
    @Test func theMassWillIsNotActedOnWhileTheBrainIsDisconnected() throws {
        var h = store()
        let start = h.sent.count
        h.publish("gateways/door/status", "offline", retain: true, at: t(10))
        h.publish("observers/ana/status", "offline", retain: true, at: t(10))
        h.core.connectionLost()
        h.advance(to: t(15))  // past the 3 s grace, the broker still away
        #expect(Self.effects(h.sent[start...]).isEmpty)
        #expect(h.core.presence.beacons.count == 2)
        #expect(h.core.observers.count == 1)
        reconnect(&h, persistence: true, at: t(20))
        h.publish("gateways/door/status", "online", retain: true, at: t(21))
        h.announce(counter, by: "door", rssi: -60, at: t(21))
        h.announce(window, by: "door", rssi: -60, at: t(21))
        h.publish("observers/ana/status", "online", retain: true, at: t(21))
        h.join("ana", window, at: t(21))
        h.advance(to: t(80))
        #expect(Self.effects(h.sent[start...]).isEmpty)
        #expect(h.core.presence.beacons.count == 2)
    }

    @Test func clientsThatNeverComeBackEndAfterTheReconnectGrace() throws {
        var h = store()
        let start = h.sent.count
        reconnect(&h, persistence: false, at: t(20))
        h.advance(to: t(64))
        #expect(Self.effects(h.sent[start...]).isEmpty)
        h.advance(to: t(65))
        #expect(Set(Self.effects(h.sent[start...])) == ["displays/exit/1 out", "displays/exit/2 out", "displays/bye/ana bye"])
        #expect(h.core.presence.beacons.isEmpty)
        #expect(h.core.observers.count == 0)
    }

    @Test func whatEnteredDuringTheOutageIsAnsweredOnce() throws {
        var h = store()
        let start = h.sent.count
        reconnect(&h, persistence: false, at: t(20))
        h.publish("gateways/door/status", "online", retain: true, at: t(21))
        h.announce(counter, by: "door", rssi: -60, at: t(21))
        h.announce(window, by: "door", rssi: -60, at: t(21))
        let newcomer = BeaconRef(major: 100, minor: 9)
        h.announce(newcomer, by: "door", rssi: -60, at: t(21))
        // The gateway publishes its presence again (a second reconnect of its own).
        h.announce(newcomer, by: "door", rssi: -60, at: t(22))
        h.publish("observers/ana/status", "online", retain: true, at: t(22))
        h.join("ana", window, at: t(22))
        h.advance(to: t(30))
        #expect(Self.effects(h.sent[start...]) == ["displays/enter/9 in"])
    }
}

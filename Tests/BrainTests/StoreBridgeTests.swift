import BeaconKit
import Contract
import Foundation
import Testing
import BrainCore
import Config

/// A store whose bridge to the central broker is down is "unknown", not "everyone left".
@Suite struct StoreBridgeTests {
    /// Store 100 has a broker of its own with two gateways; store 200 is not bridged. Rules
    /// publish every enter and exit, so each transition the brain acts on is counted.
    static let config: FleetConfig = {
        let rules = """
        [ { "name": "in", "when": "enter", "then": [ { "do": "publish", "topic": "log/{store}/enter", "text": "{minor}" } ] },
          { "name": "out", "when": "exit", "then": [ { "do": "publish", "topic": "log/{store}/exit", "text": "{minor}" } ] } ]
        """
        var text = testConfigText(rules: rules)
        text = text.replacingOccurrences(
            of: #""gateways": [ { "id": "door", "zone": "Entrance" }, { "id": "till", "zone": "Counter" } ],"#,
            with: #""gateways": [ { "id": "door", "zone": "Entrance", "store": 100 }, { "id": "till", "zone": "Counter", "store": 100 } ],"#)
        text = text.replacingOccurrences(
            of: #""stores": [ { "major": 100, "name": "Main Street", "ad": { "title": "Deal of the day" } } ],"#,
            with: #""stores": [ { "major": 100, "name": "Main Street", "broker": { "url": "mqtt://store-100.lan", "allowPlaintext": true } }, { "major": 200 } ],"#)
        return try! FleetConfig.parse(text)
    }()

    static let bridge = "stores/100/bridge"

    func transitions(_ h: Harness, from index: Int = 0) -> [String] {
        h.sent[index...].filter { $0.topic.hasPrefix("log/") }.map { "\($0.topic.split(separator: "/")[2]) \($0.text)" }
    }

    /// A brain that has seen store 100's bridge up and the counter beacon enter by a gateway's RSSI report only.
    func running() -> Harness {
        var h = Harness(config: Self.config, retained: [Self.bridge: "1"])
        h.see(counter, by: "door", rssi: -60, at: t(1))
        return h
    }

    @Test func theBrainSubscribesToTheBridgesOfItsStores() {
        #expect(BrainCore(config: Self.config).subscriptions.contains("stores/+/bridge"))
        #expect(BrainCore(config: Self.config, stores: [100]).subscriptions.contains("stores/100/bridge"))
        #expect(!BrainCore(config: Self.config, stores: [200]).subscriptions.contains { $0.hasSuffix("/bridge") })
        #expect(!BrainCore(config: testConfig()).subscriptions.contains { $0.hasSuffix("/bridge") },
                "a fleet without store brokers subscribes to no bridge")
    }

    @Test func whileTheBridgeIsDownTheStoresViewsDoNotExpire() throws {
        var h = running()
        #expect(transitions(h) == ["enter 1"])
        h.publish(Self.bridge, "0", retain: true, at: t(2))
        #expect(h.core.bridges.unknownStores == [100])
        #expect(h.log.contains { $0.message.contains("bridge down") })
        h.advance(to: t(300))
        #expect(transitions(h) == ["enter 1"], "no exit while the store is unknown")
        #expect(h.retained[h.topics.presence(of: counter)] != nil)
        let health = JSONValue(text: h.core.health(client: "b", version: "0", uptime: 1, published: 0, publishFailures: 0,
                                                   at: w(300)).text)
        #expect(health["unknownStores"] == .array([.number(100)]))

        // Healed: the store replays its presence, the gateways' statuses last.
        h.publish(Self.bridge, "1", at: t(301))
        h.announce(counter, by: "door", rssi: -60, at: t(301))
        h.publish("gateways/door/status", "online", retain: true, at: t(301))
        #expect(h.core.bridges.unknownStores == [100], "reconciling until every gateway of the store is in")
        h.publish("gateways/till/status", "online", retain: true, at: t(301))
        #expect(h.core.bridges.unknownStores.isEmpty)
        #expect(transitions(h) == ["enter 1"], "the visit goes on: no second enter, no exit")
    }

    @Test func viewsTheReplayDoesNotConfirmEndOnceWhenTheStoreIsBack() {
        var h = Harness(config: Self.config, retained: [Self.bridge: "1"])
        h.announce(counter, by: "door", rssi: -60, at: t(1))
        h.announce(window, by: "till", rssi: -70, at: t(1))
        h.publish(Self.bridge, "0", retain: true, at: t(5))
        h.advance(to: t(130))
        let before = h.sent.count
        h.publish(Self.bridge, "1", retain: true, at: t(130))
        // The window's deletion was not in the store's queue (say it overflowed); only the
        // counter's presence comes back.
        h.announce(counter, by: "door", rssi: -60, at: t(130.1))
        h.publish("gateways/door/status", "online", retain: true, at: t(130.2))
        #expect(transitions(h, from: before).isEmpty, "nothing decided before the replay is in")
        h.publish("gateways/till/status", "online", retain: true, at: t(130.2))
        #expect(transitions(h, from: before) == ["exit 2"])
        #expect(h.retained[h.topics.presence(of: window)] == nil)
        #expect(h.retained[h.topics.presence(of: counter)] != nil)
        h.advance(to: t(200))
        #expect(transitions(h, from: before) == ["exit 2"])
    }

    /// A view its gateway's reports keep is not ended by a replay that did not confirm it:
    /// the reports end it by their silence, in capture time. A bridge that reconnects without
    /// its `0` having been seen (its node at a NATS centre restarted) replays the store's
    /// retained state, in which a view the reports made has no presence.
    @Test func aViewItsGatewaysReportsKeepOutlivesAReplayThatDidNotConfirmIt() {
        var h = running()
        h.see(counter, by: "door", rssi: -60, at: t(1.5))
        h.see(counter, by: "till", rssi: -80, at: t(1.5))
        let before = h.sent.count
        h.publish(Self.bridge, "1", at: t(2))
        h.publish("gateways/door/status", "online", retain: true, at: t(2))
        h.publish("gateways/till/status", "online", retain: true, at: t(2))
        #expect(h.core.bridges.unknownStores.isEmpty)
        #expect(h.log.contains { $0.message.contains("presence reconciled") })
        #expect(transitions(h, from: before).isEmpty, "the door's reports still hear 100/1: \(transitions(h, from: before))")
        for time in stride(from: 2.0, through: 4, by: 0.5) {
            h.see(counter, by: "door", rssi: -60, at: t(time))
            h.see(counter, by: "till", rssi: -80, at: t(time))
        }
        #expect(transitions(h, from: before).isEmpty)
        #expect(h.core.presence[counter]?.views["door"] != nil)
    }

    @Test func aStoreWhoseReplayIsIncompleteIsReconciledAfterTheLimit() {
        var h = running()
        h.announce(window, by: "till", rssi: -70, at: t(1))
        h.publish(Self.bridge, "0", retain: true, at: t(2))
        h.publish(Self.bridge, "1", retain: true, at: t(50))
        h.see(counter, by: "door", rssi: -60, at: t(51))
        h.advance(to: t(50 + StoreBridges.reconcileLimit - 1))
        #expect(h.core.bridges.unknownStores == [100])
        h.advance(to: t(50 + StoreBridges.reconcileLimit))
        #expect(h.core.bridges.unknownStores.isEmpty)
        #expect(transitions(h) == ["enter 1", "enter 2", "exit 2"])
    }

    @Test func aBrainStartingWhileTheStoreIsUnknownHoldsItsVisits() throws {
        var first = Harness(config: Self.config, retained: [Self.bridge: "1"])
        first.announce(counter, by: "door", rssi: -60, at: t(1))
        first.announce(window, by: "door", rssi: -60, at: t(1))
        let since = try #require(first.retainedJSON(first.topics.visitRecord(of: counter))?["since"])
        // The central broker lost the store's presence but kept the brain's records, and the
        // store's bridge is down.
        var state = first.retained
        state[first.topics.presence(of: counter, seenBy: "door")] = nil
        state[first.topics.presence(of: window, seenBy: "door")] = nil
        state[Self.bridge] = "0"
        var h = Harness(config: Self.config, retained: state, at: t(60))
        #expect(transitions(h).isEmpty, "no exit for a store that is unknown")
        #expect(h.retained[h.topics.visitRecord(of: counter)] != nil)
        #expect(h.retained[h.topics.presence(of: counter)] != nil, "its fleet presence stays")

        h.publish(Self.bridge, "1", retain: true, at: t(70))
        h.announce(counter, by: "door", rssi: -60, at: t(70.1))
        h.publish("gateways/door/status", "online", retain: true, at: t(70.2))
        h.publish("gateways/till/status", "online", retain: true, at: t(70.2))
        #expect(transitions(h) == ["exit 2"], "the counter's visit goes on, the window's ended")
        #expect(h.retainedJSON(h.topics.visitRecord(of: counter))?["since"] == since)
        #expect(h.retainedJSON(h.topics.presence(of: counter))?["since"] == since)
        #expect(h.retained[h.topics.visitRecord(of: window)] == nil)
    }

    /// The central broker restarts without its retained messages while the brain keeps its
    /// state: a store whose status does not come back is unknown, so the reconnect grace does
    /// not end its visits; its bridge's return reconciles it.
    @Test(arguments: [false, true])
    func aBrokerThatLostTheStoresStatusLeavesItUnknown(storeCutOff: Bool) {
        var h = running()
        h.announce(window, by: "till", rssi: -70, at: t(1))
        if storeCutOff { h.publish(Self.bridge, "0", retain: true, at: t(2)) }
        h.retained = [:]
        h.apply(h.core.reconnect(at: t(10)))
        h.apply(h.core.settle(at: t(10)))
        #expect(h.core.bridges.unknownStores == [100])
        h.advance(to: t(120))
        #expect(transitions(h) == ["enter 1", "enter 2"], "no exit after the reconnect grace: the store is unknown")
        h.publish(Self.bridge, "1", retain: true, at: t(130))
        h.announce(counter, by: "door", rssi: -60, at: t(130))
        h.publish("gateways/door/status", "online", retain: true, at: t(130))
        h.publish("gateways/till/status", "online", retain: true, at: t(130))
        h.advance(to: t(200))
        #expect(transitions(h) == ["enter 1", "enter 2", "exit 2"])
        #expect(h.retained[h.topics.presence(of: counter)] != nil, "written again to the broker that lost it")
    }

    /// A centre that delivers the stores' retained statuses after the brain has settled (a NATS
    /// centre: docs/fleet.md, "1,000 stores, light"): the store starts unknown, and a live
    /// report of one of its gateways shows its bridge up, so its beacons enter and leave as
    /// anywhere (held, the exit never came); the retained `1` read later changes nothing.
    @Test func aStoreWhoseStatusIsNotReadYetIsUpOnceItsGatewaysAreHeard() {
        var h = Harness(config: Self.config)
        #expect(h.core.bridges.unknownStores == [100])
        h.see(counter, by: "door", rssi: -60, at: t(1))
        #expect(h.core.bridges.unknownStores.isEmpty, "its gateway heard live")
        #expect(h.log.contains { $0.message.contains("taking the bridge as up") })
        h.quiet("door", from: t(1), until: t(100))
        #expect(transitions(h) == ["enter 1", "exit 1"])
        // The retained status, delivered late.
        h.apply(h.core.receive(topic: Self.bridge, payload: Array("1".utf8), retained: true, at: t(101)))
        #expect(h.core.bridges.unknownStores.isEmpty)
        // Once its status is read, only the bridge says: its will makes it unknown again.
        h.publish(Self.bridge, "0", at: t(102))
        h.see(counter, by: "door", rssi: -60, at: t(103))
        #expect(h.core.bridges.unknownStores == [100])
    }

    @Test func aStoreThatWasNeverSeenUpIsUnknownAndOthersAreNot() {
        var h = Harness(config: Self.config)
        #expect(h.core.bridges.unknownStores == [100])
        h.see(otherStore, by: "gate", rssi: -60, at: t(1))
        h.quiet("gate", from: t(1), until: t(100))
        #expect(transitions(h) == ["enter 7", "exit 7"], "store 200 has no bridge: its silence counts")
        h.publish(Self.bridge, "garbage", at: t(101))
        #expect(h.core.counters.malformed[.bridgeStatus] == 1)
    }

    /// A live `1` while the brain took the bridge as up (the centre lost the bridge's
    /// connection without telling, and it reconnected): the store's gateways are asked for
    /// the reports the brain may have missed, each after its last one, when its first live
    /// report comes through the bridge (`FleetPresence.storeReconnected`); not when the brain
    /// does not ask for lost reports.
    @Test(arguments: [true, false])
    func aBridgeThatReconnectsUnseenHasItsGatewaysAskedForTheirReports(asking: Bool) throws {
        var h = Harness(core: BrainCore(config: Self.config), retained: [Self.bridge: "1"], asking: asking)
        for from in stride(from: 0.0, to: 2, by: 0.5) {
            h.publish(h.topics.rssiReports(ofGateway: "door"), rssiReport("door", from: from, to: from + 0.5, [(counter, -60)]).json,
                      at: t(from + 0.5))
        }
        let before = h.sent.count
        h.publish(Self.bridge, "1", retain: true, at: t(2.2))
        #expect(!h.sent[before...].contains { $0.topic.hasPrefix("gateways/") }, "asked at its first live report, not at the 1")
        for gateway in ["door", "till"] {
            h.publish(h.topics.rssiReports(ofGateway: gateway), rssiReport(gateway, from: 2, to: 2.5, []).json, at: t(2.5))
        }
        let commands = h.sent[before...].filter { $0.topic.hasPrefix("gateways/") }
        guard asking else {
            #expect(commands.isEmpty)
            return
        }
        // The door reported up to 2 s; the till is known to the brain from nothing: not asked.
        #expect(commands.map(\.topic) == [h.topics.commands(ofGateway: "door")])
        #expect(commands.first?.text == #"{"reports":{"after":"\#(t(2).iso8601)"}}"#)
    }
}

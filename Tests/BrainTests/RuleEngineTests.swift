import BeaconKit
import Contract
import Config
import BrainCore
import Testing
import Tracking

@Suite struct RuleEngineTests {
    let counterEntry = BeaconEntry(id: BeaconID(uuid: storeUUID, major: 100, minor: 1), name: "counter")
    let scope = RuleEngine.Scope(beacon: counter)

    func context(_ trigger: Rule.Trigger, since: CaptureTime = t(0), rssi: Double? = -60,
                 ref: BeaconRef = counter, entry: BeaconEntry? = nil) -> RuleEngine.Context {
        RuleEngine.Context(trigger: trigger, beacon: ref, uuid: storeUUID, entry: entry ?? counterEntry, rssi: rssi, since: since)
    }

    @Test func oncePerVisit() {
        var engine = RuleEngine(rules: [Rule(name: "deal", trigger: .proximity(.immediate), actions: [.ad], once: true)])
        #expect(engine.fire(context(.proximity(.immediate)), scope: scope, at: t(1)).map(\.name) == ["deal"])
        #expect(engine.fire(context(.proximity(.immediate)), scope: scope, at: t(5)).isEmpty)
        // A new visit (a later since) may fire it again.
        #expect(engine.fire(context(.proximity(.immediate), since: t(100)), scope: scope, at: t(101)).map(\.name) == ["deal"])
        // Another beacon has its own memory.
        #expect(engine.fire(context(.proximity(.immediate), ref: window), scope: .init(beacon: window), at: t(5)).count == 1)
    }

    @Test("zones: the deal at the counter fires at the counter, not at the door")
    func zones() {
        var engine = RuleEngine(rules: [Rule(name: "deal", trigger: .proximity(.immediate), zones: ["counter"],
                                             actions: [.ad], once: true)])
        func at(_ zone: String?) -> RuleEngine.Context {
            RuleEngine.Context(trigger: .proximity(.immediate), beacon: counter, uuid: storeUUID, entry: counterEntry,
                               rssi: -50, zone: zone, since: t(0))
        }
        #expect(engine.fire(at("door"), scope: scope, at: t(1)).isEmpty)
        #expect(engine.fire(at(nil), scope: scope, at: t(2)).isEmpty)
        #expect(engine.fire(at("counter"), scope: scope, at: t(3)).map(\.name) == ["deal"])
        #expect(engine.fire(at("counter"), scope: scope, at: t(4)).isEmpty, "once per visit")
    }

    @Test func cooldownInSecondsAlsoAcrossVisits() {
        var engine = RuleEngine(rules: [Rule(name: "barista", trigger: .enter, actions: [.ad], cooldown: .seconds(300))])
        #expect(engine.fire(context(.enter), scope: scope, at: t(0)).count == 1)
        #expect(engine.retire(scope, at: t(10)) == true, "the cooldown outlives the visit")
        #expect(engine.fire(context(.enter, since: t(20)), scope: scope, at: t(20)).isEmpty)
        #expect(engine.fire(context(.enter, since: t(299)), scope: scope, at: t(299)).isEmpty)
        #expect(engine.fire(context(.enter, since: t(300)), scope: scope, at: t(300)).count == 1)
        #expect(engine.retire(scope, at: t(599)) == true)
        #expect(engine.retire(scope, at: t(600)) == false)
        #expect(engine.memory(for: scope) == nil)
    }

    @Test func afterUpdatesAtNearRearmsAfterThatManyUpdatesAtNearOnly() {
        // The navigation library's default: the location at immediate, reset after 5 updates
        // at near, and only updates at near count (nothing else resets the count).
        var engine = RuleEngine(rules: [Rule(name: "where am I", trigger: .proximity(.immediate), actions: [.locationFix],
                                             cooldown: .updates(count: 5, at: .near))])
        #expect(engine.fire(context(.proximity(.immediate)), scope: scope, at: t(0)).count == 1)
        #expect(engine.memory(for: scope)?.disarmed == ["where am I": 0])
        // Back at immediate without five updates at near: nothing.
        #expect(engine.update(counter, proximity: .near).isEmpty)
        #expect(engine.update(counter, proximity: .near).isEmpty)
        #expect(engine.update(counter, proximity: .immediate).isEmpty, "immediate neither counts nor resets")
        #expect(engine.fire(context(.proximity(.immediate)), scope: scope, at: t(5)).isEmpty)
        #expect(engine.update(counter, proximity: .far).isEmpty, "far is no update at near")
        #expect(engine.update(counter, proximity: .unknown).isEmpty, "unknown is no update at near")
        #expect(engine.memory(for: scope)?.disarmed == ["where am I": 2])
        #expect(engine.update(counter, proximity: .near).isEmpty)
        #expect(engine.update(counter, proximity: .near).isEmpty)
        #expect(engine.update(counter, proximity: .near) == [scope], "the fifth update at near")
        #expect(engine.memory(for: scope) == nil)
        #expect(engine.fire(context(.proximity(.immediate)), scope: scope, at: t(10)).count == 1)
        // The beacon leaving the fleet re-arms it.
        #expect(engine.retire(scope, at: t(11)) == false)
        #expect(engine.fire(context(.proximity(.immediate), since: t(20)), scope: scope, at: t(20)).count == 1)
    }

    @Test func rssiAboveUsesTheZoneGatewaysSmoothedRSSI() {
        var engine = RuleEngine(rules: [Rule(name: "close", trigger: .enter, rssiAbove: -80, actions: [.ad])])
        #expect(engine.fire(context(.enter, rssi: nil), scope: scope, at: t(0)).isEmpty)
        #expect(engine.fire(context(.enter, rssi: -80), scope: scope, at: t(0)).isEmpty)
        #expect(engine.fire(context(.enter, rssi: -79.5), scope: scope, at: t(0)).count == 1)
    }

    @Test(arguments: [
        (Rule(name: "by name", trigger: .enter, names: ["counter"], actions: [.ad]), true),
        (Rule(name: "other name", trigger: .enter, names: ["window"], actions: [.ad]), false),
        (Rule(name: "by store", trigger: .enter, stores: [100], actions: [.ad]), true),
        (Rule(name: "other store", trigger: .enter, stores: [200], actions: [.ad]), false),
        (Rule(name: "by id", trigger: .enter, beacons: [.init(uuid: storeUUID, major: 100, minor: 1)], actions: [.ad]), true),
        (Rule(name: "by id, other uuid", trigger: .enter,
              beacons: [.init(uuid: BeaconUUID("00000000-0000-0000-0000-000000000001")!, major: 100, minor: 1)],
              actions: [.ad]), false),
        (Rule(name: "other trigger", trigger: .exit, actions: [.ad]), false),
    ])
    func matching(rule: Rule, fires: Bool) {
        var engine = RuleEngine(rules: [rule])
        #expect(engine.fire(context(.enter), scope: scope, at: t(0)).isEmpty == !fires)
    }

    @Test func joinScopesAreSeparatePerClient() {
        var engine = RuleEngine(rules: [Rule(name: "hello", trigger: .join, actions: [.greeting(template: "hi")], once: true)])
        let ada = RuleEngine.Scope(beacon: counter, client: "ada")
        let bob = RuleEngine.Scope(beacon: counter, client: "bob")
        #expect(engine.fire(context(.join), scope: ada, at: t(1)).count == 1)
        #expect(engine.fire(context(.join), scope: ada, at: t(2)).isEmpty)
        #expect(engine.fire(context(.join), scope: bob, at: t(2)).count == 1)
    }

    @Test func rulesInConfigOrder() {
        var engine = RuleEngine(rules: [
            Rule(name: "b", trigger: .enter, actions: [.ad]),
            Rule(name: "a", trigger: .enter, actions: [.ad]),
        ])
        #expect(engine.fire(context(.enter), scope: scope, at: t(0)).map(\.name) == ["b", "a"])
    }
}

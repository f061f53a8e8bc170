import BeaconKit
import Contract
import BrainCore
import Config
import Foundation
import Testing
import Tracking

/// The behaviours of the four original apps in the brain (issue 13).
@Suite struct OriginalAppsBrainTests {
    static let welcome = """
    [ { "name": "welcome", "when": "join", "fallback": "Hello! Your coffee is on its way.",
        "then": [ { "do": "greeting", "text": "Hello {customer}! A {favorite} is on its way." } ] },
      { "name": "no fallback", "when": "join",
        "then": [ { "do": "greeting", "text": "Your usual {favorite}?" } ] },
      { "name": "barista", "when": "join", "fallback": "someone is in",
        "then": [ { "do": "publish", "topic": "displays/{store}/barista", "text": "{customer} is in" } ] } ]
    """

    @Test func aGreetingWithMissingValuesSaysTheRulesFallbackOrNothing() {
        var h = Harness(config: testConfig(rules: Self.welcome))
        h.join("ana", counter, joinJSON(name: "Ana", favorite: "flat white"), at: t(1))
        #expect(h.inbox("ana").compactMap { $0["text"]?.stringValue }
                == ["Hello Ana! A flat white is on its way.", "Your usual flat white?"])
        #expect(h.sent.last { $0.topic == "displays/100/barista" }?.text == "Ana is in")

        let mark = h.sent.count
        h.join("bob", counter, joinJSON(name: nil, favorite: nil), at: t(2))
        let texts = h.inbox("bob", from: mark).compactMap { $0["text"]?.stringValue }
        #expect(texts == ["Hello! Your coffee is on its way."], "the fallback, and no half-empty greeting")
        #expect(!h.sent.contains { $0.text.contains("Hello !") || $0.text.contains("  is") })
        #expect(h.sent.last { $0.topic == "displays/100/barista" }?.text == "someone is in")
        #expect(h.core.counters.actionsSkipped == 1, "the greeting without a fallback is skipped and counted")
    }

    static let deal = """
    [ { "name": "deal", "when": "proximity:immediate", "then": [ { "do": "ad" } ], "once": true } ]
    """

    @Test func aRenamedRuleKeepsWhatItDidAndARenameWhileDownIsReported() throws {
        var h = Harness(config: testConfig(rules: Self.deal))
        h.join("ana", counter, at: t(1))
        h.see(counter, by: "till", rssi: -50, .immediate, at: t(2))
        #expect(h.inbox("ana").filter { $0["rule"] == .string("deal") }.count == 1)

        // The operator renames the rule (nothing else): it stays fired for this visit.
        let renamed = testConfig(rules: Self.deal.replacingOccurrences(of: #""deal""#, with: #""deal of the day""#))
        h.apply(h.core.apply(renamed, origin: "test", at: t(3)))
        #expect(h.log.contains { $0.message.hasPrefix("a renamed rule keeps") && $0.metadata["to"] == "deal of the day" })
        h.see(counter, by: "till", rssi: -60, .near, at: t(4))
        h.see(counter, by: "till", rssi: -50, .immediate, at: t(5))
        #expect(h.inbox("ana").filter { $0["rule"] == .string("deal of the day") }.isEmpty, "once per visit still holds")
        let record = try #require(h.retainedJSON(h.topics.visitRecord(of: counter)))
        #expect(record["fired"]?.objectValue?.keys == ["deal of the day"], "the record follows the new name")

        // Renamed again while no brain runs: the restarted brain says what it dropped.
        let again = testConfig(rules: Self.deal.replacingOccurrences(of: #""deal""#, with: #""counter deal""#))
        let restarted = h.restarted(config: again, at: t(10))
        #expect(restarted.log.contains { $0.level == .notice && $0.metadata["rules"] == "deal of the day" })
    }

    @Test func aUUIDOnlyEntryWithOnlyAHeadingNamesAnyBeaconOfItsUUIDAndFixesTheHeading() throws {
        let marker = BeaconUUID("B9407F30-F5F8-466E-AFF9-25556B57FE6D")!
        let text = testConfigText(rules: """
            [ { "name": "where am I", "when": "proximity:immediate", "names": ["stairs"], "then": [ { "do": "locationFix" } ],
                "cooldown": "after 5 updates at near" } ]
            """).replacingOccurrences(of: #""beacons": ["#, with: #""beacons": [ { "uuid": "\#(marker)", "name": "stairs", "heading": 180 },"#)
        var h = Harness(config: try FleetConfig.parse(text))
        let stairs = BeaconRef(major: 300, minor: 5)
        h.join("ana", stairs, at: t(1))
        let report = RSSIReport(gateway: "till", from: t(1.5), to: t(2), entries: [
            RSSIReport.Entry(beacon: stairs, uuid: marker, count: 2, rssi: -50, at: 0.25, rssiSmoothed: -50, proximity: .immediate),
        ])
        h.publish(h.topics.rssiReports(ofGateway: "till"), report.json, at: t(2))
        let fix = try #require(h.inbox("ana").first { $0["type"] == .string("locationFix") })
        #expect(fix["heading"] == .number(180))
        #expect(fix["lat"] == .null)
        #expect(fix["lon"] == .null)
        #expect(fix["floor"] == .null)
        #expect(h.core.entry(stairs, uuid: marker)?.store == 300, "its own major's store")
        #expect(h.core.entry(stairs)?.name == nil, "without a UUID no UUID-only entry applies")
    }

    static let callbacks = """
    [ { "name": "follow", "when": "update", "names": ["counter"],
        "then": [ { "do": "publish", "topic": "nav/{minor}", "text": "{proximity} {rssi}" } ] },
      { "name": "close by", "when": "update", "rssiAbove": -55, "cooldown": 5,
        "then": [ { "do": "greeting", "text": "right here at {zone}" } ] } ]
    """

    /// Issue 18: "The barista display says "customer-1"": `{customer}` in an enter rule
    /// takes the profile of the owner's accepted join, as the app gave it (the greeter's
    /// "name, favorite drink"), before the registry's.
    @Test func customerInABeaconRuleIsTheAcceptedJoinsProfile() {
        let rules = """
        [ { "name": "barista", "when": "enter", "fallback": "someone came in at {zone}",
            "then": [ { "do": "publish", "topic": "displays/{store}/barista", "text": "{customer} came in at {zone}: {favorite}" } ] } ]
        """
        let text = testConfigText(rules: rules, joins: "owned-or-near").replacingOccurrences(of: #""beacons": ["#, with: """
            "beacons": [ { "uuid": "\(storeUUID)", "major": 100, "minor": 50, "owner": "ana", "name": "customer-1" },
                         { "uuid": "\(storeUUID)", "major": 100, "minor": 51, "owner": "ben", "profile": { "name": "Ben", "favorite": "tea" } },
                         { "uuid": "\(storeUUID)", "major": 100, "minor": 52 },
            """)
        var h = Harness(config: try! FleetConfig.parse(text))
        let anasFob = BeaconRef(major: 100, minor: 50)
        h.join("ana", anasFob, joinJSON(name: "Ana", favorite: "flat white"), at: t(1))
        h.see(anasFob, by: "door", rssi: -60, at: t(2))
        h.see(anasFob, by: "door", rssi: -60, at: t(3))
        #expect(h.sent.last { $0.topic == "displays/100/barista" }?.text == "Ana came in at Entrance: flat white")
        // Ben's app has not joined: the registry's profile, as before.
        h.see(BeaconRef(major: 100, minor: 51), by: "door", rssi: -60, at: t(4))
        h.see(BeaconRef(major: 100, minor: 51), by: "door", rssi: -60, at: t(5))
        #expect(h.sent.last { $0.topic == "displays/100/barista" }?.text == "Ben came in at Entrance: tea")
        // A beacon of nobody's: the fallback, never "customer-1" or a hole.
        h.see(BeaconRef(major: 100, minor: 52), by: "door", rssi: -60, at: t(6))
        h.see(BeaconRef(major: 100, minor: 52), by: "door", rssi: -60, at: t(7))
        #expect(h.sent.last { $0.topic == "displays/100/barista" }?.text == "someone came in at Entrance")
    }

    /// Issue 18: "Hello ! A  is on its way." reached `displays/9/barista` through a `publish`
    /// rule without a `fallback`. No text with a hole reaches any topic: a publish without a
    /// fallback is skipped and counted, and so is a fallback that has a hole itself.
    @Test func aPublishWithMissingValuesAndNoFallbackReachesNoTopic() {
        let rules = """
        [ { "name": "barista", "when": "join",
            "then": [ { "do": "publish", "topic": "displays/{store}/barista", "text": "Hello {customer}! A {favorite} is on its way." } ] },
          { "name": "holey fallback", "when": "join", "fallback": "{customer} is in",
            "then": [ { "do": "publish", "topic": "displays/{store}/door", "text": "{customer} ({favorite}) is in" } ] } ]
        """
        var h = Harness(config: testConfig(rules: rules))
        h.join("ana", counter, joinJSON(name: "Ana", favorite: "flat white"), at: t(1))
        #expect(h.sent.last { $0.topic == "displays/100/barista" }?.text == "Hello Ana! A flat white is on its way.")
        #expect(h.sent.last { $0.topic == "displays/100/door" }?.text == "Ana (flat white) is in")
        let mark = h.sent.count
        h.join("bob", counter, joinJSON(name: nil, favorite: nil), at: t(2))
        #expect(!h.sent[mark...].contains { $0.topic.hasPrefix("displays/") }, "\(h.sent[mark...].map(\.topic))")
        #expect(!h.sent.contains { $0.text.contains("Hello !") || $0.text.contains("A  is") || $0.text.hasPrefix(" is in") })
        #expect(h.core.counters.actionsSkipped == 2, "both skipped, both counted")
    }

    /// NaviBeacon (seed 003): "The beacon ranging algorithm uses a closure as a callback for
    /// whenever it discovers a beacon ... `onBeaconChanged`": every ranging update calls it.
    /// Updates the brain decides together (one report carrying several seconds, a late
    /// gateway) each fire: a configured rate limit counts capture time, not arrival.
    @Test func updateRulesFireOnEveryUpdateEvenWhenDecidedTogether() {
        let rules = """
        [ { "name": "follow", "when": "update", "names": ["counter"],
            "then": [ { "do": "publish", "topic": "nav/{minor}", "text": "{proximity}" } ] },
          { "name": "half", "when": "update", "names": ["counter"], "cooldown": 0.5,
            "then": [ { "do": "publish", "topic": "half/{minor}", "text": "{proximity}" } ] },
          { "name": "slow", "when": "update", "names": ["counter"], "cooldown": 2.5,
            "then": [ { "do": "publish", "topic": "slow/{minor}", "text": "{proximity}" } ] } ]
        """
        var h = Harness(config: testConfig(rules: rules))
        h.see(counter, by: "till", rssi: -60, .near, at: t(1))
        h.see(counter, by: "till", rssi: -60, .near, at: t(2))
        let before = (h.sent.filter { $0.topic == "nav/1" }.count, h.sent.filter { $0.topic == "half/1" }.count,
                      h.sent.filter { $0.topic == "slow/1" }.count)
        #expect(before.0 >= 1, "present, and updated on entering")
        // One message carrying six seconds of the till's sightings, one a second: decided at once.
        let entries = (0..<6).map { i in
            RSSIReport.Entry(beacon: counter, uuid: storeUUID, count: 1, rssi: -60, at: 0.75 + Double(i), rssiSmoothed: -60,
                             distance: 1.2, proximity: .near)
        }
        h.publish(h.topics.rssiReports(ofGateway: "till"), RSSIReport(gateway: "till", from: t(2), to: t(9), entries: entries).json,
                  at: t(9))
        #expect(h.sent.filter { $0.topic == "nav/1" }.count - before.0 == 6, "every update: \(h.sent.map(\.topic))")
        #expect(h.sent.filter { $0.topic == "half/1" }.count - before.1 == 6, "a cooldown below the update interval limits nothing")
        #expect(h.sent.filter { $0.topic == "slow/1" }.count - before.2 == 2,
                "a cooldown of 2.5 s in capture time: the updates 3 s after its last firing, not all or one")
    }

    @Test func updateRulesFireOnEveryUpdateOfTheZoneGatewayRateLimited() {
        var h = Harness(config: testConfig(rules: Self.callbacks))
        h.join("ana", counter, at: t(0))
        // The zone gateway reports twice a second; another gateway's sightings are no update.
        for i in 0..<8 {
            let time = 1 + Double(i) * 0.5
            h.see(counter, by: "till", rssi: i < 4 ? -60 : -50, i < 4 ? .near : .immediate, at: t(time))
            h.see(counter, by: "door", rssi: -80, .far, at: t(time + 0.1))
        }
        let follow = h.sent.filter { $0.topic == "nav/1" }.map(\.text)
        #expect(follow == ["near -60", "near -60", "immediate -50", "immediate -50"],
                "one update a second: the till's publishInterval, as its sightings")
        let greetings = h.inbox("ana").filter { $0["rule"] == .string("close by") }
        #expect(greetings.count == 1, "rssiAbove, then its cooldown of 5 s as the rate limit")
        #expect(greetings.first?["text"] == .string("right here at Counter"))
        // Nothing of it is recorded: the rate limit lives in memory.
        #expect(h.retained[h.topics.visitRecord(of: counter)].map { JSONValue(text: $0)["fired"] } == .object([:]))

        // A new visit starts the rate limit afresh.
        h.quiet("till", from: t(4.5), until: t(100))
        h.quiet("door", from: t(4.6), until: t(101))
        h.see(counter, by: "till", rssi: -60, .near, at: t(101))
        #expect(h.sent.filter { $0.topic == "nav/1" }.count == 5)
    }

    static let navigation = """
    [ { "name": "where am I", "when": "proximity:immediate", "names": ["counter"], "then": [ { "do": "locationFix" } ],
        "cooldown": "after 5 updates at near" } ]
    """

    @Test func theNavigationDefaultSetsTheLocationAtImmediateAndResetsAfterFiveUpdatesAtNear() {
        var h = Harness(config: testConfig(rules: Self.navigation))
        h.join("ana", counter, at: t(0))
        var time = 1.0
        func update(_ proximity: Proximity) {
            h.see(counter, by: "till", rssi: proximity == .immediate ? -50 : -65, proximity, at: t(time))
            time += 1
        }
        func fixes() -> Int { h.inbox("ana").filter { $0["type"] == .string("locationFix") }.count }
        update(.immediate)
        #expect(fixes() == 1)
        for proximity in [Proximity.near, .near, .far, .near, .immediate, .near, .far] { update(proximity) }
        #expect(fixes() == 1, "four updates at near so far: far and immediate neither count nor reset")
        update(.near)
        update(.immediate)
        #expect(fixes() == 2, "the fifth update at near re-armed it")
    }

    static let tag = BeaconRef(namespace: EddystoneNamespace(hex: "00112233445566778899")!,
                               instance: EddystoneInstance(hex: "aabbccddeeff")!)
    static let stray = BeaconRef(namespace: EddystoneNamespace(hex: "ffeeddccbbaa99887766")!,
                                 instance: EddystoneInstance(hex: "000000000001")!)

    /// A gateway's presence payload for an Eddystone beacon, as `Payloads.gatewayPresence` writes it.
    static func eddystonePresence(_ ref: BeaconRef, _ gateway: String, rssi: Double, _ proximity: Proximity) -> String {
        var writer = JSONWriter()
        writer.object { o in
            o("namespace", ref.eddystone!.namespace.description)
            o("instance", ref.eddystone!.instance.description)
            o("gateway", gateway)
            o("zone", gateway.capitalized)
            o("proximity", proximity.rawValue)
            o("rssiSmoothed", rssi, places: 1)
            o("distance", 1.5, places: 2)
            o("since", t(0))
        }
        return writer.text
    }

    @Test func eddystoneBeaconsHavePresenceZonesAdsRulesRostersAndRecords() throws {
        let rules = """
        [ { "name": "in", "when": "enter", "names": ["till tag"],
            "then": [ { "do": "publish", "topic": "log/{namespace}/{instance}", "text": "{name} at {zone}, store {store}" } ] },
          { "name": "close", "when": "proximity:immediate", "beacons":[ { "namespace": "00112233445566778899", "instance": "AABBCCDDEEFF" } ],
            "then": [ { "do": "greeting", "text": "right here" } ] } ]
        """
        let text = testConfigText(rules: rules).replacingOccurrences(of: #""beacons": ["#, with: """
            "beacons": [ { "namespace": "00112233445566778899", "instance": "aabbccddeeff", "name": "till tag", "store": 100,
                           "ad": { "title": "Eddy's deal" } },
            """)
        var h = Harness(config: try FleetConfig.parse(text))
        let base = "eddystone/00112233445566778899/aabbccddeeff"
        #expect(h.topics.beacon(Self.tag) == base)
        #expect(h.retainedJSON(base + "/ad") == .object(["title": .string("Eddy's deal")]), "the standing ad, on its own topic")
        #expect(h.core.subscriptions.contains("eddystone/+/+/presence/+"))

        // A gateway's view: fleet presence, zone, the enter rule.
        h.publish(base + "/presence/till", Self.eddystonePresence(Self.tag, "till", rssi: -60, .near), retain: true, at: t(1))
        let fleet = try #require(h.retainedJSON(base + "/presence"))
        #expect(fleet["namespace"] == .string("00112233445566778899"))
        #expect(fleet["instance"] == .string("aabbccddeeff"))
        #expect(fleet["uuid"] == nil && fleet["major"] == nil)
        #expect(fleet["zone"] == .string("till"))
        #expect(h.sent.last { $0.topic == "log/00112233445566778899/aabbccddeeff" }?.text == "till tag at Till, store 100")
        #expect(h.retained["brain/visits/eddystone/00112233445566778899/aabbccddeeff"] != nil)

        // A join on its channel: the ad, the roster of its store, the answered record.
        h.join("ana", Self.tag, at: t(2))
        let ad = try #require(h.inbox("ana").first)
        #expect(ad["type"] == .string("ad"))
        #expect(ad["beacon"] == .object(["namespace": .string("00112233445566778899"), "instance": .string("aabbccddeeff")]))
        #expect(ad["ad"]?["title"] == .string("Eddy's deal"))
        #expect(h.roster?["customers"]?.arrayValue?.first?["beacon"] == ad["beacon"])
        #expect(h.retained["brain/answered/eddystone/00112233445566778899/aabbccddeeff/ana"] != nil)

        // Proximity rules match it by namespace/instance (any case in the config).
        h.see(Self.tag, by: "till", rssi: -45, .immediate, at: t(3))
        #expect(h.inbox("ana").last?["text"] == .string("right here"))

        // A restarted brain carries on: nothing answered twice.
        var restarted = h.restarted(at: t(10))
        #expect(restarted.inbox("ana").isEmpty)
        #expect(restarted.core.presence[Self.tag] != nil)

        // Leaving and the exit clean up its records and presence.
        restarted.leave("ana", Self.tag, at: t(11))
        restarted.withdraw(Self.tag, by: "till", at: t(12))
        #expect(restarted.retained[base + "/presence"] == nil)
        #expect(restarted.retained["brain/visits/eddystone/00112233445566778899/aabbccddeeff"] == nil)
        #expect(restarted.retained["brain/answered/eddystone/00112233445566778899/aabbccddeeff/ana"] == nil)

        // An Eddystone beacon without a registry store is present and answered, in no roster.
        h.publish(h.topics.presence(of: Self.stray, seenBy: "door"), Self.eddystonePresence(Self.stray, "door", rssi: -70, .far),
                  retain: true, at: t(20))
        #expect(h.retained[h.topics.presence(of: Self.stray)] != nil)
        h.join("bob", Self.stray, at: t(21))
        #expect(h.inbox("bob").first?["ad"] == .null)
        #expect(h.retained["stores/100/customers/bob"] == nil)
        #expect(h.core.owns(Self.stray))
        #expect(!BrainCore(config: h.core.config, stores: [100]).owns(Self.stray), "a brain of some stores leaves it alone")
        #expect(BrainCore(config: h.core.config, stores: [100]).subscriptions.contains("eddystone/00112233445566778899/aabbccddeeff/presence/+"))
    }

    @Test func eddystoneTopicsParseOnlyInTheirCanonicalForm() {
        let topics = Topics()
        #expect(topics.parse("eddystone/00112233445566778899/aabbccddeeff/observers/ana") == .beacon(Self.tag, .observer(client: "ana")))
        #expect(topics.parse("eddystone/00112233445566778899/AABBCCDDEEFF") == nil, "upper case is another topic")
        #expect(topics.parse("eddystone/0011/aabbccddeeff") == nil)
        #expect(topics.parse("brain/answered/eddystone/00112233445566778899/aabbccddeeff/ana")
                == .brainRecord(.answered(Self.tag, client: "ana")))
        #expect(topics.parse("brain/visits/100/1") == .brainRecord(.visit(BeaconRef(major: 100, minor: 1))))
    }
}

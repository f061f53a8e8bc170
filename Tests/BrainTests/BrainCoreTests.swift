// Over 500 lines: the Harness that every BrainTests suite drives the core through (a core, its retained state, what it sent and logged), then BrainCoreTests, the core's end-to-end cases.
import BeaconKit
import Contract
import Tracking
import Config
import BrainCore
import Foundation
import Testing

/// A broker in memory around one `BrainCore`: keeps retained messages (so a second brain
/// can be started on the same state) and every message the brain published.
struct Harness {
    var core: BrainCore
    var retained: [String: String] = [:]
    var sent: [MQTTMessage] = []
    var log: [LogEntry] = []
    let topics: Topics

    /// A brain that starts on `retained` state and settles at `now`.
    init(config: FleetConfig = testConfig(), stores: Set<UInt16> = [], retained: [String: String] = [:], at now: CaptureTime = t(0)) {
        self.init(core: BrainCore(config: config, stores: stores), retained: retained, at: now)
    }

    /// `asking`: the core asks for a hole in a gateway's reports again
    /// (`BrainCore.asksForLostReports`). Off by default: the shorthands below (`see`, `quiet`)
    /// leave holes between reports on purpose, and no gateway here answers a request.
    init(core: BrainCore, retained: [String: String] = [:], at now: CaptureTime = t(0), asking: Bool = false) {
        self.core = core
        self.core.asksForLostReports = asking
        topics = core.topics
        self.retained = retained
        for (topic, payload) in retained.sorted(by: { $0.key < $1.key }) {
            apply(self.core.receive(topic: topic, payload: Array(payload.utf8), retained: true, at: now))
        }
        apply(self.core.settle(at: now))
    }

    /// The same broker with a new brain (the old one crashed or was restarted).
    func restarted(config: FleetConfig? = nil, at now: CaptureTime) -> Harness {
        Harness(config: config ?? core.config, stores: core.stores, retained: retained, at: now)
    }

    mutating func apply(_ output: BrainOutput) {
        log += output.log
        for message in output.messages {
            sent.append(message)
            if message.retain { retained[message.topic] = message.payload.isEmpty ? nil : message.text }
        }
    }

    /// Someone else publishes.
    mutating func publish(_ topic: String, _ payload: String, retain: Bool = false, at now: CaptureTime) {
        if retain { retained[topic] = payload.isEmpty ? nil : payload }
        apply(core.receive(topic: topic, payload: Array(payload.utf8), retained: false, at: now))
    }

    mutating func publish(_ topic: String, bytes: [UInt8], at now: CaptureTime) {
        apply(core.receive(topic: topic, payload: bytes, retained: false, at: now))
    }

    mutating func advance(to now: CaptureTime) { apply(core.advance(to: now)) }

    // Shorthands for what gateways and observers do.
    /// A gateway's report of the half second before `now`: it heard `ref`.
    mutating func see(_ ref: BeaconRef, by gateway: String, rssi: Double?, _ proximity: Proximity = .near, at now: CaptureTime) {
        publish(topics.rssiReports(ofGateway: gateway), rssiReport(gateway, from: now - 0.5, to: now, [(ref, rssi)], proximity).json,
                at: now)
    }

    /// A gateway's report that it heard nothing from `start` (its last report's end) up to
    /// `now`: capture time passes (a silent beacon exits, a view ends).
    mutating func quiet(_ gateway: String, from start: CaptureTime, until now: CaptureTime) {
        publish(topics.rssiReports(ofGateway: gateway), rssiReport(gateway, from: start, to: now, []).json, at: now)
    }

    mutating func announce(_ ref: BeaconRef, by gateway: String, rssi: Double?, _ proximity: Proximity = .near, at now: CaptureTime) {
        // The gateway began hearing the beacon now (its `since`, in capture time).
        publish(topics.presence(of: ref, seenBy: gateway), presenceJSON(ref, gateway, rssi: rssi, proximity, since: now),
                retain: true, at: now)
    }

    mutating func withdraw(_ ref: BeaconRef, by gateway: String, at now: CaptureTime) {
        publish(topics.presence(of: ref, seenBy: gateway), "", retain: true, at: now)
    }

    mutating func join(_ client: String, _ ref: BeaconRef, _ payload: String = joinJSON(), at now: CaptureTime) {
        publish(topics.observer(client, of: ref), payload, retain: true, at: now)
    }

    mutating func leave(_ client: String, _ ref: BeaconRef, at now: CaptureTime) {
        publish(topics.observer(client, of: ref), "", retain: true, at: now)
    }

    /// Inbox messages sent to `client` since `index` (an index into `sent`).
    func inbox(_ client: String, from index: Int = 0) -> [JSONValue] {
        sent[index...].filter { $0.topic == topics.inbox(of: client) }.compactMap(\.json)
    }

    func retainedJSON(_ topic: String) -> JSONValue? { retained[topic].map { JSONValue(text: $0) } }

    /// What the brain said on `brain/events`, read as Contract's `BrainEvent`; one it cannot
    /// read back is a failure.
    var events: [BrainEvent] {
        sent.filter { $0.topic == topics.brainEvents }.compactMap { message in
            do { return try BrainEvent(parsing: message.payload) } catch {
                Issue.record("brain/events \(message.text): \(error)")
                return nil
            }
        }
    }

    var roster: JSONValue? { retainedJSON(topics.roster(ofStore: 100)) }
}

@Suite struct BrainCoreTests {
    // MARK: Observers

    @Test func aJoinIsAnsweredWithTheBeaconsAdAndShowsOnTheRoster() throws {
        var h = Harness()
        h.join("ada", counter, joinJSON(photo: photo(1000)), at: t(1))
        let replies = h.inbox("ada")
        #expect(replies.count == 1)
        #expect(replies.first?["type"] == .string("ad"))
        #expect(replies.first?["ad"] == .object(["title": .string("Espresso"), "price": .number(1.5)]))
        #expect(replies.first?["beacon"] == counter.json)
        #expect(replies.first?["rule"] == .null)

        let roster = try #require(h.roster)
        #expect(roster["store"] == .number(100))
        #expect(roster["name"] == .string("Main Street"))
        let customer = try #require(roster["customers"]?.arrayValue?.first)
        #expect(customer.objectValue?.keys == ["client", "name", "favorite", "photo", "beacon", "since"])
        #expect(customer["name"] == .string("Ada"))
        #expect(customer["favorite"] == .string("flat white"))
        #expect(customer["photo"] == .string("beacons/100/1/observers/ada"))
        #expect(h.retained[h.topics.answeredRecord(of: counter, client: "ada")] != nil)

        // The same join again (a retained redelivery) is not answered twice.
        h.join("ada", counter, joinJSON(photo: photo(1000)), at: t(2))
        #expect(h.inbox("ada").count == 1)
    }

    @Test func adFallsBackToTheStoreAndIsNullWithoutOne() {
        var h = Harness()
        h.join("ada", window, at: t(1))
        h.join("bob", otherStore, at: t(1))
        #expect(h.inbox("ada").first?["ad"] == .object(["title": .string("Deal of the day")]))
        #expect(h.inbox("bob").first?["ad"] == .null)
    }

    @Test func aLeaveRemovesTheCustomerAndTheRecord() throws {
        var h = Harness()
        h.join("ada", counter, at: t(1))
        h.join("bob", window, joinJSON(name: "Bob", favorite: nil), at: t(2))
        #expect(h.roster?["customers"]?.arrayValue?.count == 2)
        h.leave("ada", counter, at: t(3))
        let customers = try #require(h.roster?["customers"]?.arrayValue)
        #expect(customers.map { $0["client"] } == [.string("bob")])
        #expect(customers.first?["photo"] == .null)
        #expect(h.retained[h.topics.answeredRecord(of: counter, client: "ada")] == nil)
        h.leave("bob", window, at: t(4))
        #expect(h.roster?["customers"] == .array([]))
        #expect(!h.retained.keys.contains { $0.contains("/answered/") })
    }

    @Test func observerLastWillEndsEveryJoinAndDeletesTheProfiles() {
        var h = Harness()
        h.join("ada", counter, joinJSON(photo: photo(500)), at: t(1))
        h.join("ada", window, at: t(1))
        h.join("bob", window, at: t(1))
        h.publish("observers/ada/status", "offline", retain: true, at: t(5))
        // Held for the grace (a broker that shuts down publishes every will at once)…
        #expect(h.retained[h.topics.observer("ada", of: counter)] != nil)
        h.advance(to: t(7.9))
        #expect(h.core.counters.leaves == 0)
        // …then every join of the client ends.
        h.advance(to: t(8))
        #expect(h.retained[h.topics.observer("ada", of: counter)] == nil)
        #expect(h.retained[h.topics.observer("ada", of: window)] == nil)
        #expect(h.retained[h.topics.observer("bob", of: window)] != nil)
        #expect(h.roster?["customers"]?.arrayValue?.map { $0["client"] } == [.string("bob")])
        #expect(h.core.counters.leaves == 2)
        // The deletions come back to the brain; nothing more happens.
        let before = h.sent.count
        h.leave("ada", counter, at: t(9))
        #expect(h.sent.count == before)
    }

    @Test func aWillFollowedByTheClientComingBackWithinTheGraceChangesNothing() {
        var h = Harness()
        h.join("ada", counter, at: t(1))
        h.announce(counter, by: "door", rssi: -70, at: t(1))
        h.publish("observers/ada/status", "offline", retain: true, at: t(5))
        h.publish("gateways/door/status", "offline", retain: true, at: t(5))
        h.publish("observers/ada/status", "online", retain: true, at: t(6))
        h.see(counter, by: "door", rssi: -70, at: t(6))
        let before = h.sent.count
        h.advance(to: t(20))
        #expect(h.core.counters.leaves == 0)
        #expect(h.core.presence[counter] != nil)
        #expect(h.sent[before...].allSatisfy { !$0.retain || !$0.payload.isEmpty }, "nothing deleted")
    }

    @Test func aRosterListsAClientOnceWithTheirFirstTime() throws {
        var h = Harness()
        h.join("ada", counter, at: t(1))
        h.join("ada", window, joinJSON(name: "Ada L."), at: t(2))
        let customers = try #require(h.roster?["customers"]?.arrayValue)
        #expect(customers.count == 1)
        #expect(customers.first?["name"] == .string("Ada L."))
        #expect(customers.first?["beacon"] == window.json)
        #expect(customers.first?["since"] == .string(t(1).iso8601))
    }

    @Test func aMalformedJoinGetsAnErrorAndChangesNothing() {
        var h = Harness()
        h.join("ada", counter, at: t(1))
        let rosterBefore = h.retained[h.topics.roster(ofStore: 100)]
        h.publish(h.topics.observer("ada", of: counter), #"{"state":"joined","profile":{"name":7}}"#, at: t(2))
        let replies = h.inbox("ada")
        #expect(replies.count == 2)
        #expect(replies.last?["type"] == .string("error"))
        #expect(replies.last?["error"] == .string("profile.name must be a string, found a number"))
        #expect(replies.last?["beacon"] == counter.json)
        #expect(h.retained[h.topics.roster(ofStore: 100)] == rosterBefore)
        #expect(h.core.observers.count == 1)
        // Oversized: refused before parsing.
        h.publish(h.topics.observer("eve", of: counter), bytes: [UInt8](repeating: 0x20, count: 70_000), at: t(3))
        #expect(h.inbox("eve").first?["error"] == .string("join payload of 70000 bytes exceeds 65536"))
        #expect(h.core.counters.oversized == 1)
        #expect(h.core.counters.joinsRejected == 2)
        #expect(h.core.observers.count == 1)
    }

    @Test func aNewProfileForAJoinUpdatesTheRosterWithoutANewAd() {
        var h = Harness()
        h.join("ada", counter, at: t(1))
        h.join("ada", counter, joinJSON(favorite: "cortado"), at: t(2))
        #expect(h.inbox("ada").count == 1)
        #expect(h.roster?["customers"]?.arrayValue?.first?["favorite"] == .string("cortado"))
    }

    // MARK: Floods

    @Test func everyCustomerHasARetainedTopicAndTheRosterIsABoundedSummary() throws {
        var limits = BrainCore.Limits()
        limits.rosterLimit = 2
        var h = Harness(core: BrainCore(config: testConfig(), limits: limits))
        h.join("ada", counter, joinJSON(photo: photo(100)), at: t(1))
        h.join("bob", window, joinJSON(name: "Bob"), at: t(2))
        h.join("cy", window, joinJSON(name: "Cy"), at: t(3))
        let ada = try #require(h.retainedJSON(h.topics.customer("ada", ofStore: 100)))
        #expect(ada.objectValue?.keys == ["client", "name", "favorite", "photo", "beacon", "since"])
        #expect(ada["photo"] == .string("beacons/100/1/observers/ada"))
        #expect(ada["since"] == .string(t(1).iso8601))
        let roster = try #require(h.roster)
        #expect(roster["count"] == .number(3))
        #expect(roster["customers"]?.arrayValue?.map { $0["client"] } == [.string("bob"), .string("cy")])
        #expect(try Roster(parsing: roster).customers.last == Roster.Customer(parsing: try #require(h.retainedJSON("stores/100/customers/cy"))))
        h.leave("ada", counter, at: t(4))
        #expect(h.retained[h.topics.customer("ada", ofStore: 100)] == nil)
        #expect(h.roster?["count"] == .number(2))
    }

    @Test func rosterSummariesAreDebouncedPerStore() throws {
        var h = Harness()
        let summaries = { (h: Harness) in h.sent.filter { $0.topic == h.topics.roster(ofStore: 100) }.count }
        h.join("ada", counter, at: t(1))
        #expect(summaries(h) == 1, "the first change after a quiet spell goes out at once")
        for (i, client) in ["bob", "cy", "dee"].enumerated() { h.join(client, window, at: t(1.1 + 0.1 * Double(i))) }
        #expect(summaries(h) == 1)
        #expect(h.retained[h.topics.customer("dee", ofStore: 100)] != nil, "customers are not held back")
        h.advance(to: t(1.9))
        #expect(summaries(h) == 1)
        h.advance(to: t(2))
        #expect(summaries(h) == 2)
        #expect(h.roster?["count"] == .number(4))
        h.advance(to: t(5))
        #expect(summaries(h) == 2, "nothing changed")
    }

    /// The O(change) guard: what one join costs on the wire must not grow with the roster.
    @Test func aJoinCostsTheSameBytesWhateverTheRosterHolds() {
        var h = Harness()
        func bytesFor(joins range: Range<Int>) -> (bytes: Int, messages: Int, largest: Int) {
            let start = h.sent.count
            for i in range {
                // 50 joins a second, as in a flood; summaries are then folded per second.
                h.join("client-\(i)", BeaconRef(major: 100, minor: UInt16(1 + i % 50)), at: t(1 + Double(i) / 50))
            }
            h.advance(to: t(1 + Double(range.upperBound) / 50 + 1))
            let sent = h.sent[start...]
            return (sent.reduce(0) { $0 + $1.topic.utf8.count + $1.payload.count }, sent.count,
                    sent.map { $0.payload.count }.max() ?? 0)
        }
        let first = bytesFor(joins: 0..<500)
        let later = bytesFor(joins: 4500..<5000)
        _ = bytesFor(joins: 500..<4500)
        let last = bytesFor(joins: 5000..<5500)
        #expect(h.roster?["count"] == .number(5500))
        #expect(last.messages <= first.messages + 2, "\(first) \(last)")
        // O(roster) would make the 5,000th join cost ten times the 500th.
        #expect(Double(later.bytes) <= 1.2 * Double(first.bytes), "\(first) \(later)")
        #expect(Double(last.bytes) <= 1.2 * Double(first.bytes), "\(first) \(last)")
        #expect(last.largest < 16 * 1024, "no message grows with the roster")
    }

    @Test func aClientMakingTooManyJoinsIsRefusedUntilItEarnsAnother() {
        var h = Harness()
        for minor in 1...10 { h.join("mal", BeaconRef(major: 100, minor: UInt16(minor)), at: t(1)) }
        #expect(h.core.observers.count == 10)
        h.join("mal", BeaconRef(major: 100, minor: 11), at: t(1))
        #expect(h.core.observers.count == 10)
        let refusal = h.inbox("mal").last
        #expect(refusal?["type"] == .string("error"))
        #expect(refusal?["error"] == .string("too many joins from mal: at most 10 at once, then one every 6 s; publish the join again later"))
        #expect(h.core.counters.joinsThrottled == 1)
        // A retained join delivered again costs nothing; others keep joining.
        h.join("mal", BeaconRef(major: 100, minor: 1), at: t(2))
        h.join("ada", counter, at: t(2))
        #expect(h.inbox("ada").first?["type"] == .string("ad"))
        // 6 s later one more.
        h.join("mal", BeaconRef(major: 100, minor: 11), at: t(7.1))
        #expect(h.core.observers.count == 12)
        #expect(h.core.counters.joinsThrottled == 1)
    }

    // MARK: Presence

    @Test func fleetPresenceFollowsTheZoneAndIsDeletedWhenAbsentEverywhere() throws {
        var h = Harness()
        let topic = h.topics.presence(of: counter)
        h.announce(counter, by: "door", rssi: -70, at: t(1))
        var presence = try #require(h.retainedJSON(topic))
        #expect(presence["zone"] == .string("door"))
        #expect(presence["zoneName"] == .string("Door"))
        #expect(presence["since"] == .string(t(1).iso8601))
        #expect(h.retained[h.topics.visitRecord(of: counter)] != nil)
        for i in 2...4 { h.see(counter, by: "till", rssi: -60, .immediate, at: t(Double(i))) }
        presence = try #require(h.retainedJSON(topic))
        #expect(presence["zone"] == .string("till"))
        #expect(presence["zoneName"] == .string("Counter"), "a gateway known from sightings is named from the config")
        #expect(presence["proximity"] == .string("immediate"))
        #expect(presence["gateways"]?.arrayValue?.count == 2)
        // Sightings that change nothing but RSSI do not republish.
        let count = h.sent.count
        h.see(counter, by: "till", rssi: -61, .immediate, at: t(5))
        #expect(h.sent.count == count)

        // The door's presence was its own view; the till's reports keep theirs until its
        // silence ends the visit (in capture time: the till's reports say nothing is heard).
        h.withdraw(counter, by: "door", at: t(6))
        #expect(h.retainedJSON(topic)?["gateways"]?.arrayValue?.count == 1)
        h.quiet("till", from: t(5), until: t(40))
        #expect(h.retained[topic] == nil)
        #expect(h.retained[h.topics.visitRecord(of: counter)] == nil)
    }

    @Test func gatewayLastWillEndsItsVisitsAfterTheGrace() {
        var h = Harness()
        h.announce(counter, by: "door", rssi: -70, at: t(1))
        h.announce(window, by: "door", rssi: -70, at: t(1))
        h.announce(window, by: "till", rssi: -80, .far, at: t(1))
        h.publish("gateways/door/status", "offline", retain: true, at: t(2))
        #expect(h.retained[h.topics.presence(of: counter)] != nil, "held for the grace")
        h.advance(to: t(5))
        #expect(h.retained[h.topics.presence(of: counter)] == nil)
        #expect(h.retainedJSON(h.topics.presence(of: window))?["zone"] == .string("till"))
    }

    // MARK: Rules

    static let rules = """
    [
      { "name": "deal at the counter", "when": "proximity:immediate", "names": ["counter"],
        "then": [ { "do": "ad" } ], "once": true },
      { "name": "greet the regulars", "when": "join", "stores": [100],
        "then": [ { "do": "greeting", "text": "Hello {customer}! Your usual {favorite}?" } ] },
      { "name": "where am I", "when": "proximity:immediate", "names": ["counter"],
        "then": [ { "do": "locationFix" } ], "cooldown": "after 3 updates at near" },
      { "name": "tell the barista", "when": "enter", "stores": [100], "rssiAbove": -80,
        "then": [ { "do": "publish", "topic": "displays/{store}/barista", "text": "{name} is at {zone} ({proximity})", "qos": 1 } ],
        "cooldown": 300 },
      { "name": "goodbye", "when": "leave", "then": [ { "do": "publish", "topic": "displays/{store}/{client}", "text": "bye {customer}" } ] }
    ]
    """

    @Test func rulesAnswerJoinsAndBeaconEvents() throws {
        var h = Harness(config: testConfig(rules: Self.rules))
        h.join("ada", counter, at: t(1))
        var replies = h.inbox("ada")
        #expect(replies.map { $0["type"] } == [.string("ad"), .string("greeting")])
        #expect(replies.last?["text"] == .string("Hello Ada! Your usual flat white?"))
        #expect(replies.last?["rule"] == .string("greet the regulars"))

        h.announce(counter, by: "till", rssi: -60, .near, at: t(2))
        let barista = h.sent.filter { $0.topic == "displays/100/barista" }
        #expect(barista.map(\.text) == ["counter is at Till (near)"])

        // Reaching immediate: the deal (once) and the location fix (disarmed after).
        var mark = h.sent.count
        h.see(counter, by: "till", rssi: -50, .immediate, at: t(3))
        replies = h.inbox("ada", from: mark)
        #expect(replies.map { $0["type"] } == [.string("ad"), .string("locationFix")])
        #expect(replies.first?["rule"] == .string("deal at the counter"))
        #expect(replies.last?["lat"] == .number(52.520008))
        #expect(replies.last?["heading"] == .number(90))
        #expect(replies.last?["floor"] == .number(0))

        // Near for two updates, immediate again: neither fires.
        mark = h.sent.count
        h.see(counter, by: "till", rssi: -62, .near, at: t(4))
        h.see(counter, by: "till", rssi: -62, .near, at: t(5))
        h.see(counter, by: "till", rssi: -50, .immediate, at: t(6))
        #expect(h.inbox("ada", from: mark).isEmpty)
        // The third update at near (immediate in between neither counts nor resets) re-arms the
        // location fix; the deal stays once per visit.
        for i in 7...9 { h.see(counter, by: "till", rssi: -62, .near, at: t(Double(i))) }
        #expect(h.retainedJSON(h.topics.visitRecord(of: counter))?["disarmed"] == .array([]))
        mark = h.sent.count
        h.see(counter, by: "till", rssi: -50, .immediate, at: t(10))
        #expect(h.inbox("ada", from: mark).map { $0["type"] } == [.string("locationFix")])

        // Leave: the templated goodbye.
        h.leave("ada", counter, at: t(11))
        #expect(h.sent.last { $0.topic == "displays/100/ada" }?.text == "bye Ada")
        #expect(h.core.counters.rulesFired == 6)
    }

    @Test func rssiAboveAndCooldownOfTheBaristaRule() {
        var h = Harness(config: testConfig(rules: Self.rules))
        h.announce(counter, by: "till", rssi: -90, .far, at: t(1))
        #expect(!h.sent.contains { $0.topic == "displays/100/barista" })
        h.withdraw(counter, by: "till", at: t(2))
        h.announce(counter, by: "till", rssi: -70, .near, at: t(3))
        h.withdraw(counter, by: "till", at: t(4))
        h.announce(counter, by: "till", rssi: -70, .near, at: t(100))
        #expect(h.sent.filter { $0.topic == "displays/100/barista" }.count == 1, "cooldown 300 s")
        h.withdraw(counter, by: "till", at: t(101))
        // The cooldown is recorded while it runs, then the record goes.
        #expect(h.retainedJSON(h.topics.visitRecord(of: counter))?["since"] == .null)
        h.advance(to: t(304))
        #expect(h.retained[h.topics.visitRecord(of: counter)] == nil)
        h.announce(counter, by: "till", rssi: -70, .near, at: t(305))
        #expect(h.sent.filter { $0.topic == "displays/100/barista" }.count == 2)
    }

    @Test func hostileProfileValuesCannotRedirectATemplatedTopic() {
        var h = Harness(config: testConfig(rules: Self.rules))
        for (client, name) in [("eve", "#"), ("mallory", "a/b"), ("trent", "+")] {
            h.join(client, counter, joinJSON(name: name), at: t(1))
        }
        h.join("ok", counter, at: t(1))
        for client in ["eve", "mallory", "trent", "ok"] { h.leave(client, counter, at: t(2)) }
        // {client} is safe for all of them; a rule using {customer} in a topic would be skipped.
        #expect(h.sent.filter { $0.topic.hasPrefix("displays/100/") }.map(\.topic).sorted()
                == ["displays/100/eve", "displays/100/mallory", "displays/100/ok", "displays/100/trent"])

        var g = Harness(config: testConfig(rules: """
        [ { "name": "by name", "when": "join", "then": [ { "do": "publish", "topic": "hello/{customer}", "text": "hi" } ] } ]
        """))
        for (client, name) in [("eve", "#"), ("mallory", "brain/answered/100/1/x"), ("trent", ""), ("ok", "Ada")] {
            g.join(client, counter, joinJSON(name: name), at: t(1))
        }
        #expect(g.sent.filter { $0.topic.hasPrefix("hello/") }.map(\.topic) == ["hello/Ada"])
        #expect(g.core.counters.actionsSkipped == 3)
    }

    // MARK: Recovery

    @Test func aRestartedBrainCarriesOnWithoutAnsweringAgain() {
        var h = Harness(config: testConfig(rules: Self.rules))
        h.join("ada", counter, at: t(1))
        h.announce(counter, by: "till", rssi: -60, .near, at: t(2))
        // The gateway republishes its presence on a proximity change, and sights it.
        h.announce(counter, by: "till", rssi: -50, .immediate, at: t(3))
        h.see(counter, by: "till", rssi: -50, .immediate, at: t(3))
        #expect(h.inbox("ada").count == 4)

        // Crash; a new brain starts from what the broker holds.
        var r = h.restarted(at: t(10))
        #expect(r.inbox("ada").isEmpty, "no ad, greeting or fix again")
        #expect(!r.sent.contains { $0.topic.hasPrefix("displays/") })
        #expect(r.sent.isEmpty, "nothing to correct: \(r.sent)")
        #expect(r.core.observers.count == 1)
        #expect(r.core.presence[counter]?.since == t(2))
        // The visit continues: immediate again does not re-fire the once rule, and the fix
        // is still disarmed.
        r.see(counter, by: "till", rssi: -62, .near, at: t(11))
        r.see(counter, by: "till", rssi: -50, .immediate, at: t(12))
        #expect(r.inbox("ada").isEmpty)
        // A new visit does.
        r.withdraw(counter, by: "till", at: t(13))
        r.quiet("till", from: t(12), until: t(50))
        r.see(counter, by: "till", rssi: -50, .immediate, at: t(60))
        #expect(r.inbox("ada").map { $0["type"] } == [.string("ad"), .string("locationFix")])
    }

    @Test func aRestartedBrainCatchesUpWithWhatHappenedWhileItWasDown() throws {
        var h = Harness(config: testConfig(rules: Self.rules))
        h.join("ada", counter, at: t(1))
        h.join("bob", window, at: t(1))
        h.announce(window, by: "door", rssi: -70, at: t(1))
        var broker = h.retained
        // While no brain runs: carol joins, bob's app dies, the window beacon leaves,
        // the counter beacon arrives, ada leaves one beacon.
        broker[h.topics.observer("carol", of: counter)] = joinJSON(name: "Carol")
        broker["observers/bob/status"] = "offline"
        broker[h.topics.presence(of: window, seenBy: "door")] = nil
        broker[h.topics.presence(of: counter, seenBy: "till")] = presenceJSON(counter, "till", rssi: -60)
        broker[h.topics.observer("ada", of: counter)] = nil
        h.retained = broker

        let r = h.restarted(at: t(100))
        #expect(r.inbox("carol").map { $0["type"] } == [.string("ad"), .string("greeting")])
        #expect(r.inbox("ada").isEmpty)
        #expect(r.retained[r.topics.observer("bob", of: window)] == nil, "bob's profile is deleted")
        #expect(r.retained[r.topics.presence(of: window)] == nil)
        #expect(r.retainedJSON(r.topics.visitRecord(of: window))?["since"] == .null, "kept for the barista's cooldown")
        #expect(r.retainedJSON(r.topics.presence(of: counter))?["zone"] == .string("till"))
        #expect(r.sent.contains { $0.topic == "displays/100/barista" }, "the enter that happened meanwhile")
        // Ada's leave rule ran; her profile is gone with the brain that knew it, so "bye {customer}"
        // would say "bye ": skipped and counted instead (issue 18: no text with a hole on any topic).
        #expect(!r.sent.contains { $0.topic == "displays/100/ada" }, "no \"bye \" with a hole")
        #expect(r.core.counters.actionsSkipped >= 1, "ada's leave ran its rule, whose text lacked a value")
        #expect(r.core.counters.leaves >= 1)
        #expect(r.sent.contains { $0.topic == "displays/100/bob" })
        let customers = try #require(r.roster?["customers"]?.arrayValue)
        #expect(customers.map { $0["client"] } == [.string("carol")])
        #expect(!r.retained.keys.contains { $0.hasPrefix("brain/answered/100/1/ada") })
    }

    @Test func aRestartIgnoresPresenceLeftByADeadGateway() {
        var h = Harness()
        h.announce(counter, by: "door", rssi: -70, at: t(1))
        h.retained["gateways/door/status"] = "offline"
        let r = h.restarted(at: t(10))
        #expect(r.core.presence[counter] == nil)
        #expect(r.retained[r.topics.presence(of: counter)] == nil)
    }

    @Test func aRestartWithAnInterruptedWriteAnswersAgainRatherThanNever() {
        var h = Harness()
        h.join("ada", counter, at: t(1))
        // The record never reached the broker.
        h.retained[h.topics.answeredRecord(of: counter, client: "ada")] = nil
        let r = h.restarted(at: t(5))
        #expect(r.inbox("ada").count == 1)
    }

    // MARK: Bad input

    @Test func hostilePayloadsOnEveryTopicAreCountedAndIgnored() {
        var h = Harness(config: testConfig(rules: Self.rules))
        h.announce(counter, by: "door", rssi: -70, at: t(1))
        h.join("ada", window, at: t(1))
        let retainedBefore = h.retained
        let bad: [String] = [
            "not json", "{", "[]", "null", "42", #""text""#, #"{"major":"100"}"#,
            String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000),
            #"{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":1}}}}}}}}}"#,
            "\u{FEFF}{}", "{\"x\":\"\\ud800\"}",
        ]
        let topics = [
            "gateways/door/rssi", "beacons/100/1/presence/door", "beacons/100/1/observers/ada", "gateways/door/status",
            "observers/ada/status", "fleet/config",
        ]
        for topic in topics {
            for payload in bad { h.publish(topic, payload, at: t(2)) }
            h.publish(topic, bytes: [UInt8](repeating: 0x7B, count: 65 * 1024), at: t(2))
        }
        // Topics outside the contract, or almost in it.
        for topic in ["beacons/100", "beacons/100/1/presence/door/x", "beacons/65536/1", "beacons/01/1",
                      "beacons/100/1/observers/a+b", "random/topic", "brain/visits/100/1/x"] {
            h.publish(topic, "{}", at: t(2))
        }
        // fleet/config may be larger (4 MiB): its oversized payload is malformed instead.
        #expect(h.core.counters.oversized == topics.count - 1)
        #expect(h.core.counters.malformed.values.reduce(0, +) == topics.count * bad.count + 1)
        #expect(h.core.counters.unknownTopics == 7)
        #expect(h.core.presence[counter]?.zone == "door")
        #expect(h.core.observers.count == 1)
        #expect(h.retained == retainedBefore, "no retained state changed")
        #expect(h.inbox("ada").filter { $0["type"] == .string("error") }.count == bad.count + 1)
        #expect(h.events.filter { $0.name == "config" }.count == bad.count + 1)
        // Every other rejected input is reported: 20 a second one by one, the rest in a summary.
        let rejected = h.core.counters.rejected + h.core.counters.unknownTopics - (bad.count + 1)
        let single = h.events.compactMap { if case .rejected(let r) = $0 { r } else { nil } }
        #expect(single.count == 20)
        #expect(single.first?.kind == "rssiReport")
        #expect(single.first?.topic == "gateways/door/rssi")
        #expect(single.first?.bytes == 8)
        h.advance(to: t(3.5))
        guard case .suppressed(let count, let since, _)? = h.events.last else {
            Issue.record("no summary: \(h.events.last.map(\.json) ?? "nothing")")
            return
        }
        #expect(count == rejected - 20)
        #expect(since.iso8601 == t(2).iso8601)
        // Still answering.
        h.join("zoe", counter, at: t(3))
        #expect(h.inbox("zoe").first?["type"] == .string("ad"))
    }

    @Test func anOversizedConfigIsReportedAndTheLastGoodOneKept() {
        var limits = BrainCore.Limits(maxConfigPayload: 1000)
        limits.eventsPerSecond = 5
        var h = Harness(core: BrainCore(config: testConfig(), limits: limits))
        h.publish("fleet/config", String(repeating: " ", count: 2000) + "{}", retain: true, at: t(1))
        #expect(h.events.contains {
            guard case .config(let report) = $0 else { return false }
            return report.outcome == .rejected(errors: ["fleet/config: payload of 2002 bytes exceeds 1000"])
        })
        #expect(h.events.contains {
            guard case .rejected(let r) = $0 else { return false }
            return r.kind == "oversized" && r.topic == "fleet/config" && r.bytes == 2002
        })
        #expect(h.core.counters.configsRejected == 1)
        #expect(h.core.config == testConfig())
    }

    // MARK: Config and stores

    @Test func standingAdsArePublishedAndFollowTheConfig() throws {
        var h = Harness()
        #expect(h.retained["beacons/100/1/ad"] == #"{"title":"Espresso","price":1.5}"#)
        #expect(h.retained["beacons/100/2/ad"] == #"{"title":"Deal of the day"}"#)
        // A config where the counter has no ad of its own and the store none either.
        let text = testConfigText(counterAd: "null").replacingOccurrences(of: #", "ad": null"#, with: "")
            .replacingOccurrences(of: #", "ad": { "title": "Deal of the day" }"#, with: "")
        h.publish("fleet/config", text, retain: true, at: t(1))
        #expect(h.retained["beacons/100/1/ad"] == nil)
        #expect(h.retained["beacons/100/2/ad"] == nil)
        #expect(h.core.counters.configsApplied == 1)
        // An invalid config is reported and the last good one kept.
        h.publish("fleet/config", #"{"rules":[{"when":"sometimes"}]}"#, retain: true, at: t(2))
        #expect(h.core.counters.configsRejected == 1)
        guard case .config(let report)? = h.events.last, case .rejected(let errors) = report.outcome else {
            Issue.record("no rejection: \(h.events.last.map(\.json) ?? "nothing")")
            return
        }
        #expect(!errors.isEmpty)
        // A restart with the original file finds the ads gone and puts them back (the
        // retained fleet/config is now the invalid one, which it rejects too).
        let r = h.restarted(config: testConfig(), at: t(3))
        #expect(r.retained["beacons/100/1/ad"] != nil)
    }

    @Test func aRestartDeletesAdsThatLeftTheConfig() {
        var h = Harness()
        h.retained["beacons/100/9/ad"] = #"{"old":true}"#
        h = h.restarted(at: t(1))
        #expect(h.retained["beacons/100/9/ad"] == nil)
        #expect(h.sent.filter(\.retain).map(\.topic) == ["beacons/100/9/ad"])
    }

    @Test func storesRestrictABrainToItsMajors() {
        var h = Harness(stores: [200])
        #expect(h.retained["beacons/100/1/ad"] == nil)
        h.join("ada", counter, at: t(1))
        h.announce(counter, by: "door", rssi: -60, at: t(1))
        #expect(h.inbox("ada").isEmpty)
        #expect(h.core.presence.beacons.isEmpty)
        #expect(h.core.counters.foreign == 2)
        h.join("bob", otherStore, at: t(1))
        #expect(h.inbox("bob").count == 1)
        #expect(h.retained["stores/200/roster"] != nil)
        #expect(h.core.subscriptions.contains("beacons/200/+/observers/+"))
        #expect(!h.core.subscriptions.contains { $0.hasPrefix("beacons/100") || $0.hasPrefix("beacons/+") })
    }

    @Test func topicPrefixApplies() {
        var h = Harness(config: testConfig(prefix: "acme"))
        h.publish("acme/beacons/100/1/observers/ada", joinJSON(), retain: true, at: t(1))
        #expect(h.sent.contains { $0.topic == "acme/observers/ada/inbox" })
        #expect(h.retained["acme/stores/100/roster"] != nil)
        #expect(h.core.subscriptions.allSatisfy { $0.hasPrefix("acme/") })
    }
}

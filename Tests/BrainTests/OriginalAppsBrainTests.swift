import BeaconKit
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
        #expect(h.sent.last { $0.topic == "displays/100/barista" }?.payload == "Ana is in")

        let mark = h.sent.count
        h.join("bob", counter, joinJSON(name: nil, favorite: nil), at: t(2))
        let texts = h.inbox("bob", from: mark).compactMap { $0["text"]?.stringValue }
        #expect(texts == ["Hello! Your coffee is on its way."], "the fallback, and no half-empty greeting")
        #expect(!h.sent.contains { $0.payload.contains("Hello !") || $0.payload.contains("  is") })
        #expect(h.sent.last { $0.topic == "displays/100/barista" }?.payload == "someone is in")
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
}

import BeaconKit
import Contract
import BrainCore
import Config
import Foundation
import Testing
import Tracking

/// Rosters driven by proximity (`stores[].roster`): the storefront greeter's store presence,
/// with no app.
@Suite struct ProximityRosterTests {
    static let adasFob = BeaconRef(major: 900, minor: 1)
    static let bensFob = BeaconRef(major: 900, minor: 2)

    /// Store 100 greets at its till by proximity (`roster`), store 200 by joins only (the
    /// default); Ada's and Ben's fobs are in the registry with their owners, Ada with a profile.
    static func configText(roster: String = #"{ "from": "proximity", "gateways": ["till"] }"#) -> String {
        """
        {
          "broker": { "url": "mqtt://127.0.0.1:1883" },
          "gateways": [ { "id": "door", "zone": "Entrance", "store": 100 }, { "id": "till", "zone": "Counter", "store": 100 },
                        { "id": "bar", "zone": "Bar", "store": 200 } ],
          "stores": [ { "major": 100, "name": "Main Street", "roster": \(roster) }, { "major": 200, "name": "Harbour" } ],
          "beacons": [
            { "uuid": "\(storeUUID)", "major": 900, "minor": 1, "owner": "ada",
              "profile": { "name": "Ada", "favorite": "flat white" } },
            { "uuid": "\(storeUUID)", "major": 900, "minor": 2, "owner": "ben" },
            { "uuid": "\(storeUUID)", "major": 100, "minor": 1, "name": "counter" },
            { "uuid": "\(storeUUID)", "major": 200, "minor": 1, "name": "bar" }
          ],
          "brain": { "joins": "open" }
        }
        """
    }

    static func config(roster: String = #"{ "from": "proximity", "gateways": ["till"] }"#) -> FleetConfig {
        try! FleetConfig.parse(configText(roster: roster))
    }

    func customer(_ h: Harness, _ client: String, store: UInt16 = 100) -> JSONValue? {
        h.retainedJSON(h.topics.customer(client, ofStore: store))
    }

    /// Messages the brain wrote on a customer's topic (publishes and deletes).
    func writes(_ h: Harness, _ client: String, store: UInt16 = 100) -> [MQTTMessage] {
        h.sent.filter { $0.topic == h.topics.customer(client, ofStore: store) }
    }

    @Test func aCustomerEntersAtImmediateNotAtNear() throws {
        var h = Harness(config: Self.config())
        h.announce(Self.adasFob, by: "till", rssi: -65, .near, at: t(1))
        #expect(customer(h, "ada") == nil, "near the counter is not at it")
        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(2))
        let entry = try #require(customer(h, "ada"))
        #expect(entry == JSONValue(text: """
            {"client":"ada","name":"Ada","favorite":"flat white","photo":null,"beacon":{"major":900,"minor":1},
             "since":"\(t(2).iso8601)"}
            """))
        #expect(h.roster?["count"] == .number(1))
        #expect(h.roster?["customers"]?.arrayValue?.first == entry, "the summary lists her as her own topic does")
        // The same expiry as a join's entry: nothing personal outlives the broker's clock.
        #expect(writes(h, "ada").last?.expiry == UInt32(BrainConfig().joinMaxAge))
    }

    @Test func onlyTheGreetingSpotsGatewaysCount() {
        var h = Harness(config: Self.config())
        h.announce(Self.adasFob, by: "door", rssi: -50, .immediate, at: t(1))
        #expect(customer(h, "ada") == nil, "the door is not the greeting spot")
        // Every gateway of the store counts when the roster names none.
        var any = Harness(config: Self.config(roster: #""proximity""#))
        any.announce(Self.adasFob, by: "door", rssi: -50, .immediate, at: t(1))
        #expect(customer(any, "ada")?["name"] == .string("Ada"))
    }

    @Test func aCustomerOnTheImmediateNearBorderDoesNotFlap() {
        var h = Harness(config: Self.config())
        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(1))
        // She stands where the gateway's class goes back and forth, then steps back a little.
        for second in 2...20 {
            h.announce(Self.adasFob, by: "till", rssi: -58, second % 2 == 0 ? .near : .immediate, at: t(Double(second)))
            h.advance(to: t(Double(second) + 0.5))
        }
        // One stray far reading shorter than leaveAfter (3 s) does not take her off either.
        h.announce(Self.adasFob, by: "till", rssi: -80, .far, at: t(21))
        h.advance(to: t(22))
        h.announce(Self.adasFob, by: "till", rssi: -62, .near, at: t(23))
        h.advance(to: t(30))
        #expect(customer(h, "ada") != nil)
        #expect(writes(h, "ada").count == 1, "written once, never deleted: \(writes(h, "ada").map(\.text))")
    }

    @Test func aCustomerLeavesAtFarAfterLeaveAfter() {
        var h = Harness(config: Self.config())
        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(1))
        h.announce(Self.adasFob, by: "till", rssi: -85, .far, at: t(5))
        h.advance(to: t(7.5))
        #expect(customer(h, "ada") != nil, "far for 2.5 s of leaveAfter's 3")
        h.advance(to: t(8.1))
        #expect(customer(h, "ada") == nil)
        #expect(writes(h, "ada").last?.payload.isEmpty == true, "the retained entry is deleted")
        #expect(h.roster?["count"] == .number(0))
        // Back at the counter: a new visit.
        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(20))
        #expect(customer(h, "ada")?["since"] == .string(t(20).iso8601))
    }

    @Test func aCustomerLeavesAtOnceWhenTheStoreStopsSeeingHer() {
        var h = Harness(config: Self.config())
        h.announce(Self.adasFob, by: "door", rssi: -70, .far, at: t(1))
        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(2))
        h.withdraw(Self.adasFob, by: "till", at: t(3))
        h.advance(to: t(5))
        #expect(customer(h, "ada") != nil, "the door still sees her: she may come back to the counter within leaveAfter")
        h.advance(to: t(6.1))
        #expect(customer(h, "ada") == nil, "3 s not at the counter")

        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(10))
        #expect(customer(h, "ada") != nil)
        h.withdraw(Self.adasFob, by: "till", at: t(11))
        h.withdraw(Self.adasFob, by: "door", at: t(11))
        #expect(customer(h, "ada") == nil, "she left the store: no waiting")
    }

    @Test func enterAfterIgnoresACustomerWalkingPast() {
        var h = Harness(config: Self.config(roster: #"{ "from": "proximity", "enterAfter": 2 }"#))
        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(1))
        h.announce(Self.adasFob, by: "till", rssi: -70, .near, at: t(2))
        h.advance(to: t(5))
        #expect(customer(h, "ada") == nil, "1 s at the counter")
        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(6))
        h.advance(to: t(7))
        #expect(customer(h, "ada") == nil)
        h.advance(to: t(8))
        #expect(customer(h, "ada")?["since"] == .string(t(8).iso8601))
    }

    @Test func eachStoreHasItsOwnMode() {
        var h = Harness(config: Self.config())
        // Store 200 is driven by joins only: Ben's fob at its bar puts nobody on its roster…
        h.announce(Self.bensFob, by: "bar", rssi: -45, .immediate, at: t(1))
        #expect(customer(h, "ben", store: 200) == nil)
        // …his app's join does, as it always did.
        h.join("ben", BeaconRef(major: 200, minor: 1), joinJSON(name: "Ben", favorite: "tea"), at: t(2))
        #expect(customer(h, "ben", store: 200)?["name"] == .string("Ben"))
        // Store 100 is driven by proximity only: a join there is answered (the ad) but the
        // roster is the counter's.
        h.join("carla", counter, joinJSON(name: "Carla"), at: t(3))
        #expect(h.inbox("carla").first?["type"] == .string("ad"))
        #expect(customer(h, "carla") == nil)
        // Ben's fob without a profile shows his client id only.
        h.announce(Self.bensFob, by: "till", rssi: -45, .immediate, at: t(4))
        #expect(customer(h, "ben")?["name"] == .null)
        #expect(customer(h, "ben")?["client"] == .string("ben"))
    }

    @Test func bothJoinsAndProximityMakeOneEntryPerCustomer() {
        var h = Harness(config: Self.config(roster: #"{ "from": "both", "gateways": ["till"] }"#))
        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(1))
        #expect(customer(h, "ada")?["favorite"] == .string("flat white"))
        // Her app joins too: its profile (and photo) wins, her arrival stays the first.
        h.join("ada", counter, joinJSON(name: "Ada L.", favorite: "cortado", photo: photo(500)), at: t(2))
        #expect(customer(h, "ada")?["favorite"] == .string("cortado"))
        #expect(customer(h, "ada")?["photo"] == .string(h.topics.observer("ada", of: counter)))
        #expect(customer(h, "ada")?["since"] == .string(t(1).iso8601))
        #expect(h.roster?["count"] == .number(1))
        // She leaves the counter; her app is still joined: she stays, with the app's profile.
        h.announce(Self.adasFob, by: "till", rssi: -85, .far, at: t(3))
        h.advance(to: t(7))
        #expect(customer(h, "ada")?["name"] == .string("Ada L."))
        h.leave("ada", counter, at: t(8))
        #expect(customer(h, "ada") == nil)
    }

    @Test func aRestartedBrainCarriesTheVisitOn() {
        var h = Harness(config: Self.config())
        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(1))
        h.announce(Self.adasFob, by: "till", rssi: -62, .near, at: t(2))
        var restarted = h.restarted(at: t(10))
        // Still at the counter (near, between enter and leave): same entry, same arrival.
        #expect(customer(restarted, "ada")?["since"] == .string(t(1).iso8601))
        #expect(writes(restarted, "ada").isEmpty, "nothing to correct")
        restarted.announce(Self.adasFob, by: "till", rssi: -85, .far, at: t(11))
        restarted.advance(to: t(14.5))
        #expect(customer(restarted, "ada") == nil)

        // She left while no brain ran (the till deleted its presence): the next brain deletes
        // her entry.
        var gone = h
        gone.retained[gone.topics.presence(of: Self.adasFob, seenBy: "till")] = nil
        #expect(gone.retained[gone.topics.customer("ada", ofStore: 100)] != nil)
        let next = gone.restarted(at: t(20))
        #expect(next.retained[next.topics.customer("ada", ofStore: 100)] == nil)
        #expect(next.roster?["count"] == .number(0))
    }

    @Test func aNewConfigTurnsProximityOff() {
        var h = Harness(config: Self.config())
        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(1))
        #expect(customer(h, "ada") != nil)
        h.apply(h.core.apply(Self.config(roster: #""joins""#), origin: "test", at: t(2)))
        #expect(customer(h, "ada") == nil, "store 100 went back to joins: her entry leaves")
        h.apply(h.core.apply(Self.config(), origin: "test", at: t(3)))
        #expect(customer(h, "ada") != nil, "and proximity again: she is still at the counter")
    }

    @Test func aGreetingRuleSaysTheRegistryProfileOfACustomersBeacon() throws {
        let rules = #"""
            "rules": [ { "name": "till-greeting", "when": "proximity:immediate", "zones": ["till"],
                         "then": [ { "do": "publish", "topic": "displays/till", "text": "{customer}: {favorite}?" } ],
                         "fallback": "A customer is at the till" } ],
            "brain":
            """#
        let config = try FleetConfig.parse(Self.configText().replacingOccurrences(of: #""brain":"#, with: rules))
        var h = Harness(config: config)
        h.announce(Self.adasFob, by: "till", rssi: -50, .immediate, at: t(1))
        h.announce(Self.bensFob, by: "till", rssi: -50, .immediate, at: t(2))
        #expect(h.sent.filter { $0.topic == "displays/till" }.map(\.text) == ["Ada: flat white?", "A customer is at the till"])
        #expect(customer(h, "ada") != nil)
    }

    @Test(arguments: [
        (#""nearby""#, "stores[0].roster: \"nearby\" is not one of \"joins\", \"proximity\", \"both\""),
        (#"{ "from": "proximity", "enter": "near", "leave": "near" }"#,
         "stores[0].roster.leave: \"near\" must be farther than enter (\"near\"): a customer standing on the border would come and go"),
        (#"{ "from": "proximity", "gateways": ["tll"] }"#,
         "stores[0].roster.gateways[0]: \"tll\" is not a gateway id; the gateways are door, till, bar"),
        (#"{ "from": "proximity", "gateways": ["bar"] }"#, "stores[0].roster.gateways[0]: \"bar\" stands in store 200, not 100"),
        (#"{ "from": "joins", "leaveAfter": 5 }"#,
         "stores[0].roster.leaveAfter: applies to a roster driven by proximity (\"from\": \"proximity\" or \"both\")"),
        (#"{ "from": "proximity", "leaveAfter": 900 }"#, "stores[0].roster.leaveAfter: 900 is out of range 0…600 s"),
        (#"{ "gateways": [] }"#, "stores[0].roster.from: is required"),
    ])
    func configCheckExplains(roster: String, expected: String) {
        do {
            _ = try FleetConfig.parse(Self.configText(roster: roster))
            Issue.record("accepted \(roster)")
        } catch {
            #expect(error.errors.map(\.description).contains(expected), "\(error.errors.map(\.description))")
        }
    }

    @Test func configCheckSaysWhomEachStoreGreetsWhere() throws {
        #expect(Self.config().rosterNotes == [
            "store 100's roster (proximity): 2 customer beacons at immediate at till, off at far after 3 s or when out of the store",
        ])
        let nobody = try FleetConfig.parse(Self.configText(roster: #""both""#).replacingOccurrences(of: #""owner": "ben""#, with: #""name": "b""#)
            .replacingOccurrences(of: #""owner": "ada","#, with: "")
            .replacingOccurrences(of: #""profile": { "name": "Ada", "favorite": "flat white" }"#, with: #""name": "a""#))
            .rosterNotes
        #expect(nobody == ["store 100's roster (both): nobody: no registry beacon has an owner (beacons[].owner) at immediate at any "
                           + "gateway of the store, off at far after 3 s or when out of the store"])
        let storeless = try FleetConfig.parse(Self.configText().replacingOccurrences(of: #", "store": 100 }"#, with: " }")).rosterNotes
        #expect(storeless.first?.hasSuffix("; note: no gateway says \"store\": 100, so only beacons of store 100 (beacons[].store) are seen there") == true,
                "\(storeless)")
    }

    @Test func aProfileNeedsAnOwner() {
        let text = Self.configText().replacingOccurrences(of: #""minor": 2, "owner": "ben" }"#,
                                                          with: #""minor": 2, "profile": { "name": "Ben" } }"#)
        do {
            _ = try FleetConfig.parse(text)
            Issue.record("accepted a profile without an owner")
        } catch {
            #expect(error.errors.map(\.description) == ["beacons[1].profile: needs an owner: a profile is the customer's who owns the beacon"])
        }
    }
}

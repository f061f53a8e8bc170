import BeaconKit
import Contract
import BrainCore
import Config
import GatewayCore
import Testing
import WebDisplay

@Suite("beacon-web's model of the fleet")
struct FleetStateTests {
    @Test("the greeter lists customers in the store newest first, with the zone of their beacon, then app users not in range")
    func greeter() throws {
        var state = FleetState(config: try fleetConfig())
        let change = state.receive("stores/100/roster", bytes: roster(100, [customer("ana", "Ana", minor: 1, since: 0),
                                                                            customer("ben", "Ben", minor: 2, since: 30),
                                                                            customer("cy", "Cy", minor: 3, since: 40)]))
        #expect(change.affects(.greeter(store: 100)) && change.affects(.floor(store: 100)) && !change.affects(.greeter(store: 7)))
        state.receive("beacons/100/1/presence", bytes: fleetPresence(100, 1, zone: "counter", zoneName: "Counter"), at: 45)
        state.receive("beacons/100/3/presence", bytes: fleetPresence(100, 3, zone: "door", zoneName: "Entrance"), at: 45)

        var page = state.parsed(.greeter(store: 100))
        #expect(page["name"] == .string("Main Street"))
        let people = try #require(page["customers"]?.arrayValue)
        #expect(people.map { $0["name"] } == [.string("Cy"), .string("Ana"), .string("Ben")],
                "in the store newest first, then those not in range")
        #expect(people[1]["zone"] == .string("Counter") && people[1]["inRange"] == .bool(true))
        #expect(people[2]["zone"] == .null && people[2]["inRange"] == .bool(false), "Ben's beacon is not heard: apart")
        #expect(people[1]["favorite"] == .string("flat white"))

        // Ben's join ends: he is off the list at once (he was never in the store).
        state.receive("stores/100/roster", bytes: roster(100, [customer("ana", "Ana", minor: 1, since: 0),
                                                               customer("cy", "Cy", minor: 3, since: 40)]), at: 50)
        #expect(state.greeter(store: 100).map(\.client) == ["cy", "ana"])
        // Ana's ends while her tag is at the counter: held for the store's exit timeout (10 s), then gone.
        state.receive("stores/100/roster", bytes: roster(100, [customer("cy", "Cy", minor: 3, since: 40)]), at: 60)
        #expect(state.greeter(store: 100).map(\.client) == ["cy", "ana"])
        #expect(state.greeter(store: 100).last?.away == true)
        #expect(state.expireCards(at: w(69.9)).isEmpty)
        #expect(state.expireCards(at: w(70)).affects(.greeter(store: 100)))
        page = state.parsed(.greeter(store: 100))
        #expect(page["customers"]?.arrayValue?.map { $0["client"] } == [.string("cy")])
    }

    /// The storefront greeter's shopkeeper sees how long a customer has been in the shop;
    /// seed 002 enters the shop at "immediate" and leaves it at "far", and a tag that drops
    /// out for a moment (a proximity roster lets it go after `leaveAfter`, an app leaving at
    /// far rejoins) is no new customer.
    @Test("a card stays steady through a drop-out shorter than the exit timeout: \"in store since\" does not restart")
    func steadyThroughDropOuts() throws {
        var state = FleetState(config: try fleetConfig())
        state.receive("beacons/100/1/presence", bytes: fleetPresence(100, 1, zone: "counter", zoneName: "Counter"), at: 0)
        state.receive("stores/100/roster", bytes: roster(100, [customer("ana", "Ana", minor: 1, since: 5)]), at: 5)
        #expect(state.greeter(store: 100).map(\.since) == [t(5)])
        // Off the roster at 100 s, back at 106 s with a new since: the same card, the same since.
        state.receive("stores/100/roster", bytes: roster(100, []), at: 100)
        #expect(state.greeter(store: 100).map(\.client) == ["ana"], "held")
        #expect(state.expireCards(at: w(105)).isEmpty)
        state.receive("stores/100/roster", bytes: roster(100, [customer("ana", "Ana", minor: 1, since: 106)]), at: 106)
        #expect(state.expireCards(at: w(120)).isEmpty, "back on the roster: no hold to end")
        let card = try #require(state.greeter(store: 100).first)
        #expect(card.since == t(5) && !card.away)
        // A longer absence is a new visit.
        state.receive("stores/100/roster", bytes: roster(100, []), at: 200)
        #expect(state.expireCards(at: w(210)).affects(.greeter(store: 100)))
        state.receive("stores/100/roster", bytes: roster(100, [customer("ana", "Ana", minor: 1, since: 300)]), at: 300)
        #expect(state.greeter(store: 100).map(\.since) == [t(300)])
        // The tag's presence may end a moment before the roster entry: the card is held in the
        // store all the same, never moved to "not in range" on the way out.
        state.receive("beacons/100/1/presence", "", at: 400)
        #expect(state.greeter(store: 100).first?.inRange == true)
        state.receive("stores/100/roster", bytes: roster(100, []), at: 401)
        let held = try #require(state.greeter(store: 100).first)
        #expect(held.inRange && held.away && held.zone == nil)
        #expect(state.expireCards(at: w(411)).affects(.greeter(store: 100)))
        #expect(state.greeter(store: 100).isEmpty)
    }

    @Test("\"in store since\" and \"at the counter since\" are apart: a customer's own tag counts from its arrival, the zone from the move")
    func inStoreAndAtTheCounter() throws {
        var config = try fleetConfig()
        config.beacons.append(BeaconEntry(id: .ibeacon(uuid: storeUUID, major: 100, minor: 1), owner: "ana"))
        var state = FleetState(config: config)
        // Ana's own tag comes in at the door at 0 s (the presence's since), she joins at 20 s,
        // her tag moves to the counter at 90 s.
        state.receive("beacons/100/1/presence", bytes: fleetPresence(100, 1, zone: "door", zoneName: "Entrance"), at: 2)
        state.receive("stores/100/roster", bytes: roster(100, [customer("ana", "Ana", minor: 1, since: 20)]), at: 20)
        var page = state.parsed(.greeter(store: 100))
        var ana = try #require(page["customers"]?.arrayValue?.first)
        #expect(ana["since"] == .string(t(0).iso8601) && ana["zone"] == .string("Entrance") && ana["zoneSince"] == .string(t(0).iso8601))
        state.receive("beacons/100/1/presence", bytes: fleetPresence(100, 1, zone: "counter", zoneName: "Counter"), at: 90)
        page = state.parsed(.greeter(store: 100))
        ana = try #require(page["customers"]?.arrayValue?.first)
        #expect(ana["since"] == .string(t(0).iso8601), "in store since her tag came in")
        #expect(ana["zone"] == .string("Counter") && ana["zoneSince"] == .string(t(90).iso8601), "at the counter since 90 s")
    }

    @Test("per-customer topics, once seen, are the truth for a store (the summary may be bounded)")
    func perCustomerTopics() throws {
        var state = FleetState(config: try fleetConfig())
        state.receive("stores/100/roster", bytes: roster(100, [customer("ana", "Ana", minor: 1, since: 0)]))
        let ben = Roster(store: 100, name: nil, customers: [customer("ben", "Ben", minor: 2, since: 30)]).json(at: nil)
        // One customer's payload is the summary's entry.
        let entry = try #require(try JSONParser().parse(ben)["customers"]?.arrayValue?.first)
        state.receive("stores/100/customers/ben", entry.jsonText)
        state.receive("stores/100/customers/cy", #"{"client":"cy","name":"Cy","favorite":null,"photo":null,"beacon":{"major":100,"minor":3},"since":"2026-11-21T09:01:00.000Z"}"#)
        #expect(state.greeter(store: 100).map(\.client) == ["cy", "ben"])
        state.receive("stores/100/customers/cy", "")
        #expect(state.greeter(store: 100).map(\.client) == ["ben"])
        // A payload naming another client than its topic is refused.
        state.receive("stores/100/customers/dan", #"{"client":"eve","name":"Eve","favorite":null,"photo":null,"beacon":{"major":100,"minor":3},"since":"2026-11-21T09:01:00.000Z"}"#)
        #expect(state.greeter(store: 100).map(\.client) == ["ben"])
        #expect(state.malformed == 1)
    }

    @Test("photos come from the retained joins, are served by URL and never inlined in the page data")
    func photos() throws {
        var state = FleetState(config: try fleetConfig())
        state.receive("stores/100/roster", bytes: roster(100, [customer("ana", "Ana", minor: 1, since: 0, photo: true)]))
        #expect(state.greeter(store: 100).first?.photoURL == nil, "no photo until the join is read")
        state.receive("beacons/100/1/observers/ana", bytes: join(name: "Ana", photo: jpeg))
        let url = try #require(state.greeter(store: 100).first?.photoURL)
        #expect(url.hasPrefix("/photos/100/ana?v="))
        #expect(state.photo(store: 100, client: "ana") == jpeg)
        #expect(!state.json(for: .greeter(store: 100), at: w(0)).contains("/9j/"), "no base64 JPEG in the JSON")
        state.receive("beacons/100/1/observers/ana", "")
        #expect(state.photo(store: 100, client: "ana") == nil)
    }

    @Test("the floor places gateways from the config, lays out unplaced ones, and draws beacons around their zone")
    func floor() throws {
        var state = FleetState(config: try fleetConfig())
        state.receive("stores/100/roster", bytes: roster(100, [customer("ana", "Ana", minor: 1, since: 0)]))
        state.receive("beacons/100/1/presence", bytes: fleetPresence(100, 1, zone: "counter", zoneName: "Counter"))
        state.receive("beacons/100/9/presence", bytes: fleetPresence(100, 9, zone: "door", zoneName: "Entrance"))
        let floor = state.floor(store: 100, at: w(0))
        #expect(floor.plan == FloorPlan(width: 20, height: 10))
        #expect(floor.gateways.map(\.id) == ["door", "counter", "window"])
        #expect(floor.gateways[0].position == FloorPosition(x: 2, y: 5) && floor.gateways[0].placed)
        #expect(!floor.gateways[2].placed && floor.gateways[2].position.y < 10)
        let ana = try #require(floor.dots.first { $0.beacon == BeaconRef(major: 100, minor: 1) })
        #expect(ana.label == "Ana" && ana.isCustomer && ana.zone == "counter")
        let distance = ((ana.position.x - 16) * (ana.position.x - 16) + (ana.position.y - 3) * (ana.position.y - 3)).squareRoot()
        #expect(distance < 2.5, "drawn near the counter: \(ana.position)")
        let trolley = try #require(floor.dots.first { $0.beacon == BeaconRef(major: 100, minor: 9) })
        #expect(trolley.label == "trolley" && !trolley.isCustomer && trolley.zone == "door")

        // Leaving: the fleet presence is deleted.
        let change = state.receive("beacons/100/1/presence", "")
        #expect(change.affects(.floor(store: 100)))
        #expect(state.floor(store: 100, at: w(0)).dots.map(\.beacon) == [BeaconRef(major: 100, minor: 9)])
    }

    @Test("the dashboard makes offline, stalled and late gateways stand out")
    func fleetConditions() throws {
        var state = FleetState(config: try fleetConfig())
        func health(_ gateway: String, state sourceState: String, adverts: Double) -> String {
            GatewayHealth(gateway: gateway, version: "0.1.0", uptime: 10, source: "hci:0", sourceState: sourceState,
                            advertsPerSecond: adverts, decodedPerSecond: adverts / 2, dropped: 3, malformed: 4, queueDepth: 0,
                            tracked: 5, published: 6, ts: w(0)).json
        }
        #expect(state.condition(ofGateway: "door", at: w(0)) == .unknown)
        state.receive("gateways/door/status", "online")
        state.receive("gateways/door/health", health("door", state: "running", adverts: 40))
        state.receive("gateways/counter/status", "online")
        state.receive("gateways/counter/health", health("counter", state: "retrying", adverts: 0))
        state.receive("gateways/window/status", "offline")
        state.receive("gateways/stray/status", "online")
        state.receive("gateways/stray/health", health("stray", state: "running", adverts: 0))
        #expect(state.condition(ofGateway: "door", at: w(1)) == .ok)
        #expect(state.condition(ofGateway: "counter", at: w(1)) == .stalled)
        #expect(state.condition(ofGateway: "window", at: w(1)) == .offline)
        #expect(state.condition(ofGateway: "stray", at: w(1)) == .quiet)
        // Health is due every 30 s: after 2.5 intervals without one, the gateway is late.
        #expect(state.condition(ofGateway: "door", at: w(80)) == .late)

        let page = state.parsed(.fleet, at: 1)
        let rows = try #require(page["gateways"]?.arrayValue)
        #expect(rows.map { $0["id"] } == ["door", "counter", "window", "stray"].map(JSONValue.string))
        #expect(rows.map { $0["attention"] } == [false, true, true, false].map(JSONValue.bool))
        #expect(rows[0]["advertsPerSecond"] == .number(40))
        #expect(rows[0]["malformed"] == .number(4) && rows[0]["dropped"] == .number(3))
        #expect(rows[0]["calibration"]?["pathLossExponent"] == .number(2.5))
        #expect(rows[3]["calibration"] == .null, "a gateway outside the config has no calibration")
        #expect(page["attention"] == .number(2))
        #expect(page["brain"] == .string("unknown"))
        #expect(rows.map { $0["stale"] } == [false, false, false, false].map(JSONValue.bool), "window has no figures to grey")

        // Its last figures stay, but are no longer current: offline, or health overdue (late).
        state.receive("gateways/counter/status", "offline")
        let later = try #require(state.parsed(.fleet, at: 80)["gateways"]?.arrayValue)
        #expect(later.map { $0["stale"] } == [true, true, false, true].map(JSONValue.bool), "\(later)")
        #expect(later[1]["advertsPerSecond"] == .number(0) && later[1]["condition"] == .string("offline"))
    }

    @Test("the dashboard shows what the brain's calibration learned beside the config's values, and forgets a deleted record")
    func learnedCalibration() throws {
        var state = FleetState(config: try fleetConfig())
        let record = CalibrationRecord(gateway: "door",
                                       values: .init(rssiOffset: -5.94, pathLossExponent: 2.4321, since: t(60)),
                                       samples: 240, links: 3, residual: 1.2, pinned: false, configuredOffset: 0, before: nil)
        state.receive("gateways/door/calibration", record.json)
        state.receive("gateways/counter/calibration", record.json)  // the record names another gateway
        var rows = try #require(state.parsed(.fleet, at: 1)["gateways"]?.arrayValue)
        #expect(rows[0]["learned"]?["rssiOffset"] == .number(-5.9))
        #expect(rows[0]["learned"]?["pathLossExponent"] == .number(2.43))
        #expect(rows[0]["learned"]?["pinned"] == .bool(false))
        #expect(rows[0]["calibration"]?["pathLossExponent"] == .number(2.5), "the config's values stay beside it")
        #expect(rows[1]["learned"] == .null)
        #expect(state.malformed == 1)
        state.receive("gateways/door/calibration", "")
        rows = try #require(state.parsed(.fleet, at: 1)["gateways"]?.arrayValue)
        #expect(rows[0]["learned"] == .null)
    }

    @Test("a new fleet/config applies (names, positions), keeping this process's broker; a bad one is counted")
    func liveConfig() throws {
        var state = FleetState(config: try fleetConfig())
        let change = state.receive("fleet/config", """
        {"broker": {"url": "mqtts://elsewhere:8883"}, "stores": [{"major": 100, "name": "High Street"}]}
        """)
        #expect(change.config && change.affects(.fleet) && change.affects(.greeter(store: 100)))
        #expect(state.storeName(100) == "High Street")
        #expect(state.config.broker.url.host == "127.0.0.1")
        state.receive("fleet/config", "{not json")
        #expect(state.malformed == 1 && state.storeName(100) == "High Street")
    }

    @Test("every page says whether the broker is connected, and a change of it reaches every page")
    func live() throws {
        var state = FleetState(config: try fleetConfig())
        #expect(state.parsed(.greeter(store: 100))["live"] == .bool(false))
        let change = state.setBrokerConnected(true)
        #expect(change.affects(.fleet) && change.affects(.greeter(store: 100)) && change.affects(.floor(store: 100)))
        for page in [FleetState.Page.fleet, .greeter(store: 100), .floor(store: 100)] {
            #expect(state.parsed(page)["live"] == .bool(true))
        }
        #expect(state.setBrokerConnected(true).isEmpty)
        #expect(!state.setBrokerConnected(false).isEmpty)
        #expect(state.parsed(.fleet)["live"] == .bool(false))
    }

    @Test("messages that are not JSON, or not what their topic says, change nothing but the fleet page's count of them")
    func badInput() throws {
        var state = FleetState(config: try fleetConfig())
        for (topic, text) in [("beacons/100/1/presence", "{"), ("gateways/door/health", "[1]"),
                              ("stores/100/roster", #"{"store": 7, "customers": []}"#),
                              ("beacons/100/1/observers/ana", #"{"state":"left"}"#)] {
            let change = state.receive(topic, text)
            #expect(change.malformed?.topic == topic && change.affects(.fleet) && change.stores.isEmpty && !change.config,
                    "\(topic)")
        }
        #expect(state.malformed == 4)
        // The fleet page counts them and shows the last one.
        let fleet = state.parsed(.fleet, at: 90)
        #expect(fleet["malformed"] == .number(4))
        #expect(fleet["lastMalformed"]?["topic"] == .string("beacons/100/1/observers/ana"))
        #expect(fleet["lastMalformed"]?["reason"] == .string("not an observer's join"))
        #expect(state.presence.isEmpty && state.gateways.isEmpty)
    }
}

import BrainCore
import Brain
import LiveClock
import Foundation
import MQTT
import TestSupport
import Testing
import BeaconKit
import Contract
import Tracking

/// The brain against a real Mosquitto: each test starts its own broker on a free port and
/// stops exactly what it started.
@Suite("Brain with a real broker", .serialized, .capturingLogs)
struct BrokerTests {
    static let rules = BrainCoreTests.rules

    @Test("a join is answered with the ad on the observer's inbox, and shows on the roster")
    func joinToReply() async throws {
        let directory = try TemporaryDirectory("brain-join")
        let broker = try await MosquittoBroker.start(in: directory)
        let brain = try await RunningBrain.start(testConfig(rules: Self.rules), broker: broker)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["observers/#", "stores/#", "beacons/100/1/ad",
                                                                                  "brain/status"], in: directory)
        let ad = await watch.waitForJSON(on: "beacons/100/1/ad")
        #expect(ad?["title"] == .string("Espresso"), "the standing ad is retained")
        #expect(await watch.waitFor(topic: "brain/status", text: "online") != nil)

        let phone = try await Peer(broker)
        try phone.publish("beacons/100/1/observers/ada", joinJSON(photo: photo(2048)), retain: true)
        let reply = await watch.waitForJSON(on: "observers/ada/inbox") { $0["type"] == .string("ad") }
        #expect(reply?["ad"]?["title"] == .string("Espresso"), "\(watch.records)\n\(broker.diagnostics)")
        let greeting = await watch.waitForJSON(on: "observers/ada/inbox") { $0["type"] == .string("greeting") }
        #expect(greeting?["text"] == .string("Hello Ada! Your usual flat white?"))
        let roster = await watch.waitForJSON(on: "stores/100/roster") { $0["customers"]?.arrayValue?.count == 1 }
        #expect(roster?["customers"]?.arrayValue?.first?["photo"] == .string("beacons/100/1/observers/ada"))

        try phone.publish("beacons/100/1/observers/ada", "", retain: true)
        let empty = await watch.waitForJSON(on: "stores/100/roster") { $0["customers"] == .array([]) }
        #expect(empty != nil, "the roster empties on leave")

        await phone.stop()
        await brain.stop()
        #expect(await watch.waitFor(topic: "brain/status", text: "offline") != nil, "offline on a clean stop")
        await watch.stop()
        await broker.stop()
    }

    @Test("zone switching between two gateways on the evidence of their RSSI reports, and the exit on silence")
    func zoneSwitching() async throws {
        let directory = try TemporaryDirectory("brain-zone")
        let broker = try await MosquittoBroker.start(in: directory)
        let brain = try await RunningBrain.start(testConfig(), broker: broker)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/100/1/presence", "beacons/100/1/events"],
                                                        in: directory)
        let gateways = try await Peer(broker)
        let topic = "beacons/100/1/presence"

        try gateways.publish("beacons/100/1/presence/door", presenceJSON(counter, "door", rssi: -70), retain: true)
        let first = await watch.waitForJSON(on: topic)
        #expect(first?["zone"] == .string("door"), "\(broker.diagnostics)")
        // The till hears the beacon 10 dB louder than the door, window after window: the zone
        // moves, once.
        func report(_ window: Int, till: Double?, door: Double?) throws {
            let from = t(Double(window) / 2)
            try gateways.publish("gateways/till/rssi",
                                 rssiReport("till", from: from, to: from + 0.5, till.map { [(counter, $0)] } ?? [], .immediate).json)
            try gateways.publish("gateways/door/rssi",
                                 rssiReport("door", from: from, to: from + 0.5, door.map { [(counter, $0)] } ?? []).json)
        }
        for window in 0..<8 { try report(window, till: -60, door: -70) }
        let moved = await watch.waitForJSON(on: topic) { $0["zone"] == .string("till") }
        #expect(moved?["zoneName"] == .string("Counter"))
        #expect(moved?["proximity"] == .string("immediate"))
        let event = await watch.waitForJSON(on: "beacons/100/1/events") { $0["event"] == .string("zone") }
        #expect(event?["from"] == .string("door"))
        let decision = try event.map { try ZoneDecision(parsing: $0, topic: counter) }
        #expect(decision.map { $0.at <= t(4) } == true, "capture time, not the brain's clock: \(String(describing: event))")

        // Then neither gateway hears it: the beacon exits from the till (after 10 s of silence: the
        // test fleet's exitMinimum).
        for window in 8..<40 { try report(window, till: nil, door: nil) }
        #expect(await watch.waitForDeletion(of: topic), "\(watch.records)")
        let exit = await watch.waitForJSON(on: "beacons/100/1/events") { $0["event"] == .string("exit") }
        #expect(exit?["zone"] == .string("till"), "\(watch.json(on: "beacons/100/1/events"))")
        #expect(watch.json(on: topic).filter { $0["zone"] == .string("till") }.count == 1)
        #expect(brain.statistics.beacons == 0)

        await gateways.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }

    @Test("a gateway's last will drops its views at once")
    func gatewayLastWill() async throws {
        let directory = try TemporaryDirectory("brain-gateway-will")
        let broker = try await MosquittoBroker.start(in: directory)
        let brain = try await RunningBrain.start(testConfig(), broker: broker)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/+/+/presence"], in: directory)
        let door = try await DyingClient(broker, id: "gw-door", willTopic: "gateways/door/status", in: directory)
        let others = try await Peer(broker)
        try others.publish("gateways/door/status", "online", retain: true)
        try others.publish("beacons/100/1/presence/door", presenceJSON(counter, "door", rssi: -60), retain: true)
        try others.publish("beacons/100/2/presence/door", presenceJSON(window, "door", rssi: -60), retain: true)
        try others.publish("beacons/100/2/presence/till", presenceJSON(window, "till", rssi: -80, .far), retain: true)
        #expect(await watch.waitForJSON(on: "beacons/100/2/presence") { $0["gateways"]?.arrayValue?.count == 2 } != nil)
        #expect(await watch.waitForJSON(on: "beacons/100/1/presence") != nil)

        await door.kill()
        #expect(await watch.waitForDeletion(of: "beacons/100/1/presence"), "\(watch.records)\n\(broker.diagnostics)")
        let window = await watch.waitForJSON(on: "beacons/100/2/presence") { $0["zone"] == .string("till") }
        #expect(window?["gateways"]?.arrayValue?.count == 1)
        #expect(brain.statistics.beacons == 1)

        await others.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }

    @Test("a gateway's last will is held for the grace in the brain's own time, then drops its views")
    func gatewayWillGraceOnAManualClock() async throws {
        let directory = try TemporaryDirectory("brain-will-grace")
        let broker = try await MosquittoBroker.start(in: directory)
        let clock = ManualClock(at: w(0))
        let brain = try await RunningBrain.start(testConfig(), broker: broker, clock: clock)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/+/+/presence"], in: directory)
        let door = try await DyingClient(broker, id: "gw-door", willTopic: "gateways/door/status", in: directory)
        let others = try await Peer(broker)
        try others.publish("gateways/door/status", "online", retain: true)
        try others.publish("beacons/100/1/presence/door", presenceJSON(counter, "door", rssi: -60), retain: true)
        #expect(await watch.waitForJSON(on: "beacons/100/1/presence") != nil)
        let received = brain.statistics.counters.received

        /// Waits until the brain's timers have gone round at the time the clock moved to.
        func advance(by seconds: Double) async {
            clock.advance(by: seconds)
            let now = clock.monotonic()
            #expect(await eventually { (brain.statistics.timerRound ?? -1) >= now }, "no round of the timers at \(now) s")
        }
        await door.kill()
        // The will is the only message the brain receives now (the door's status, offline).
        #expect(await eventually { brain.statistics.counters.received == received + 1 })
        await advance(by: 2.9)
        #expect(brain.statistics.beacons == 1, "held: a broker that shuts down sends every will at once")
        #expect(!watch.records.contains { $0.topic == "beacons/100/1/presence" && $0.text.isEmpty })
        await advance(by: 0.2)
        // On the next round of the timers, however little real time went by.
        #expect(brain.statistics.beacons == 0, "the views drop once the grace runs out in the brain's time")
        #expect(await watch.waitForDeletion(of: "beacons/100/1/presence"), "\(watch.records)")

        await others.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }

    @Test("an observer's last will ends its joins and deletes its profile from the broker")
    func observerLastWill() async throws {
        let directory = try TemporaryDirectory("brain-observer-will")
        let broker = try await MosquittoBroker.start(in: directory)
        let brain = try await RunningBrain.start(testConfig(rules: Self.rules), broker: broker)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["stores/#", "beacons/+/+/observers/+",
                                                                                  "displays/#"], in: directory)
        let app = try await DyingClient(broker, id: "app-ada", willTopic: "observers/ada/status", in: directory)
        let phones = try await Peer(broker)
        try phones.publish("observers/ada/status", "online", retain: true)
        try phones.publish("beacons/100/1/observers/ada", joinJSON(photo: photo(4096)), retain: true)
        try phones.publish("beacons/100/2/observers/ada", joinJSON(), retain: true)
        try phones.publish("beacons/100/2/observers/bob", joinJSON(name: "Bob"), retain: true)
        let both = await watch.waitForJSON(on: "stores/100/roster") { $0["customers"]?.arrayValue?.count == 2 }
        #expect(both != nil, "\(watch.records)")

        await app.kill()
        let roster = await watch.waitForJSON(on: "stores/100/roster") {
            $0["customers"]?.arrayValue?.map { $0["client"] } == [.string("bob")]
        }
        #expect(roster != nil, "\(watch.records)")
        #expect(await watch.waitForDeletion(of: "beacons/100/1/observers/ada"), "the profile with the photo is gone")
        #expect(await watch.waitForDeletion(of: "beacons/100/2/observers/ada"))
        #expect(await watch.waitFor(topic: "displays/100/ada") != nil, "leave rules ran")
        #expect(brain.statistics.joins == 1)

        // Nothing of ada is retained any more.
        let fresh = try await MosquittoSubscriber.start(broker: broker, filters: ["#"], in: directory)
        _ = await fresh.waitFor(topic: "beacons/100/2/observers/bob")
        #expect(await fresh.caughtUp(on: broker))
        #expect(!fresh.records.contains { $0.topic.contains("observers/ada") && $0.topic.hasPrefix("beacons/") })
        #expect(!fresh.records.contains { $0.topic.hasPrefix("brain/answered/") && $0.topic.hasSuffix("/ada") })

        await fresh.stop()
        await phones.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }

    @Test("a brain restarted in the middle of a visit answers nothing twice")
    func restartMidVisit() async throws {
        let directory = try TemporaryDirectory("brain-restart")
        let broker = try await MosquittoBroker.start(in: directory)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["observers/+/inbox", "displays/#"],
                                                        in: directory)
        let peer = try await Peer(broker)
        var brain = try await RunningBrain.start(testConfig(rules: Self.rules), broker: broker)
        try peer.publish("beacons/100/1/observers/ada", joinJSON(), retain: true)
        try peer.publish("beacons/100/1/presence/till", presenceJSON(counter, "till", rssi: -60, .near), retain: true)
        try peer.publish("beacons/100/1/presence/till", presenceJSON(counter, "till", rssi: -50, .immediate), retain: true)
        // ad + greeting on join, then the once-per-visit deal and the location fix at immediate.
        #expect(await eventually { watch.json(on: "observers/ada/inbox").count == 4 }, "\(watch.records)")
        #expect(await watch.waitFor(topic: "displays/100/barista") != nil)

        for round in 1...2 {
            await brain.stop()
            brain = try await RunningBrain.start(testConfig(rules: Self.rules), broker: broker)
            #expect(brain.statistics.joins == 1, "round \(round)")
            #expect(brain.statistics.beacons == 1)
            // Still at immediate, sighted again: the deal was given this visit, the fix is disarmed.
            let from = t(Double(round))
            let received = brain.statistics.counters.received
            try peer.publish("gateways/till/rssi", rssiReport("till", from: from, to: from + 0.5, [(counter, -50)], .immediate).json)
            await peer.flush()
            // Nothing happens: checked once the brain has read the report, not after a while.
            #expect(await eventually { brain.statistics.counters.received > received })
            #expect(brain.statistics.counters.inboxMessages == 0, "round \(round): \(watch.records)")
            #expect(watch.json(on: "observers/ada/inbox").count == 4)
            #expect(watch.records.filter { $0.topic == "displays/100/barista" }.count == 1)
        }

        // Gone: the till withdraws its presence and its reports hear nothing for a while. A new
        // visit (the till hears the beacon again) is answered again.
        try peer.publish("beacons/100/1/presence/till", "", retain: true)
        try peer.publish("gateways/till/rssi", rssiReport("till", from: t(2.5), to: t(30), []).json)
        #expect(await eventually { brain.statistics.beacons == 0 })
        try peer.publish("gateways/till/rssi", rssiReport("till", from: t(30), to: t(30.5), [(counter, -50)], .immediate).json)
        #expect(await eventually { watch.json(on: "observers/ada/inbox").count == 6 }, "\(watch.records)")

        await peer.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }

    @Test("beacon-brain killed with SIGKILL mid-visit and started again does not resend the ad")
    func killedExecutable() async throws {
        let directory = try TemporaryDirectory("brain-kill")
        let broker = try await MosquittoBroker.start(in: directory)
        let program = Programs.built("beacon-brain")
        try #require(FileManager.default.isExecutableFile(atPath: program), "build beacon-brain first: \(program)")
        let config = try directory.write("fleet.json", testConfigText(rules: Self.rules, broker: broker.url))
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["observers/+/inbox", "brain/#"],
                                                        in: directory)
        func launch() throws -> ChildProcess {
            try ChildProcess(program, ["--config", config, "--log-level", "debug"], in: directory, name: "beacon-brain")
        }
        var process = try launch()
        #expect(await watch.waitForJSON(on: "brain/health/beacon-brain", timeout: 10) { $0["settled"] == .bool(true) } != nil,
                "\(process.diagnostics)")
        let peer = try await Peer(broker)
        try peer.publish("beacons/100/1/presence/till", presenceJSON(counter, "till", rssi: -50, .immediate), retain: true)
        try peer.publish("beacons/100/1/observers/ada", joinJSON(), retain: true)
        #expect(await eventually { watch.json(on: "observers/ada/inbox").count == 2 }, "\(process.diagnostics)")
        #expect(await eventually { watch.records.contains { $0.topic == "brain/answered/100/1/ada" } })

        process.signal(SIGKILL)
        await process.waitForExit()
        #expect(await watch.waitFor(topic: "brain/status", text: "offline") != nil, "the last will")
        let healthBefore = watch.records.filter { $0.topic == "brain/health/beacon-brain" }.count
        process = try launch()
        // The new process's health once it has settled with ada's join in hand: a reply to
        // that join would have gone out before it, on the same connection.
        #expect(await eventually(timeout: 10) {
            watch.json(on: "brain/health/beacon-brain").dropFirst(healthBefore).contains {
                $0["settled"] == .bool(true) && $0["joins"] == .number(1)
            }
        }, "\(process.diagnostics)")
        #expect(await watch.caughtUp(on: broker, marker: "brain/caught-up"))
        #expect(watch.json(on: "observers/ada/inbox").count == 2, "\(process.diagnostics)")

        // SIGTERM: a clean stop with status 0.
        process.signal(SIGTERM)
        #expect(await process.waitForExit(timeout: 10) == 0, "\(process.diagnostics)")
        #expect(await eventually { watch.records.last { $0.topic == "brain/status" }?.text == "offline" })

        await peer.stop()
        await watch.stop()
        await broker.stop()
    }

    @Test("malformed and hostile payloads on every subscribed topic are counted and ignored")
    func hostilePayloads() async throws {
        let directory = try TemporaryDirectory("brain-hostile")
        let broker = try await MosquittoBroker.start(in: directory)
        let brain = try await RunningBrain.start(testConfig(rules: Self.rules), broker: broker)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["observers/+/inbox"], in: directory)
        let peer = try await Peer(broker)
        try peer.publish("beacons/100/1/presence/door", presenceJSON(counter, "door", rssi: -60), retain: true)
        #expect(await eventually { brain.statistics.beacons == 1 })

        let bad: [[UInt8]] = [
            Array("not json".utf8), Array("{\"major\":\"100\",\"minor\":[1]}".utf8), Array("[]".utf8), Array("null".utf8),
            Array((String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)).utf8),
            Array(("{\"a\":" + String(repeating: "{\"a\":", count: 40) + "1" + String(repeating: "}", count: 41)).utf8),
            [UInt8](repeating: 0x7B, count: 70 * 1024), [UInt8](repeating: 0x20, count: 1024 * 1024),
            [0xFF, 0xFE, 0x00, 0x7B], Array("{\"state\":\"joined\",\"profile\":{\"photo\":\"////\"}}".utf8),
        ]
        let topics = ["gateways/door/rssi", "beacons/100/1/presence/door", "beacons/100/1/presence", "beacons/100/1/ad",
                      "beacons/100/1/observers/eve", "gateways/door/status", "observers/eve/status", "stores/100/roster",
                      "fleet/config", "brain/visits/100/1", "brain/answered/100/1/eve"]
        for topic in topics {
            for payload in bad { try peer.publish(topic, bytes: payload) }
        }
        // Still answering, in order after all of that.
        try peer.publish("beacons/100/2/observers/zoe", joinJSON(name: "Zoe"), retain: true)
        let reply = await watch.waitForJSON(on: "observers/zoe/inbox", timeout: 20) { $0["type"] == .string("ad") }
        #expect(reply != nil, "\(broker.diagnostics)")

        let counters = brain.statistics.counters
        // Per topic the payloads over 64 KiB are dropped unparsed (fleet/config takes up to
        // 4 MiB); a settled brain no longer listens on its own five topics (presence, ad,
        // roster, records): what others write there never reaches it.
        let large = bad.filter { $0.count > 64 * 1024 }.count
        #expect(large == 3)
        #expect(counters.oversized == large * (topics.count - 1 - 5), "\(counters)")
        #expect(counters.joinsRejected == bad.count)
        #expect(watch.json(on: "observers/eve/inbox").filter { $0["type"] == .string("error") }.count == bad.count)
        for kind in [BrainCounters.Input.rssiReport, .gatewayPresence, .gatewayStatus, .observerStatus, .join] {
            #expect(counters.malformed[kind] == bad.count - large, "\(kind)")
        }
        #expect(counters.malformed[.fleetConfig] == bad.count)
        #expect(counters.configsRejected == bad.count)
        #expect(brain.statistics.beacons == 1, "the door's view survived")
        #expect(brain.statistics.joins == 1)

        await peer.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }

    @Test("after a broker restart the brain reconnects, rebuilds and answers")
    func brokerRestart() async throws {
        let directory = try TemporaryDirectory("brain-broker-restart")
        let broker = try await MosquittoBroker.start(in: directory)
        let brain = try await RunningBrain.start(testConfig(), broker: broker)
        try await broker.restart()  // without persistence: every retained message is gone
        #expect(await eventually(timeout: 10) { brain.statistics.connections == 2 && brain.statistics.settled })
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/100/1/ad", "brain/status",
                                                                                  "observers/+/inbox"], in: directory)
        #expect(await watch.waitForJSON(on: "beacons/100/1/ad") != nil, "the standing ad is published again")
        #expect(await watch.waitFor(topic: "brain/status", text: "online") != nil)
        let peer = try await Peer(broker)
        try peer.publish("beacons/100/1/observers/ada", joinJSON(), retain: true)
        #expect(await watch.waitForJSON(on: "observers/ada/inbox") != nil)

        await peer.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }

    @Test("a new fleet/config applies live; an invalid one is reported and the last good one kept")
    func liveConfig() async throws {
        let directory = try TemporaryDirectory("brain-config")
        let broker = try await MosquittoBroker.start(in: directory)
        let brain = try await RunningBrain.start(testConfig(), broker: broker)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/100/+/ad", "brain/events"],
                                                        in: directory)
        let operator_ = try await Peer(broker)
        let new = testConfigText(broker: broker.url, counterAd: #"{"title":"Cortado","price":2}"#)
        try operator_.publish("fleet/config", new, retain: true)
        #expect(await watch.waitForJSON(on: "beacons/100/1/ad") { $0["title"] == .string("Cortado") } != nil)
        let reports = { watch.records.compactMap { record -> ConfigReport<CaptureClock>? in
            if record.topic == "brain/events", case .config(let report)? = record.brainEvent { report } else { nil }
        } }
        #expect(await eventually(timeout: 5) { reports().contains { if case .applied = $0.outcome { true } else { false } } }, "\(watch.records)")
        try operator_.publish("fleet/config", #"{"beacons":[{"major":1}]}"#, retain: true)
        #expect(await eventually(timeout: 5) {
            reports().contains { if case .rejected(let errors) = $0.outcome { !errors.isEmpty } else { false } }
        }, "\(watch.records)")
        #expect(brain.statistics.counters.configsApplied == 1)
        #expect(brain.statistics.counters.configsRejected == 1)
        #expect(watch.json(on: "beacons/100/1/ad").last?["title"] == .string("Cortado"))

        await operator_.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }

    @Test("two brains split a fleet by store")
    func storesSplitAFleet() async throws {
        let directory = try TemporaryDirectory("brain-split")
        let broker = try await MosquittoBroker.start(in: directory)
        let main = try await RunningBrain.start(testConfig(), broker: broker, stores: [100], clientID: "brain-100")
        let other = try await RunningBrain.start(testConfig(), broker: broker, stores: [200], clientID: "brain-200")
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["observers/+/inbox"], in: directory)
        let peer = try await Peer(broker)
        try peer.publish("beacons/100/1/observers/ada", joinJSON(), retain: true)
        try peer.publish("beacons/200/7/observers/bob", joinJSON(name: "Bob"), retain: true)
        #expect(await watch.waitForJSON(on: "observers/ada/inbox") != nil)
        #expect(await watch.waitForJSON(on: "observers/bob/inbox") != nil)
        // Each brain has answered its own store's join, and nothing else: no need to wait and see.
        #expect(main.statistics.counters.inboxMessages == 1 && other.statistics.counters.inboxMessages == 1)
        #expect(watch.json(on: "observers/ada/inbox").count == 1, "answered once, by one brain")
        #expect(watch.json(on: "observers/bob/inbox").count == 1)
        #expect(main.statistics.joins == 1 && other.statistics.joins == 1)
        #expect(main.statistics.counters.foreign == 0, "subscriptions keep other stores' traffic away")

        await peer.stop()
        await main.stop()
        await other.stop()
        await watch.stop()
        await broker.stop()
    }
}

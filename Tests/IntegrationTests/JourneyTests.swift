import BeaconKit
import Foundation
import HCI
import TestSupport
import Testing

/// The originals, journey by journey (issue 18): each seed's flow as its own text writes it,
/// against the real programs with the shipped defaults (no `"joins": "open"`).
@Suite("journeys of the original apps")
struct JourneyTests {
    /// Seed 000's UUID: `let uuidObj = NSUUID(UUIDString: "0CF052C2-97CA-407C-84F8-B62AAC4E9020")`.
    static let smartUUID = BeaconUUID("0CF052C2-97CA-407C-84F8-B62AAC4E9020")!

    /// Smart iBeacons (seed 000), on btvirt radios, a real broker, the brain and observe:
    ///
    /// - emitter: "the iOS device emitting the iBeacon" (here the gateway `counter`, major 9
    ///   as `CLBeaconRegion(proximityUUID: uuidObj, major: 9, minor: 6, …)`; its minor is the
    ///   store's rotating proof of presence, the deliberate difference in the README's table);
    /// - brain: "an ad server which publishes a deal whenever it detects a new device on the
    ///   iBeacon's designated channel": `PubNub.sendMessage("Free Latte!", toChannel: event.channel)`;
    /// - observer: "When an observer device gets close enough to an iBeacon emitter, it uses
    ///   the beacon's information to subscribe to the iBeacon's channel, receive the brain's
    ///   ad, then leave the channel."
    ///
    /// With the default `brain.joins` the phone, which owns nothing, gets "Free Latte!"; a
    /// phone elsewhere quoting the fixed minor 6, a made-up value or a stale one gets nothing.
    @Test("Smart iBeacons: the phone that owns nothing gets \"Free Latte!\" at the beacon, nobody elsewhere does")
    func smartIBeacons() async throws {
        let dir = try TemporaryDirectory("journey-smart-ibeacons")
        let broker = try await MosquittoBroker.start(in: dir)
        let btvirt = try await BtvirtServer.start(in: dir)
        let secretText = "c0ffee-0123456789abcdef-the-pubnub-cafe"
        let secretFile = try dir.write("store-9.proof", secretText + "\n")
        let proof = PresenceProof(secret: Array(secretText.utf8), slotSeconds: 30)
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "counter", "store": 9, "source": "\#(btvirt.sourceURI)", "advertise": {"uuid": "\#(Self.smartUUID)", "major": 9, "proof": true}}"#,
        ], extra: """
            "stores": [{"major": 9, "name": "PubNub Cafe", "ad": {"title": "Free Latte!"},
                        "proof": {"secretFile": "\(secretFile)"}}],
            "brain": {}
            """)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: [
            "beacons/9/+/observers/+", "observers/+/inbox", "brain/status", "gateways/counter/status",
        ], in: dir)
        let brain = try startProgram("beacon-brain", ["--config", config], in: dir)
        // "merely wait for the server status to display "ready to transmit" then press the transmit button"
        #expect(await watch.waitFor(topic: "brain/status", text: "online", timeout: 30) != nil, "\(brain.diagnostics)")
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "counter"], in: dir)
        #expect(await watch.waitFor(topic: "gateways/counter/status", text: "online", timeout: 30) != nil, "\(gateway.diagnostics)")

        // The phone: its own radio ranging the seed's UUID (btvirt reports no RSSI, so it joins on
        // a sighting rather than at immediate), no profile ("Smart iBeacons" has none).
        let phone = try startProgram("beaconctl", [
            "observe", "--broker", broker.url, "--client", "phone1", "--source", btvirt.sourceURI,
            "--join-on", "sighting", "--uuid", Self.smartUUID.description,
        ], in: dir)
        let left = await watch.waitFor(timeout: 40) { $0.topic.hasPrefix("beacons/9/") && $0.topic.hasSuffix("/observers/phone1")
            && $0.payload.isEmpty }
        try #require(left != nil, "\(watch.records)\n\(phone.diagnostics)\n\(brain.diagnostics)\n\(gateway.diagnostics)")
        // It joined the channel named after what it ranged: major 9 and the store's value now.
        let join = try #require(watch.records.first { $0.topic.hasSuffix("/observers/phone1") && !$0.payload.isEmpty })
        let minor = try #require(UInt16(join.topic.split(separator: "/")[2]))
        let joinedAt = Date().timeIntervalSince1970
        let slot = Instant(seconds: joinedAt)
        #expect(proof.accepts(minor, store: 9, at: slot) || proof.accepts(minor, store: 9, at: slot - 30),
                "the advertised minor is the store's proof value: \(minor)")
        // "receive the brain's ad, then leave the channel"
        let printed = await eventually(timeout: 10) { phone.stdout.contains("Free Latte!") }
        #expect(printed, "\(phone.diagnostics)")
        #expect(phone.stderr.contains("left beacon 9/\(minor): the ad arrived"), "\(phone.diagnostics)")
        #expect(!watch.records.contains { $0.topic == "observers/phone1/inbox" && $0.json?["type"] == .string("error") })

        // Nobody elsewhere: a phone without the radio quoting the seed's fixed minor 6, a
        // made-up value, or the value of two slots ago.
        let stale = proof.value(store: 9, slot: proof.slot(at: Instant(seconds: Date().timeIntervalSince1970)) - 2)
        let forged = minor &+ 1
        for (client, quoted) in [("phone2", UInt16(6)), ("phone3", forged), ("phone4", stale)] {
            let remote = try startProgram("beaconctl", ["observe", "--broker", broker.url, "--client", client,
                                                        "--major", "9", "--minor", "\(quoted)", "--count", "1",
                                                        "--timeout", "20"], in: dir)
            #expect(await remote.waitForExit(timeout: 30) == 0, "\(remote.diagnostics)")
            let answer = try #require(remote.stdoutLines.first.flatMap { try? JSONParser().parse($0) }, "\(remote.diagnostics)")
            #expect(answer["type"] == .string("error"), "\(client) quoting 9/\(quoted): \(answer)")
            #expect(answer["error"]?.stringValue?.contains("proof of presence") == true, "\(answer)")
            #expect(!remote.stdout.contains("Free Latte!"))
        }

        phone.signal(SIGTERM)
        #expect(await phone.waitForExit(timeout: 10) == 0, "\(phone.diagnostics)")
        #expect(await gateway.stop() == 0, "\(gateway.diagnostics)")
        await brain.stop()
        await watch.stop()
        await btvirt.stop()
        await broker.stop()
    }

    /// The storefront greeter (seed 002), the customer's side and the shopkeeper's, on btvirt
    /// radios with the shipped defaults. Its words: "a shopkeeper know[s] when a customer
    /// enters the store and [has] a little bit of information about the customer" (name,
    /// favorite drink, picture); the app loads the profile "when we're in range of an
    /// iBeacon", with "the "enter shop" trigger at "immediate" range and the "leave shop"
    /// trigger at "far"" (btvirt reports no RSSI: the app joins on a sighting and leaves when
    /// the beacon is gone, `--leave-at gone`). The store's beacon carries its proof of
    /// presence (an emulated controller advertising this slot's value), so the customer, who
    /// owns no beacon, is let in by the default `brain.joins`.
    @Test("Storefront greeter: the profile is on the shop's display for the whole visit and leaves with the customer")
    func storefrontGreeter() async throws {
        let dir = try TemporaryDirectory("journey-greeter")
        let broker = try await MosquittoBroker.start(in: dir)
        let btvirt = try await BtvirtServer.start(in: dir)
        let secretText = "the-greeter-store-secret-0123456789"
        let secretFile = try dir.write("store-9.proof", secretText + "\n")
        // An hour's slot: the value stays the same through the test.
        let proof = PresenceProof(secret: Array(secretText.utf8), slotSeconds: 3600)
        let config = try writeFleet(dir, broker: broker, gateways: [], extra: """
            "stores": [{"major": 9, "name": "PubNub Cafe", "ad": {"title": "Welcome in"},
                        "proof": {"secretFile": "\(secretFile)", "slotSeconds": 3600}}],
            "brain": {}
            """)
        let shop = try await MosquittoSubscriber.start(broker: broker, filters: [
            "stores/9/customers/+", "beacons/9/+/observers/+", "observers/eric/inbox", "brain/status",
        ], in: dir)
        let brain = try startProgram("beacon-brain", ["--config", config], in: dir)
        #expect(await shop.waitFor(topic: "brain/status", text: "online", timeout: 30) != nil, "\(brain.diagnostics)")
        let value = proof.value(store: 9, at: Instant(seconds: Date().timeIntervalSince1970))
        let beacon = try await Advertiser.start(.h4Unix(path: btvirt.lePath),
                                                beacon: IBeacon(uuid: Self.smartUUID, major: 9, minor: value, txPower: -59),
                                                intervalMs: 100, retrigger: 0.3)
        let profile = try dir.write("eric.json", #"{"name": "Eric", "favorite": "latte"}"#)
        let app = try startProgram("beaconctl", [
            "observe", "--broker", broker.url, "--client", "eric", "--profile", profile, "--source", btvirt.sourceURI,
            "--join-on", "sighting", "--uuid", Self.smartUUID.description, "--stay", "--leave-at", "gone",
            // Long enough that a loaded machine's late advertising reports (an emulated
            // controller, load 13: one gap passed 3 s) are not a customer leaving.
            "--exit-timeout", "10",
        ], in: dir)
        // "Enter shop": the shopkeeper's display gets the customer's name and favorite drink.
        let card = await shop.waitFor(timeout: 30) { $0.topic == "stores/9/customers/eric" && !$0.payload.isEmpty }
        let customer = try #require(card?.json, "\(shop.records)\n\(app.diagnostics)\n\(brain.diagnostics)")
        #expect(customer["name"] == .string("Eric"))
        #expect(customer["favorite"] == .string("latte"))
        // The profile stays loaded while the customer is in the shop: past the ad and past
        // the answer timeout the join and the card are still there.
        #expect(await eventually(timeout: 10) { app.stdout.contains("Welcome in") }, "\(app.diagnostics)")
        try await Task.sleep(nanoseconds: 12_000_000_000)
        #expect(!shop.records.contains { $0.topic == "beacons/9/\(value)/observers/eric" && $0.payload.isEmpty },
                "still joined: \(app.diagnostics)")
        #expect(!shop.records.contains { $0.topic == "stores/9/customers/eric" && $0.payload.isEmpty }, "still on the display")
        #expect(!app.stderr.contains("left beacon"), "\(app.diagnostics)")

        // "Leave shop": the beacon is no longer heard; the app leaves, the card goes.
        await beacon.stop()
        let left = await shop.waitFor(timeout: 30) { $0.topic == "beacons/9/\(value)/observers/eric" && $0.payload.isEmpty }
        #expect(left != nil, "\(app.diagnostics)")
        #expect(app.stderr.contains("left beacon 9/\(value): the beacon is gone"), "\(app.diagnostics)")
        #expect(await shop.waitFor(timeout: 20) { $0.topic == "stores/9/customers/eric" && $0.payload.isEmpty } != nil,
                "the profile left the shop's display: \(shop.records)")

        app.signal(SIGTERM)
        #expect(await app.waitForExit(timeout: 10) == 0, "\(app.diagnostics)")
        await brain.stop()
        await shop.stop()
        await btvirt.stop()
        await broker.stop()
    }
}

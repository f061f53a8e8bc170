import BeaconKit
import Wire
import HCI
import Config
import Simulation
import Foundation
import TestSupport
import Testing

/// The four original apps end to end (issue 13): the range words, the ranging observer.
@Suite("the original apps end to end")
struct OriginalAppsTests {
    static let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!

    /// The hot/cold seeker's ranging callback (seed 001), as its text writes it:
    ///   `case CLProximityUnknown: ... blueColor ... [self setStatus:@"Freezing!"];`
    ///   `case CLProximityFar: ... blueColor ... [self setStatus:@"Cold!"];`
    ///   `case CLProximityImmediate: ... purpleColor ... [self setStatus:@"Warmer"];`
    ///   `case CLProximityNear: ... redColor ... [self setStatus:@"HOT!"];`
    /// and `self.signalStrengthLabel.text = [NSString stringWithFormat:@"%ddB", beacon.rssi];`
    @Test("beaconctl range --words original says the original app's words for each proximity class, with its dB line")
    func originalWords() async throws {
        let dir = try TemporaryDirectory("beaconctl-range-words")
        let start = CaptureTime(iso8601: "2026-11-21T10:00:00.000Z")!
        var writer = BtsnoopWriter(datalink: .h4)
        // From 10 m (-79 dBm with n = 2 and P1m -59) to 0.1 m, four advertisements a second.
        let steps: [Int8] = [-79, -79, -79, -79, -62, -62, -62, -62, -62, -62, -62, -62, -40, -40, -40, -40, -40, -40, -40, -40]
        for (i, rssi) in steps.enumerated() {
            writer.appendEvent(advertisingEvent(IBeacon(uuid: Self.uuid, major: 7, minor: 1, txPower: -59),
                                                address: 0xD0_00_00_00_00_01, rssi: rssi), at: start + 0.1 + Double(i) * 0.25)
        }
        let capture = try dir.write("walk.log", bytes: writer.bytes)
        let range = try startProgram("beaconctl", ["range", "--source", "btsnoop:\(capture)", "--speed", "0",
                                                   "--exit-timeout", "3", "--words", "original"], in: dir)
        #expect(await range.waitForExit(timeout: 20) == 0, "\(range.diagnostics)")
        let lines = range.stdoutLines.filter { !$0.contains("gone") }
        let words = lines.map { $0.split(separator: " ").suffix(2).joined(separator: " ") }
        #expect(words.first == "far Cold!", "\(range.stdoutLines)")
        #expect(words.contains("near HOT!"), "\(range.stdoutLines)")
        #expect(words.contains("immediate Warmer"), "\(range.stdoutLines)")
        #expect(words.last == "unknown Freezing!", "stale at the end: \(range.stdoutLines)")
        // The signal line as the original showed it ("%ddB"), the last RSSI heard.
        #expect(lines.first?.contains("  -79dB  ") == true, "\(range.stdoutLines)")
        #expect(lines.contains { $0.contains("  -40dB  ") && $0.hasSuffix("immediate  Warmer") }, "\(range.stdoutLines)")
        #expect(!lines.contains { $0.contains("rssi -") }, "the original's dB line replaces the rssi field")

        let bad = try startProgram("beaconctl", ["range", "--source", "btsnoop:\(capture)", "--words", "tepid"], in: dir)
        #expect(await bad.waitForExit(timeout: 20) == 2)
        #expect(bad.stderr.contains("--words: \"tepid\" is neither game nor original"), "\(bad.diagnostics)")
    }

    @Test("a gateway names a beacon by its UUID-only registry entry: name, a heading alone, the UUID's calibration")
    func uuidOnlyEntryInSightings() async throws {
        let dir = try TemporaryDirectory("gateway-uuid-entry")
        let broker = try await MosquittoBroker.start(in: dir)
        let marker = BeaconUUID("B9407F30-F5F8-466E-AFF9-25556B57FE6D")!
        var writer = BtsnoopWriter(datalink: .h4)
        let start = CaptureTime(iso8601: "2026-11-21T10:00:00.000Z")!
        for i in 0..<20 {
            writer.appendEvent(advertisingEvent(IBeacon(uuid: marker, major: 7, minor: 42, txPower: -59),
                                                address: 0xD0_00_00_00_00_2A, rssi: -70), at: start + Double(i) * 0.25)
        }
        let capture = try dir.write("stairs.log", bytes: writer.bytes)
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "hall", "source": "btsnoop:\#(capture)?loop"}"#],
                                    extra: #""beacons": [{"uuid": "\#(marker)", "name": "stairs", "heading": 180, "measuredPower": -70}]"#)
        let subscriber = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/7/42"], in: dir)
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "hall"], in: dir)
        let sighting = await subscriber.waitFor(topic: "beacons/7/42", timeout: 20)
        let payload = try #require(sighting?.json, "\(gateway.diagnostics)")
        #expect(payload["name"] == .string("stairs"))
        #expect(payload["location"] == .object(["lat": .null, "lon": .null, "heading": .number(180), "floor": .null]))
        #expect(payload["distance"] == .number(1), "-70 dBm with the UUID's calibration of -70 dBm at 1 m")
        #expect(await gateway.stop() == 0, "\(gateway.diagnostics)")
        await subscriber.stop()
        await broker.stop()
    }

    /// A broker, the brain with store 100's deal of the day, and a subscriber watching the
    /// observer `phone`.
    struct Store {
        let dir: TemporaryDirectory
        let broker: MosquittoBroker
        let brain: ChildProcess
        let watch: MosquittoSubscriber

        static func start(_ label: String, config: ((MosquittoBroker, TemporaryDirectory) async throws -> String)? = nil) async throws -> Store {
            let dir = try TemporaryDirectory(label)
            let broker = try await MosquittoBroker.start(in: dir)
            let path: String
            if let config {
                path = try await config(broker, dir)
            } else {
                path = try writeFleet(dir, broker: broker, gateways: [], extra: """
                    "stores": [{"major": 100, "name": "Main Street", "ad": {"title": "Free Latte!"}}]
                    """)
            }
            let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/+/+/observers/phone",
                                                                                    "observers/phone/#", "brain/status"], in: dir)
            let brain = try startProgram("beacon-brain", ["--config", path], in: dir)
            _ = await watch.waitFor(topic: "brain/status", text: "online", timeout: 20)
            return Store(dir: dir, broker: broker, brain: brain, watch: watch)
        }

        /// The joins (non-empty) and leaves (empty) of `phone`, in order, as "join 100/7" / "leave 100/7".
        var joins: [String] {
            watch.records.filter { $0.topic.hasPrefix("beacons/") }.map { record in
                let parts = record.topic.split(separator: "/")
                return (record.payload.isEmpty ? "leave " : "join ") + "\(parts[1])/\(parts[2])"
            }
        }

        func stop() async {
            await brain.stop()
            await watch.stop()
            await broker.stop()
        }
    }

    @Test("observe --source on btvirt: joins a beacon it hears (no RSSI: --join-on sighting), prints the ad, leaves; then the next")
    func rangingObserverOnBtvirt() async throws {
        let store = try await Store.start("observe-btvirt")
        let btvirt = try await BtvirtServer.start(in: store.dir)
        let profile = try store.dir.write("ana.json", #"{"name": "Ana", "favorite": "flat white"}"#)
        let observer = try startProgram("beaconctl", [
            "observe", "--broker", store.broker.url, "--client", "phone", "--profile", profile,
            "--source", btvirt.sourceURI, "--join-on", "sighting", "--uuid", Self.uuid.description,
        ], in: store.dir)
        let ranging = await eventually(timeout: 20) { observer.stderr.contains("ranging on ") && observer.stderr.contains("running") }
        try #require(ranging, "\(observer.diagnostics)")

        // The counter's beacon: an emulated controller advertising (our own HCI commands over H4).
        var advertiser = try await Advertiser.start(.h4Unix(path: btvirt.lePath),
                                                    beacon: IBeacon(uuid: Self.uuid, major: 100, minor: 7, txPower: -59),
                                                    intervalMs: 100, retrigger: 0.3)
        let left = await store.watch.waitFor(timeout: 20) { $0.topic == "beacons/100/7/observers/phone" && $0.payload.isEmpty }
        try #require(left != nil, "\(store.watch.records)\n\(observer.diagnostics)\n\(store.brain.diagnostics)")
        let join = try #require(store.watch.records.first { $0.topic == "beacons/100/7/observers/phone" && !$0.payload.isEmpty })
        #expect(join.json?["profile"]?["name"] == .string("Ana"), "joined with the profile")
        #expect(store.watch.records.contains { $0.topic == "observers/phone/status" && $0.text == "online" })
        let printed = await eventually(timeout: 10) { observer.stdout.contains("Free Latte!") }
        #expect(printed, "the ad, printed from the inbox: \(observer.diagnostics)")
        #expect(observer.stderr.contains("left beacon 100/7: the ad arrived"), "\(observer.diagnostics)")

        // It moves on: the next beacon it hears is joined and left the same way.
        await advertiser.stop()
        advertiser = try await Advertiser.start(.h4Unix(path: btvirt.lePath),
                                                beacon: IBeacon(uuid: Self.uuid, major: 100, minor: 8, txPower: -59),
                                                intervalMs: 100, retrigger: 0.3)
        let next = await store.watch.waitFor(timeout: 20) { $0.topic == "beacons/100/8/observers/phone" && $0.payload.isEmpty }
        #expect(next != nil, "\(store.watch.records)\n\(observer.diagnostics)")
        #expect(Array(store.joins.prefix(4)) == ["join 100/7", "leave 100/7", "join 100/8", "leave 100/8"])

        // The last will: killed, the broker says offline for it.
        observer.signal(SIGKILL)
        #expect(await store.watch.waitFor(topic: "observers/phone/status", text: "offline", timeout: 30) != nil)
        await advertiser.stop()
        await btvirt.stop()
        await store.stop()
    }

    @Test("observe --source on a replayed store: joins each beacon the walk reaches at immediate, prints its ad, leaves")
    func rangingObserverOnReplay() async throws {
        // A simulated store heard from the counter: customers who reach it come within 0.3 m
        // (immediate), those who browse stay metres away. From the phone's side it is the
        // same air: the phone passes beacons.
        let simulation = StoreSimulation(customers: 4, duration: 40, gateways: [.init(id: "counter", position: 12)], seed: 3)
        let counterMinors = simulation.visits.filter { $0.spot > 11 }.map(\.minor).sorted()
        try #require(!counterMinors.isEmpty)
        var out = ""
        let store = try await Store.start("observe-replay") { broker, dir in
            out = dir.path
            let simulate = try startProgram("beaconctl", ["simulate", "--out", dir.path, "--customers", "4", "--duration", "40",
                                                          "--gateways", "counter:12", "--seed", "3", "--broker", broker.url], in: dir)
            guard await simulate.waitForExit(timeout: 60) == 0 else { throw TestFailure(simulate.diagnostics) }
            return dir.path + "/fleet.json"
        }
        let observer = try startProgram("beaconctl", [
            "observe", "--config", out + "/fleet.json", "--client", "phone",
            "--source", "btsnoop:\(out)/counter.log", "--speed", "2",
        ], in: store.dir)
        #expect(await observer.waitForExit(timeout: 90) == 0, "\(observer.diagnostics)")
        let ads = observer.stdoutLines.compactMap { try? JSONParser().parse($0) }.filter { $0["type"] == .string("ad") }
        let answered = Set(ads.compactMap { $0["beacon"]?["minor"]?.numberValue.map { UInt16($0) } })
        #expect(answered == Set(counterMinors), "\(observer.diagnostics)")
        for minor in counterMinors {
            #expect(observer.stderr.contains("joined beacon 100/\(minor) (immediate"), "\(observer.diagnostics)")
            #expect(observer.stderr.contains("left beacon 100/\(minor)"), "\(observer.diagnostics)")
        }
        #expect(ads.allSatisfy { $0["ad"]?["title"] == .string("Deal of the day") })
        // Every join it made it also left: nothing of the phone stays on the broker.
        let joins = store.joins
        #expect(joins.filter { $0.hasPrefix("join") }.count == joins.filter { $0.hasPrefix("leave") }.count, "\(joins)")
        #expect(store.watch.records.last { $0.topic == "observers/phone/status" }?.text == "offline")
        await store.stop()
    }

    @Test("Eddystone-UID beacons end to end: a gateway's sightings reach the brain; fleet presence, the ad on joining, records")
    func eddystoneThroughTheBrain() async throws {
        let dir = try TemporaryDirectory("eddystone-brain")
        let broker = try await MosquittoBroker.start(in: dir)
        let (namespace, instance) = ("00112233445566778899", "aabbccddeeff")
        let beacon = EddystoneUID(txPower: -18, namespace: EddystoneNamespace(hex: namespace)!,
                                  instance: EddystoneInstance(hex: instance)!)
        var writer = BtsnoopWriter(datalink: .h4)
        let start = CaptureTime(iso8601: "2026-11-21T10:00:00.000Z")!
        for i in 0..<40 {
            writer.appendEvent(HCIEventBuilder.legacyReport([.init(address: BluetoothAddress(rawValue: 0xE0_00_00_00_00_01),
                                                                   data: AdvertisingData.eddystoneUID(beacon), rssi: -60)]),
                               at: start + Double(i) * 0.25)
        }
        let capture = try dir.write("eddystone.log", bytes: writer.bytes)
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "hall", "source": "btsnoop:\#(capture)?loop", "zone": "Hall"}"#],
                                    extra: """
            "stores": [{"major": 100, "name": "Main Street"}],
            "beacons": [{"namespace": "\(namespace)", "instance": "\(instance)", "name": "hall tag", "store": 100,
                         "ad": {"title": "Free Latte!"}}],
            "rules": [{"name": "in", "when": "enter", "names": ["hall tag"],
                       "then": [{"do": "publish", "topic": "displays/{store}/door", "text": "{name} at {zone}"}]}]
            """)
        // What a previous run of the gateway left behind about a beacon no longer there.
        let stale = "eddystone/ffeeddccbbaa99887766/000000000001/presence/hall"
        #expect(await broker.publish(stale, #"{"namespace":"ffeeddccbbaa99887766","instance":"000000000001","gateway":"hall","zone":"Hall","proximity":"far","rssiSmoothed":-80.0,"distance":9.0,"since":"2026-11-21T09:00:00.000Z"}"#,
                                     retain: true))
        let base = "eddystone/\(namespace)/\(instance)"
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["eddystone/#", "displays/#", "brain/#", "stores/#"], in: dir)
        let brain = try startProgram("beacon-brain", ["--config", config], in: dir)
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "hall"], in: dir)

        let fleet = await watch.waitFor(timeout: 30) { $0.topic == base + "/presence" && !$0.payload.isEmpty }
        let presence = try #require(fleet?.json, "\(watch.records)\n\(brain.diagnostics)\n\(gateway.diagnostics)")
        #expect(presence["namespace"] == .string(namespace))
        #expect(presence["zone"] == .string("hall"))
        #expect(presence["zoneName"] == .string("Hall"))
        #expect(await watch.waitFor(topic: "displays/100/door", text: "hall tag at Hall", timeout: 10) != nil, "the enter rule")
        #expect(watch.records.contains { $0.topic == base + "/ad" && $0.json?["title"] == .string("Free Latte!") })
        #expect(await watch.waitFor(timeout: 20) { $0.topic == stale && $0.payload.isEmpty } != nil,
                "the gateway deletes the Eddystone presence it no longer sees")

        let observer = try startProgram("beaconctl", ["observe", "--broker", broker.url, "--client", "ana",
                                                      "--namespace", namespace, "--instance", instance.uppercased(), "--count", "1",
                                                      "--timeout", "20"], in: dir)
        #expect(await observer.waitForExit(timeout: 30) == 0, "\(observer.diagnostics)")
        let ad = try #require(observer.stdoutLines.first.flatMap { try? JSONParser().parse($0) }, "\(observer.diagnostics)")
        #expect(ad["beacon"] == .object(["namespace": .string(namespace), "instance": .string(instance)]))
        #expect(ad["ad"]?["title"] == .string("Free Latte!"))
        #expect(watch.records.contains { $0.topic == "brain/answered/eddystone/\(namespace)/\(instance)/ana" && !$0.payload.isEmpty })
        #expect(watch.records.contains { $0.topic == "stores/100/customers/ana" && $0.json?["beacon"]?["instance"] == .string(instance) })

        await gateway.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }
}

import BeaconKit
import Contract
import BrainCore
import Config
import Foundation
import TestSupport
import Simulation
import Testing
import Tracking

/// Issue 8's store with every gateway advertising an iBeacon of its own once a second, heard
/// by the other three through a log-distance channel (exponent 2.5, −59 dBm at 1 m, Gaussian
/// noise, 20 % lost) whose receivers read `offsets` dB high or low: the gateways' RSSI
/// reports of those reference beacons, one window a second.
struct ReferenceStore {
    static let gateways: [(id: String, x: Double, y: Double)] = [
        ("door", 3.75, 2.5), ("window", 3.75, 7.5), ("shelves", 11.25, 7.5), ("counter", 11.25, 2.5),
    ]
    var offsets: [String: Double] = ["door": 6, "window": -6, "shelves": 3, "counter": -3]
    var exponent = 2.5
    var noise = 4.0
    var seed: UInt64 = 1

    static func beacon(_ index: Int) -> BeaconRef { BeaconRef(major: 100, minor: UInt16(60_000 + index)) }

    /// The fleet config: the four gateways placed and advertising; `brain` the calibration object.
    static func configText(calibration: String = #"{"minSeconds": 30, "interval": 10}"#, door: String = "",
                           broker: String = "mqtt://127.0.0.1:1883") -> String {
        let gateways = Self.gateways.enumerated().map { index, g in
            #"{"id": "\#(g.id)", "store": 100, "position": {"x": \#(g.x), "y": \#(g.y)}, "#
                + #""advertise": {"uuid": "\#(storeUUID)", "major": 100, "minor": \#(60_000 + index), "power": -59}"#
                + (g.id == "door" ? door : "") + "}"
        }
        return """
        {"broker": {"url": "\(broker)"}, "gateways": [\(gateways.joined(separator: ", "))],
         "stores": [{"major": 100, "floorPlan": {"width": 15, "height": 10}}],
         "brain": {"calibration": \(calibration)}}
        """
    }

    static func config(calibration: String = #"{"minSeconds": 30, "interval": 10}"#, door: String = "") throws -> FleetConfig {
        try FleetConfig.parse(configText(calibration: calibration, door: door))
    }

    /// `seconds` of reports, in capture-time order, starting at `t(0)`.
    func reports(seconds: Int) -> [RSSIReport] {
        var random = SplitMix64(seed: seed)
        var out: [RSSIReport] = []
        for second in 0..<seconds {
            for (r, receiver) in Self.gateways.enumerated() {
                var entries: [RSSIReport.Entry] = []
                for (s, sender) in Self.gateways.enumerated() where s != r {
                    guard Double.random(in: 0..<1, using: &random) >= 0.2 else { continue }
                    let d = ((receiver.x - sender.x) * (receiver.x - sender.x) + (receiver.y - sender.y) * (receiver.y - sender.y)).squareRoot()
                    let rssi = (-59 - 10 * exponent * log10(d) + offsets[receiver.id, default: 0]
                        + random.gaussian(deviation: noise)).rounded()
                    entries.append(RSSIReport.Entry(beacon: Self.beacon(s), uuid: storeUUID, count: 1, rssi: rssi, at: 0.5,
                                                    rssiSmoothed: rssi, distance: nil, proximity: .far))
                }
                out.append(RSSIReport(gateway: receiver.id, from: t(Double(second)), to: t(Double(second + 1)), entries: entries))
            }
        }
        return out
    }
}

@Suite("Calibration from reference beacons")
struct CalibrationTests {
    @Test("the fit recovers injected offsets and the exponent from simulated pairs",
          arguments: [UInt64(1), 2, 3])
    func recoversOffsets(seed: UInt64) throws {
        let store = ReferenceStore(seed: seed)
        var calibrator = Calibrator(config: try ReferenceStore.config())
        var records: [CalibrationRecord] = []
        for report in store.reports(seconds: 600) { records += calibrator.learn(from: report) }
        #expect(!records.isEmpty)
        for (id, offset) in store.offsets {
            let applied = try #require(calibrator.applied[id], "\(id) is calibrated")
            #expect(abs(applied.rssiOffset + offset) < 1.5, "\(id): learned \(applied.rssiOffset) dB for a radio \(offset) dB off")
            #expect(abs(applied.pathLossExponent - 2.5) < 0.3, "exponent \(applied.pathLossExponent)")
            #expect(applied.samples >= 60 && applied.links == 3 && applied.residual < 3)
        }
        // Applied: a report is corrected by the gateway's learned offset.
        let report = RSSIReport(gateway: "door", from: t(0), to: t(1), entries: [
            RSSIReport.Entry(beacon: counter, uuid: storeUUID, count: 1, rssi: -60, at: 0.5, rssiSmoothed: -61, distance: nil,
                             proximity: .near),
        ])
        let corrected = calibrator.corrected(report).entries[0]
        let door = try #require(calibrator.applied["door"]).rssiOffset
        #expect(corrected.rssi == -60 + door && corrected.rssiSmoothed == -61 + door)
    }

    @Test("the pure fit: exact links give exact offsets; a link far off the others is outvoted")
    func robustFit() throws {
        var links: [CalibrationLink] = []
        let offsets = ["door": 6.0, "window": -6, "shelves": 3, "counter": -3]
        let g = ReferenceStore.gateways
        for (r, receiver) in g.enumerated() {
            for (s, sender) in g.enumerated() where s != r {
                let d = ((receiver.x - sender.x) * (receiver.x - sender.x) + (receiver.y - sender.y) * (receiver.y - sender.y)).squareRoot()
                links.append(CalibrationLink(gateway: receiver.id, distance: d, power: -59,
                                             rssi: -59 - 25 * log10(d) + offsets[receiver.id]!, count: 500))
            }
        }
        let settings = CalibrationSettings()
        let exact = try #require(CalibrationFit.fit(links, priorExponent: 2.5, settings: settings))
        for (id, offset) in offsets { #expect(abs(exact.bias[id]! - offset) < 0.01) }
        // One link 15 dB down (a shelf between them): the others still place its gateway.
        links[0].rssi -= 15
        let robust = try #require(CalibrationFit.fit(links, priorExponent: 2.5, settings: settings))
        for (id, offset) in offsets { #expect(abs(robust.bias[id]! - offset) < 1.5, "\(id): \(robust.bias[id]!)") }
        // Bounds: the exponent stays within its limits, an offset within maxOffset.
        var bounded = settings
        bounded.maxOffset = 4
        bounded.maxExponent = 2.2
        let clamped = try #require(CalibrationFit.fit(links, priorExponent: 2.5, settings: bounded))
        #expect(clamped.exponent <= 2.2 && clamped.bias.values.allSatisfy { abs($0) <= 4 } && !clamped.clamped.isEmpty)
    }

    @Test("too little evidence changes nothing: before minSeconds, below minSamples, or no reference beacon")
    func refusesThinEvidence() throws {
        let store = ReferenceStore()
        // 25 s of evidence, the first fit is due after 30 s.
        var early = Calibrator(config: try ReferenceStore.config())
        for report in store.reports(seconds: 25) { #expect(early.learn(from: report).isEmpty) }
        #expect(early.applied.isEmpty && early.correction(of: "door") == 0)
        // Time enough, but each gateway hears fewer than minSamples advertisements.
        var sparse = Calibrator(config: try ReferenceStore.config(calibration: #"{"minSeconds": 10, "minSamples": 500}"#))
        for report in store.reports(seconds: 120) { #expect(sparse.learn(from: report).isEmpty) }
        #expect(sparse.applied.isEmpty)
        // Off: nothing learned, nothing corrected.
        var off = Calibrator(config: try ReferenceStore.config(calibration: #"{"enabled": false}"#))
        for report in store.reports(seconds: 120) { #expect(off.learn(from: report).isEmpty) }
        // No transmitter with a position: customers' beacons teach nothing.
        var none = Calibrator(config: testConfig())
        #expect(none.learn(from: rssiReport("door", from: 0, to: 100, [(counter, -60)], n: 500)).isEmpty)
    }

    @Test("an operator's rssiOffset pins the gateway: never corrected, and it anchors the others")
    func pinnedGateway() throws {
        // The config corrects the door by −6 dB itself: its reports arrive right.
        var store = ReferenceStore()
        store.offsets["door"] = 0
        var calibrator = Calibrator(config: try ReferenceStore.config(door: #", "rssiOffset": -6"#))
        var records: [CalibrationRecord] = []
        for report in store.reports(seconds: 300) { records += calibrator.learn(from: report) }
        let door = try #require(records.last { $0.gateway == "door" })
        #expect(door.pinned && door.rssiOffset == 0 && door.configuredOffset == -6)
        #expect(calibrator.correction(of: "door") == 0)
        #expect(abs(calibrator.correction(of: "window") - 6) < 1.5)
    }

    @Test("a record says what changed and reads back as written")
    func recordRoundTrip() throws {
        var calibrator = Calibrator(config: try ReferenceStore.config())
        var records: [CalibrationRecord] = []
        for report in ReferenceStore().reports(seconds: 300) { records += calibrator.learn(from: report) }
        let first = try #require(records.first { $0.gateway == "window" })
        #expect(first.before == nil)
        let window = records.filter { $0.gateway == "window" }
        for (a, b) in zip(window, window.dropFirst()) { #expect(b.before == a.values, "each record names the values it replaced") }
        let json = JSONValue(text: first.json)
        let back = try CalibrationRecord(parsing: json, topic: "window")
        #expect(abs(back.rssiOffset - first.rssiOffset) < 0.01 && back.samples == first.samples && back.values.since == first.values.since)
        #expect(throws: PayloadError.self) { try CalibrationRecord(parsing: json, topic: "door") }
        // A restarted brain applies what it had learned until it learns anew.
        var restarted = Calibrator(config: try ReferenceStore.config())
        restarted.restore(back)
        #expect(restarted.correction(of: "window") == back.rssiOffset)
    }
}

@Suite("Calibration over a real broker", .serialized, .capturingLogs)
struct CalibrationBrokerTests {
    @Test("the brain publishes every gateway's calibration retained, near the offsets injected into a simulated store")
    func publishesCalibration() async throws {
        let directory = try TemporaryDirectory("brain-calibration")
        let broker = try await MosquittoBroker.start(in: directory)
        let brain = try await RunningBrain.start(try ReferenceStore.config(), broker: broker)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["gateways/+/calibration", "brain/events"],
                                                        in: directory)
        let gateways = try await Peer(broker)
        let store = ReferenceStore()
        for report in store.reports(seconds: 120) { try gateways.publish("gateways/\(report.gateway)/rssi", report.json) }
        await gateways.flush()
        for (id, offset) in store.offsets.sorted(by: { $0.key < $1.key }) {
            let record = await watch.waitFor(topic: "gateways/\(id)/calibration", timeout: 30)
            let json = try #require(record.flatMap { try? JSONParser().parse($0.payload) }, "\(watch.records)\n\(broker.diagnostics)")
            let learned = try #require(json["rssiOffset"]?.numberValue)
            #expect(abs(learned + offset) < 2, "\(id): \(learned) dB learned for a radio \(offset) dB off")
            #expect(json["pathLossExponent"]?.numberValue.map { abs($0 - 2.5) < 0.5 } == true)
            #expect(json["samples"]?.numberValue.map { $0 >= 60 } == true)
        }
        let event = await watch.waitFor { $0.topic == "brain/events" && $0.brainEvent?.name == "calibration" }
        #expect(event != nil, "the change is an event too")
        // Retained: a subscriber that comes later gets every gateway's record at once.
        let later = try await MosquittoSubscriber.start(broker: broker, filters: ["gateways/+/calibration"], in: directory)
        for id in store.offsets.keys.sorted() {
            #expect(await later.waitFor(timeout: 10) { $0.topic == "gateways/\(id)/calibration" && $0.retained } != nil)
        }
        await later.stop()
        await gateways.stop()
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }
}

@Suite("Calibration in the brain")
struct CalibrationBrainTests {
    @Test("a restarted brain applies its retained records; turning calibration off deletes them")
    func readBackAndWithdraw() throws {
        var core = BrainCore(config: try ReferenceStore.config())
        #expect(core.subscriptions.contains("gateways/+/calibration"))
        let record = CalibrationRecord(gateway: "window", values: .init(rssiOffset: 5.5, pathLossExponent: 2.4, since: t(60)),
                                       samples: 120, links: 3, residual: 1.2, pinned: false, configuredOffset: 0, before: nil)
        _ = core.receive(topic: "gateways/window/calibration", payload: Array(record.json.utf8), retained: true, at: t(0))
        _ = core.settle(at: t(1))
        #expect(core.calibrator.correction(of: "window") == 5.5, "applied again after a restart")
        // The window's reports reach the zone fusion corrected: −70 dBm reported is −64.5.
        _ = core.receive(topic: "gateways/window/rssi", payload: Array(rssiReport("window", from: 2, to: 3, [(counter, -70)]).json.utf8),
                         retained: false, at: t(3))
        #expect(core.presence[counter]?.views["window"]?.rssiSmoothed == -64.5, "\(String(describing: core.presence[counter]))")

        let off = try ReferenceStore.config(calibration: #"{"enabled": false}"#)
        let out = core.apply(off, origin: "test", at: t(4))
        #expect(out.messages.contains { $0.topic == "gateways/window/calibration" && $0.payload.isEmpty && $0.retain },
                "the record is deleted: \(out.messages.map(\.topic))")
        #expect(core.calibrator.correction(of: "window") == 0)
    }
}

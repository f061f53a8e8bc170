import BeaconKit
import Contract
import Config
import Foundation
import TestSupport
import Testing
import Tracking

/// Issue 20 items 2 and 3 on a real broker (docs/security.md "Sealed records"): every record
/// a restarted brain trusts is sealed, and no valid config makes a record larger than the
/// brain reads back.
@Suite("records a restarted brain trusts: sealed and bounded")
struct RecordTrustTests {
    static let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
    static let gateways = [
        #"{"id": "door", "zone": "Door", "store": 100, "position": {"x": 3.75, "y": 2.5}}"#,
        #"{"id": "counter", "zone": "Counter", "store": 100, "position": {"x": 11.25, "y": 2.5}}"#,
    ]

    /// One gateway's report of one second in which it heard `minor` at `rssi`.
    static func report(_ gateway: String, second: Double, minor: Int, rssi: Double) -> String {
        let start = CaptureTime(seconds: 1_795_251_600 + second)
        return RSSIReport(gateway: gateway, from: start, to: start + 1, entries: [
            RSSIReport.Entry(beacon: BeaconRef(major: 100, minor: UInt16(minor)), uuid: BeaconUUID(Self.uuid), count: 4,
                             rssi: rssi, at: 0.5, rssiSmoothed: rssi, distance: nil, proximity: .near),
        ]).json
    }

    static func calibration(_ gateway: String, offset: Double) -> String {
        #"{"gateway":"\#(gateway)","rssiOffset":\#(offset),"pathLossExponent":2.5,"samples":900,"links":3,"residual":1,"#
            + #""since":"2026-11-21T08:00:00.000Z","pinned":false,"configuredOffset":0,"before":null}"#
    }

    @Test("a forged calibration record (rssiOffset 50) moves no customer: ignored, reported, deleted")
    func forgedCalibration() async throws {
        let dir = try TemporaryDirectory("forged-calibration")
        let broker = try await MosquittoBroker.start(in: dir)
        let config = try writeFleet(dir, broker: broker, gateways: Self.gateways, extra: """
        "stores": [{"major": 100, "name": "Main Street", "floorPlan": {"width": 15, "height": 10}}],
        "brain": {"joins": "open", "calibration": {"minSeconds": 3600}}
        """)
        let key = try dir.write("brain.secret", "the brain's own secret\n")
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: [
            "brain/events", "gateways/+/calibration", "beacons/100/5/events",
        ], in: dir)
        // While no brain runs, on a broker that lets anyone write: the counter reads 50 dB
        // low and the door 50 dB high, says the forgery.
        #expect(await broker.publish("gateways/counter/calibration", Self.calibration("counter", offset: 50), retain: true))
        #expect(await broker.publish("gateways/door/calibration", Self.calibration("door", offset: -50), retain: true))
        let brain = try startProgram("beacon-brain", ["--config", config, "--record-key", key], in: dir)
        for gateway in ["door", "counter"] {
            let reported = await watch.waitFor(timeout: 30) {
                guard $0.topic == "brain/events", case .rejected(let r)? = $0.brainEvent else { return false }
                return r.kind == "record" && r.topic == "gateways/\(gateway)/calibration" && r.reason.contains("brain-secret")
            }
            #expect(reported != nil, "\(gateway): \(brain.diagnostics)")
            #expect(await watch.waitFor(timeout: 10) { $0.topic == "gateways/\(gateway)/calibration" && $0.payload.isEmpty } != nil,
                    "the forgery of \(gateway) was not deleted")
        }
        // A customer standing at the door: −45 dBm there, −75 at the counter, for 8 s.
        for second in 0..<8 {
            #expect(await broker.publish("gateways/door/rssi", Self.report("door", second: Double(second), minor: 5, rssi: -45)))
            #expect(await broker.publish("gateways/counter/rssi", Self.report("counter", second: Double(second), minor: 5, rssi: -75)))
        }
        let enter = await watch.waitFor(timeout: 30) { $0.topic == "beacons/100/5/events" && $0.text.contains(#""enter""#) }
        #expect(enter?.json?["zone"] == .string("door"), "\(String(describing: enter)) \(brain.diagnostics)")
        #expect(!watch.records.contains { $0.topic == "beacons/100/5/events" && $0.text.contains(#""zone":"counter""#) },
                "a forged calibration moved the customer: \(watch.records)")
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }

    @Test("config check refuses a 70,000-character rule name, with the reason")
    func longRuleName() async throws {
        let dir = try TemporaryDirectory("long-rule-name")
        let name = String(repeating: "deal at the counter ", count: 3_500)
        let config = try dir.write("fleet.json", """
        {"broker": {"url": "mqtt://127.0.0.1:1883"}, "gateways": [{"id": "door"}],
         "rules": [{"name": "\(name)", "when": "enter", "once": true, "then": [{"do": "publish", "topic": "log/{minor}", "text": "deal"}]}]}
        """)
        let check = try startProgram("beaconctl", ["config", "check", config], in: dir)
        #expect(await check.waitForExit(timeout: 20) == 2)
        #expect(check.stderr.contains("rules[0].name: is 70000 characters long; at most 200"), "\(check.stderr)")
    }

    /// The largest config `config check` accepts (as many 200-character `once` rules as a
    /// visit's record holds) survives a SIGKILL and restart of the brain: each rule fired once.
    @Test("a max-size valid config: no once rule fires twice across SIGKILL and restart")
    func maxSizeConfigSurvivesSIGKILL() async throws {
        let dir = try TemporaryDirectory("max-records")
        let broker = try await MosquittoBroker.start(in: dir)
        let most = (FleetConfig.maxRecordBytes - 1024) / (2 * 202 + 29)
        let rules = (0..<most).map { i in
            let prefix = "deal \(i) at the counter "
            let name = prefix + String(repeating: "x", count: FleetConfig.maxNameLength - prefix.count)
            return #"{"name": "\#(name)", "when": "enter", "once": true, "then": [{"do": "publish", "topic": "log/\#(i)", "text": "{minor}"}]}"#
        }
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "door"}"#], extra: """
        "stores": [{"major": 100, "name": "Main Street", "ad": {"title": "Deal of the day"}}],
        "rules": [\(rules.joined(separator: ",\n"))]
        """)
        let check = try startProgram("beaconctl", ["config", "check", config], in: dir)
        #expect(await check.waitForExit(timeout: 20) == 0, "\(check.stderr)")
        let key = try dir.write("brain.secret", "the brain's own secret\n")
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["log/#", "brain/events", "brain/visits/#",
                                                                                   "observers/+/inbox"], in: dir)
        var brain = try startProgram("beacon-brain", ["--config", config, "--record-key", key], in: dir)
        let presence = #"{"uuid":"\#(Self.uuid)","major":100,"minor":7,"gateway":"door","zone":"Door","proximity":"near","#
            + #""rssiSmoothed":-60,"distance":1.0,"since":"2026-11-21T08:00:00.000Z"}"#
        #expect(await broker.publish("beacons/100/7/presence/door", presence, retain: true))
        let fired = await eventually(timeout: 30) { watch.records.filter { $0.topic.hasPrefix("log/") }.count >= most }
        #expect(fired, "\(watch.records.filter { $0.topic.hasPrefix("log/") }.count) of \(most) rules fired; \(brain.diagnostics)")
        let record = await watch.waitFor(timeout: 10) {
            $0.topic == "brain/visits/100/7" && $0.text.contains(#""deal \#(most - 1) at"#)
        }
        #expect((record?.payload.count ?? 0) > 30_000, "the record of every rule: \(record?.payload.count ?? 0) bytes")
        brain.signal(SIGKILL)
        _ = await brain.waitForExit(timeout: 10)
        brain = try startProgram("beacon-brain", ["--config", config, "--record-key", key], in: dir)
        // A join answered by the restarted brain: it has settled, so rules it would fire again
        // have fired by then.
        #expect(await broker.publish("beacons/100/1/observers/ada", #"{"state":"joined","profile":{"name":"Ada"}}"#, retain: true))
        #expect(await watch.waitFor(topic: "observers/ada/inbox", timeout: 30) != nil, "\(brain.diagnostics)")
        let logs = watch.records.filter { $0.topic.hasPrefix("log/") }.map(\.topic)
        #expect(logs.count == most && Set(logs).count == most, "\(logs.count) rule publishes for \(most) once rules")
        #expect(!watch.records.contains {
            guard $0.topic == "brain/events", case .rejected(let r)? = $0.brainEvent else { return false }
            return r.kind == "oversized"
        },
                "the brain rejected its own record")
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }
}

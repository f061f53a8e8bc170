import BeaconKit
import Contract
import Foundation
import TestSupport
import Testing

/// On an anonymous broker anyone may write `brain/#`. A brain with its record key
/// (`--record-key`, or the credential `brain-secret`) trusts only the records it sealed: a
/// visit or answered join forged while no brain ran makes a restarted brain run no exit or
/// leave rule, is reported on `brain/events` and is deleted.
@Suite("forged brain records on an anonymous broker")
struct ForgedRecordTests {
    @Test("a restarted brain runs no rules for records it did not seal, and deletes them")
    func forgedRecordsAreIgnored() async throws {
        let dir = try TemporaryDirectory("forged-records")
        let broker = try await MosquittoBroker.start(in: dir)
        let config = try writeFleet(dir, broker: broker, gateways: [], extra: """
        "stores": [{"major": 100, "name": "Main Street", "ad": {"title": "Deal of the day"}}],
        "rules": [{"name": "out", "when": "exit", "then": [{"do": "publish", "topic": "log/exit/{minor}", "text": "{minor}"}]},
                  {"name": "bye", "when": "leave", "then": [{"do": "publish", "topic": "log/leave/{client}", "text": "{client}"}]}]
        """)
        let key = try dir.write("brain.secret", "the brain's own secret\n")
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: [
            "log/#", "brain/events", "brain/visits/#", "brain/answered/#", "observers/ada/inbox",
        ], in: dir)
        // While no brain runs: a visit of 100/9 and Mallory's answered join of 100/1, so that
        // the next brain would end them (exit and leave rules) as if they had really been.
        #expect(await broker.publish("brain/visits/100/9", #"{"since":"2026-11-21T08:00:00.000Z"}"#, retain: true))
        #expect(await broker.publish("brain/answered/100/1/mallory", #"{"join":"x","since":"2026-11-21T08:00:00.000Z"}"#,
                                     retain: true))
        let brain = try startProgram("beacon-brain", ["--config", config, "--record-key", key], in: dir)
        let reported = await watch.waitFor(timeout: 30) {
            guard $0.topic == "brain/events", case .rejected(let r)? = $0.brainEvent else { return false }
            return r.kind == "record" && r.topic == "brain/visits/100/9" && r.reason.contains("brain-secret")
        }
        #expect(reported != nil, "\(brain.diagnostics)")
        // A join after it: answered once the brain has settled, so an exit or leave rule
        // run for the forged records would have come before its ad.
        #expect(await broker.publish("beacons/100/1/observers/ada", #"{"state":"joined","profile":{"name":"Ada"}}"#, retain: true))
        #expect(await watch.waitFor(topic: "observers/ada/inbox", timeout: 30) != nil, "\(brain.diagnostics)")
        #expect(watch.records.filter { $0.topic.hasPrefix("log/") }.isEmpty, "a forged record ran rules: \(watch.records)")
        #expect(watch.records.contains { $0.topic == "brain/visits/100/9" && $0.payload.isEmpty }, "the forgery stayed")
        #expect(watch.records.contains { $0.topic == "brain/answered/100/1/mallory" && $0.payload.isEmpty })
        // The brain's own record of Ada's join is sealed.
        let own = await watch.waitFor(timeout: 10) { $0.topic == "brain/answered/100/1/ada" && !$0.payload.isEmpty }
        #expect(own?.text.contains(#","seal":""#) == true, "\(String(describing: own))")
        #expect(!brain.stderr.contains("no record key"))
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }
}

import BeaconKit
import Foundation
import TestSupport
import Testing

/// What the brain retains about customers carries an MQTT 5 message expiry of
/// `brain.joinMaxAge`: the broker drops it even when no brain is left to delete it.
@Suite("personal data expires on an MQTT 5 broker")
struct PersonalDataExpiryTests {
    @Test("roster entries and summaries are retained with a message expiry of brain.joinMaxAge")
    func rosterExpires() async throws {
        let dir = try TemporaryDirectory("expiry")
        let broker = try await MosquittoBroker.start(in: dir)
        let config = try dir.write("fleet.json", """
        {"broker": {"url": "\(broker.url)", "keepalive": 5, "mqttVersion": "5"},
         "stores": [{"major": 100, "name": "Main Street"}],
         "brain": {"joins": "open", "joinMaxAge": 600}}
        """)
        let watch = try ChildProcess(Programs.system("stdbuf")!, [
            "-oL", Programs.system("mosquitto_sub")!, "-V", "5", "-h", "127.0.0.1", "-p", String(broker.port),
            "-F", "%t|%E", "-t", "stores/100/customers/+", "-t", "stores/100/roster", "-t", "brain/status",
        ], in: dir, name: "sub-v5")
        let brain = try startProgram("beacon-brain", ["--config", config], in: dir)
        #expect(await eventually(timeout: 30) { watch.stdout.contains("brain/status|") }, "\(watch.diagnostics)\n\(brain.diagnostics)")
        #expect(await broker.publish("beacons/100/1/observers/ada", #"{"state":"joined","profile":{"name":"Ada"}}"#, retain: true))
        func expiry(_ topic: String) -> Int? {
            watch.stdoutLines.last { $0.hasPrefix(topic + "|") }.flatMap { Int($0.dropFirst(topic.count + 1)) }
        }
        #expect(await eventually(timeout: 30) { expiry("stores/100/customers/ada") != nil && expiry("stores/100/roster") != nil },
                "\(watch.diagnostics)\n\(brain.diagnostics)")
        for topic in ["stores/100/customers/ada", "stores/100/roster"] {
            #expect((1...600).contains(expiry(topic) ?? 0), "\(topic): \(watch.stdout)")
        }
        #expect(watch.stdoutLines.contains("brain/status|"), "brain/status has no expiry: \(watch.stdout)")
        await brain.stop()
        await watch.stop()
        await broker.stop()
    }
}

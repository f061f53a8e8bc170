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

    /// The app's own join is personal data too: `beaconctl observe` retains it with an
    /// expiry of the fleet's `brain.joinMaxAge` (MQTT 5, its default); over 3.1.1 it cannot.
    @Test("beaconctl observe retains its join with a message expiry of brain.joinMaxAge")
    func observerJoinExpires() async throws {
        let dir = try TemporaryDirectory("expiry-observe")
        let broker = try await MosquittoBroker.start(in: dir)
        let config = try dir.write("fleet.json", """
        {"broker": {"url": "\(broker.url)", "keepalive": 5}, "brain": {"joins": "open", "joinMaxAge": 900}}
        """)
        let watch = try ChildProcess(Programs.system("stdbuf")!, [
            "-oL", Programs.system("mosquitto_sub")!, "-V", "5", "-h", "127.0.0.1", "-p", String(broker.port),
            "-F", "%t|%E", "-t", "beacons/100/+/observers/+",
        ], in: dir, name: "sub-v5")
        let ana = try startProgram("beaconctl", ["observe", "--config", config, "--client", "ana", "--major", "100",
                                                 "--minor", "1"], in: dir)
        let ben = try startProgram("beaconctl", ["observe", "--config", config, "--client", "ben", "--major", "100",
                                                 "--minor", "2", "--mqtt-version", "3.1.1"], in: dir)
        // The first message on the topic is the join (the last, after the stop, its deletion).
        func join(_ topic: String) -> Substring? {
            watch.stdoutLines.first { $0.hasPrefix(topic + "|") }.map { $0.dropFirst(topic.count + 1) }
        }
        #expect(await eventually(timeout: 30) {
            join("beacons/100/1/observers/ana") != nil && join("beacons/100/2/observers/ben") != nil
        }, "\(watch.diagnostics)\n\(ana.diagnostics)\n\(ben.diagnostics)")
        let expiry = join("beacons/100/1/observers/ana").flatMap { Int($0) }
        #expect((800...900).contains(expiry ?? 0), "\(watch.stdout)")
        #expect(join("beacons/100/2/observers/ben") == "", "over MQTT 3.1.1 no expiry: \(watch.stdout)")
        #expect(await ana.stop() == 0, "\(ana.diagnostics)")
        #expect(await ben.stop() == 0, "\(ben.diagnostics)")
        await watch.stop()
        await broker.stop()
    }
}

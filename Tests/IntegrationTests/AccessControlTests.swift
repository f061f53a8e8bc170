import Foundation
import TestSupport
import Testing
import Wire

/// The example ACL in deploy/mosquitto holds on a real Mosquitto: a gateway publishes only
/// its own topics, observers only their own joins, the brain alone publishes ads.
@Suite("deploy/mosquitto ACL")
struct AccessControlTests {
    static let users = ["door", "counter", "brain", "operator", "display", "ana", "audit"]

    func startBroker(_ dir: TemporaryDirectory) async throws -> MosquittoBroker {
        var acl = try String(contentsOfFile: Programs.repositoryRoot + "/deploy/mosquitto/beaconbridge.acl", encoding: .utf8)
        acl += "\n# test only: a user that sees everything\nuser audit\ntopic read #\n"
        let aclPath = try dir.write("acl", acl)
        var passwords = ""
        for user in Self.users {
            let file = try await MosquittoBroker.passwordFile(in: dir, user: user, password: "pw-\(user)")
            passwords += try String(contentsOfFile: file, encoding: .utf8)
        }
        let passwordPath = try dir.write("passwd-all", passwords)
        return try await MosquittoBroker.start(in: dir, extraConfig: """
        allow_anonymous false
        password_file \(passwordPath)
        acl_file \(aclPath)
        """)
    }

    func publish(_ broker: MosquittoBroker, as user: String, _ topic: String, _ payload: String,
                 in dir: TemporaryDirectory) async throws {
        let process = try ChildProcess(Programs.system("mosquitto_pub")!, [
            "-h", "127.0.0.1", "-p", String(broker.port), "-u", user, "-P", "pw-\(user)", "-i", "pub-\(user)",
            "-q", "1", "-t", topic, "-m", payload,
        ], in: dir)
        #expect(await process.waitForExit(timeout: 5) == 0, "\(process.diagnostics)")
    }

    @Test("allowed publications arrive, forbidden ones are dropped by the broker")
    func rolesHold() async throws {
        let dir = try TemporaryDirectory("acl")
        let broker = try await startBroker(dir)
        let audit = try await MosquittoSubscriberAs.start(broker: broker, user: "audit", filters: ["#"], in: dir)

        let allowed = [
            ("door", "beacons/1/2/presence/door"), ("door", "beacons/1/2"), ("door", "gateways/door/status"),
            ("ana", "beacons/1/2/observers/ana"), ("ana", "observers/ana/status"),
            ("brain", "beacons/1/2/ad"), ("brain", "observers/ana/inbox"), ("brain", "stores/1/roster"),
            ("operator", "fleet/config"), ("operator", "gateways/door/cmd"),
            ("display", "homeassistant/sensor/beaconbridge/gateway_door_status/config"),
        ]
        let forbidden = [
            ("door", "beacons/1/2/presence/counter"), ("door", "gateways/counter/status"), ("door", "beacons/1/2/ad"),
            ("ana", "beacons/1/2/observers/ben"), ("ana", "beacons/1/2/ad"), ("ana", "observers/ben/inbox"),
            ("ana", "stores/1/roster"), ("display", "beacons/1/2/observers/ana"), ("counter", "gateways/door/health"),
            ("display", "stores/1/roster"), ("display", "gateways/door/status"), ("display", "homeassistant/sensor/other/config"),
        ]
        for (user, topic) in forbidden { try await publish(broker, as: user, topic, "forbidden", in: dir) }
        for (user, topic) in allowed { try await publish(broker, as: user, topic, "allowed", in: dir) }
        try await publish(broker, as: "brain", "brain/marker", "done", in: dir)
        #expect(await eventually(timeout: 5) { audit.stdout.contains("brain/marker done") }, "\(broker.diagnostics)")
        let seen = audit.stdoutLines
        for (user, topic) in allowed {
            #expect(seen.contains("\(topic) allowed"), "\(user) may publish \(topic)")
        }
        for (user, topic) in forbidden {
            #expect(!seen.contains("\(topic) forbidden"), "\(user) must not publish \(topic)")
        }
        await audit.stop()
        await broker.stop()
    }

    @Test("a gateway with its user name and a password file works under the ACL")
    func gatewayAuthenticates() async throws {
        let dir = try TemporaryDirectory("acl-gateway")
        let broker = try await startBroker(dir)
        let audit = try await MosquittoSubscriberAs.start(broker: broker, user: "audit", filters: ["beacons/#", "gateways/#"],
                                                          in: dir)
        let capture = try dir.write("store.log", bytes: GatewayTests.capture(beacons: [(1, 0...10)], step: 0.5).bytes)
        let passwordFile = try dir.write("door-password", "pw-door\n")
        let config = try dir.write("fleet.json", """
        {"broker": {"url": "mqtt://127.0.0.1:\(broker.port)", "passwordFile": "\(passwordFile)", "keepalive": 5},
         "gateways": [{"id": "door", "source": "btsnoop:\(capture)?loop"}]}
        """)
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "door"], in: dir)
        #expect(await eventually(timeout: 15) { audit.stdout.contains("beacons/7/1/presence/door {") }, "\(gateway.diagnostics)")
        #expect(audit.stdout.contains("gateways/door/status online"))
        await gateway.stop()
        #expect(await eventually(timeout: 5) { audit.stdout.contains("gateways/door/status offline") })

        // The wrong password: refused, reported, and the gateway keeps retrying instead of dying.
        let wrong = try startProgram("beacon-gateway", ["--config", config, "--id", "door"], in: dir,
                                     environment: ["BEACONBRIDGE_MQTT_PASSWORD": "wrong"])
        #expect(await eventually(timeout: 10) { wrong.stderr.contains("not authorised") }, "\(wrong.diagnostics)")
        #expect(wrong.isRunning)
        await wrong.stop()
        await audit.stop()
        await broker.stop()
    }
}

/// mosquitto_sub as a named user, printing `topic payload` lines.
enum MosquittoSubscriberAs {
    static func start(broker: MosquittoBroker, user: String, filters: [String], in dir: TemporaryDirectory) async throws -> ChildProcess {
        var arguments = ["-h", "127.0.0.1", "-p", String(broker.port), "-u", user, "-P", "pw-\(user)", "-v"]
        for filter in filters { arguments += ["-t", filter] }
        let process = try ChildProcess(Programs.system("stdbuf")!, ["-oL", Programs.system("mosquitto_sub")!] + arguments, in: dir)
        try await Task.sleep(nanoseconds: 500_000_000)
        return process
    }
}

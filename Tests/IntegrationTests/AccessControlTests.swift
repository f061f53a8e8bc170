import BeaconKit
import Config
import Foundation
import TestSupport
import Testing
import Wire

/// The ACL `beaconctl provision` writes (deploy/mosquitto has it for fleet.example.json)
/// holds on a real Mosquitto: a credential speaks only for itself. Each attack of issue 9
/// is tried and refused here; the brain's own checks (joins, records) are in BrainTests.
@Suite("deploy/mosquitto ACL")
struct AccessControlTests {
    static let users = ["door", "counter", "brain", "operator", "display-100", "homeassistant", "ana", "ben", "audit"]

    @Test("the shipped ACL and broker security are what provision writes for the example fleet")
    func shippedIsGenerated() throws {
        let root = Programs.repositoryRoot + "/deploy/"
        let example = try FleetConfig.parse(String(contentsOfFile: root + "fleet.example.json", encoding: .utf8))
        let acl = try String(contentsOfFile: root + "mosquitto/beaconbridge.acl", encoding: .utf8)
        #expect(acl == AccessPolicy(config: example).text,
                """
                deploy/mosquitto/beaconbridge.acl is generated: change Config/AccessPolicy.swift, then run \
                beaconctl provision deploy/fleet.example.json --out DIR and copy DIR/broker/beaconbridge.acl
                """)
        let security = try String(contentsOfFile: root + "mosquitto/beaconbridge.conf", encoding: .utf8)
        #expect(security == BrokerSecurityConfig().text)
        let store = try String(contentsOfFile: root + "mosquitto/mosquitto.conf", encoding: .utf8)
        // A listener's setting: every listener needs it, right after its line.
        #expect(store.contains("listener 1883 127.0.0.1\nuse_username_as_clientid true\n"))
    }

    func startBroker(_ dir: TemporaryDirectory) async throws -> MosquittoBroker {
        // The shipped ACL with two apps, as `beaconctl provision … --observer ana --observer ben` writes it.
        let root = Programs.repositoryRoot + "/deploy/"
        let example = try FleetConfig.parse(String(contentsOfFile: root + "fleet.example.json", encoding: .utf8))
        var acl = AccessPolicy(config: example, observers: ["ana", "ben"]).text
        acl += "\n# test only: a user that sees everything\nuser audit\ntopic read #\n"
        let aclPath = try dir.write("acl", acl)
        var passwords = ""
        for user in Self.users {
            let file = try await MosquittoBroker.passwordFile(in: dir, user: user, password: "pw-\(user)")
            passwords += try String(contentsOfFile: file, encoding: .utf8)
        }
        let passwordPath = try dir.write("passwd-all", passwords)
        // Right after TestSupport's listener line: it is that listener's setting.
        return try await MosquittoBroker.start(in: dir, extraConfig: """
        use_username_as_clientid true
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
            ("door", "gateways/door/rssi"),
            ("ana", "beacons/1/2/observers/ana"), ("ana", "observers/ana/status"),
            ("brain", "beacons/1/2/ad"), ("brain", "observers/ana/inbox"), ("brain", "stores/1/roster"),
            ("brain", "beacons/1/2/observers/ana"), ("brain", "brain/visits/1/2"), ("brain", "displays/100/barista"),
            ("brain", "gateways/door/calibration"),
            ("operator", "fleet/config"), ("operator", "gateways/door/cmd"),
            ("display-100", "homeassistant/binary_sensor/beaconbridge/gateway_door_connectivity/config"),
            ("display-100", "homeassistant/device_tracker/beaconbridge/beacon_1_2/state"),
            ("homeassistant", "homeassistant/status"),
        ]
        // Every attack of the table below, and what else no role may write.
        let forbidden = Self.spoofs.map { ($0.user, $0.topic) } + [
            ("door", "beacons/1/2/presence/counter"), ("door", "gateways/counter/status"), ("door", "beacons/1/2/ad"),
            ("ana", "beacons/1/2/ad"), ("display-100", "beacons/1/2/observers/ana"), ("display-100", "stores/1/roster"),
            ("display-100", "gateways/door/status"), ("display-100", "homeassistant/sensor/other/config"),
            ("display-100", "homeassistant/sensor/beaconbridge/gateway_door_adverts/state"),
            ("door", "displays/100/barista"), ("display-100", "gateways/door/calibration"),
            ("homeassistant", "homeassistant/sensor/beaconbridge/gateway_door_status/config"),
            ("homeassistant", "gateways/door/status"), ("homeassistant", "fleet/config"),
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
        // beacon-web's fleet page shows what the brain's calibration learned. (The user name is
        // the client id: this subscriber starts once no other display connection comes.)
        let screen = try await MosquittoSubscriberAs.start(broker: broker, user: "display-100",
                                                            filters: ["gateways/+/calibration"], in: dir)
        try await publish(broker, as: "brain", "gateways/window/calibration", "learned", in: dir)
        #expect(await eventually(timeout: 10) { screen.stdout.contains("gateways/window/calibration learned") },
                "the display reads the brain's calibration records")
        await screen.stop()
        await audit.stop()
        await broker.stop()
    }

    /// The attacks of issue 9 that a broker can stop, each as one publication.
    static let spoofs: [(attack: String, user: String, topic: String)] = [
        ("an app fakes a gateway's presence (moves a customer between zones)", "ana", "beacons/1/2/presence/door"),
        ("one gateway's login speaks for another (presence)", "counter", "beacons/1/2/presence/door"),
        ("one gateway's login speaks for another (RSSI reports)", "counter", "gateways/door/rssi"),
        ("one gateway's login speaks for another (health)", "counter", "gateways/door/health"),
        ("an app fakes sightings", "ana", "beacons/1/2"),
        ("an app says a gateway went offline (drops its views)", "ana", "gateways/door/status"),
        ("a gateway says another went offline", "counter", "gateways/door/status"),
        ("an app says another app went offline (ends Ana's joins)", "ben", "observers/ana/status"),
        ("a gateway says an app went offline", "door", "observers/ana/status"),
        ("an app joins under another app's name", "ben", "beacons/1/2/observers/ana"),
        ("an app deletes another app's join", "ben", "beacons/1/2/observers/ana"),
        ("an app pauses a gateway's scan", "ana", "gateways/door/cmd"),
        ("a gateway commands another gateway", "door", "gateways/counter/cmd"),
        ("an app overwrites the fleet config", "ana", "fleet/config"),
        ("a gateway overwrites the fleet config", "door", "fleet/config"),
        ("the display overwrites the fleet config", "display-100", "fleet/config"),
        ("an app forges a visit record (exit rules on restart)", "ana", "brain/visits/1/2"),
        ("an app forges an answered record", "ana", "brain/answered/1/2/ana"),
        ("a gateway forges a visit record", "door", "brain/visits/1/2"),
        ("an app writes another's inbox", "ana", "observers/ben/inbox"),
        ("an app writes the roster", "ana", "stores/1/roster"),
        ("an app writes a customer entry", "ana", "stores/1/customers/ana"),
        ("an app writes fleet presence", "ana", "beacons/1/2/presence"),
        ("a gateway writes fleet presence", "door", "beacons/1/2/presence"),
        ("an app says the brain is offline", "ana", "brain/status"),
        ("a gateway calibrates itself (its RSSI offset in the zone fusion)", "door", "gateways/door/calibration"),
        ("a gateway calibrates another", "door", "gateways/counter/calibration"),
        ("an app calibrates a gateway", "ana", "gateways/door/calibration"),
        ("the operator writes a calibration record (the brain's to write)", "operator", "gateways/door/calibration"),
    ]

    @Test("an app learns nothing about other customers: no profile, photo, inbox, roster or presence but its own")
    func observersReadOnlyTheirOwn() async throws {
        let dir = try TemporaryDirectory("acl-read")
        let broker = try await startBroker(dir)
        let ana = try await MosquittoSubscriberAs.start(broker: broker, user: "ana", filters: [
            "#", "beacons/+/+/observers/+", "observers/+/inbox", "stores/+/roster", "stores/+/customers/+",
            "beacons/+/+/presence", "beacons/+/+/presence/+", "beacons/+/+", "gateways/+/status", "brain/#",
        ], in: dir)
        let secrets = [
            ("ben", "beacons/1/3/observers/ben", "ben's profile and photo"), ("brain", "observers/ben/inbox", "ben's inbox"),
            ("brain", "stores/1/roster", "the roster"), ("brain", "stores/1/customers/ben", "ben's roster entry"),
            ("brain", "beacons/1/3/presence", "ben's whereabouts"), ("door", "beacons/1/3/presence/door", "a gateway's view"),
            ("door", "beacons/1/3", "a sighting"), ("brain", "brain/answered/1/3/ben", "the brain's records"),
        ]
        for (user, topic, payload) in secrets { try await publish(broker, as: user, topic, payload, in: dir) }
        try await publish(broker, as: "brain", "beacons/1/2/ad", "the public ad", in: dir)
        try await publish(broker, as: "brain", "observers/ana/inbox", "ana's own inbox", in: dir)
        #expect(await eventually(timeout: 5) { ana.stdout.contains("observers/ana/inbox ana's own inbox") }, "\(ana.diagnostics)")
        #expect(ana.stdout.contains("beacons/1/2/ad the public ad"))
        for (_, topic, payload) in secrets {
            #expect(!ana.stdout.contains(payload), "ana read \(topic)")
        }
        await ana.stop()
        await broker.stop()
    }

    @Test("no credential can take over another's connection: the user name is the client id")
    func clientIdTakeover() async throws {
        let dir = try TemporaryDirectory("acl-takeover")
        let broker = try await startBroker(dir)
        // The brain, connected as beacon-brain; an app connects with the brain's client id.
        let brain = try await MosquittoSubscriberAs.start(broker: broker, user: "brain", filters: ["fleet/config"], in: dir,
                                                          clientID: "beacon-brain")
        let impostor = try await MosquittoSubscriberAs.start(broker: broker, user: "ana", filters: ["observers/ana/inbox"],
                                                             in: dir, clientID: "beacon-brain")
        // (Another connection as `brain` itself would take it over: one connection per user.)
        try await publish(broker, as: "operator", "fleet/config", "still-here", in: dir)
        #expect(await eventually(timeout: 5) { brain.stdout.contains("fleet/config still-here") },
                "the brain lost its connection to an app using its client id\n\(brain.diagnostics)\n\(broker.diagnostics)")
        #expect(brain.isRunning && impostor.isRunning)
        #expect(broker.log.contains("as ana (") && broker.log.contains("as brain ("), "\(broker.diagnostics)")
        await impostor.stop()
        await brain.stop()
        await broker.stop()
    }

    @Test("anonymous clients are refused")
    func anonymousRefused() async throws {
        let dir = try TemporaryDirectory("acl-anonymous")
        let broker = try await startBroker(dir)
        let process = try ChildProcess(Programs.system("mosquitto_pub")!, [
            "-h", "127.0.0.1", "-p", String(broker.port), "-q", "1", "-t", "fleet/config", "-m", "{}",
        ], in: dir)
        #expect(await process.waitForExit(timeout: 5) != 0)
        #expect(process.stderr.contains("not authorised"), "\(process.diagnostics)")
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

/// mosquitto_sub as a named user, printing `topic payload` lines (and, with `-d`, its protocol
/// lines, which begin with `Client `), returned once the broker has answered its subscription.
enum MosquittoSubscriberAs {
    static func start(broker: MosquittoBroker, user: String, filters: [String], in dir: TemporaryDirectory,
                      clientID: String? = nil) async throws -> ChildProcess {
        var arguments = ["-h", "127.0.0.1", "-p", String(broker.port), "-u", user, "-P", "pw-\(user)", "-v", "-d"]
        if let clientID { arguments += ["-i", clientID] }
        for filter in filters { arguments += ["-t", filter] }
        let process = try ChildProcess(Programs.system("stdbuf")!, ["-oL", Programs.system("mosquitto_sub")!] + arguments, in: dir)
        let subscribed = await eventually(timeout: 10, interval: 0.02) {
            !process.isRunning || process.stdout.contains("received SUBACK")
        }
        guard subscribed, process.isRunning else {
            await process.stop()
            throw TestFailure("mosquitto_sub as \(user) did not subscribe\n\(process.diagnostics)\n\(broker.diagnostics)")
        }
        return process
    }
}

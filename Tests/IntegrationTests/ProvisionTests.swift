import BeaconKit
import Config
import Foundation
import TestSupport
import Testing
import Wire

/// `beaconctl provision` makes a store where every part connects under its own identity
/// over TLS: a real Mosquitto runs the configuration, password file, ACL and certificate it
/// wrote; a gateway and the brain take their passwords as systemd credentials; an app and
/// the operator log in as themselves; anonymous clients are refused.
@Suite("beaconctl provision: a TLS store where every part is itself")
struct ProvisionTests {
    struct Store {
        let dir: TemporaryDirectory
        let out: String
        let port: UInt16
        let config: String
        let broker: MosquittoBroker

        func password(_ user: String) throws -> String {
            try String(contentsOfFile: out + "/credentials/\(user).password", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// A directory such as systemd's `$CREDENTIALS_DIRECTORY` for `user`.
        func credentials(for user: String, secret: Bool = false) throws -> [String: String] {
            let directory = dir.file("credentials-\(user)")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: out + "/credentials/\(user).password", toPath: directory + "/mqtt-password")
            if secret {
                try FileManager.default.copyItem(atPath: out + "/credentials/brain.secret", toPath: directory + "/brain-secret")
            }
            return ["CREDENTIALS_DIRECTORY": directory]
        }

        /// mosquitto_sub over TLS as `user`, printing `topic payload` lines.
        func subscribe(as user: String, _ filters: [String]) throws -> ChildProcess {
            var arguments = ["-h", "127.0.0.1", "-p", String(port), "--cafile", out + "/clients/ca.crt",
                             "-u", user, "-P", try password(user), "-v", "-d"]
            for filter in filters { arguments += ["-t", filter] }
            return try ChildProcess(Programs.system("stdbuf")!, ["-oL", Programs.system("mosquitto_sub")!] + arguments,
                                    in: dir, name: "sub-\(user)")
        }
    }

    static func provision(_ label: String, extraBeacons: String = "", extra: [String] = []) async throws -> Store {
        let dir = try TemporaryDirectory(label)
        let port = try FreePort.allocate()
        let capture = try dir.write("door.log", bytes: GatewayTests.capture(beacons: [(1, 0...30)], step: 0.5).bytes)
        let out = dir.file("secrets")
        let config = try dir.write("fleet.json", """
        {"broker": {"url": "mqtts://127.0.0.1:\(port)", "tls": {"caFile": "\(out)/clients/ca.crt"}, "keepalive": 5},
         "gateways": [{"id": "door", "source": "btsnoop:\(capture)?loop", "zone": "Entrance"}, {"id": "counter"}],
         "stores": [{"major": 7, "name": "Test Street", "ad": {"title": "Deal"}}],
         "beacons": [{"uuid": "\(GatewayTests.uuid)", "major": 7, "minor": 1, "name": "Ana's fob", "owner": "ana"}\(extraBeacons)]}
        """)
        let provision = try startProgram("beaconctl", ["provision", config, "--out", out, "--port", String(port),
                                                       "--bind", "127.0.0.1", "--broker-directory", out + "/broker",
                                                       "--observer", "ben"] + extra, in: dir)
        try #require(await provision.waitForExit(timeout: 60) == 0, "\(provision.diagnostics)")
        let security = try String(contentsOfFile: out + "/broker/beaconbridge.conf", encoding: .utf8)
        let broker = try await MosquittoBroker.start(in: dir, extraConfig: security)
        return Store(dir: dir, out: out, port: port, config: config, broker: broker)
    }

    /// mosquitto_pub over TLS as `user`; its exit status.
    static func publish(_ store: Store, as user: String, _ topic: String, _ payload: String) async throws -> Int32? {
        let process = try ChildProcess(Programs.system("mosquitto_pub")!, [
            "-h", "127.0.0.1", "-p", String(store.port), "--cafile", store.out + "/clients/ca.crt",
            "-u", user, "-P", try store.password(user), "-q", "1", "-t", topic, "-m", payload,
        ], in: store.dir, name: "pub-\(user)")
        return await process.waitForExit(timeout: 15)
    }

    @Test("gateway, brain, app and operator connect as themselves over TLS; anonymous clients are refused")
    func everyPartIsItself() async throws {
        let store = try await Self.provision("provision-store")
        let operatorView = try store.subscribe(as: "operator", ["beacons/#", "gateways/#", "brain/status", "homeassistant/#",
                                                                "observers/#"])
        #expect(await eventually(timeout: 15) { operatorView.stdout.contains("received SUBACK") }, "\(operatorView.diagnostics)")

        let gateway = try startProgram("beacon-gateway", ["--config", store.config, "--id", "door"], in: store.dir,
                                       environment: try store.credentials(for: "door"))
        let brain = try startProgram("beacon-brain", ["--config", store.config], in: store.dir,
                                     environment: try store.credentials(for: "brain", secret: true))
        #expect(await eventually(timeout: 30) {
            operatorView.stdout.contains("beacons/7/1/presence/door {") && operatorView.stdout.contains("beacons/7/1/presence {")
                && operatorView.stdout.contains("gateways/door/status online") && operatorView.stdout.contains("brain/status online")
        }, "\(operatorView.stdout)\n\(gateway.diagnostics)\n\(brain.diagnostics)\n\(store.broker.diagnostics)")

        // Home Assistant reads what its entities show, writes its birth message and nothing else.
        let homeAssistant = try store.subscribe(as: "homeassistant", ["homeassistant/#", "gateways/+/status", "gateways/+/health",
                                                                      "beacons/+/+/presence", "brain/status", "stores/#"])
        #expect(await eventually(timeout: 30) {
            homeAssistant.stdout.contains("gateways/door/status online") && homeAssistant.stdout.contains("beacons/7/1/presence {")
                && homeAssistant.stdout.contains("brain/status online") && homeAssistant.stdout.contains("gateways/door/health {")
        }, "\(homeAssistant.diagnostics)\n\(store.broker.diagnostics)")
        await homeAssistant.stop()  // one connection per user: the user name is the client id
        #expect(try await Self.publish(store, as: "homeassistant", "homeassistant/status", "online") == 0)
        #expect(try await Self.publish(store, as: "homeassistant", "brain/status", "forged") == 0)  // dropped by the ACL
        #expect(await eventually(timeout: 10) { operatorView.stdout.contains("homeassistant/status online") },
                "the operator reads homeassistant/#\n\(operatorView.stdout)")
        #expect(!operatorView.stdout.contains("brain/status forged"))

        // Ana's app joins her own beacon and hears from the brain.
        let app = try startProgram("beaconctl", ["observe", "--config", store.config, "--broker", "mqtts://ana@127.0.0.1:\(store.port)",
                                                 "--client", "ana", "--major", "7", "--minor", "1", "--count", "1"],
                                   in: store.dir, environment: ["BEACONBRIDGE_MQTT_PASSWORD": try store.password("ana")])
        #expect(await app.waitForExit(timeout: 30) == 0, "\(app.diagnostics)\n\(brain.diagnostics)")
        #expect(app.stdout.contains(#""type":"ad""#), "\(app.diagnostics)")
        #expect(await eventually(timeout: 10) { operatorView.stdout.contains("observers/ana/inbox {") },
                "the operator reads observers/#\n\(operatorView.stdout)")

        // Each under its own user name, which is also its client id (use_username_as_clientid).
        let log = store.broker.log
        #expect(!log.contains("Warning: ACL pattern"), "\(log.suffix(4000))")
        for user in ["door", "brain", "ana", "operator", "homeassistant"] {
            #expect(log.contains(" as \(user) ") && log.contains("u'\(user)'"), "\(user) did not log in as itself\n\(log.suffix(4000))")
        }
        #expect(!gateway.stderr.contains("warning"), "no risk to warn about: \(gateway.stderr)")
        #expect(!brain.stderr.contains("anonymously"), "\(brain.stderr)")

        // No password, a wrong one, or plaintext to the TLS port: refused.
        let anonymous = try ChildProcess(Programs.system("mosquitto_pub")!, [
            "-h", "127.0.0.1", "-p", String(store.port), "--cafile", store.out + "/clients/ca.crt",
            "-t", "fleet/config", "-m", "{}"], in: store.dir, name: "anonymous")
        #expect(await anonymous.waitForExit(timeout: 10) != 0)
        #expect(anonymous.stderr.contains("not authorised") || anonymous.stderr.contains("Connection Refused"),
                "\(anonymous.diagnostics)")
        let wrong = try startProgram("beacon-gateway", ["--config", store.config, "--id", "door"], in: store.dir,
                                     environment: ["BEACONBRIDGE_MQTT_PASSWORD": try store.password("counter")])
        #expect(await eventually(timeout: 15) { wrong.stderr.contains("not authorised") }, "\(wrong.diagnostics)")
        await wrong.stop()

        await app.stop()
        await brain.stop()
        await gateway.stop()
        await operatorView.stop()
        await store.broker.stop()
    }

    @Test("an app joins only its own beacon, or the store's while its own is in; a refused join is answered and leaves the broker")
    func joinsAreBoundToTheirOwner() async throws {
        // 7/1 is Ana's fob (owner ana), 7/2 the store's counter; Ben has no beacon.
        let store = try await Self.provision("provision-joins", extraBeacons: """
            , {"uuid": "\(GatewayTests.uuid)", "major": 7, "minor": 2, "name": "counter"}
            """)
        let view = try store.subscribe(as: "operator", ["beacons/+/+/presence", "beacons/+/+/observers/+", "brain/events"])
        #expect(await eventually(timeout: 15) { view.stdout.contains("received SUBACK") }, "\(view.diagnostics)")
        let gateway = try startProgram("beacon-gateway", ["--config", store.config, "--id", "door"], in: store.dir,
                                       environment: try store.credentials(for: "door"))
        let brain = try startProgram("beacon-brain", ["--config", store.config], in: store.dir,
                                     environment: try store.credentials(for: "brain", secret: true))
        #expect(await eventually(timeout: 30) { view.stdout.contains("beacons/7/1/presence {") },
                "Ana's fob never reached the store\n\(gateway.diagnostics)\n\(brain.diagnostics)")

        // The reference app, logged in as itself (one connection per user: its inbox and its join).
        func app(_ user: String, _ minor: Int, _ extra: [String] = []) throws -> ChildProcess {
            try startProgram("beaconctl", ["observe", "--config", store.config, "--broker", "mqtts://\(user)@127.0.0.1:\(store.port)",
                                           "--client", user, "--major", "7", "--minor", String(minor)] + extra,
                             in: store.dir, environment: ["BEACONBRIDGE_MQTT_PASSWORD": try store.password(user)])
        }
        // Ben joins Ana's fob, to learn when she comes and goes: refused, told why, and the
        // brain deletes his join (profile and all) from the broker while his app still runs;
        // reported on brain/events.
        let spy = try app("ben", 1)
        #expect(await eventually(timeout: 30) { spy.stdout.contains("beacon 7/1 belongs to another customer: only its owner may join it") },
                "\(spy.diagnostics)\n\(brain.diagnostics)")
        #expect(await eventually(timeout: 10) { view.stdout.contains("'beacons/7/1/observers/ben', ... (0 bytes))") },
                "the refused join stayed on the broker\n\(brain.diagnostics)")
        #expect(spy.isRunning, "the app did not delete it itself: \(spy.diagnostics)")
        #expect(await eventually(timeout: 10) {
            view.stdoutLines.contains { $0.hasPrefix("brain/events ") && $0.contains("beacons/7/1/observers/ben") }
        }, "\(brain.diagnostics)")
        #expect(!spy.stdout.contains(#""type":"ad""#))
        await spy.stop()
        // Ben joins the store's counter: none of his beacons is in the store.
        let outsider = try app("ben", 2)
        #expect(await eventually(timeout: 30) { outsider.stdout.contains("no beacon in the registry belongs to ben") },
                "\(outsider.diagnostics)\n\(brain.diagnostics)")
        #expect(!outsider.stdout.contains(#""type":"ad""#))
        await outsider.stop()
        // Ana joins the counter while her fob is in the store: answered with its ad.
        let ana = try app("ana", 2, ["--count", "1"])
        #expect(await ana.waitForExit(timeout: 30) == 0, "\(ana.diagnostics)\n\(brain.diagnostics)")
        #expect(ana.stdout.contains(#""type":"ad""#), "\(ana.diagnostics)")

        await brain.stop()
        await gateway.stop()
        await view.stop()
        await store.broker.stop()
    }

    @Test("provisioning again keeps every password and the CA, and adds what is new")
    func idempotent() async throws {
        let store = try await Self.provision("provision-again")
        let door = try store.password("door"), ca = try String(contentsOfFile: store.out + "/ca/ca.crt", encoding: .utf8)
        let web = try String(contentsOfFile: store.out + "/web/web.crt", encoding: .utf8)
        // An operator adds a user by hand, and its rules in local.acl.
        let hand = try ChildProcess(Programs.system("mosquitto_passwd")!, ["-b", store.out + "/broker/passwd", "dana", "by-hand"],
                                    in: store.dir)
        #expect(await hand.waitForExit(timeout: 30) == 0, "\(hand.diagnostics)")
        let local = "user dana\ntopic read beacons/+/+/ad\ntopic write dana/notes\n"
        try local.write(toFile: store.out + "/broker/local.acl", atomically: true, encoding: .utf8)
        let again = try startProgram("beaconctl", ["provision", store.config, "--out", store.out, "--observer", "carla",
                                                   "--port", String(store.port), "--bind", "127.0.0.1",
                                                   "--broker-directory", store.out + "/broker"], in: store.dir)
        #expect(await again.waitForExit(timeout: 60) == 0, "\(again.diagnostics)")
        #expect(try store.password("door") == door)
        #expect(try String(contentsOfFile: store.out + "/ca/ca.crt", encoding: .utf8) == ca)
        #expect(try store.password("carla").count == 48)
        let passwd = try String(contentsOfFile: store.out + "/broker/passwd", encoding: .utf8)
        #expect(passwd.contains("carla:$7$") && passwd.contains("door:$7$") && !passwd.contains(door))
        #expect(passwd.contains("dana:$7$"), "the hand-added user was erased:\n\(passwd)")
        #expect(again.stdout.contains("kept 1 user(s) added to broker/passwd by hand: dana"), "\(again.diagnostics)")
        let acl = try String(contentsOfFile: store.out + "/broker/beaconbridge.acl", encoding: .utf8)
        #expect(acl.hasSuffix(local), "\(acl.suffix(500))")
        #expect(try String(contentsOfFile: store.out + "/web/web.crt", encoding: .utf8) == web)
        for file in ["credentials/door.password", "credentials/brain.secret", "ca/ca.key", "web/web.key"] {
            let mode = try FileManager.default.attributesOfItem(atPath: store.out + "/" + file)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(file) is \(String(mode ?? 0, radix: 8))")
        }
        // The broker reads broker/ in place (--broker-directory): shared with its group, no one else.
        for file in ["broker/passwd", "broker/broker.key"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: store.out + "/" + file)
            let expected = geteuid() == 0 ? 0o640 : 0o600
            #expect(attributes[.posixPermissions] as? Int == expected, "\(file): \(attributes)")
        }

        // The broker, restarted on the new files, lets dana in with her hand-set password.
        await store.broker.stop()
        let security = try String(contentsOfFile: store.out + "/broker/beaconbridge.conf", encoding: .utf8)
        let broker = try await MosquittoBroker.start(in: store.dir, extraConfig: security)  // its listener: store.port
        let dana = try ChildProcess(Programs.system("mosquitto_pub")!, [
            "-h", "127.0.0.1", "-p", String(store.port), "--cafile", store.out + "/clients/ca.crt",
            "-u", "dana", "-P", "by-hand", "-t", "dana/notes", "-m", "hi"], in: store.dir)
        #expect(await dana.waitForExit(timeout: 15) == 0, "\(dana.diagnostics)\n\(broker.diagnostics)")

        // local.acl must begin with a user: a bare topic line would add to the generated file's last user.
        try "topic readwrite #\n".write(toFile: store.out + "/broker/local.acl", atomically: true, encoding: .utf8)
        let refused = try startProgram("beaconctl", ["provision", store.config, "--out", store.out], in: store.dir)
        #expect(await refused.waitForExit(timeout: 60) == 2, "\(refused.diagnostics)")
        #expect(refused.stderr.contains("must follow a \"user NAME\" line"), "\(refused.diagnostics)")
        await broker.stop()
    }

    @Test("the broker reads the provisioned files in place as its own user, mosquitto, whatever --out's mode")
    func brokerUserReadsInPlace() async throws {
        try #require(geteuid() == 0 && getpwnam("mosquitto") != nil, "needs root and the mosquitto user (Debian's mosquitto)")
        let store = try await Self.provision("provision-in-place")
        await store.broker.stop()
        // Mosquitto started as root drops to user mosquitto before it reads the password file
        // and the ACL (its default `user`); the test's directory lets it pass, nothing more.
        chmod(store.dir.path, 0o711)
        let security = try String(contentsOfFile: store.out + "/broker/beaconbridge.conf", encoding: .utf8)
        let configuration = try store.dir.write("in-place.conf", "log_dest stderr\nlog_type all\n" + security)
        let broker = try ChildProcess(Programs.system("mosquitto")!, ["-c", configuration], in: store.dir, name: "mosquitto-in-place")
        var published: Int32?
        _ = await eventually(timeout: 20, interval: 0.5) {
            published = try? await Self.publish(store, as: "operator", "gateways/door/cmd", "{}")
            return published == 0 || !broker.isRunning
        }
        #expect(published == 0, "\(broker.diagnostics)")
        #expect(!broker.stderr.contains("Unable to open"), "\(broker.diagnostics)")
        _ = await broker.stop()
    }

    @Test("each screen logs in as itself with the fleet's web certificate; two on one login are told why they drop")
    func screensAreThemselves() async throws {
        let store = try await Self.provision("provision-screens", extra: ["--display", "lobby", "--display", "till"])
        let users = try await BeaconWebTests.usersFile(in: store.dir)
        func screen(_ user: String?) throws -> ChildProcess {
            var arguments = ["--config", store.config, "--users", users, "--port", "0",
                             "--tls-cert", store.out + "/web/web.crt", "--tls-key", store.out + "/web/web.key"]
            if let user {
                arguments += ["--mqtt-user", user, "--mqtt-password-file", store.out + "/credentials/\(user).password"]
            }
            return try startProgram("beacon-web", arguments, in: store.dir)
        }
        let lobby = try screen("display-lobby"), till = try screen("display-till")
        var url: String?
        _ = await eventually(timeout: 30) {
            url = lobby.stdoutLines.first { $0.hasPrefix("listening on ") }.map { String($0.dropFirst(13)) }
            return url != nil || !lobby.isRunning
        }
        // The page's certificate is the fleet CA's, for the broker's name (127.0.0.1 here).
        let url_ = try #require(url, "\(lobby.diagnostics)")
        #expect(url_.hasPrefix("https://127.0.0.1:"))
        let curl = try ChildProcess(Programs.system("curl")!, ["-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                                               "--cacert", store.out + "/clients/ca.crt", url_ + "/healthz"],
                                    in: store.dir)
        #expect(await curl.waitForExit(timeout: 15) == 0, "\(curl.diagnostics)")
        #expect(curl.stdout == "200", "\(curl.diagnostics)")
        #expect(await eventually(timeout: 20) {
            store.broker.log.contains(" as display-lobby (") && store.broker.log.contains(" as display-till (")
        }, "\(store.broker.diagnostics)")
        #expect(!lobby.stderr.contains("warning") && !till.stderr.contains("warning"), "\(lobby.stderr)\n\(till.stderr)")

        // A second screen on the lobby's login: the broker drops one for the other, over and over.
        let twin = try screen("display-lobby")
        #expect(await eventually(timeout: 45) {
            (lobby.stderr + twin.stderr).contains("another client is probably connected with the same client id \"display-lobby\"")
        }, "\(lobby.diagnostics)\n\(twin.diagnostics)\n\(store.broker.log.suffix(3000))")
        #expect(store.broker.log.contains("already connected, closing old connection"))
        #expect(!till.stderr.contains("same client id"), "\(till.diagnostics)")
        await twin.stop()

        // Without a password: said at start-up, as the gateway and the brain say it.
        let anonymous = try screen(nil)
        #expect(await eventually(timeout: 20) { anonymous.stderr.contains("no broker password") }, "\(anonymous.diagnostics)")
        await anonymous.stop()
        await till.stop()
        await lobby.stop()
        await store.broker.stop()
    }
}

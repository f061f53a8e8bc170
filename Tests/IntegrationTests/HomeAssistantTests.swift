import BeaconKit
import Foundation
import TestSupport
import Testing

/// A real Home Assistant (core 2024.3.3 from PyPI, `scripts/home-assistant --prepare`)
/// reads `beacon-web`'s MQTT discovery for a replayed store, and the test reads what it
/// made of it through Home Assistant's REST API (`/api/states`), as a dashboard would.
///
/// Home Assistant stays on loopback: its configuration.yaml has no `default_config` and no
/// integration but what its REST API and MQTT need; onboarding skips the `core_config`
/// step (its weather integration calls out); `--skip-pip`; and a Python audit hook
/// (`tools/home-assistant/sitecustomize.py`) stops and records every TCP connect, sendto
/// or listening bind beyond loopback and every name resolved other than localhost: the
/// test fails on any. (It also stops the UDP connects with which Home Assistant's network
/// integration learns its source address; they send nothing, and are only listed.)
/// Not installed, so one ERROR line at MQTT's start: its camera platform needs numpy.
///
/// SLOW: Home Assistant takes 10–60 s to start, plus a one-time install (about 140 MB)
/// into BEACONBRIDGE_HA_CACHE. BEACONBRIDGE_SKIP_HA=1 skips it.
@Suite("Home Assistant reads our discovery (slow)", .serialized)
struct HomeAssistantTests {
    static let uuid = BeaconWebTests.uuid
    static let till = "00112233445566778899/aabbccddeeff"

    @Test("each tracker shows its zone, gateways their connectivity and figures, a beacon its battery; entities go when a customer leaves or discovery is turned off",
          .enabled(if: ProcessInfo.processInfo.environment["BEACONBRIDGE_SKIP_HA"] == nil, "BEACONBRIDGE_SKIP_HA is set"),
          .timeLimit(.minutes(15)))
    func realHomeAssistant() async throws {
        let dir = try TemporaryDirectory("home-assistant")
        let hass = try await HomeAssistant.prepared(in: dir)
        let broker = try await MosquittoBroker.start(in: dir)

        // Ana (tag-1, 100/1) by the door, Ben (tag-2, 100/2) at the counter; each gateway hears
        // both; the till tag (Eddystone-UID, with TLM telemetry: 2950 mV, 21.5 °C) by the door.
        let door = try dir.write("door.log", bytes: try BeaconWebTests.capture(ana: -50, ben: -88, till: -55))
        let counter = try dir.write("counter.log", bytes: try BeaconWebTests.capture(ana: -88, ben: -50))
        let extra = """
        "stores": [{"major": 100, "name": "Main Street"}],
        "beacons": [{"uuid": "\(Self.uuid)", "major": 100, "minor": 1, "name": "tag-1"},
                    {"uuid": "\(Self.uuid)", "major": 100, "minor": 2, "name": "tag-2"},
                    {"namespace": "00112233445566778899", "instance": "aabbccddeeff", "name": "till tag", "store": 100}],
        "homeAssistant": {"discovery": true}
        """
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "source": "btsnoop:\#(door)?loop", "zone": "Entrance", "store": 100}"#,
            #"{"id": "counter", "source": "btsnoop:\#(counter)?loop", "zone": "Counter", "store": 100}"#,
        ], extra: extra, defaults: #"{"exitTimeout": 10, "healthInterval": 2}"#)

        var processes: [ChildProcess] = []
        var ha: ChildProcess?
        func failure() -> String {
            processes.map(\.diagnostics).joined(separator: "\n") + "\n" + (ha?.diagnostics ?? "")
                + "\n--- home-assistant.log ---\n" + String(hass.log.suffix(8000)) + "\n" + broker.diagnostics
        }
        do {
            for id in ["door", "counter"] {
                processes.append(try startProgram("beacon-gateway", ["--config", config, "--id", id], in: dir))
            }
            processes.append(try startProgram("beacon-brain", ["--config", config], in: dir))
            var observers: [String: ChildProcess] = [:]
            for (client, name, minor) in [("ana", "Ana", 1), ("ben", "Ben", 2)] {
                let profile = try dir.write("\(client).json", #"{"name": "\#(name)", "favorite": "tea"}"#)
                let observer = try startProgram("beaconctl", ["observe", "--broker", broker.url, "--client", client,
                                                              "--major", "100", "--minor", "\(minor)", "--profile", profile], in: dir)
                observers[client] = observer
                processes.append(observer)
            }
            let (web, _) = try await BeaconWebTests.startWeb(config: config, in: dir)
            processes.append(web)
            ha = try hass.start()
            try await hass.onboard(broker: broker)

            // Every entity, by its friendly name (device name, then entity name unless `name: null`).
            let trackers = ["tag-1": "Entrance", "tag-2": "Counter", "till tag": "Entrance", "Ana": "Entrance", "Ben": "Counter"]
            let all = try await hass.waitForStates(timeout: 120) { states in
                trackers.allSatisfy { states[$0.key]?.state == $0.value }
                    && ["door (Entrance)", "counter (Counter)"].allSatisfy { gateway in
                        states["Gateway \(gateway) Connectivity"]?.state == "on"
                            && (Double(states["Gateway \(gateway) Adverts per second"]?.state ?? "") ?? 0) > 0
                            && states["Gateway \(gateway) Tracked beacons"]?.state == (gateway.hasPrefix("door") ? "3" : "2")
                    }
                    && states["till tag Battery"]?.state == "2950"
            }
            let shownAll = await hass.shown()
            #expect(all != nil, "Home Assistant never showed every entity right: \(shownAll)\n\(failure())")
            if let all {
                for name in trackers.keys {
                    let tracker = all[name]
                    #expect(tracker?.id.hasPrefix("device_tracker.") == true)
                    #expect(tracker?.attributes["source_type"] == .string("bluetooth_le"), "\(name)")
                    // The brain's presence is there too, as attributes.
                    #expect(tracker?.attributes["proximity"]?.stringValue != nil, "\(name): \(String(describing: tracker))")
                }
                #expect(all["Gateway door (Entrance) Connectivity"]?.attributes["device_class"] == .string("connectivity"))
                #expect(all["till tag Battery"]?.attributes["unit_of_measurement"] == .string("mV"))
                #expect(all["till tag Temperature"]?.state == "21.5")
            }

            // Ben leaves (his app says so) and the counter gateway stops: his tracker goes,
            // his tag moves to the door's zone, the counter shows disconnected.
            observers["ben"]?.signal(SIGINT)
            #expect(await processes[1].stop() == 0, "\(failure())")
            let after = try await hass.waitForStates(timeout: 90) { states in
                states["Ben"] == nil && states["tag-2"]?.state == "Entrance" && states["Ana"]?.state == "Entrance"
                    && states["Gateway counter (Counter) Connectivity"]?.state == "off"
                    && states["Gateway counter (Counter) Adverts per second"]?.state == "unavailable"
            }
            let shownAfter = await hass.shown()
            #expect(after != nil, "after Ben left and the counter stopped: \(shownAfter)\n\(failure())")

            // Discovery turned off (the config pushed live): every entity of ours goes.
            let off = try dir.write("fleet-off.json", try String(contentsOfFile: config, encoding: .utf8)
                .replacingOccurrences(of: #""homeAssistant": {"discovery": true}"#, with: #""homeAssistant": {"discovery": false}"#))
            let push = try startProgram("beaconctl", ["config", "push", off, "--broker", broker.url], in: dir)
            #expect(await push.waitForExit(timeout: 30) == 0, "\(push.diagnostics)")
            let ours = ["tag-1", "tag-2", "till tag", "Ana", "till tag Battery", "till tag Temperature", "Gateway door (Entrance) Connectivity",
                        "Gateway door (Entrance) Adverts per second", "Gateway door (Entrance) Tracked beacons",
                        "Gateway counter (Counter) Connectivity"]
            let gone = try await hass.waitForStates(timeout: 60) { states in ours.allSatisfy { states[$0] == nil } }
            let shownGone = await hass.shown()
            #expect(gone != nil, "entities left after discovery was turned off: \(shownGone)\n\(failure())")
        } catch {
            Issue.record("\(error)\n\(failure())")
        }
        if let ha { #expect(await ha.stop(grace: 30) != nil) }
        for process in processes.reversed() { await process.stop() }
        await broker.stop()

        let log = hass.log
        #expect(!log.contains("InvalidStateError"), "\(log.suffix(8000))")
        #expect(!log.contains("Erroneous JSON"), "attributes Home Assistant could not read: \(log.suffix(8000))")
        let beyond = hass.network.split(separator: "\n").filter { !$0.hasPrefix("udp-probe ") }
        #expect(beyond.isEmpty, "Home Assistant tried to go beyond loopback:\n\(hass.network)")
    }
}

/// One Home Assistant of a test: its configuration directory, its REST API on a free
/// loopback port, the owner's token after onboarding.
final class HomeAssistant: @unchecked Sendable {
    struct State: CustomStringConvertible {
        var id: String
        var state: String
        var attributes: JSONValue
        var description: String { "\(id)=\(state)" }
    }

    let directory: TemporaryDirectory
    let venv: String
    let port: UInt16
    var base: String { "http://127.0.0.1:\(port)" }
    var config: String { directory.file("ha-config") }
    var netlog: String { directory.file("ha-network.log") }
    private(set) var token = ""

    private init(directory: TemporaryDirectory, venv: String, port: UInt16) {
        self.directory = directory
        self.venv = venv
        self.port = port
    }

    /// Installs Home Assistant into its cache if it is not there yet (said on stderr first).
    static func prepared(in directory: TemporaryDirectory) async throws -> HomeAssistant {
        let script = Programs.repositoryRoot + "/scripts/home-assistant"
        var check = try ChildProcess(script, ["--check"], in: directory, name: "home-assistant-check")
        if await check.waitForExit(timeout: 30) != 0 {
            FileHandle.standardError.write(Data("""
                Home Assistant test: installing Home Assistant core (about 140 MB) once with scripts/home-assistant --prepare \
                (BEACONBRIDGE_HA_CACHE moves it; BEACONBRIDGE_SKIP_HA=1 skips this test)

                """.utf8))
            let prepare = try ChildProcess(script, ["--prepare"], in: directory, name: "home-assistant-prepare")
            guard await prepare.waitForExit(timeout: 900) == 0 else {
                throw TestFailure("scripts/home-assistant --prepare failed (or set BEACONBRIDGE_SKIP_HA=1)\n\(prepare.diagnostics)")
            }
            check = try ChildProcess(script, ["--check"], in: directory, name: "home-assistant-check")
            guard await check.waitForExit(timeout: 30) == 0 else { throw TestFailure("\(check.diagnostics)") }
        }
        // --check prints the venv.
        let venv = check.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        return HomeAssistant(directory: directory, venv: venv, port: try FreePort.allocate())
    }

    /// Starts it: HTTP on loopback only, no default_config, nothing installed at run time.
    func start() throws -> ChildProcess {
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        _ = try directory.write("ha-config/configuration.yaml", """
            # Home Assistant of BeaconBridge's test: no default_config (it would set up integrations
            # that reach the internet), only what the REST API, onboarding and MQTT need.
            homeassistant:
              name: BeaconBridge test
              latitude: 52.52
              longitude: 13.40
              elevation: 34
              unit_system: metric
              currency: EUR
              country: DE
              time_zone: UTC
            http:
              server_host: 127.0.0.1
              server_port: \(port)
            api:
            config:
            onboarding:
            logger:
              default: info

            """)
        return try ChildProcess(venv + "/bin/hass", ["--config", config, "--skip-pip", "--log-no-color"],
                                environment: ["PYTHONPATH": Programs.repositoryRoot + "/tools/home-assistant",
                                              "BEACONBRIDGE_HA_NETLOG": netlog, "PYTHONDONTWRITEBYTECODE": "1"],
                                in: directory, name: "hass")
    }

    var log: String { (try? String(contentsOfFile: config + "/home-assistant.log", encoding: .utf8)) ?? "" }
    var network: String { (try? String(contentsOfFile: netlog, encoding: .utf8)) ?? "" }

    /// One request to its API through curl: status and body.
    func request(_ path: String, json: String? = nil, form: String? = nil) async throws -> (status: Int, body: String) {
        guard let curl = Programs.system("curl") else { throw TestFailure("curl is not installed: run scripts/install-deps") }
        let out = directory.file("ha-\(UUID().uuidString.prefix(8)).body")
        var arguments = ["-s", "-S", "-o", out, "-w", "%{http_code}", "--max-time", "30", "--noproxy", "*"]
        if !token.isEmpty { arguments += ["-H", "Authorization: Bearer \(token)"] }
        if let json { arguments += ["-H", "Content-Type: application/json", "--data-raw", json] }
        if let form { arguments += ["--data-raw", form] }
        let process = try ChildProcess(curl, arguments + [base + path], in: directory, name: "curl")
        guard await process.waitForExit(timeout: 60) == 0 else { return (0, process.stderr) }
        let body = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        return (Int(process.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0, body)
    }

    func requestJSON(_ path: String, json: String? = nil, form: String? = nil) async throws -> JSONValue {
        let (status, body) = try await request(path, json: json, form: form)
        guard status == 200, let value = try? JSONParser().parse(body) else {
            throw TestFailure("Home Assistant \(path): HTTP \(status): \(body)\n--- log ---\n\(log.suffix(4000))")
        }
        return value
    }

    /// Onboarding's first step only (the owner; no core_config, no analytics), a token, and
    /// the MQTT integration on `broker` through the config flow, as the UI would add it.
    func onboard(broker: MosquittoBroker) async throws {
        let up = await eventually(timeout: 60, interval: 0.5) { (try? await self.request("/api/onboarding"))?.status == 200 }
        guard up else { throw TestFailure("Home Assistant's HTTP API never answered on \(base)") }
        let client = base + "/"
        let user = try await requestJSON("/api/onboarding/users", json: """
            {"client_id": "\(client)", "name": "Store Manager", "username": "manager", "password": "correct horse battery staple", "language": "en"}
            """)
        guard let code = user["auth_code"]?.stringValue else { throw TestFailure("onboarding gave no auth code: \(user.jsonText)") }
        let tokens = try await requestJSON("/auth/token", form: "grant_type=authorization_code&code=\(code)&client_id=\(client)")
        guard let access = tokens["access_token"]?.stringValue else { throw TestFailure("no access token: \(tokens.jsonText)") }
        token = access
        let flow = try await requestJSON("/api/config/config_entries/flow", json: #"{"handler": "mqtt", "show_advanced_options": false}"#)
        guard let id = flow["flow_id"]?.stringValue else { throw TestFailure("no MQTT config flow: \(flow.jsonText)") }
        let entry = try await requestJSON("/api/config/config_entries/flow/\(id)",
                                          json: #"{"broker": "127.0.0.1", "port": \#(broker.port)}"#)
        guard entry["type"]?.stringValue == "create_entry" else { throw TestFailure("MQTT was not added: \(entry.jsonText)") }
    }

    /// Every entity's state, by friendly name.
    func states() async throws -> [String: State] {
        let list = try await requestJSON("/api/states")
        var out: [String: State] = [:]
        for item in list.arrayValue ?? [] {
            guard let id = item["entity_id"]?.stringValue, let state = item["state"]?.stringValue else { continue }
            let attributes = item["attributes"] ?? .object([:])
            out[attributes["friendly_name"]?.stringValue ?? id] = State(id: id, state: state, attributes: attributes)
        }
        return out
    }

    /// The states once `condition` holds of them; `nil` if it never did.
    func waitForStates(timeout: Double, _ condition: ([String: State]) -> Bool) async throws -> [String: State]? {
        var last: [String: State]?
        let held = await eventually(timeout: timeout, interval: 0.5) {
            guard let states = try? await self.states() else { return false }
            last = states
            return condition(states)
        }
        return held ? last : nil
    }

    /// What it shows now, for a failure's message.
    func shown() async -> String {
        guard let states = try? await states() else { return "(no states)" }
        return states.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.state)" }.joined(separator: "; ")
    }
}

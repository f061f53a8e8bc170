import BeaconKit
import Simulation
import Wire
import Foundation
import TestSupport
import Testing

/// Exactly-once effects across broker outages (docs/brain.md "Broker outages"): a replayed
/// store (two `beacon-gateway`s replaying captures, `beacon-brain`, Ana's `beaconctl observe`)
/// runs once without an outage and once with one, and the effects must be equal: Ana's inbox
/// and the rule publishes as multisets, each beacon's presence transitions as a sequence.
///
/// The store, in capture time (`end` = outage + 50 s, so everyone is back well before):
/// 100/1 at the door from 0 to `end`; 100/2 at the door from 0 to 10 s and 100/9 at the
/// counter from 0 to 0.5 s (they exit during the outage); 100/3 at the counter from 15 s to
/// `end` (it enters during the outage), and Ana joins 100/3 at the start. The outage begins
/// once the first effects are seen (about 1 s).
///
/// The gateways replay on one timeline (`--start-at`, as `beaconctl score` starts them), so
/// the run is the same whichever starts first. The same store replayed with the brain or a
/// gateway stopped (SIGSTOP) now and then, as a loaded machine stops them, must decide the
/// same: every decision with its capture time (issue 20 item 3).
///
/// Effects are watched by `mosquitto_sub`; the one that watches after the outage must be
/// connected before anyone else can publish, so the broker comes back with a password file
/// that holds only the watcher, the watcher logs in, and a config reload (SIGHUP) with every
/// part's password lets the others in (each part logs in as its own identity).
@Suite("broker outages: greetings, rules and presence exactly once")
struct BrokerOutageTests {
    enum Stop: String, Sendable { case graceful, sigkill }

    struct Fault: Sendable, CustomStringConvertible {
        var seconds: Int
        var persistence: Bool
        var stop: Stop
        var description: String { "\(seconds) s, \(stop.rawValue), persistence \(persistence ? "on" : "off")" }
    }

    struct Effects: Equatable, CustomStringConvertible {
        /// Ana's inbox without times, sorted.
        var inbox: [String]
        /// `displays/…` publishes, sorted.
        var rules: [String]
        /// Per beacon, its fleet presence as a sequence of zones and `absent`, repeats folded.
        var transitions: [String: [String]]
        /// Per beacon, every zone decision (`beacons/<major>/<minor>/events`: enter, zone,
        /// exit) as published, whole: zone, zone name, `from`, `since` and capture time `ts`.
        var decisions: [String: [String]]
        /// `brain/status` as published live, in order (an `offline` before the last: the broker
        /// dropped the brain, its will).
        var brainStatus: [String] = []

        var description: String {
            "inbox \(inbox)\nrules \(rules)\ntransitions \(transitions)\ndecisions \(decisions)"
        }
    }

    /// The run without an outage, once per capture length, shared by the variants.
    actor Baselines {
        static let shared = Baselines()
        var runs: [Int: Task<Effects, any Error>] = [:]

        func effects(outage seconds: Int) async throws -> Effects {
            if let run = runs[seconds] { return try await run.value }
            let run = Task { try await BrokerOutageTests.run(fault: nil, end: Double(seconds + 50), label: "baseline-\(seconds)") }
            runs[seconds] = run
            return try await run.value
        }
    }

    /// Scheduling hiccups on purpose: the part stopped (SIGSTOP) for `seconds`, then continued,
    /// `times` times, `every` seconds apart, from the first effects on.
    struct Hiccups: Sendable, CustomStringConvertible {
        var part: String
        var seconds: Double
        var times = 4
        var every = 6.0
        /// The rule effect after which they begin (nil: the first effects).
        var after: String? = nil
        /// Every part's `broker.keepalive`: the product's default (30 s) where a stop is a
        /// stall the broker must not notice; 5 s where the stop is meant to outlast it.
        var keepalive = 30
        var description: String { "\(part) stopped \(seconds) s, \(times) times" + (after.map { " after \"\($0)\"" } ?? "") }
    }

    static let watcher = (user: "watch", password: "watch-outage")
    /// Every part's user name (`BrokerIdentity`), all with `watcher.password`.
    static let users = ["watch", "brain", "door", "counter", "ana"]

    @Test("10 s outages", arguments: [
        Fault(seconds: 10, persistence: false, stop: .sigkill), Fault(seconds: 10, persistence: false, stop: .graceful),
        Fault(seconds: 10, persistence: true, stop: .sigkill), Fault(seconds: 10, persistence: true, stop: .graceful),
    ])
    func tenSeconds(_ fault: Fault) async throws {
        try await compare(fault)
    }

    @Test("slow: 60 s outages (about two minutes each, run in parallel)", arguments: [
        Fault(seconds: 60, persistence: false, stop: .sigkill), Fault(seconds: 60, persistence: false, stop: .graceful),
        Fault(seconds: 60, persistence: true, stop: .sigkill), Fault(seconds: 60, persistence: true, stop: .graceful),
    ])
    func sixtySeconds(_ fault: Fault) async throws {
        try await compare(fault)
    }

    /// Reproducible decisions (issue 20 item 3): the same replay again, undisturbed, and with
    /// the brain stopped 2 s or the door's gateway 1 s now and then, the broker paused, or the
    /// brain stopped long enough for the broker to drop it, decides exactly what the baseline
    /// decided: every enter, zone and exit, with its capture time.
    @Test("the same replay decides the same, undisturbed or with hiccups", arguments: [
        nil, Hiccups(part: "beacon-brain", seconds: 2), Hiccups(part: "door", seconds: 1),
        // The broker paused 8 s while 100/3 is at the counter (issue 22): nobody is heard
        // meanwhile, every keepalive runs out, and all come back, the gateways sending the
        // reports they kept.
        Hiccups(part: "mosquitto", seconds: 8, times: 1, after: "displays/enter/3 3 at Counter", keepalive: 5),
        // The same at the first effects: the counter's QoS 1 deletion of 100/9, handed to its
        // client during the pause, came before its reports and ended the visit the brain knew
        // from presence; the reports then began it again (seen by nats6, then 2 runs of 3).
        Hiccups(part: "mosquitto", seconds: 8, times: 1, keepalive: 5),
        // The brain stopped past one and a half keepalives (5 s here) while 100/2 is at the
        // door: the broker drops it (its will), the gateways stay connected and report to no
        // one, and when it is back they send those reports again at its request. Mosquitto
        // 2.0 looks for silent clients every 6 s, so a client silent 8 s is dropped 8-14 s
        // after its last packet: 15 s always is (10 s was not, once). Under CI's load the
        // 2 s stops above were once dropped the same way (100/2's exit at 27.25 s, a hole
        // of 14 s, longer than the 10 s a gateway keeps at a 5 s keepalive): they now run at
        // the product's default keepalive (30 s), where a 2 s stall is no drop.
        Hiccups(part: "beacon-brain", seconds: 15, times: 1, after: "displays/exit/9 9 left", keepalive: 5),
    ])
    func reproducible(_ hiccups: Hiccups?) async throws {
        async let baseline = Baselines.shared.effects(outage: 10)
        let again = try await Self.run(fault: nil, end: 60, label: "again-\(hiccups.map { "\($0.part)-\(Int($0.seconds))s\($0.after == nil ? "" : "-later")" } ?? "undisturbed")", hiccups: hiccups)
        let expected = try await baseline
        func check() {
            #expect(again.decisions == expected.decisions, """
                every decision, \(hiccups?.description ?? "undisturbed"): \(Self.differences(again.decisions, expected.decisions)) \
                differ\n\(again.decisions)\nbaseline \(expected.decisions)
                """)
            #expect(again.inbox == expected.inbox)
            #expect(again.rules == expected.rules)
            #expect(again.transitions == expected.transitions)
            if hiccups?.part == "beacon-brain", hiccups?.times == 1 {
                #expect(again.brainStatus.dropLast().contains("offline"), "the broker dropped the brain: \(again.brainStatus)")
            }
        }
        guard hiccups?.part == "door" else { return check() }
        // Under full-suite load this case differed in every run of 2026-11-28 (never alone):
        // the door's beacons exited about 3 s in and never came back. The cause, found with
        // the door stopped 5 s instead of 1 (BEACONBRIDGE_KEEP_OUTAGE_LOGS keeps every
        // message): the counter's capture is quiet from 0.5 s to 15 s, and its replay cut that
        // stretch to 5 s, so the counter's capture time ran 9.5 s ahead of the door's for the
        // rest of the run. A door silent for `clockHold` (2 s of the brain's running time: a
        // 1 s stop plus starvation) was let go, the brain jumped to the counter's time, the
        // door's beacons were past their exit timeout, and the door's reports stayed 9.5 s
        // behind, dropped for ever. Fixed in BtsnoopSource (replays in step wait out a quiet
        // stretch: `BtsnoopSourceTests`). What stays: a door starved past `clockHold` while
        // the brain runs is let go and, past its exit timeout (3 s here), its beacons exit and
        // come back when it catches up, by design (docs/presence.md); at that load it is not
        // the scenario this case sets, so it records a known issue, not a failure.
        withKnownIssue("a door starved past clockHold and its exit timeout loses its beacons until it catches up",
                       isIntermittent: true) { check() }
    }

    func compare(_ fault: Fault) async throws {
        async let baseline = Baselines.shared.effects(outage: fault.seconds)
        let withOutage = try await Self.run(fault: fault, end: Double(fault.seconds + 50),
                                            label: "outage-\(fault.seconds)-\(fault.stop.rawValue)-\(fault.persistence)")
        let expected = try await baseline
        // The baseline itself is what the rules say.
        #expect(expected.rules == ["displays/enter/1 1 at Entrance", "displays/enter/2 2 at Entrance",
                                   "displays/enter/3 3 at Counter", "displays/enter/9 9 at Counter", "displays/exit/1 1 left",
                                   "displays/exit/2 2 left", "displays/exit/3 3 left", "displays/exit/9 9 left"])
        #expect(expected.inbox.count == 3, "\(expected)")
        #expect(expected.transitions == ["100/1": ["door", "absent"], "100/2": ["door", "absent"],
                                         "100/3": ["counter", "absent"], "100/9": ["counter", "absent"]])
        #expect(expected.decisions.mapValues { $0.compactMap { (try? JSONParser().parse(Array($0.utf8)))?["event"]?.stringValue } }
                == ["100/1": ["enter", "exit"], "100/2": ["enter", "exit"], "100/3": ["enter", "exit"], "100/9": ["enter", "exit"]],
                "\(expected.decisions)")
        // Every decision (issue 20): enter, zone and exit with their capture times, equal to
        // the run without the outage (docs/brain.md, "Broker outages").
        #expect(withOutage.decisions == expected.decisions, """
            every decision, with a \(fault) outage: \(Self.differences(withOutage.decisions, expected.decisions)) differ
            \(withOutage.decisions)\nbaseline \(expected.decisions)
            """)
        #expect(withOutage.inbox == expected.inbox, "with a \(fault) outage")
        #expect(withOutage.rules == expected.rules, "with a \(fault) outage")
        #expect(withOutage.transitions == expected.transitions, "with a \(fault) outage")
    }

    // MARK: - One run of the store

    /// Capture time of both captures' second 0.
    static let captureStart = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!

    static func capture(_ visits: [(minor: UInt16, from: Double, to: Double)]) -> [UInt8] {
        var writer = BtsnoopWriter(datalink: .h4)
        let start = captureStart
        var t = 0.0
        var i = 0
        let end = visits.map(\.to).max() ?? 0
        while t <= end {
            for visit in visits where visit.from <= t && t <= visit.to {
                let jitter = Int8((i * 7) % 5) - 2
                writer.appendEvent(advertisingEvent(IBeacon(uuid: StoreSimulation.defaultUUID, major: 100, minor: visit.minor,
                                                            txPower: -59),
                                                    address: 0xC0_00_00_64_00_00 + UInt64(visit.minor), rssi: -60 + jitter),
                                   at: start + t)
                i += 1
            }
            t += 0.25
        }
        return writer.bytes
    }

    static func run(fault: Fault?, end: Double, label: String, hiccups: Hiccups? = nil) async throws -> Effects {
        let dir = try TemporaryDirectory(label)
        let everyone = try await passwordFile(users, in: dir)
        let onlyWatcher = try await passwordFile([watcher.user], in: dir)
        let passwords = dir.file("passwords")
        try FileManager.default.copyItem(atPath: everyone, toPath: passwords)
        let environment = ["BEACONBRIDGE_MQTT_PASSWORD": watcher.password]
        var extra = "allow_anonymous false\npassword_file \(passwords)\n"
        if fault?.persistence == true {
            extra += "persistence true\npersistence_location \(dir.path)/\nautosave_interval 1\n"
        }
        let broker = try await MosquittoBroker.start(in: dir, extraConfig: extra)
        let door = try dir.write("door.log", bytes: capture([(1, 0, end), (2, 0, 10)]))
        let counter = try dir.write("counter.log", bytes: capture([(9, 0, 0.5), (3, 15, end)]))
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "source": "btsnoop:\#(door)", "zone": "Entrance"}"#,
            #"{"id": "counter", "source": "btsnoop:\#(counter)", "zone": "Counter"}"#,
        ], extra: """
        "stores": [{"major": 100, "name": "Main Street", "ad": {"title": "Deal of the day"}}],
        "rules": [
          {"name": "hello", "when": "join", "then": [{"do": "greeting", "text": "Hello {customer}"}]},
          {"name": "arrive", "when": "enter", "then": [{"do": "publish", "topic": "displays/enter/{minor}", "text": "{minor} at {zone}"},
                                                       {"do": "greeting", "text": "welcome to {zone}"}]},
          {"name": "depart", "when": "exit", "then": [{"do": "publish", "topic": "displays/exit/{minor}", "text": "{minor} left"}]}
        ]
        """, defaults: #"{"exitTimeout": 3}"#, keepalive: hiccups?.keepalive ?? 5)
        let filters = ["observers/+/inbox", "displays/#", "beacons/100/+/presence", "beacons/100/+/events", "brain/status"]
        var watchers = [try await MosquittoSubscriber.start(broker: broker, filters: filters, credentials: watcher, in: dir)]
        var processes: [ChildProcess] = []
        // With BEACONBRIDGE_KEEP_OUTAGE_LOGS=<dir>: every message with its arrival time, kept
        // there (how the replay running ahead below was found).
        let keep = ProcessInfo.processInfo.environment["BEACONBRIDGE_KEEP_OUTAGE_LOGS"]
        let everything = try keep.map { _ in
            try ChildProcess(try #require(Programs.system("mosquitto_sub")),
                             ["-h", "127.0.0.1", "-p", "\(broker.port)", "-u", watcher.user, "-P", watcher.password,
                              "-t", "#", "-F", "%U %t %p"], in: dir, name: "everything")
        }
        func stopAll() async {
            if let everything, let keep {
                _ = await everything.stop()
                try? everything.stdout.write(toFile: "\(keep)/\(label)-everything.log", atomically: true, encoding: .utf8)
            }
            for process in processes.reversed() { await process.stop() }
            for watcher in watchers { await watcher.stop() }
            await broker.stop()
        }
        do {
            processes.append(try startProgram("beacon-brain", ["--config", config], in: dir, environment: environment))
            guard await watchers[0].waitFor(topic: "brain/status", text: "online", timeout: 30) != nil else {
                throw TestFailure("the brain did not come up\n\(processes[0].diagnostics)\n\(broker.diagnostics)")
            }
            let profile = try dir.write("ana.json", #"{"name": "Ana", "favorite": "flat white"}"#)
            processes.append(try startProgram("beaconctl", ["observe", "--broker", broker.url, "--client", "ana",
                                                            "--major", "100", "--minor", "3", "--profile", profile], in: dir,
                                            environment: environment))
            // Both replays' second 0 plays at one wall-clock instant, once both have connected.
            let startAt = CaptureTime(seconds: (Date().timeIntervalSince1970 + 4).rounded()).iso8601
            var parts = ["beacon-brain": processes[0]]
            if let process = broker.process { parts["mosquitto"] = process }
            for id in ["door", "counter"] {
                parts[id] = try startProgram("beacon-gateway", ["--config", config, "--id", id, "--start-at", startAt,
                                                                     "--replay-origin", captureStart.iso8601],
                                             in: dir, environment: environment)
                processes.append(parts[id]!)
            }
            let diagnostics = { processes.map(\.diagnostics).joined(separator: "\n") + "\n" + broker.diagnostics }

            if let hiccups {
                // From the first effects on: the part stops and continues, a few times.
                guard await eventually(timeout: 60, { Self.effects(watchers).rules.contains(hiccups.after ?? "displays/enter/1 1 at Entrance") }),
                      let part = parts[hiccups.part]
                else { throw TestFailure("no effects before the hiccups\n\(diagnostics())") }
                for _ in 0..<hiccups.times {
                    part.signal(SIGSTOP)
                    // The hiccup's length and spacing are the scenario, not a wait for something.
                    try await Task.sleep(nanoseconds: UInt64(hiccups.seconds * 1e9))
                    part.signal(SIGCONT)
                    try await Task.sleep(nanoseconds: UInt64(hiccups.every * 1e9))
                }
            }

            if let fault {
                // The outage begins once the first effects are out.
                let first = await eventually(timeout: 60) {
                    let rules = Self.effects(watchers).rules
                    return ["displays/enter/1 1 at Entrance", "displays/enter/2 2 at Entrance",
                            "displays/enter/9 9 at Counter"].allSatisfy(rules.contains) && Self.effects(watchers).inbox.count >= 2
                }
                guard first else { throw TestFailure("no effects before the outage\n\(Self.effects(watchers))\n\(diagnostics())") }
                switch fault.stop {
                case .graceful: await broker.stop()
                case .sigkill: await broker.kill()
                }
                await watchers[0].stop()
                // The outage itself: its length is the scenario, not a wait for something.
                try await Task.sleep(nanoseconds: UInt64(fault.seconds) * 1_000_000_000)
                // Back, letting in only the watcher first.
                try replace(passwords, with: onlyWatcher)
                try await broker.restart()
                watchers.append(try await MosquittoSubscriber.start(broker: broker, filters: filters,
                                                                    credentials: watcher, in: dir))
                try replace(passwords, with: everyone)
                broker.process?.signal(SIGHUP)
            }

            let exits = ["displays/exit/1 1 left", "displays/exit/2 2 left", "displays/exit/3 3 left", "displays/exit/9 9 left"]
            let done = await eventually(timeout: end + 90, interval: 0.2) {
                let rules = Self.effects(watchers).rules
                return exits.allSatisfy(rules.contains)
            }
            guard done else { throw TestFailure("not every visit ended\n\(Self.effects(watchers))\n\(diagnostics())") }
            // Everyone stops; then a marker says every earlier message has been delivered.
            for process in processes.reversed() {
                process.signal(SIGTERM)
                _ = await process.waitForExit(timeout: 20)
            }
            let marker = try ChildProcess(try #require(Programs.system("mosquitto_pub")),
                                          ["-h", "127.0.0.1", "-p", "\(broker.port)", "-u", watcher.user, "-P", watcher.password,
                                           "-q", "1", "-t", "displays/end", "-m", "end"],
                                          in: dir, name: "marker")
            _ = await marker.waitForExit(timeout: 20)
            guard await watchers.last?.waitFor(topic: "displays/end", timeout: 20) != nil else {
                throw TestFailure("the end marker did not arrive\n\(diagnostics())")
            }
            let effects = Self.effects(watchers)
            if let keep {
                for process in processes { try? process.diagnostics.write(toFile: "\(keep)/\(label)-\(process.name)-\(process.pid).log", atomically: true, encoding: .utf8) }
            }
            await stopAll()
            return effects
        } catch {
            await stopAll()
            throw error
        }
    }

    /// How many decisions one run made that the other did not (each counted once, per beacon).
    static func differences(_ a: [String: [String]], _ b: [String: [String]]) -> Int {
        Set(a.keys).union(b.keys).reduce(0) { sum, beacon in
            var rest = b[beacon] ?? []
            var unmatched = 0
            for decision in a[beacon] ?? [] {
                if let i = rest.firstIndex(of: decision) { rest.remove(at: i) } else { unmatched += 1 }
            }
            return sum + unmatched + rest.count
        }
    }

    /// A Mosquitto password file for `users`, each with `watcher.password`.
    static func passwordFile(_ users: [String], in dir: TemporaryDirectory) async throws -> String {
        let path = try await MosquittoBroker.passwordFile(in: dir, user: users[0], password: watcher.password)
        for user in users.dropFirst() {
            let tool = try ChildProcess(try #require(Programs.system("mosquitto_passwd")), ["-b", path, user, watcher.password],
                                        in: dir, name: "mosquitto_passwd")
            guard await tool.waitForExit(timeout: 20) == 0 else { throw TestFailure("mosquitto_passwd failed\n\(tool.diagnostics)") }
        }
        return path
    }

    /// Puts `source`'s content at `path` (the broker reads it on start and on SIGHUP).
    static func replace(_ path: String, with source: String) throws {
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: source, toPath: path)
    }

    static func effects(_ watchers: [MosquittoSubscriber]) -> Effects {
        effects(records: watchers.flatMap(\.records))
    }

    static func effects(records: [MosquittoSubscriber.Record]) -> Effects {
        var inbox: [String] = []
        var rules: [String] = []
        var transitions: [String: [String]] = [:]
        var decisions: [String: [String]] = [:]
        var brainStatus: [String] = []
        for record in records {
            if record.topic == "brain/status", !record.retained { brainStatus.append(record.text) }
            if record.topic.hasSuffix("/events") {
                decisions[record.topic.split(separator: "/").dropFirst().prefix(2).joined(separator: "/"), default: []]
                    .append(record.text)
                continue
            }
            if record.topic == "observers/ana/inbox", var json = record.json {
                json["ts"] = nil
                inbox.append(JSONValue.object(json).jsonText)
            } else if record.topic.hasPrefix("displays/"), record.topic != "displays/end" {
                rules.append(record.topic + " " + record.text)
            } else if record.topic.hasSuffix("/presence"), !record.retained {
                // Only what was published while a watcher listened: a retained message handed
                // to a watcher as it subscribes is the broker's memory, and a broker SIGKILLed
                // with persistence on comes back with its last autosave's (1 s old), which may
                // still hold a presence the brain deleted just before the kill (seen once in a
                // CI rehearsal: 100/9 counter, absent, counter, absent); the brain deletes it
                // again when it reconnects, which is published live and counted here.
                let beacon = record.topic.split(separator: "/").dropFirst().prefix(2).joined(separator: "/")
                let state = record.payload.isEmpty ? "absent" : (record.json?["zone"]?.stringValue ?? "?")
                if transitions[beacon]?.last != state { transitions[beacon, default: []].append(state) }
            }
        }
        return Effects(inbox: inbox.sorted(), rules: rules.sorted(), transitions: transitions, decisions: decisions,
                       brainStatus: brainStatus)
    }
}

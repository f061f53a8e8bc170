// Over 500 lines: one scenario run (run(fault:): the cluster, the store and its bridge, the brain, the watchers, the replay and the figures) shared by the kill, cut and rolling-restart cases, as one sequence over the same processes.
import BeaconKit
import Foundation
import TestSupport
import Testing

/// Faults of issue 22 item 3 on a 3-node NATS centre: two gateways replay a store into the
/// store's Mosquitto, bridged by `beaconctl bridge` to the cluster (from node 2 on); the brain
/// and Ana's `beaconctl observe` are on the cluster (the brain on node 1, Ana on node 3). Once
/// the first effects are out, node 1 (the brain's) or node 2 (the bridge's) is SIGKILLed, and
/// the brain or the bridge must be seen again from another node; or all three are restarted
/// one by one (SIGTERM), each node holding the retained state again before the next; or
/// node 1 or 2 is cut off from the others and from its clients (network namespaces of the
/// test's own) and healed, the healed node holding the retained state again. What the brain decides is
/// compared with a run without the fault (BrokerOutageTests' comparison): greetings, rule
/// publishes, each beacon's presence transitions, every zone decision with its capture time,
/// the retained state afterwards, and the part back within 5 s.
///
/// That comparison is not yet met every time, and is recorded as a known issue (docs/fleet.md,
/// "What each failure looks like"): the brain is connected to the next node and reading within
/// about a second, but nats-server 2.9 holds every retained publish for 4 s until JetStream
/// has a new leader for `$MQTT_rmsgs` (4-10 s after the kill of a node that led it) and then
/// drops it from the retained store ("unable to store retained message"); and in 1 run of 9 a
/// rule effect came twice, in 2 runs of 3 the brain's presence flapped after the bridge moved.
///
/// A cut is worse for what the brain decides than a kill: nothing tells the clients on the
/// cut-off node. The brain notices by its link timeout (`broker.linkTimeout`, here 1.5 s,
/// below the fleet's 3 s exitTimeout: visits the brain ends for the silence are not begun
/// again when the reports come back, docs/fleet.md), the store's bridge only by its
/// keepalive (Mosquitto 2.0.11 has nothing shorter: about 21 s), and the wills of the parts
/// on it are never seen (docs/fleet.md has the figures).
///
/// Opt-in (`BEACONBRIDGE_NATS_FAULT=1`): about a minute each, up to 3 on this loaded 2-core
/// machine, and what it compares is not yet met every time.
@Suite("NATS centre: a node dies under the brain or the bridge", .serialized,
       .enabled(if: ProcessInfo.processInfo.environment["BEACONBRIDGE_NATS_FAULT"] != nil,
                "opt-in: BEACONBRIDGE_NATS_FAULT=1 (up to 3 minutes, and partly not met on nats-server 2.9: docs/fleet.md)"))
struct NATSNodeFaultTests {
    /// Capture seconds: 100/1 at the door throughout, 100/2 at the door until 10 s, 100/9 at
    /// the counter for 0.5 s, 100/3 at the counter from 15 s.
    static let end = 40.0

    struct Run {
        var effects: BrokerOutageTests.Effects
        /// The retained topics at the end, read from a node left, with the statuses' payloads.
        var retained: [String]
        /// Seconds from the kill to the brain's `online` (the bridge's `1`) again, from the node it
        /// moved to; nil without a fault.
        var back: Double?
        /// A rolling restart's steps, one per node, in order.
        var restarts: [Restart] = []
        /// A cut-off node's figures.
        var cut: Cut?
    }

    /// What a cut and its heal looked like from the centre (the watcher, on node 3).
    struct Cut: CustomStringConvertible {
        /// The heal → the healed node hands a new client the retained `brain/status online`
        /// and `stores/100/bridge 1`; nil: not within 30 s.
        var retainedOnIt: Double?
        /// The statuses the centre saw while the node was cut off, and after the heal
        /// (`brain/status …`, `stores/100/bridge …`).
        var during: [String]
        var afterHeal: [String]

        var description: String {
            "the retained state read from the healed node " + (retainedOnIt.map { String(format: "%.2f s", $0) } ?? "never")
                + " after the heal; statuses at the centre during the cut: \(during), after the heal: \(afterHeal)"
        }
    }

    /// How long a cut lasts (s): longer than 1.5 keepalives of the brain (`broker.keepalive`,
    /// 30 s by default) and of the bridge (`bridge.keepalive`, 10 s), so that the cut-off node
    /// has given its clients up, and sent their wills, before it is back.
    static let cutLength = 50.0

    /// One node's turn in a rolling restart.
    struct Restart: CustomStringConvertible {
        var node: String
        /// SIGTERM → the node takes an MQTT client's QoS 1 publish again.
        var down: Double
        /// The node back → the retained `brain/status online` and `stores/100/bridge 1` read from it.
        var retainedOnIt: Double?
        /// SIGTERM → the brain's `online` (node 1) or the bridge's `1` (node 2) again, from another node.
        var partBack: Double?

        var description: String {
            func f(_ value: Double?) -> String { value.map { String(format: "%.2f s", $0) } ?? "never" }
            return "\(node): back after \(f(down)), the retained state read from it \(f(retainedOnIt)) later"
                + (partBack.map { ", its client seen again from another node after \(f($0))" } ?? "")
        }
    }

    enum Fault {
        /// SIGKILL of one node (0: the brain's, 1: the bridge's).
        case kill(Int)
        /// Each node in turn: SIGTERM, start again, on to the next once it takes clients and
        /// holds the retained state.
        case rollingRestart
        /// One node (0: the brain's, 1: the bridge's) cut off from the two others and from its
        /// clients for `cutLength` s, then healed: each node in a network namespace of its own,
        /// joined to the clients' namespace by a veth pair; the cut takes the node's end down.
        case cut(Int)
    }

    @Test("kill the node the brain is on: the brain moves to another node; what it decides against a run without the fault")
    func brainsNodeDies() async throws {
        try await compare(killing: 0, who: "the brain's online")
    }

    @Test("kill the node the store's bridge is on: the bridge moves to another node; what the brain decides against a run without the fault")
    func bridgesNodeDies() async throws {
        try await compare(killing: 1, who: "the bridge's 1")
    }

    @Test("restart all three nodes one by one: what the brain decides against a run without the fault, the retained state on each node")
    func rollingRestart() async throws {
        async let baseline = Self.run(fault: nil)
        let faulted = try await Self.run(fault: .rollingRestart)
        let expected = try await baseline
        if ProcessInfo.processInfo.environment["BEACONBRIDGE_FLEET_REPORT"] != nil {
            print("NATS rolling restart: " + faulted.restarts.map(\.description).joined(separator: "; "))
        }
        #expect(faulted.restarts.count == 3)
        for restart in faulted.restarts {
            #expect(restart.retainedOnIt != nil, "\(restart.node) came back without the retained state")
        }
        #expect(faulted.retained == expected.retained, "the retained state after the restarts")
        // Not met every time (docs/fleet.md, "What each failure looks like"). 2026-11-29, 5 runs
        // with the replays on one timeline, the decisions equal in none: 100/9's exit at 2.75 s
        // (before the brain asked for holes), then at 0 s instead of 3.5 s where looked at: the brain, moved three times in 3 s, had decided
        // nothing when the bridge came back, and the reconciliation dropped the counter's view
        // of 100/9, which the store's replay no longer held, before its reports came. Before:
        // while the store's
        // bridge moves off node 2 the gateways' RSSI reports are QoS 0 and not queued, so a
        // customer arriving in those seconds is decided from later reports: in 2 runs of 3,
        // 100/3 entered at 16.5 s of capture time instead of 15.0 s, and in one of them a rule
        // effect (displays/exit/9) came twice (the brain's QoS 1 publish sent again after its
        // move, most likely); the third run was equal in everything.
        withKnownIssue("a rolling restart: the reports of the bridge's move are lost (QoS 0), a zone decided later; nats-server 2.9's leader elections as in the kills",
                       isIntermittent: true) {
            #expect(faulted.effects.rules == expected.effects.rules, "rule effects once each, as without the restarts")
            #expect(faulted.effects.inbox == expected.effects.inbox, "greetings once each, as without the restarts")
            #expect(faulted.effects.transitions == expected.effects.transitions)
            #expect(faulted.effects.decisions == expected.effects.decisions, "every decision with its capture time")
            for restart in faulted.restarts {
                #expect((restart.partBack ?? 0) <= 5, "\(restart)")
                #expect((restart.retainedOnIt ?? .infinity) <= 5, "\(restart)")
            }
        }
    }

    /// The centre as it sees a node cut off: a host that lost its network (its link down),
    /// not a process that died. Nothing tells the clients on it, nor it of them: the brain
    /// gives the silent path up after its link timeout and moves on; the bridge after one to
    /// two keepalives (10 s).
    @Test("cut off the brain's node, then the bridge's, from the two others and from its clients, then heal: what the brain decides against a run without the fault",
          .enabled(if: NetworkLab.available, "needs root for ip netns"), arguments: [0, 1])
    func cutOffNode(_ victim: Int) async throws {
        let who = victim == 0 ? "the brain's online" : "the bridge's 1"
        async let baseline = Self.run(fault: nil)
        let faulted = try await Self.run(fault: .cut(victim))
        let expected = try await baseline
        let back = try #require(faulted.back, "\(who) again from another node")
        let cut = try #require(faulted.cut)
        if ProcessInfo.processInfo.environment["BEACONBRIDGE_FLEET_REPORT"] != nil {
            print("NATS cut-off node \(victim + 1): \(who) again \(String(format: "%.2f", back)) s after the cut; \(cut)")
        }
        #expect(cut.retainedOnIt != nil, "the healed node hands out the retained state: \(cut)")
        #expect(faulted.retained == expected.retained, "the retained state after the cut and the heal")
        #expect(!cut.afterHeal.contains("brain/status offline") && !cut.afterHeal.contains("stores/100/bridge 0"),
                "no will of a client the cut-off node gave up arrives after the heal: \(cut)")
        // Not met (docs/fleet.md, "What each failure looks like"), 2 runs of each on 2026-11-28:
        // node 1 cut, the brain gave it up 1.5 s after the cut (its link timeout) and was back
        // on another node after 5.1 and 6.2 s, of which 4 s nats-server 2.9 held its connect
        // ("loading session record … timeout") while $MQTT_sess elected a leader; it decided
        // every visit once, but a departure seen during the gap was decided later than without
        // the cut (100/2's exit at 14.25 s of capture time instead of 13.0 s). Node 2 cut, the
        // bridge moved after 21.7 s (Mosquitto 2.0.11's bridge has only its keepalive, and a
        // 5 s one flapped at the heal: docs/fleet.md), the store's QoS 0 reports of those
        // seconds are lost and the brain ended a visit it stopped hearing about. The healed
        // node served the retained state 8-27 s after the heal.
        withKnownIssue("a cut-off node: the brain back 5-6 s after the cut (nats-server 2.9 holds its connect 4 s while JetStream elects a leader), the bridge after 21 s (Mosquitto 2.0.11: keepalive only), reports of the gap lost (QoS 0), a departure decided later or a visit ended; the healed node slow to serve the retained state",
                       isIntermittent: true) {
            #expect(faulted.effects.rules == expected.effects.rules, "rule effects once each, as without the cut")
            #expect(faulted.effects.inbox == expected.effects.inbox, "greetings once each, as without the cut")
            #expect(faulted.effects.transitions == expected.effects.transitions)
            #expect(faulted.effects.decisions == expected.effects.decisions, "every decision with its capture time")
            #expect(back <= 5, "\(who) seen again within 5 s of node \(victim + 1)'s cut: \(back) s")
            #expect((cut.retainedOnIt ?? .infinity) <= 5, "\(cut)")
        }
    }

    func compare(killing victim: Int, who: String) async throws {
        async let baseline = Self.run(fault: nil)
        let faulted = try await Self.run(fault: .kill(victim))
        let expected = try await baseline
        #expect(expected.effects.rules == ["displays/enter/1 1 at Entrance", "displays/enter/2 2 at Entrance",
                                           "displays/enter/3 3 at Counter", "displays/enter/9 9 at Counter",
                                           "displays/exit/1 1 left", "displays/exit/2 2 left", "displays/exit/3 3 left",
                                           "displays/exit/9 9 left"], "\(expected.effects)")
        let back = try #require(faulted.back, "\(who) again from another node")
        if ProcessInfo.processInfo.environment["BEACONBRIDGE_FLEET_REPORT"] != nil {
            print("NATS node fault: \(who) again \(String(format: "%.2f", back)) s after node \(victim + 1) was killed")
        }
        // Not yet met every time (docs/fleet.md, "What each failure looks like"); recorded, not
        // hidden. nats-server 2.9 holds retained publishes (the brain's `online`, the bridge's
        // `1`) 4 s each while JetStream elects a new leader for MQTT's retained messages, so
        // `back` within 5 s is met only when the dead node led none of them (1.0-1.7 s). The
        // bridge's node killed, 2026-11-29 after a27d742: the retained state as without the
        // fault in 11 of 11 runs, every decision in 10 of 11 (in one, 100/9 exited at 8.75 s, the
        // counter's reports sent again trailing the door's; cause not found). Before it, 100/9
        // exited at 5.5-17.5 s in 8 of 20 runs and the centre kept its presence in 4 of 5
        // (docs/fleet.md). After 8628ccb (filters in few packets), 6 more: every decision in 5,
        // the retained state in 6; `back` once (the missed one: 100/9 at 11.5 s, the counter's
        // deletion dated at the end of a wait for an answer lost with the node; since fd19999
        // dated when made, FleetPresenceOutageTests `.answerLost`). The brain's node killed: every decision in the
        // runs since, but a rule effect published twice in 1 of 9 runs before 8628ccb and 1 of 4
        // after it (the brain's QoS 1 publish sent again after its move). The rolling restart:
        // met in the runs since. Seen earlier and not since: the brain's presence flapping
        // after the bridge moved.
        withKnownIssue("nats-server 2.9 during a JetStream leader election: retained publishes held and dropped; duplicates and flapping seen",
                       isIntermittent: true) {
            #expect(faulted.effects.rules == expected.effects.rules, "rule effects once each, as without the fault")
            #expect(faulted.effects.inbox == expected.effects.inbox, "greetings once each, as without the fault")
            #expect(faulted.effects.transitions == expected.effects.transitions)
            #expect(back <= 5, "\(who) seen again within 5 s of node \(victim + 1)'s death: \(back) s")
            #expect(faulted.effects.decisions == expected.effects.decisions, "every decision with its capture time")
            #expect(faulted.retained == expected.retained, "the retained state after the fault")
        }
    }

    /// `fault`: nil for the baseline.
    static func run(fault: Fault?) async throws -> Run {
        // The node killed or cut off, if any.
        let victim: Int?
        let name: String
        switch fault {
        case .kill(let node)?: (victim, name) = (node, "fault-n\(node + 1)")
        case .cut(let node)?: (victim, name) = (node, "cut-n\(node + 1)")
        case .rollingRestart?: (victim, name) = (nil, "rolling")
        case nil: (victim, name) = (nil, "baseline")
        }
        let dir = try TemporaryDirectory("nats-\(name)")
        // A cut needs a network to cut: a namespace per node and one for every client (the
        // store's broker, its gateways, the brain, Ana, the test's subscribers), the nodes'
        // links meeting there, which routes between them.
        var lab: NetworkLab?
        var links: [NetworkLab.Link] = []
        var placement: NATSCluster.Placement?
        if case .cut? = fault {
            let made = try NetworkLab()
            lab = made
            let hub = try made.namespace("hub")
            try made.forward(in: hub)
            let spokes = try (1...3).map { try made.namespace("n\($0)") }
            links = try spokes.map { try made.link(hub, $0, subnet: 214) }
            for (i, link) in links.enumerated() {
                for other in links where other.name != link.name {
                    try made.route(in: spokes[i], to: other.b.address, via: link.a.address)
                }
            }
            placement = NATSCluster.Placement(hosts: links.map(\.b.address), namespaces: spokes, clients: hub)
        }
        defer { lab?.destroy() }
        let hub = placement?.clients
        let cluster = try await NATSCluster.start(in: dir, placement: placement)
        let ports = cluster.nodes.map(\.ports.mqtt)
        let hosts = cluster.nodes.map(\.host)
        func url(from first: Int) -> String {
            "mqtt://" + (0..<3).map { "\(hosts[(first + $0) % 3]):\(ports[(first + $0) % 3])" }.joined(separator: ",")
        }
        /// A program of the package, in the clients' namespace when there is one.
        func start(_ program: String, _ arguments: [String]) throws -> ChildProcess {
            guard let hub else { return try startProgram(program, arguments, in: dir) }
            let command = hub.wrap(Programs.built(program), arguments)
            return try ChildProcess(command.program, command.arguments, in: dir, name: program)
        }
        func subscriber(on node: Int, _ filters: [String]) async throws -> MosquittoSubscriber {
            try await MosquittoSubscriber.start(host: hosts[node], port: ports[node], filters: filters, qos: 0, namespace: hub, in: dir,
                                                diagnostics: cluster.diagnostics)
        }
        let storePort = try FreePort.allocate()
        let door = try dir.write("door.log", bytes: BrokerOutageTests.capture([(1, 0, end), (2, 0, 10)]))
        let counter = try dir.write("counter.log", bytes: BrokerOutageTests.capture([(9, 0, 0.5), (3, 15, end)]))
        let nodes = (0..<3).map { i in
            #"{"name": "n\#(i + 1)", "host": "\#(hosts[i])", "mqttPort": \#(ports[i]), "clusterPort": \#(cluster.nodes[i].ports.cluster), "#
                + #""clientPort": \#(cluster.nodes[i].ports.client)}"#
        }
        let fleet = try dir.write("fleet.json", """
        {
          "broker": { "url": "\(url(from: 0))", "allowPlaintext": true, "linkTimeout": 1.5 },
          "centre": { "kind": "nats", "nodes": [\(nodes.joined(separator: ", "))] },
          "bridge": { "url": "\(url(from: 1))" },
          "brain": { "joins": "open" },
          "defaults": { "exitTimeout": 3 },
          "gateways": [ { "id": "door", "source": "btsnoop:\(door)", "zone": "Entrance", "store": 100 },
                        { "id": "counter", "source": "btsnoop:\(counter)", "zone": "Counter", "store": 100 } ],
          "stores": [ { "major": 100, "name": "Main Street", "ad": { "title": "Deal of the day" },
                        "broker": { "url": "mqtt://127.0.0.1:\(storePort)" } } ],
          "rules": [
            { "name": "hello", "when": "join", "then": [ { "do": "greeting", "text": "Hello {customer}" } ] },
            { "name": "arrive", "when": "enter", "then": [ { "do": "publish", "topic": "displays/enter/{minor}", "text": "{minor} at {zone}" },
                                                         { "do": "greeting", "text": "welcome to {zone}" } ] },
            { "name": "depart", "when": "exit", "then": [ { "do": "publish", "topic": "displays/exit/{minor}", "text": "{minor} left" } ] }
          ]
        }
        """)
        let bridgeTool = try startProgram("beaconctl", ["bridge", fleet, "--store", "100", "--out", dir.file("bridges")], in: dir)
        try #require(await bridgeTool.waitForExit(timeout: 30) == 0, "\(bridgeTool.diagnostics)")
        let bridge = try String(contentsOfFile: dir.file("bridges/bridge-100.conf"), encoding: .utf8)
        let store: MosquittoBroker
        do {
            store = try await MosquittoBroker.start(in: dir, extraConfig: bridge, port: storePort, namespace: hub)
        } catch {
            await cluster.stop()
            throw error
        }

        let filters = ["observers/+/inbox", "displays/#", "beacons/100/+/presence", "beacons/100/+/events", "brain/status"]
        // The test's own subscribers take QoS 0: on nats-server a QoS 1 subscription is a JetStream
        // consumer, which a node may refuse ("Unable to add JetStream consumer") or stall while
        // JetStream elects new leaders after the kill; what they watch must not depend on that.
        let watcher: MosquittoSubscriber
        do {
            // `test/mark`: the test's own markers (no effect reads them).
            watcher = try await subscriber(on: 2, filters + ["stores/100/bridge", "test/mark"])
        } catch {
            await store.stop()
            await cluster.stop()
            throw error
        }
        var processes: [ChildProcess] = []
        var others: [MosquittoSubscriber] = []
        // With BEACONBRIDGE_KEEP_OUTAGE_LOGS: the gateways' reports as the brain's node hands them out.
        let keep = ProcessInfo.processInfo.environment["BEACONBRIDGE_KEEP_OUTAGE_LOGS"]
        let reports = keep == nil ? nil : try? await subscriber(on: 0, ["gateways/+/rssi", "gateways/+/cmd"])
        if let reports { others.append(reports) }
        func stopAll() async {
            for process in processes.reversed() { await process.stop() }
            for subscriber in others + [watcher] { await subscriber.stop() }
            await store.stop()
            await cluster.stop()
        }
        do {
            let diagnostics = { processes.map(\.diagnostics).joined(separator: "\n") + "\n" + store.diagnostics + "\n" + cluster.diagnostics }
            guard await watcher.waitFor(topic: "stores/100/bridge", text: "1", timeout: 60) != nil else {
                throw TestFailure("the store's bridge did not connect\n\(diagnostics())")
            }
            processes.append(try start("beacon-brain", ["--config", fleet]))
            guard await watcher.waitFor(topic: "brain/status", text: "online", timeout: 60) != nil else {
                throw TestFailure("the brain did not come up\n\(diagnostics())")
            }
            var gateways: [ChildProcess] = []
            let profile = try dir.write("ana.json", #"{"name": "Ana", "favorite": "flat white"}"#)
            processes.append(try start("beaconctl", ["observe", "--config", fleet, "--broker", url(from: 2), "--client", "ana",
                                                     "--major", "100", "--minor", "3", "--profile", profile]))
            // Both replays' second 0 plays at one wall-clock instant (`--start-at`, as BrokerOutageTests
            // and `beaconctl score` start them), as real gateways share the wall clock: replayed alone,
            // the counter's quiet 14.5 s would be cut to 5 s and its capture time run 9.5 s ahead of
            // the door's, so that a door the brain stops waiting for during the fault could never
            // catch up (its reports behind what the brain decided, dropped).
            let startAt = CaptureTime(seconds: (Date().timeIntervalSince1970 + 4).rounded()).iso8601
            for id in ["door", "counter"] {
                gateways.append(try start("beacon-gateway", ["--config", fleet, "--id", id, "--start-at", startAt,
                                                             "--replay-origin", BrokerOutageTests.captureStart.iso8601]))
                processes.append(gateways.last!)
            }

            var back: Double?
            var restarts: [Restart] = []
            var cutFigures: Cut?
            // A rolling restart takes node 3 away from the watcher too: a second watcher on
            // node 1 (restarted first, back by then) reads what comes while node 3 is down.
            var stand: (watcher: MosquittoSubscriber, from: Int, cut: Int)?
            if case .rollingRestart? = fault {
                let first = await eventually(timeout: 60) {
                    let effects = BrokerOutageTests.effects([watcher])
                    return ["displays/enter/1 1 at Entrance", "displays/enter/2 2 at Entrance",
                            "displays/enter/9 9 at Counter"].allSatisfy(effects.rules.contains) && effects.inbox.count >= 2
                }
                guard first else { throw TestFailure("no effects before the restarts\n\(diagnostics())") }
                for (i, node) in cluster.nodes.enumerated() {
                    if i == 2 {
                        let second = try await MosquittoSubscriber.start(port: ports[0], filters: filters + ["stores/100/bridge"], qos: 0,
                                                                         in: dir, diagnostics: cluster.diagnostics)
                        others.append(second)
                        stand = (second, second.records.count, watcher.records.count)
                    }
                    let part: (topic: String, text: String)? = i == 0 ? ("brain/status", "online") : i == 1 ? ("stores/100/bridge", "1") : nil
                    let before = part.map { part in watcher.records.filter { $0.topic == part.topic && $0.text == part.text }.count } ?? 0
                    let stopped = Date()
                    await node.stop()
                    try await node.start()
                    try await cluster.waitUntilReady()
                    let down = Date().timeIntervalSince(stopped)
                    let up = Date()
                    // The retained state as the restarted node hands it to a new client.
                    let reader = try await MosquittoSubscriber.start(port: ports[i], filters: ["brain/status", "stores/100/bridge"], qos: 0,
                                                                     in: dir)
                    others.append(reader)
                    let held = await eventually(timeout: 30, interval: 0.02) {
                        reader.records.contains { $0.retained && $0.topic == "brain/status" && $0.text == "online" }
                            && reader.records.contains { $0.retained && $0.topic == "stores/100/bridge" && $0.text == "1" }
                    }
                    let retainedOnIt = held ? Date().timeIntervalSince(up) : nil
                    var partBack: Double?
                    if let part {
                        let watching = i == 2 ? stand!.watcher : watcher
                        if await eventually(timeout: 30, interval: 0.02, {
                            watching.records.filter { $0.topic == part.topic && $0.text == part.text }.count > before
                        }) {
                            partBack = Date().timeIntervalSince(stopped)
                        }
                    }
                    restarts.append(Restart(node: node.name, down: down, retainedOnIt: retainedOnIt, partBack: partBack))
                }
            }
            if case .cut(let node)? = fault, let lab {
                let first = await eventually(timeout: 60) {
                    let effects = BrokerOutageTests.effects([watcher])
                    return ["displays/enter/1 1 at Entrance", "displays/enter/2 2 at Entrance",
                            "displays/enter/9 9 at Counter"].allSatisfy(effects.rules.contains) && effects.inbox.count >= 2
                }
                guard first else { throw TestFailure("no effects before the cut\n\(diagnostics())") }
                let (topic, text) = node == 0 ? ("brain/status", "online") : ("stores/100/bridge", "1")
                let before = watcher.records.filter { $0.topic == topic && $0.text == text }.count
                let cutIndex = watcher.records.count
                let cutAt = Date()
                try lab.set(links[node], up: false)
                let moved = await eventually(timeout: Self.cutLength + 30, interval: 0.02) {
                    watcher.records.filter { $0.topic == topic && $0.text == text }.count > before
                }
                if moved { back = Date().timeIntervalSince(cutAt) }
                #expect(moved, "\(topic) \(text) did not come again from another node\n\(diagnostics())")
                let rest = Self.cutLength - Date().timeIntervalSince(cutAt)
                if rest > 0 { try await Task.sleep(for: .seconds(rest)) }
                let healIndex = watcher.records.count
                try lab.set(links[node], up: true)
                let healed = Date()
                // The retained state as the healed node hands it to a new client, once it takes one.
                var reader: MosquittoSubscriber?
                while reader == nil, Date().timeIntervalSince(healed) < 30 {
                    reader = try? await subscriber(on: node, ["brain/status", "stores/100/bridge"])
                    if reader == nil { try await Task.sleep(for: .milliseconds(200)) }
                }
                if let reader { others.append(reader) }
                let held = await eventually(timeout: 30, interval: 0.02) {
                    let records = reader?.records ?? []
                    return records.contains { $0.retained && $0.topic == "brain/status" && $0.text == "online" }
                        && records.contains { $0.retained && $0.topic == "stores/100/bridge" && $0.text == "1" }
                }
                let retainedOnIt = held ? Date().timeIntervalSince(healed) : nil
                // Late news of the cut: what the node held for its clients, given to the others,
                // goes over its routes ahead of a marker a client publishes through it once it
                // serves the retained state again (rather than 3 s of waiting). A will the node
                // makes only after the heal (a client it gives up then) is bounded by neither:
                // 2 of 3 runs with the marker saw one (brain/status offline, stores/100/bridge 0)
                // before the marker; the one run with the 3 s wait saw none.
                let mark = "healed \(node)"
                var marked = await NATSCluster.publish(host: hosts[node], port: ports[node], topic: "test/mark", payload: mark, qos: 0,
                                                       namespace: hub, in: dir) == 0
                if marked {
                    marked = await eventually(timeout: 30, interval: 0.02) {
                        watcher.records.contains { $0.topic == "test/mark" && $0.text == mark }
                    }
                }
                #expect(marked, "a marker through the healed node \(node + 1) reached the centre's watcher\n\(diagnostics())")
                let statuses: (ArraySlice<MosquittoSubscriber.Record>) -> [String] = { records in
                    records.filter { $0.topic == "brain/status" || $0.topic == "stores/100/bridge" }.map { "\($0.topic) \($0.text)" }
                }
                let now = watcher.records
                cutFigures = Cut(retainedOnIt: retainedOnIt, during: statuses(now[cutIndex..<healIndex]), afterHeal: statuses(now[healIndex...]))
            }
            if case .kill(let victim)? = fault {
                let first = await eventually(timeout: 60) {
                    let effects = BrokerOutageTests.effects([watcher])
                    return ["displays/enter/1 1 at Entrance", "displays/enter/2 2 at Entrance",
                            "displays/enter/9 9 at Counter"].allSatisfy(effects.rules.contains) && effects.inbox.count >= 2
                }
                guard first else { throw TestFailure("no effects before the fault\n\(diagnostics())") }
                // The brain's `online`, or the bridge's `1`, is what it publishes when it has connected.
                let (topic, text) = victim == 0 ? ("brain/status", "online") : ("stores/100/bridge", "1")
                let before = watcher.records.filter { $0.topic == topic && $0.text == text }.count
                let killed = Date()
                await cluster.nodes[victim].kill()
                let moved = await eventually(timeout: 30, interval: 0.02) {
                    watcher.records.filter { $0.topic == topic && $0.text == text }.count > before
                }
                if moved { back = Date().timeIntervalSince(killed) }
                #expect(moved, "\(topic) \(text) did not come again from another node\n\(diagnostics())")
            }

            let exits = ["displays/exit/1 1 left", "displays/exit/2 2 left", "displays/exit/3 3 left", "displays/exit/9 9 left"]
            // What the centre saw: the watcher's records, and during node 3's turn the stand-in's
            // (until the watcher's node is back, from the moment it went).
            let seen: () -> [MosquittoSubscriber.Record] = {
                guard let stand else { return watcher.records }
                // Not what node 1 handed the stand-in as it subscribed: the retained state.
                let standIn = stand.watcher.records.dropFirst(stand.from).filter { !$0.retained }
                let mine = watcher.records
                return Array(mine.prefix(stand.cut)) + standIn
            }
            let done = await eventually(timeout: end + 90, interval: 0.2) {
                let rules = BrokerOutageTests.effects(records: seen()).rules
                guard case .cut? = fault else { return exits.allSatisfy(rules.contains) }
                // A cut can hide a whole visit from the brain (its node's, while its keepalive
                // runs out): done once the captures are over and every visit it began has ended.
                let minors = { (kind: String) in Set(rules.filter { $0.hasPrefix("displays/\(kind)/") }.map { $0.split(separator: " ")[0] }
                                                        .map { $0.split(separator: "/").last ?? "" }) }
                return gateways.allSatisfy { $0.stderr.contains("source finished") } && !minors("enter").isEmpty
                    && minors("enter") == minors("exit")
            }
            guard done else { throw TestFailure("not every visit ended\n\(BrokerOutageTests.effects(records: seen()))\n\(diagnostics())") }
            // The retained state, from node 2 (node 3 when node 2 was killed), while everyone still runs.
            // The brain's status last: nats-server answered the filters' retained messages in
            // their order in every run seen here, so it comes after the others.
            let reader = try await subscriber(on: victim == 1 ? 2 : 1, ["beacons/#", "gateways/+/status", "stores/#", "observers/+/status",
                                                                        "brain/status"])
            others.append(reader)
            _ = await reader.waitFor(timeout: 20) { $0.topic == "brain/status" && $0.retained }
            for process in processes.reversed() {
                process.signal(SIGTERM)
                _ = await process.waitForExit(timeout: 20)
            }
            // nats-server 2.9 drops a QoS 1 publish it takes while JetStream elects leaders after
            // a heal ("timeout for request type MS" on $MQTT.msgs, seen once right after a cut):
            // the marker is published again until it arrives (no effect reads displays/end).
            var ended = false
            for _ in 0..<4 where !ended {
                if await NATSCluster.publish(host: hosts[2], port: ports[2], topic: "displays/end", payload: "end", namespace: hub,
                                             in: dir) == 0 {
                    ended = await (stand?.watcher ?? watcher).waitFor(topic: "displays/end", timeout: 15) != nil
                }
            }
            guard ended else {
                throw TestFailure("the end marker did not arrive\n\(diagnostics())")
            }
            let retained = reader.records.filter(\.retained).map { record in
                record.topic.hasSuffix("/status") || record.topic.hasSuffix("/bridge") ? "\(record.topic) \(record.text)" : record.topic
            }.sorted()
            if let keep {
                try? (reports?.records ?? []).map(\.description).joined(separator: "\n")
                    .write(toFile: "\(keep)/nats-\(name)-reports.log", atomically: true, encoding: .utf8)
                try? diagnostics().write(toFile: "\(keep)/nats-\(name).log", atomically: true, encoding: .utf8)
                try? store.log.write(toFile: "\(keep)/nats-\(name)-store.log", atomically: true, encoding: .utf8)
                for node in cluster.nodes {
                    try? node.log.write(toFile: "\(keep)/nats-\(name)-\(node.name).log", atomically: true, encoding: .utf8)
                }
                try? watcher.records.map(\.description).joined(separator: "\n")
                    .write(toFile: "\(keep)/nats-\(name)-watcher.log", atomically: true, encoding: .utf8)
            }
            let run = Run(effects: BrokerOutageTests.effects(records: seen()), retained: retained, back: back, restarts: restarts,
                          cut: cutFigures)
            await stopAll()
            return run
        } catch {
            await stopAll()
            throw error
        }
    }
}

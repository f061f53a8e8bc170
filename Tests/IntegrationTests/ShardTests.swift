import BeaconKit
import Foundation
import TestSupport
import Testing

/// Two brains split 100 stores (`beacon-brain --shard`); one is killed and the other stands
/// in for its stores until it is back, answering nothing twice.
@Suite("brains in shards: a killed brain's stores are taken over")
struct ShardTests {
    static func fleet(_ dir: TemporaryDirectory, broker: MosquittoBroker) throws -> String {
        try dir.write("fleet.json", """
        {
          "broker": { "url": "\(broker.url)", "keepalive": 5 },
          "stores": [ { "major": 100, "ad": { "deal": "a" } }, { "major": 175, "ad": { "deal": "b" } } ],
          "rules": [
            { "name": "in", "when": "enter", "then": [ { "do": "publish", "topic": "log/{store}/enter", "text": "{minor}" } ] },
            { "name": "out", "when": "exit", "then": [ { "do": "publish", "topic": "log/{store}/exit", "text": "{minor}" } ] }
          ],
          "brain": { "joins": "open", "shards": [ { "name": "a", "stores": ["100-149"] }, { "name": "b", "stores": ["150-199"] } ] }
        }
        """)
    }

    static func brain(_ shard: String, _ fleet: String, in dir: TemporaryDirectory) throws -> ChildProcess {
        try startProgram("beacon-brain", ["--config", fleet, "--shard", shard, "--log-level", "info"], in: dir)
    }

    /// Waits until `brain` has settled `count` shards' brains.
    static func settled(_ brain: ChildProcess, count: Int = 1) async -> Bool {
        await eventually(timeout: 60) {
            brain.stderr.components(separatedBy: "settled from retained state").count - 1 >= count || !brain.isRunning
        } && brain.isRunning
    }

    @Test("one of two brains killed: the other answers for its stores, then hands them back")
    func takeover() async throws {
        let dir = try TemporaryDirectory("shards")
        let broker = try await MosquittoBroker.start(in: dir)
        let fleet = try Self.fleet(dir, broker: broker)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["observers/+/inbox", "log/#", "brain/shards/#"],
                                                        in: dir)
        let a = try Self.brain("a", fleet, in: dir)
        var b = try Self.brain("b", fleet, in: dir)
        #expect(await Self.settled(a), "\(a.diagnostics)")
        #expect(await Self.settled(b), "\(b.diagnostics)")

        // A customer at store 160 (shard b) and two joins, one per shard.
        #expect(await broker.publish("gateways/door/status", "online", retain: true))
        #expect(await broker.publish("beacons/160/1/presence/door",
                                     #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":160,"minor":1,"gateway":"door","zone":"Door","proximity":"near","rssiSmoothed":-60.0,"distance":1.5,"since":"2026-11-21T09:00:00.000Z"}"#, retain: true))
        #expect(await watch.waitFor(topic: "log/160/enter", text: "1", timeout: 30) != nil, "\(b.diagnostics)")
        for (client, beacon) in [("ana", "120/1"), ("ben", "170/1")] {
            #expect(await broker.publish("observers/\(client)/status", "online", retain: true))
            #expect(await broker.publish("beacons/\(beacon)/observers/\(client)", #"{"state":"joined"}"#, retain: true))
            #expect(await watch.waitFor(topic: "observers/\(client)/inbox", timeout: 30) != nil)
        }

        // Brain b dies; a join for its stores comes in.
        b.signal(SIGKILL)
        await b.waitForExit()
        let killed = Date()
        #expect(await broker.publish("observers/cleo/status", "online", retain: true))
        #expect(await broker.publish("beacons/175/1/observers/cleo", #"{"state":"joined"}"#, retain: true))
        let answered = await watch.waitFor(topic: "observers/cleo/inbox", timeout: 60)
        #expect(answered?.json?["ad"]?.objectValue?["deal"] == .string("b"), "\(a.diagnostics)")
        let takeover = Date().timeIntervalSince(killed)
        if ProcessInfo.processInfo.environment["BEACONBRIDGE_FLEET_REPORT"] != nil {
            FileHandle.standardError.write(Data("fleet: shard b's stores answered by shard a \(String(format: "%.2f", takeover)) s after b was killed\n".utf8))
        }
        #expect(a.stderr.contains("standing in for it"))
        #expect(await watch.waitFor(timeout: 10) { $0.topic == "brain/shards/b/holder" && $0.text == "a" } != nil)

        // The stand-in carries on what b answered: no second enter, no second reply to ben;
        // the customer leaves: one exit.
        #expect(await broker.publish("beacons/160/1/presence/door", "", retain: true))
        #expect(await watch.waitFor(topic: "log/160/exit", text: "1", timeout: 30) != nil)
        #expect(watch.records.filter { $0.topic == "log/160/enter" }.count == 1)
        #expect(watch.records.filter { $0.topic == "observers/ben/inbox" }.count == 1)

        // b is back: a hands its stores over, b answers what comes next, once.
        b = try Self.brain("b", fleet, in: dir)
        #expect(await eventually(timeout: 60) { a.stderr.contains("handing the shard over") }, "\(a.diagnostics)")
        #expect(await Self.settled(b), "\(b.diagnostics)")
        #expect(await watch.waitFor(timeout: 30) { $0.topic == "brain/shards/b/holder" && $0.text.isEmpty } != nil)
        #expect(await broker.publish("observers/dan/status", "online", retain: true))
        #expect(await broker.publish("beacons/180/1/observers/dan", #"{"state":"joined"}"#, retain: true))
        #expect(await watch.waitFor(topic: "observers/dan/inbox", timeout: 30) != nil)
        #expect(await broker.publish("observers/eve/status", "online", retain: true))
        #expect(await broker.publish("beacons/181/1/observers/eve", #"{"state":"joined"}"#, retain: true))
        #expect(await watch.waitFor(topic: "observers/eve/inbox", timeout: 30) != nil)
        #expect(watch.records.filter { $0.topic == "observers/dan/inbox" }.count == 1, "answered by one brain only")
        #expect(watch.records.filter { $0.topic == "observers/cleo/inbox" }.count == 1)

        await b.stop()
        await a.stop()
        await watch.stop()
        await broker.stop()
    }
}

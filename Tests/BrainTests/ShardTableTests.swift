import BeaconKit
import Contract
import BrainCore
import Config
import Testing

@Suite("brain shards: who answers for which stores")
struct ShardTableTests {
    static let shards = [BrainShard(name: "a", stores: [1]), BrainShard(name: "b", stores: [2]),
                         BrainShard(name: "c", stores: [3])]

    @Test func aShardWhoseBrainIsGoneIsAnsweredByTheNextOneOnline() {
        var a = ShardTable(shards: Self.shards, me: "a")
        var b = ShardTable(shards: Self.shards, me: "b")
        for name in ["a", "b", "c"] {
            a.status(of: name, .online)
            b.status(of: name, .online)
        }
        #expect(a.covered.isEmpty && b.covered.isEmpty)
        #expect(a.mayRunOwnShard)
        // c dies: its successor (round the end) is a.
        a.status(of: "c", .offline)
        b.status(of: "c", .offline)
        #expect(a.covered == ["c"])
        #expect(b.covered.isEmpty)
        // b dies too: a answers for both.
        a.status(of: "b", .offline)
        #expect(a.covered == ["b", "c"])
        #expect(a.successor(of: "b") == "a")
        // A shard that never said anything counts as gone.
        var fresh = ShardTable(shards: Self.shards, me: "b")
        fresh.status(of: "b", .online)
        #expect(fresh.covered == ["a", "c"])
    }

    @Test func aShardsOwnBrainWaitsUntilItsStandInLetsGo() {
        var b = ShardTable(shards: Self.shards, me: "b")
        b.status(of: "a", .online)
        b.holder(of: "b", "a")
        #expect(!b.mayRunOwnShard, "a live stand-in holds b")
        b.holder(of: "b", "")
        #expect(b.mayRunOwnShard)
        b.holder(of: "b", "a")
        b.status(of: "a", .offline)
        #expect(b.mayRunOwnShard, "a stand-in that died holds nothing")
        b.holder(of: "zzz", "a")
        b.status(of: "zzz", .online)
        #expect(b.holders["zzz"] == nil && b.statuses["zzz"] == nil, "shards not in the config are ignored")
    }

    @Test func shardTopics() {
        let topics = Topics(prefix: "acme")
        #expect(topics.shardStatus("a") == "acme/brain/shards/a/status")
        #expect(topics.parse("acme/brain/shards/a/holder") == .shardHolder("a"))
        #expect(topics.parse("acme/brain/shards/a/status") == .shardStatus("a"))
        #expect(topics.parse("acme/brain/shards/a/sync") == .shardSync("a"))
        #expect(topics.parse("brain/shards/a/status") == nil)
        #expect(topics.shardFilters == ["acme/brain/shards/+/status", "acme/brain/shards/+/holder"])
    }

    @Test func shardsInTheConfig() throws {
        let config = try FleetConfig.parse(#"{"brain": {"shards": [{"name": "a", "stores": [7, "100-102"]}, {"name": "b", "stores": ["103-103"]}]}}"#)
        #expect(config.brain.shards == [BrainShard(name: "a", stores: [7, 100, 101, 102]), BrainShard(name: "b", stores: [103])])
        #expect(throws: ConfigErrors.self) {
            try FleetConfig.parse(#"{"brain": {"shards": [{"name": "a", "stores": ["9-3"]}]}}"#)
        }
        do {
            _ = try FleetConfig.parse(#"{"brain": {"shards": [{"name": "a", "stores": [1, 2]}, {"name": "b", "stores": [2]}, {"name": "a", "stores": [5]}, {"name": "c/d", "stores": []}]}}"#)
            Issue.record("accepted")
        } catch {
            #expect(error.errors.map(\.description) == [
                "brain.shards[1].stores: store 2 is in shard \"a\" already",
                "brain.shards[2].name: \"a\" names another shard too",
                "brain.shards[3].name: \"c/d\" contains '/'",
            ])
        }
    }
}

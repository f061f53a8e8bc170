import BeaconKit
import Brain
import Config
import LiveClock
import Logging
import TestSupport
import Testing

/// A brain of a sharded fleet stands in for a silent shard after `startGrace` of its
/// clock (`BrainService.Options.clock`), not of the machine's.
@Suite("Shard supervisor on a manual clock", .capturingLogs)
struct ShardClockTests {
    @Test("a shard whose brain never spoke is stood in for once the start grace has passed on the supervisor's clock")
    func startGraceOnTheClock() async throws {
        let directory = try TemporaryDirectory("shard-clock")
        let broker = try await MosquittoBroker.start(in: directory)
        let config = try FleetConfig.parse("""
            {"broker": {"url": "\(broker.url)", "keepalive": 5},
             "brain": {"joins": "open", "shards": [{"name": "a", "stores": ["100-149"]}, {"name": "b", "stores": ["150-199"]}]}}
            """)
        let clock = ManualClock(at: WallTime(iso8601: "2026-11-21T10:00:00.000Z")!)
        var brain = BrainService.Options(clientID: "brain-shard-clock")
        brain.clock = clock
        brain.reconnectDelay = 0.1...1
        var options = ShardSupervisor.Options(brain: brain)
        options.startGrace = 5
        let supervisor = try ShardSupervisor(config: config, shard: "a", password: nil,
                                             logger: Logger(label: "brain-shard-test"), options: options)
        let running = Task { try await supervisor.run() }
        func advance(by seconds: Double) async {
            clock.advance(by: seconds)
            let now = clock.monotonic()
            #expect(await eventually { (supervisor.decidedAt ?? -1) >= now }, "no decision at \(now) s")
        }
        // Its own shard starts at the first decision after the shards' state is read (no one holds it).
        #expect(await eventually { supervisor.hasReadShards }, "\(broker.diagnostics)")
        await advance(by: 0.25)
        #expect(await eventually { supervisor.answering.own }, "\(broker.diagnostics)")
        await advance(by: 4.5)
        #expect(supervisor.answering.covering.isEmpty, "4.75 s of the clock: shard b's brain may still be starting")
        await advance(by: 0.5)
        #expect(supervisor.answering.covering == ["b"], "5.25 s of the clock: standing in for the silent shard")

        running.cancel()
        _ = try? await running.value
        await broker.stop()
    }
}

import BeaconKit
import CoreHost
import LiveClock
import Logging
import MQTT
import Synchronization
import TestSupport
import Testing

/// What the two services share around their cores.
@Suite("Core host")
struct CoreHostTests {
    final class Lines: Sendable {
        let kept = Mutex<[(Logger.Level, String, Logger.Metadata?, String)]>([])
    }

    /// Keeps what is logged through it.
    struct Recorder: LogHandler {
        let lines: Lines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            lines.kept.withLock { $0.append((event.level, event.message.description, event.metadata, event.source)) }
        }
    }

    @Test("a core's log entry is logged at the level of the same name, with its metadata and the caller's module as source")
    func logEntries() {
        let lines = Lines()
        let recorder = Recorder(lines: lines)
        let logger = Logger(label: "core-host-test") { _ in recorder }
        let levels: [(LogEntry.Level, Logger.Level)] = [
            (.debug, .debug), (.info, .info), (.notice, .notice), (.warning, .warning), (.error, .error),
        ]
        for (level, _) in levels { logger.log(LogEntry(level, "gateway offline", ["gateway": "door"])) }
        let logged = lines.kept.withLock { $0 }
        #expect(logged.map(\.0) == levels.map(\.1))
        #expect(logged.allSatisfy { $0.1 == "gateway offline" && $0.2 == ["gateway": .string("door")] })
        // `[BrainTests]`, not `[CoreHost]`: logs name the service that logged (the kernel-path
        // rig waits for `[Gateway] enter`).
        #expect(logged.allSatisfy { $0.3 == "BrainTests" }, "\(logged.map(\.3))")
    }

    @Test("the timers go round when the host's clock is advanced: due ones in the order registered, a scheduled one with the next due, cancellation ends them")
    func timersOnAManualClock() async throws {
        let clock = ManualClock(at: WallTime(nanoseconds: 0))
        // Never started: the timers publish nothing.
        let client = try MQTTClient(MQTTClientOptions(broker: try BrokerURL(parsing: "mqtt://127.0.0.1:1"), clientID: "host"))
        let host = CoreHost<[String]>([], client: client, logger: Logger(label: "core-host-test"), clock: clock,
                                      outage: .outbox(limit: 10))
        let timers: [CoreHost<[String]>.Timer] = [
            .init("often", every: 1) { h, now in h.core.append("often \(now)") },
            .init("when told", every: 0.5, firstAfter: .infinity) { h, now in h.core.append("when told \(now)") },
        ]
        let running = Task { await host.runTimers(timers) }
        func advance(by seconds: Double) async {
            clock.advance(by: seconds)
            let now = clock.monotonic()
            #expect(await eventually { (host.timerRound ?? -1) >= now }, "no round at \(now) s")
        }
        await advance(by: 1)
        #expect(host.withLock { $0.core } == ["often 1.0"])
        host.withLock { $0.schedule("when told", at: 1.5) }
        await advance(by: 1)
        #expect(host.withLock { $0.core } == ["often 1.0", "often 2.0", "when told 2.0"])
        await advance(by: 0.5)
        #expect(host.withLock { $0.core.last } == "when told 2.5")
        #expect(host.withLock { $0.rounds } == 3)
        running.cancel()
        await running.value
    }

    @Test("what is published while the host is not connected waits in its outbox, the others first and bounded, then the latest retained state, and goes to a real broker on connect")
    func outboxUntilConnected() async throws {
        let directory = try TemporaryDirectory("core-host-outbox")
        let broker = try await MosquittoBroker.start(in: directory)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["host/#"], in: directory)
        let client = try MQTTClient(MQTTClientOptions(broker: broker.brokerURL, clientID: "core-host"))
        try client.start()
        #expect(await eventually(timeout: 10) { client.isConnected }, "\(broker.diagnostics)")
        let host = CoreHost<Int>(0, client: client, logger: Logger(label: "core-host-test"), clock: SystemClock(),
                                 outage: .outbox(limit: 2))
        func message(_ topic: String, _ text: String, retain: Bool = false) -> MQTTMessage {
            MQTTMessage(topic: "host/" + topic, text: text, qos: 1, retain: retain)
        }
        // Not connected as far as the host knows (no `connected` yet): all of it waits.
        host.withLock { h in
            host.publish([message("event", "1"), message("state", "a", retain: true), message("event", "2"),
                          message("state", "b", retain: true), message("event", "3")], in: &h)
        }
        #expect(host.withLock { ($0.published, $0.outboxDropped) } == (0, 1), "event 1 dropped: the outbox holds two")
        host.withLock { h in host.connected(&h) }
        #expect(host.withLock { ($0.published, $0.connections) } == (3, 1))
        let last = await watch.waitFor(timeout: 10) { $0.topic == "host/state" }
        #expect(last?.text == "b", "\(watch.records)")
        #expect(watch.records.map { "\($0.topic) \($0.text)" } == ["host/event 2", "host/event 3", "host/state b"])
        await client.stop(timeout: 2)
        await watch.stop()
        await broker.stop()
    }
}

import BeaconKit
import Config
import Simulation
import Gateway
import HCI
import Logging
import MQTT
import Synchronization

/// Counts what the engine would hand to libmosquitto.
final class CountingPublisher: MessagePublisher {
    let counts = Mutex((messages: 0, bytes: 0))

    func publish(_ message: MQTTMessage) throws(MQTTError) {
        counts.withLock {
            $0.messages += 1
            $0.bytes += message.payload.count + message.topic.utf8.count
        }
    }
}

extension Workloads {
    /// The gateway's work per advertisement without the broker: `GatewayEngine.handle`
    /// decodes, tracks, writes the sighting and builds the message (raw mode: every
    /// advertisement is published), up to the call into the MQTT client.
    static func pipeline(beacons: Int, adverts: Int, raw: Bool, runs: Int) -> Measurement {
        let workload = BenchmarkWorkload(count: adverts, beacons: beacons)
        let start = Instant(iso8601: "2026-11-21T09:00:00.000Z")!
        let frames = workload.events().enumerated().map { i, event in
            HCIFrame(time: start + Double(i) * 0.001, event: event)
        }
        let text = """
        {"broker":{"url":"mqtt://127.0.0.1:1883"},
         "defaults":{"exitTimeout":3600,"staleAfter":3600,"raw":\(raw)},
         "gateways":[{"id":"bench","source":"hci:0"}]}
        """
        let config: FleetConfig
        do { config = try FleetConfig.parse(text) } catch { fatalError("pipeline config: \(error)") }
        var logger = Logger(label: "bench")
        logger.logLevel = .critical
        let publisher = CountingPublisher()
        return measure("gateway/\(raw ? "raw" : "1s-interval")", unit: "adverts", operations: adverts, runs: runs) {
            // A fresh engine per run: every beacon enters once, as in a replay.
            let engine = GatewayEngine(config: config, gateway: config.gateways[0], publisher: publisher, logger: logger)
            engine.connected(at: start)
            for frame in frames { engine.handle(frame: frame) }
            return engine.statistics.published
        }
    }
}

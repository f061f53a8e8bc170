import BeaconKit
import Config
import Simulation
import GatewayCore
import Wire
import Synchronization

/// What the gateway process keeps per engine (`GatewayService`): the engine, the reused
/// output, and here, in place of libmosquitto, a count of what would be handed to it.
struct PipelineState {
    var engine: GatewayEngine
    var output = GatewayOutput()
    var messages = 0
    var bytes = 0
}

extension Workloads {
    /// The gateway's work per advertisement without the broker, as `GatewayService` does it:
    /// under the service's lock, `GatewayEngine.handle` decodes, tracks, writes the sighting
    /// and builds the message (raw mode: every advertisement is published), and each message
    /// is handed on, up to the call into the MQTT client.
    static func pipeline(beacons: Int, adverts: Int, raw: Bool, runs: Int) -> Measurement {
        let workload = BenchmarkWorkload(count: adverts, beacons: beacons)
        let start = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
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
        return measure("gateway/\(raw ? "raw" : "1s-interval")", unit: "adverts", operations: adverts, runs: runs) {
            // A fresh engine per run: every beacon enters once, as in a replay.
            var engine = GatewayEngine(config: config, gateway: config.gateways[0])
            // A replay: the capture's clock stands in for the gateway's own.
            _ = engine.connected(at: start.asWallTime())
            let state = Mutex(PipelineState(engine: engine))
            for frame in frames {
                state.withLock { s in
                    s.engine.handle(frame, into: &s.output)
                    for message in s.output.messages {
                        s.messages += 1
                        s.bytes += message.payload.count + message.topic.utf8.count
                    }
                    s.output.removeAll()
                }
            }
            return state.withLock { $0.messages }
        }
    }
}

public import BeaconKit
public import Config
import Wire

extension GatewayEngine {
    /// What a gateway publishes for a capture, decided ahead of time: the engine fed the
    /// capture's HCI events with the timers a running gateway has (every 100 ms), each message
    /// at the seconds after `start` it was decided at. Health is left out. The fleet bench
    /// replays these through real brokers; the brain's in-process benchmark feeds them to
    /// `BrainCore` directly.
    public static func decisions(config: FleetConfig, gateway: GatewayConfig, capture: [UInt8], start: CaptureTime,
                                 duration: Double) throws -> [(Double, MQTTMessage)] {
        var engine = GatewayEngine(config: config, gateway: gateway)
        // Decided ahead of time, the gateway's own clock is the capture's: a replay.
        var decided: [(Double, MQTTMessage)] = engine.connected(at: start.asWallTime()).messages.map { (0, $0) }
        var nextTick = start + 0.1
        var output = GatewayOutput()
        try capture.withUnsafeBytes { raw in
            var reader = try BtsnoopReader(bytes: raw)
            while let record = reader.next() {
                guard let event = record.hciEvent(datalink: reader.datalink) else { continue }
                let time = record.timestamp
                while nextTick <= time {
                    decided += engine.advance(to: nextTick).messages.map { (nextTick.seconds(since: start), $0) }
                    nextTick = nextTick + 0.1
                }
                engine.handle(HCIFrame(time: time, event: Array(event)), into: &output)
                let at = time.seconds(since: start)
                for message in output.messages { decided.append((at, message)) }
                output.removeAll()
            }
        }
        let end = start + duration
        while nextTick <= end {
            decided += engine.advance(to: nextTick).messages.map { (nextTick.seconds(since: start), $0) }
            nextTick = nextTick + 0.1
        }
        return decided
    }
}

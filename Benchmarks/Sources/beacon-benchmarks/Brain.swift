import BeaconKit
import Contract
import Wire
import Tracking
import Config
import GatewayCore
import BrainCore
import Simulation

extension Workloads {
    /// The brain's core taking in sightings (`BrainCore.receive` on `beacons/<major>/<minor>`),
    /// as the gateways publish them, from `beacons` beacons seen by one gateway.
    static func brainSightings(beacons: Int, count: Int, runs: Int) -> Measurement {
        let text = #"{"broker":{"url":"mqtt://127.0.0.1:1883"},"stores":[{"major":100,"name":"Main Street","ad":{"title":"Deal"}}]}"#
        let config: FleetConfig
        do { config = try FleetConfig.parse(text) } catch { fatalError("brain config: \(error)") }
        let workload = BenchmarkWorkload(count: count, beacons: beacons)
        let start = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
        var tracker = Tracker()
        let topics = Topics()
        // The gateway's own sightings for these advertisements (raw mode: one per advert).
        var messages: [(topic: String, payload: [UInt8])] = []
        for (index, event) in workload.events().enumerated() {
            event.withUnsafeBytes { bytes in
                var decoder = AdvertisementDecoder()
                decoder.decodeBeacons(event: bytes) { report, beacon in
                    guard let id = beacon.id else { return }
                    let time = start + Double(index) * 0.001
                    let update = tracker.observe(id, address: report.address, rssi: report.rssi,
                                                 measuredPower: beacon.measuredPower, txPower: beacon.txPower, at: time)
                    messages.append((topics.sightings(of: id.ref),
                                     Payloads.sightingBytes(update.track, gateway: "door", entry: nil, at: time)))
                }
            }
        }
        return measure("brain/sightings", unit: "sightings", operations: messages.count, runs: runs) {
            receivingAll(messages, config: config, from: start, spacing: 0.001)
        }
    }

    /// One run of a brain-core workload: a fresh core, settled at `start`, takes `messages`
    /// in order, `spacing` seconds of capture time apart. Returns how many messages it
    /// published (the run's checksum).
    static func receivingAll(_ messages: [(topic: String, payload: [UInt8])], config: FleetConfig,
                             from start: CaptureTime, spacing: Double) -> Int {
        var core = BrainCore(config: config)
        _ = core.settle(at: start)
        var checksum = 0
        for (index, message) in messages.enumerated() {
            let output = core.receive(topic: message.topic, payload: message.payload, retained: false,
                                      at: start + Double(index) * spacing)
            checksum &+= output.messages.count
        }
        return checksum
    }
}

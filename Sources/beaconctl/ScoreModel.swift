import BeaconKit
import Contract
import BrainCore
import Config
import HCI
import Simulation
import Tracking
import Wire

/// What a run of a simulated store produced, in seconds after the simulation's start: the
/// brain's zone decisions and the gateways' sightings (for the baselines).
struct StoreRun {
    var decisions: [ZoneDecision] = []
    var sightings: [ZoneBaseline.Sighting] = []
    /// What the brain's calibration applied at the end, by gateway (in process only).
    var calibration: [String: CalibrationRecord] = [:]

    /// The brain's zone over time, per beacon.
    func timelines(start: CaptureTime) -> [UInt32: ZoneTimeline] {
        var out: [UInt32: ZoneTimeline] = [:]
        for decision in decisions.sorted(by: { $0.at < $1.at }) {
            let key = PresenceScore.key(decision.beacon.major, decision.beacon.minor)
            out[key, default: ZoneTimeline()].record(decision.kind == .exit ? nil : decision.zone,
                                                     at: decision.at.seconds(since: start))
        }
        return out
    }
}

/// The store's gateways and brain without processes or a broker: each gateway's tracker and
/// RSSI reporter fed its capture frame by frame, the reports handed to the brain's
/// `FleetPresence` in capture-time order (through its `Calibrator`). The same decisions as
/// the real programs (their engines do the same per frame), in a fraction of the time: for
/// trying settings on many seeds. `beaconctl score` without `--in-process` runs the real programs.
enum InProcessStore {
    static func run(_ simulation: FloorSimulation, config: FleetConfig) throws -> StoreRun {
        struct GatewayState {
            var id: String
            var settings: TrackerSettings
            var tracker: Tracker
            var reporter: RSSIReporter
            var decoder = AdvertisementDecoder()
        }
        var presence = FleetPresence(settings: FleetPresence.Settings(config))
        // As the brain: calibration learns from each report as sent, the fusion takes it corrected.
        var calibrator = Calibrator(config: config)
        presence.zoneNames = Dictionary(config.gateways.map { ($0.id, $0.zone ?? $0.id) }, uniquingKeysWith: { a, _ in a })
        var gateways: [GatewayState] = []
        var frames: [(time: CaptureTime, gateway: Int, event: [UInt8])] = []
        for (id, writer) in simulation.captures().sorted(by: { $0.key < $1.key }) {
            guard let gateway = config.gateway(id: id) else { continue }
            gateways.append(GatewayState(id: id, settings: gateway.tracker, tracker: Tracker(settings: gateway.tracker),
                                         reporter: RSSIReporter(interval: gateway.reportInterval)))
            for frame in try BtsnoopSource.events(in: writer.bytes) {
                frames.append((frame.time, gateways.count - 1, frame.event))
            }
        }
        frames.sort { $0.time != $1.time ? $0.time < $1.time : $0.gateway < $1.gateway }
        var run = StoreRun()
        let start = simulation.start
        for id in gateways.map(\.id) { _ = presence.gatewayStatus(id, online: true) }
        func deliver(_ reports: [RSSIReport]) {
            for report in reports {
                _ = calibrator.learn(from: report)
                // Scored as fast as it reads: the report clock runs at the capture's pace, each
                // report arriving as its window closes (a replay's running clock).
                _ = presence.report(calibrator.corrected(report), receivedAt: report.to.asWallTime())
                run.decisions += presence.takeDecisions()
            }
        }
        for frame in frames {
            var g = gateways[frame.gateway]
            let tracker = g.tracker
            deliver(g.reporter.close(upTo: frame.time, gateway: g.id) { tracker.tracks[$0] })
            var decoder = g.decoder
            frame.event.withUnsafeBytes { bytes in
                decoder.decodeBeacons(event: bytes) { report, beacon in
                    guard let id = beacon.id, config.accepts(id) else { return }
                    let update = g.tracker.observe(id, address: report.address, rssi: report.rssi,
                                                   measuredPower: beacon.measuredPower, txPower: beacon.txPower, at: frame.time)
                    g.reporter.add(id, rssi: report.rssi.map { Double($0) + g.settings.rssiOffset }, at: frame.time)
                    if update.publish, let smoothed = update.track.rssiSmoothed, update.track.rssi != nil,
                       let major = id.major, let minor = id.minor {
                        run.sightings.append(ZoneBaseline.Sighting(time: frame.time.seconds(since: start), major: major,
                                                                   minor: minor, gateway: g.id, rssiSmoothed: smoothed))
                    }
                }
            }
            g.decoder = decoder
            gateways[frame.gateway] = g
        }
        // The end: every gateway's clock runs on (a replay's time jumps a day ahead).
        let end = (frames.last?.time ?? start) + 86_400
        for i in gateways.indices {
            let tracker = gateways[i].tracker
            deliver(gateways[i].reporter.close(upTo: end, gateway: gateways[i].id) { tracker.tracks[$0] })
        }
        run.calibration = calibrator.applied
        return run
    }
}

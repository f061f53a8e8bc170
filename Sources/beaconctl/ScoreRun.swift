import BeaconKit
import Contract
import BrainCore
import CommandLineSupport
import Config
import MQTT
import Simulation
import Synchronization
import SystemCalls
import LiveClock

/// One simulated store replayed through the real programs: a Mosquitto of its own, one
/// `beacon-gateway` per gateway on a shared replay timeline, `beacon-brain`, and a
/// subscriber collecting the brain's zone decisions (`beacons/+/+/events`) and the
/// gateways' sightings (`beacons/+/+`). Every process is stopped by its PID.
struct ProcessStore {
    var simulation: FloorSimulation
    var directory: String
    var configText: (_ broker: String) throws -> String
    /// Prints where the replay is.
    var progress: (String) -> Void
    /// Longest wall-clock time for the whole run, s.
    var timeout: Double

    /// What the subscriber collects, and how far each gateway has reported.
    final class Collected: Sendable {
        struct State {
            var decisions: [ZoneDecision] = []
            var sightings: [ZoneBaseline.Sighting] = []
            var reported: [String: CaptureTime] = [:]
            var open: Set<BeaconRef> = []
            var brainSettled = false
            var malformed = 0
        }
        let state = Mutex(State())
        let start: CaptureTime
        let topics = Topics()

        init(start: CaptureTime) { self.start = start }

        func take(_ message: MQTTMessage) {
            switch topics.parse(message.topic) {
            case .beacon(let ref, .zoneEvents)? where ref.eddystone == nil:
                guard let json = try? JSONParser().parse(message.payload),
                      let decision = try? ZoneDecision(parsing: json, topic: ref) else {
                    state.withLock { $0.malformed += 1 }
                    return
                }
                state.withLock { s in
                    s.decisions.append(decision)
                    if decision.kind == .exit { s.open.remove(ref) } else { s.open.insert(ref) }
                }
            case .beacon(let ref, .sighting)? where ref.eddystone == nil:
                guard let json = try? JSONParser().parse(message.payload),
                      let sighting = try? Sighting(parsing: json, topic: ref), let smoothed = sighting.rssiSmoothed else { return }
                let baseline = ZoneBaseline.Sighting(time: sighting.at.seconds(since: start), major: ref.major, minor: ref.minor,
                                                     gateway: sighting.gateway, rssiSmoothed: smoothed)
                state.withLock { $0.sightings.append(baseline) }
            case .gatewayRSSI(let gateway)?:
                guard let json = try? JSONParser().parse(message.payload),
                      let time = (try? RSSIReport(parsing: json, topic: gateway))?.to else { return }
                state.withLock { $0.reported[gateway] = max($0.reported[gateway] ?? time, time) }
            case .brainHealth?:
                if BrainHealth(parsing: message.payload)?.settled == true {
                    state.withLock { $0.brainSettled = true }
                }
            default: break
            }
        }
    }

    func run() async throws -> StoreRun {
        guard let gatewayProgram = Programs.sibling("beacon-gateway"), let brainProgram = Programs.sibling("beacon-brain") else {
            throw CommandFailure("beacon-gateway and beacon-brain must be beside beaconctl (the same build)", status: .failure)
        }
        try FileSystem.makeDirectories(directory)
        let broker = try await BenchBroker.start(in: directory)
        var processes: [RunningProgram] = []
        var subscriber: MQTTClient?
        do {
            let collected = Collected(start: simulation.start)
            try write(simulation, into: directory, broker: broker.url, loop: false)
            let configPath = directory + "/fleet.json"
            try FileSystem.write(configPath, Array(try configText(broker.url).utf8))

            let client = try MQTTClient(MQTTClientOptions(broker: try BrokerURL(parsing: broker.url),
                                                          clientID: "beaconctl-score-\(ProcessInfo.id)"))
            subscriber = client
            let topics = collected.topics
            try client.subscribe([topics.zoneEvents(of: .anyIBeacon), topics.sightings(of: .anyIBeacon), topics.gatewayRSSIFilter,
                                  topics.brainHealth(Topics.anyLevel)], qos: 1)
            try client.start()
            let listener = Task { for await event in client.events { if case .message(let m) = event { collected.take(m) } } }
            defer { listener.cancel() }

            processes.append(try RunningProgram(brainProgram, ["--config", configPath, "--log-level", "error"],
                                              name: "brain", in: directory))
            try await waitUntil("the brain settled", seconds: 60) { collected.state.withLock { $0.brainSettled } }

            // Every gateway replays on the same timeline: the simulation's second 0 plays a few
            // seconds from now, after all of them have connected.
            let gateways = simulation.layout.gateways.map(\.id)
            let at = WallClock.now() + 3 + 0.5 * Double(gateways.count)
            for id in gateways {
                processes.append(try RunningProgram(gatewayProgram, [
                    "--config", configPath, "--id", id, "--log-level", "error",
                    "--start-at", at.iso8601, "--replay-origin", simulation.start.iso8601,
                ], name: "gateway-\(id)", in: directory))
            }
            let end = simulation.start + simulation.crowd.duration
            let deadline = WallClock.monotonic() + timeout
            // The gateways may finish long before the brain has read what they sent (at full
            // replay speed on a busy machine, before its first decision): the run is over when
            // every customer who came has an exit decided, or, if the brain missed someone,
            // `brainCatchUp` seconds after the gateways finished with no visit open.
            let visitors = Set(simulation.truth.visits.map { BeaconRef(major: $0.major, minor: $0.minor) })
            var gatewaysFinished: Double?
            while true {
                let (reported, open, exited) = collected.state.withLock { s in
                    (s.reported, s.open, Set(s.decisions.filter { $0.kind == .exit }.map(\.beacon)))
                }
                let least = gateways.map { reported[$0] ?? .epoch }.min() ?? .epoch
                if least >= end, open.isEmpty {
                    if visitors.isSubset(of: exited) { break }
                    let finished = gatewaysFinished ?? WallClock.monotonic()
                    gatewaysFinished = finished
                    if WallClock.monotonic() - finished > Self.brainCatchUp { break }
                }
                if let failed = processes.first(where: { $0.poll() != nil }) {
                    throw CommandFailure("\(failed.name) ended early: \(failed.errors.suffix(2000))", status: .failure)
                }
                guard WallClock.monotonic() < deadline else {
                    throw CommandFailure("the replay did not finish within \(Int(timeout)) s (the machine may be too "
                                         + "busy; --timeout raises the limit)", status: .failure)
                }
                let done = least <= simulation.start ? 0 : min(simulation.crowd.duration, least.seconds(since: simulation.start))
                progress("\(Int(done)) of \(Int(simulation.crowd.duration)) s replayed"
                         + (least >= end ? ", \(open.count) visits still open" : ""))
                try await Task.sleep(nanoseconds: 200_000_000)
            }
            let run = collected.state.withLock { s in
                StoreRun(decisions: s.decisions, sightings: s.sightings.sorted { $0.time < $1.time })
            }
            for process in processes.reversed() { await process.stop() }
            await client.stop(timeout: 1)
            await broker.stop()
            return run
        } catch {
            for process in processes.reversed() { await process.stop() }
            if let subscriber { await subscriber.stop(timeout: 1) }
            await broker.stop()
            throw error
        }
    }

    /// Seconds the brain is given, after the gateways finished, to decide the visits it has
    /// not decided yet.
    static let brainCatchUp = 30.0

    private func waitUntil(_ what: String, seconds: Double, _ condition: () -> Bool) async throws {
        let deadline = WallClock.monotonic() + seconds
        while !condition() {
            guard WallClock.monotonic() < deadline else { throw CommandFailure("timed out waiting until \(what)", status: .failure) }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }
}

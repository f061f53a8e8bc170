public import BeaconKit
public import Wire
public import Tracking
public import Config
import GatewayCore
public import HCI
public import Logging
public import MQTT
import Synchronization

/// Where a gateway's messages go: the MQTT client in production. The engine talks to it
/// only through this, so the order of publications is decided in one place.
public protocol MessagePublisher: Sendable {
    func publish(_ message: MQTTMessage) throws(MQTTError)
}

extension MQTTClient: MessagePublisher {}

/// The gateway's state machine: source frames in, MQTT messages out.
///
/// All state lives in one `Mutex`; every input (a frame from the source thread, a tick,
/// an MQTT event, an operator command) is handled to completion under it, in arrival
/// order, and publications happen inside it too so they leave in the order decided.
/// Nothing here reads the clock: times come with the inputs.
public final class GatewayEngine: Sendable {
    public struct Statistics: Sendable, Equatable {
        public var decode: DecodeCounters
        public var tracked: Int
        public var published: Int
        public var dropped: Int
        public var queueDepth: Int
        public var filtered: Int
        public var connected: Bool
        public var sourceState: SourceState
    }

    struct State {
        var config: FleetConfig
        var gateway: GatewayConfig
        var topics: Topics
        var registry: BeaconRegistry
        var decoder = AdvertisementDecoder()
        var tracker: Tracker
        var outbox: Outbox
        var connected = false
        var sourceState = SourceState.starting
        var sourceDetail = ""
        var published = 0
        var filtered = 0
        var publishErrors = 0
        /// Our own presence topics found retained on the broker at start-up.
        var inherited: Set<String> = []
        var inheritedDeadline: Instant?
        var inheritanceSettled = false
        var lastHealth: (time: Instant, reports: Int, beacons: Int)?
        var scanningPaused = false
    }

    let state: Mutex<State>
    let publisher: any MessagePublisher
    let logger: Logger
    public let gatewayID: String

    public init(config: FleetConfig, gateway: GatewayConfig, publisher: any MessagePublisher, logger: Logger) {
        gatewayID = gateway.id
        self.publisher = publisher
        self.logger = logger
        state = Mutex(State(config: config, gateway: gateway, topics: config.topics,
                            registry: Self.registry(config), tracker: Self.tracker(config, gateway),
                            outbox: Outbox(sightingLimit: gateway.queueLimit)))
    }

    static func registry(_ config: FleetConfig) -> BeaconRegistry { config.registry }

    static func tracker(_ config: FleetConfig, _ gateway: GatewayConfig) -> Tracker {
        let calibration = config.registry.calibration
        var tracker = Tracker(settings: gateway.tracker, calibration: calibration.beacons)
        tracker.uuidCalibration = calibration.uuids
        return tracker
    }

    public var statistics: Statistics {
        state.withLock { s in
            Statistics(decode: s.decoder.counters, tracked: s.tracker.count, published: s.published,
                       dropped: s.outbox.dropped, queueDepth: s.outbox.depth, filtered: s.filtered,
                       connected: s.connected, sourceState: s.sourceState)
        }
    }

    public var isConnected: Bool { state.withLock { $0.connected } }

    /// The fleet config in force (the start-up one, or the last applied).
    public var config: FleetConfig { state.withLock { $0.config } }

    /// The tracks in range now, sorted by beacon.
    public var tracks: [Track] {
        state.withLock { $0.tracker.tracks.values.sorted { $0.id < $1.id } }
    }

    // MARK: - Inputs

    /// One HCI event from the source.
    public func handle(frame: HCIFrame) {
        state.withLock { s in
            // Timeouts due before this frame come out of `observe` first (TrackUpdate.timeouts).
            var decoder = s.decoder
            frame.event.withUnsafeBytes { bytes in
                decoder.decodeBeacons(event: bytes) { report, beacon in
                    observe(&s, beacon: beacon, address: report.address, rssi: report.rssi, at: frame.time)
                }
            }
            s.decoder = decoder
        }
    }

    /// Time has reached `now` (source time): exits and stale proximities come due.
    public func advance(to now: Instant) {
        state.withLock { s in expire(&s, at: now) }
    }

    public func sourceChanged(_ state: SourceState, detail: String) {
        self.state.withLock { s in
            s.sourceState = state
            s.sourceDetail = detail
        }
        switch state {
        case .retrying: logger.warning("source problem, retrying", metadata: ["detail": "\(detail)"])
        default: logger.info("source \(state.rawValue)", metadata: ["detail": "\(detail)"])
        }
    }

    /// The broker connection came up: announce ourselves and restore presence.
    public func connected(at now: Instant) {
        state.withLock { s in
            s.connected = true
            send(&s, OutgoingMessage(topic: s.topics.status(ofGateway: gatewayID), payload: "online", qos: 1, retain: true))
            let queued = s.outbox.drain()
            // Current presence wins over whatever was queued for the same topic.
            let current = s.tracker.tracks.values.sorted { $0.id < $1.id }.map { presenceMessage(s, $0) }
            let currentTopics = Set(current.map(\.topic))
            for message in queued where !(message.retain && currentTopics.contains(message.topic)) {
                send(&s, message)
            }
            for message in current { send(&s, message) }
            if s.inheritedDeadline == nil {
                s.inheritedDeadline = now + s.gateway.tracker.exitTimeout
            }
        }
        logger.info("connected to the broker; presence republished")
    }

    public func disconnected(reason: String) {
        state.withLock { $0.connected = false }
        logger.warning("broker connection lost; queueing", metadata: ["reason": "\(reason)"])
    }

    /// A retained presence topic of ours found on the broker (start-up read-back).
    public func inheritedPresence(topic: String) {
        state.withLock { s in
            if !s.inheritanceSettled { s.inherited.insert(topic) }
        }
    }

    /// Deletes presence left by an earlier run for beacons not seen again within one
    /// exit timeout. Returns true once: when the read-back phase has just ended.
    @discardableResult
    public func settleInheritedPresence(at now: Instant) -> Bool {
        state.withLock { s in
            if s.inheritanceSettled { return false }
            guard let deadline = s.inheritedDeadline, now >= deadline else { return false }
            s.inheritanceSettled = true
            let current = Set(s.tracker.tracks.values.map { s.topics.presence(of: $0.id, seenBy: gatewayID) })
            for topic in s.inherited.sorted() where !current.contains(topic) {
                send(&s, OutgoingMessage(topic: topic, payload: "", qos: 1, retain: true))
            }
            if !s.inherited.isEmpty {
                logger.info("cleared presence left by an earlier run", metadata: ["count": "\(s.inherited.subtracting(current).count)"])
            }
            s.inherited.removeAll()
            return true
        }
    }

    /// The health message, with rates since the previous one.
    public func health(at now: Instant, uptime: Double, version: String, sourceName: String) -> MQTTMessage {
        state.withLock { s in
            let counters = s.decoder.counters
            var reportRate = 0.0
            var beaconRate = 0.0
            if let last = s.lastHealth, now > last.time {
                let elapsed = now.seconds(since: last.time)
                reportRate = Double(counters.reports - last.reports) / elapsed
                beaconRate = Double(counters.beacons - last.beacons) / elapsed
            }
            s.lastHealth = (now, counters.reports, counters.beacons)
            let health = Payloads.Health(
                gateway: gatewayID, version: version, uptime: uptime, source: sourceName,
                sourceState: s.scanningPaused ? SourceState.paused.rawValue : s.sourceState.rawValue,
                advertsPerSecond: reportRate, decodedPerSecond: beaconRate, dropped: s.outbox.dropped,
                malformed: counters.malformed, queueDepth: s.outbox.depth, tracked: s.tracker.count,
                published: s.published, ts: now)
            return MQTTMessage(topic: s.topics.health(ofGateway: gatewayID), text: health.json, qos: 0, retain: true)
        }
    }

    /// Publishes a message through the engine's ordering and outage queue.
    public func publish(_ message: OutgoingMessage) {
        state.withLock { s in send(&s, message) }
    }

    /// Withdraws every presence and says `offline`: the clean-shutdown sequence.
    public func withdraw() {
        state.withLock { s in
            for track in s.tracker.tracks.values.sorted(by: { $0.id < $1.id }) {
                send(&s, OutgoingMessage(topic: s.topics.presence(of: track.id, seenBy: gatewayID), payload: "", qos: 1, retain: true))
            }
            send(&s, OutgoingMessage(topic: s.topics.status(ofGateway: gatewayID), payload: "offline", qos: 1, retain: true))
        }
    }

    /// Applies a new fleet config (from `fleet/config` or a reload). The source and the
    /// broker cannot change without a restart; the result says so.
    public func apply(_ config: FleetConfig) -> ConfigApplyResult {
        guard let gateway = config.gateway(id: gatewayID) else {
            return .rejected(["the new config has no gateway \"\(gatewayID)\""])
        }
        return state.withLock { s in
            var needsRestart: [String] = []
            if gateway.source != s.gateway.source { needsRestart.append("source") }
            if gateway.scan != s.gateway.scan { needsRestart.append("scan") }
            if config.broker(forGateway: gatewayID) != s.config.broker(forGateway: gatewayID) {
                needsRestart.append("broker")
            }
            if config.topicPrefix != s.config.topicPrefix { needsRestart.append("topicPrefix") }
            let previousTracks = s.tracker.tracks
            s.config = config
            s.gateway.tracker = gateway.tracker
            s.gateway.healthInterval = gateway.healthInterval
            s.gateway.zone = gateway.zone
            s.registry = Self.registry(config)
            var tracker = Self.tracker(config, gateway)
            // Keep what is in range; beacons the new allow-list rejects exit now.
            for track in previousTracks.values where !config.accepts(track.id) {
                send(&s, OutgoingMessage(topic: s.topics.presence(of: track.id, seenBy: gatewayID), payload: "", qos: 1, retain: true))
            }
            tracker.restore(previousTracks.values.filter { config.accepts($0.id) })
            s.tracker = tracker
            return .applied(needsRestart: needsRestart)
        }
    }

    public func setScanningPaused(_ paused: Bool) {
        state.withLock { $0.scanningPaused = paused }
    }

    // MARK: - Inside the lock

    private func observe(_ s: inout State, beacon: Beacon, address: BluetoothAddress, rssi: Int8?, at time: Instant) {
        guard let id = beacon.id else { return }
        guard s.config.accepts(id) else {
            s.filtered += 1
            return
        }
        let update = s.tracker.observe(id, address: address, rssi: rssi, measuredPower: beacon.measuredPower,
                                       txPower: beacon.txPower, at: time)
        for timeout in update.timeouts { handle(&s, timeout) }
        if update.entered {
            logger.debug("enter", metadata: ["beacon": "\(id)"])
        }
        if update.entered || update.proximityChangedFrom != nil {
            send(&s, presenceMessage(s, update.track))
        }
        if update.publish {
            // Bytes straight to the client: no String, no second copy (raw mode sends every advert).
            let payload = Payloads.sightingBytes(update.track, gateway: gatewayID, entry: s.registry[id], at: time)
            send(&s, sighting: payload, topic: s.topics.sightings(of: id))
        }
    }

    private func expire(_ s: inout State, at now: Instant) {
        guard s.tracker.mayTimeOut(by: now) else { return }
        for timeout in s.tracker.advance(to: now) { handle(&s, timeout) }
    }

    private func handle(_ s: inout State, _ timeout: TrackTimeout) {
        switch timeout {
        case .stale(let track, _):
            send(&s, presenceMessage(s, track))
        case .exit(let track, _):
            logger.debug("exit", metadata: ["beacon": "\(track.id)"])
            send(&s, OutgoingMessage(topic: s.topics.presence(of: track.id, seenBy: gatewayID), payload: "", qos: 1, retain: true))
        }
    }

    private func presenceMessage(_ s: State, _ track: Track) -> OutgoingMessage {
        OutgoingMessage(topic: s.topics.presence(of: track.id, seenBy: gatewayID),
                      payload: Payloads.gatewayPresence(track, gateway: gatewayID, zone: s.gateway.zone ?? gatewayID),
                      qos: 1, retain: true)
    }

    private func send(_ s: inout State, _ message: OutgoingMessage) {
        if s.connected, publish(&s, MQTTMessage(topic: message.topic, payload: Array(message.payload.utf8),
                                                qos: message.qos, retain: message.retain)) {
            return
        }
        if message.retain { s.outbox.keep(message) } else { s.outbox.add(message) }
    }

    /// A sighting (QoS 0, not retained) whose payload is already bytes.
    private func send(_ s: inout State, sighting payload: [UInt8], topic: String) {
        if s.connected, publish(&s, MQTTMessage(topic: topic, payload: payload, qos: 0, retain: false)) { return }
        s.outbox.add(OutgoingMessage(topic: topic, payload: String(decoding: payload, as: UTF8.self), qos: 0, retain: false))
    }

    /// Hands `message` to the client; false when the connection is gone (the caller queues it).
    private func publish(_ s: inout State, _ message: MQTTMessage) -> Bool {
        do {
            try publisher.publish(message)
            s.published += 1
        } catch where error.isNoConnection {
            s.connected = false
            return false
        } catch {
            s.publishErrors += 1
            logger.error("publish failed", metadata: ["topic": "\(message.topic)", "error": "\(error)"])
        }
        return true
    }
}

public enum ConfigApplyResult: Sendable, Equatable {
    case applied(needsRestart: [String])
    case rejected([String])
}

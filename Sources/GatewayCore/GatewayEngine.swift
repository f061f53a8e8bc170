// Over 500 lines: the engine's state is private to this file; every input and decision touching it is here.
public import BeaconKit
import Contract
public import Config
public import Tracking
public import Wire

/// What one input to the gateway's engine led to.
public struct GatewayOutput: Sendable, Equatable {
    /// To publish now, in this order. While the engine believes the broker is away it
    /// queues instead (`Outbox`), and this stays empty.
    public var messages: [MQTTMessage] = []
    public var log: [LogEntry] = []
    /// The read-back of this gateway's own retained presence has just ended: the
    /// subscription for it can go.
    public var readBackEnded = false
    /// A reconnect began another read-back of this gateway's own retained presence: the
    /// service subscribes to it again (`GatewayEngine.connected`).
    public var readBackStarted = false
    /// What became of a new fleet config (`GatewayEngine.apply`).
    public var config: ConfigApplyResult?

    public init() {}

    /// Empties the output for the next input, keeping its storage (the hot path reuses one).
    public mutating func removeAll() {
        messages.removeAll(keepingCapacity: true)
        log.removeAll(keepingCapacity: true)
        readBackEnded = false
        readBackStarted = false
        config = nil
    }
}

public enum ConfigApplyResult: Sendable, Equatable {
    case applied(needsRestart: [String])
    case rejected([String])
}

/// The gateway's decisions as a value: HCI frames, ticks, broker and operator events in;
/// the messages to publish, in order, and what to log out. It never reads the clock
/// (times come with the inputs), never publishes and never logs: `GatewayService` owns
/// one, feeds it under one lock and does the I/O, so what it decides leaves in the order
/// decided.
///
/// While the broker is away (`disconnected`, or a publish the service could not deliver,
/// `undelivered`), presence changes are kept, the latest per topic, and sightings wait in a
/// bounded queue (`Outbox`); `connected` sends what waited and republishes presence.
public struct GatewayEngine: Sendable {
    public struct Statistics: Sendable, Equatable {
        public var decode: DecodeCounters
        public var tracked: Int
        public var dropped: Int
        public var queueDepth: Int
        public var filtered: Int
        public var connected: Bool
        public var sourceState: SourceState
    }

    public let gatewayID: String
    /// The fleet config in force (the start-up one, or the last applied).
    public private(set) var config: FleetConfig
    private var gateway: GatewayConfig
    private var topics: Topics
    private var registry: BeaconRegistry
    private var decoder = AdvertisementDecoder()
    private var tracker: Tracker
    /// The brain's per-window RSSI reports (`gateways/<id>/rssi`).
    private var reporter: RSSIReporter
    private var outbox: Outbox
    /// The RSSI reports made while the broker is away, oldest first, with the capture time
    /// each is complete to: the latest `reportBacklogSeconds` are kept and sent first on
    /// reconnect, so the brain decides the outage from what the gateway heard instead of
    /// taking it as a gap (docs/presence.md, "Broker outages").
    private var reportBacklog: [(to: CaptureTime, message: MQTTMessage)] = []
    /// Seconds of capture time of RSSI reports a disconnected gateway keeps: longer than an
    /// outage plus the MQTT client's longest reconnect back-off (30 s).
    public static let reportBacklogSeconds = 120.0
    /// The reports sent in the last `reportBacklogSeconds` of capture time, kept for two
    /// resends. Those of the last `resendSeconds`, handed to a connection that then died, may
    /// never have reached the broker (QoS 0; a broker killed or cut off loses what was in
    /// flight), so a disconnect puts them back in the backlog, marked `"resent":true`; the
    /// brain skips a resent one it already has. And a brain the broker dropped while this
    /// gateway stayed connected asks for all of them after the capture time it has
    /// (`brainReady(resendingAfter:)`): its hole runs from the drop to its request, which
    /// a long stop or a slow reconnect makes longer than `resendSeconds` — a CI run's 15 s
    /// stop of the brain left 10 s of a 10 s window; the whole backlog's span covers an
    /// outage of the brain as long as one of the gateway's own.
    private var recentReports: [(to: CaptureTime, message: MQTTMessage)] = []
    /// Presence this gateway deleted (its beacon left) in the last `reportBacklogSeconds` of
    /// capture time, by topic: published again when the brain asks for reports after a capture
    /// time (`brainReady(resendingAfter:)`). A store's Mosquitto can lose an empty retained
    /// message queued for its bridge when a reconnection attempt fails (NATSNodeFaultTests:
    /// the bridge's node killed, the next node held the attempt 4 s without a CONNACK; the
    /// presence sent before the deletion reached the centre, the deletion never did), and the
    /// centre then keeps a presence of a beacon long gone, for every new subscriber to read.
    private var recentDeletions: [(topic: String, at: CaptureTime)] = []
    /// Capture seconds of sent reports a disconnect puts back: one and a half keepalives (how
    /// long a cut connection can go unnoticed), at least 10 s, at most the backlog.
    public let resendSeconds: Double
    /// Whether messages go out (`messages`) or wait (`Outbox`).
    public private(set) var isConnected = false
    /// Connected again after an outage, with a brain about, and waiting for it to ask for
    /// what this gateway kept (`brainReady`): everything but `online` waits meanwhile.
    public private(set) var awaitsBrain = false
    /// Whether a brain has been online since the gateway started (`brain/status`): a gateway
    /// waits for the brain after a reconnect only where there is one. Not cleared by the
    /// brain's `offline`: a broker that stops gracefully publishes the brain's will to us
    /// just before the outage the brain must then be waited for.
    private var brainSeen = false
    /// How long a reconnected gateway waits for the brain's request before it sends what it
    /// kept anyway (wall seconds, `GatewayService`): the brain's reconnect grace, longer
    /// than the MQTT client's longest back-off (30 s).
    public static let brainWaitSeconds = 45.0
    private var sourceState = SourceState.starting
    private var filtered = 0
    /// Our own presence topics found retained on the broker at start-up.
    private var inherited: Set<String> = []
    private var inheritedDeadline: WallTime?
    private var inheritanceSettled = false
    /// Reading our retained presence back after a reconnect: a broker may have lost a delete
    /// it had acknowledged (killed before saving), so stale presence comes back.
    private var rereadDeadline: WallTime?
    private var lastHealth: (time: WallTime, reports: Int, beacons: Int)?
    private var scanningPaused = false
    /// Eddystone-UID beacons by the address they advertise from: their TLM frames carry no
    /// identity of their own.
    private var eddystoneAddresses: [BluetoothAddress: BeaconID] = [:]
    /// When each beacon's telemetry was last published.
    private var telemetrySent: [BeaconID: CaptureTime] = [:]
    /// Seconds between two telemetry messages of one beacon.
    public static let telemetryInterval = 60.0
    /// Whether enters and exits are logged (at `debug`): off, they cost nothing.
    public var logsBeacons = false
    /// The gateway was started with `--broker`: the command line, not the config, names its
    /// broker, so a config's broker is neither applied nor a reason to restart.
    public var brokerFromCommandLine = false

    public init(config: FleetConfig, gateway: GatewayConfig) {
        gatewayID = gateway.id
        self.config = config
        self.gateway = gateway
        topics = config.topics
        registry = Self.registry(config)
        tracker = Self.tracker(config, gateway)
        reporter = RSSIReporter(interval: gateway.reportInterval)
        outbox = Outbox(limit: gateway.queueLimit)
        resendSeconds = min(Self.reportBacklogSeconds, max(10, 1.5 * Double(config.broker(forGateway: gateway.id).keepalive)))
    }

    static func registry(_ config: FleetConfig) -> BeaconRegistry { config.registry }

    static func tracker(_ config: FleetConfig, _ gateway: GatewayConfig) -> Tracker {
        let calibration = config.registry.calibration
        var tracker = Tracker(settings: gateway.tracker, calibration: calibration.beacons)
        tracker.uuidCalibration = calibration.uuids
        return tracker
    }

    public var statistics: Statistics {
        Statistics(decode: decoder.counters, tracked: tracker.count, dropped: outbox.dropped,
                   queueDepth: outbox.depth, filtered: filtered, connected: isConnected || awaitsBrain,
                   sourceState: sourceState)
    }

    /// The tracks in range now, sorted by beacon.
    public var tracks: [Track] { tracker.tracks.values.sorted { $0.id < $1.id } }

    // MARK: - Inputs

    /// One HCI event from the source, appended to `out`: the hot path, which reuses the
    /// caller's output rather than making one per frame.
    public mutating func handle(_ frame: HCIFrame, into out: inout GatewayOutput) {
        // Report windows that ended before this frame go first, then its advertisements.
        if reporter.isDue(at: frame.time) { report(upTo: frame.time, &out) }
        // Timeouts due before this frame come out of `observe` first (TrackUpdate.timeouts).
        var decoder = self.decoder
        frame.event.withUnsafeBytes { bytes in
            decoder.decodeBeacons(event: bytes) { report, beacon in
                observe(beacon, address: report.address, rssi: report.rssi, at: frame.time, &out)
            }
        }
        self.decoder = decoder
    }

    /// One HCI event from the source.
    public mutating func handle(_ frame: HCIFrame) -> GatewayOutput {
        var out = GatewayOutput()
        handle(frame, into: &out)
        return out
    }

    /// Time has reached `now` (source time): exits and stale proximities come due.
    public mutating func advance(to now: CaptureTime) -> GatewayOutput {
        var out = GatewayOutput()
        if reporter.isDue(at: now) { report(upTo: now, &out) }
        guard tracker.mayTimeOut(by: now) else { return out }
        for timeout in tracker.advance(to: now) { handle(timeout, &out) }
        return out
    }

    public mutating func sourceChanged(_ state: SourceState, detail: String) -> GatewayOutput {
        sourceState = state
        var out = GatewayOutput()
        switch state {
        case .retrying: out.log.append(LogEntry(.warning, "source problem, retrying", ["detail": detail]))
        default: out.log.append(LogEntry(.info, "source \(state.rawValue)", ["detail": detail]))
        }
        return out
    }

    /// The broker connection came up: announce ourselves, send what waited and restore presence.
    ///
    /// After an outage, when a brain was online before it, the gateway says `online` and
    /// waits (`awaitsBrain`) until the brain asks for what it kept (`brainReady`, from the
    /// brain's `{"reports":"send"}` on `gateways/<id>/cmd`) or `brainWaitSeconds` pass: RSSI
    /// reports sent while the brain is not yet subscribed again reach no one (QoS 0, and a
    /// broker restarted without persistence keeps no session), and the brain would decide
    /// the outage without them (docs/brain.md, "Broker outages").
    public mutating func connected(at now: WallTime) -> GatewayOutput {
        let reconnect = inheritedDeadline != nil
        var out = GatewayOutput()
        if reconnect && inheritanceSettled {
            // A reconnect: read our retained presence back again (`inheritedPresence`).
            if rereadDeadline == nil { out.readBackStarted = true }
            rereadDeadline = now + gateway.tracker.exitTimeout
        } else if !reconnect {
            inheritedDeadline = now + gateway.tracker.exitTimeout
        }
        guard reconnect, brainSeen else {
            isConnected = true
            awaitsBrain = false
            send(MQTTMessage(topic: topics.status(ofGateway: gatewayID), text: "online", qos: 1, retain: true), &out)
            sendKept(&out)
            out.log.append(LogEntry(.info, "connected to the broker; presence republished"))
            return out
        }
        awaitsBrain = true
        out.messages.append(MQTTMessage(topic: topics.status(ofGateway: gatewayID), text: "online", qos: 1, retain: true))
        out.log.append(LogEntry(.info, "connected to the broker; waiting for the brain to ask for the reports kept",
                                ["reports": "\(reportBacklog.count)", "most seconds": "\(Int(Self.brainWaitSeconds))"]))
        return out
    }

    /// The brain asked for what this gateway kept while away (or `brainWaitSeconds` passed):
    /// the reports first, then what was queued, then current presence. Nothing unless the
    /// gateway waits for it, or the brain names the capture time it has this gateway's reports
    /// up to (`resendingAfter`): its own connection was down while ours was not, so the
    /// reports sent meanwhile reached no one (QoS 0, and the brain's session is clean). Those
    /// of them still in `recentReports` (the last `reportBacklogSeconds`) go out again, marked
    /// resent, in capture order; the brain waits for them before deciding past its gap
    /// (`FleetPresence`, "resend").
    public mutating func brainReady(timedOut: Bool = false, resendingAfter after: CaptureTime? = nil) -> GatewayOutput {
        var out = GatewayOutput()
        guard awaitsBrain else {
            guard let after, isConnected else { return out }
            let again = recentReports.filter { $0.to > after }.map { Self.markedResent($0.message) }
            out.messages += again
            // After them, as first sent: the deletions of presence of beacons not tracked now.
            let current = currentPresenceTopics
            let latest = recentReports.last?.to
            let deletions = recentDeletions.filter { deletion in
                !current.contains(deletion.topic) && latest.map { $0.seconds(since: deletion.at) <= Self.reportBacklogSeconds } ?? true
            }
            for deletion in deletions { send(MQTTMessage(topic: deletion.topic, text: "", qos: 1, retain: true), &out) }
            out.log.append(LogEntry(.info, "the brain asked for the reports after a capture time (it was away, or they did not reach it); sent again",
                                    ["after": after.iso8601, "reports": "\(again.count)", "deletions": "\(deletions.count)"]))
            return out
        }
        awaitsBrain = false
        isConnected = true
        sendKept(&out)
        out.log.append(LogEntry(timedOut ? .warning : .info,
                                timedOut ? "the brain did not ask for the reports kept; sent anyway, presence republished"
                                         : "the brain asked for the reports kept; sent, presence republished",
                                ["messages": "\(out.messages.count)"]))
        return out
    }

    /// A `brain/status` message: `online` says a brain is about.
    public mutating func brainStatus(online: Bool) { if online { brainSeen = true } }

    /// What waited for the broker: the reports first (the presence queued after them is then
    /// no news to the brain), then the queue, then current presence, which wins over whatever
    /// was queued for the same topic.
    private mutating func sendKept(_ out: inout GatewayOutput) {
        out.messages += reportBacklog.map(\.message)
        reportBacklog.removeAll()
        let queued = outbox.drain()
        let current = tracks.map(presenceMessage)
        let currentTopics = Set(current.map(\.topic))
        for message in queued where !(message.retain && currentTopics.contains(message.topic)) {
            send(message, &out)
        }
        for message in current { send(message, &out) }
    }

    public mutating func disconnected(reason: String) -> GatewayOutput {
        isConnected = false
        awaitsBrain = false
        keepRecentReports()
        var out = GatewayOutput()
        out.log.append(LogEntry(.warning, "broker connection lost; queueing", ["reason": reason]))
        return out
    }

    /// Messages of an earlier output the service could not hand to the client because the
    /// connection had gone: they wait for the reconnect like everything after them.
    public mutating func undelivered(_ messages: some Sequence<MQTTMessage>) {
        isConnected = false
        let reports = topics.rssiReports(ofGateway: gatewayID)
        var kept: [(to: CaptureTime, message: MQTTMessage)] = []
        for message in messages {
            guard message.topic == reports else {
                queue(message)
                continue
            }
            // Older than any report made from now on: they wait in the backlog, first.
            if let json = try? JSONParser().parse(message.payload), let report = try? RSSIReport(parsing: json, topic: gatewayID) {
                kept.append((report.to, message))
            }
        }
        // Never sent: not a resend, whether or not a disconnect already kept them as one.
        let payloads = Set(kept.map(\.message.payload))
        recentReports.removeAll { payloads.contains($0.message.payload) }
        reportBacklog.removeAll { payloads.contains(RSSIReport.unmarked($0.message.payload)) }
        reportBacklog = Self.inCaptureOrder(kept + reportBacklog)
        keepRecentReports()
    }

    /// The reports of the last `resendSeconds` sent back into the backlog, marked as resent
    /// (`recentReports`); the older ones reached the broker before the connection died.
    private mutating func keepRecentReports() {
        guard let last = recentReports.last else { return }
        let resent = recentReports.filter { last.to.seconds(since: $0.to) <= resendSeconds }
            .map { (to: $0.to, message: Self.markedResent($0.message)) }
        recentReports.removeAll()
        reportBacklog = Self.inCaptureOrder(resent + reportBacklog)
    }

    /// A report as sent again (`RSSIReport.markedResent`).
    static func markedResent(_ report: MQTTMessage) -> MQTTMessage {
        var message = report
        message.payload = RSSIReport.markedResent(message.payload)
        return message
    }

    /// Reports by the capture time each is complete to, the order they were made in kept for
    /// equal times (a busy window's parts).
    static func inCaptureOrder(_ reports: [(to: CaptureTime, message: MQTTMessage)]) -> [(to: CaptureTime, message: MQTTMessage)] {
        reports.enumerated().sorted { ($0.element.to, $0.offset) < ($1.element.to, $1.offset) }.map(\.element)
    }

    /// A retained presence topic of ours found on the broker. At start-up it waits for one
    /// exit timeout (the beacon may be seen again); read back after a reconnect, when the
    /// tracker is live, it is deleted at once unless its beacon is tracked now.
    @discardableResult
    public mutating func inheritedPresence(topic: String) -> GatewayOutput {
        var out = GatewayOutput()
        if !inheritanceSettled {
            inherited.insert(topic)
        } else if rereadDeadline != nil, !currentPresenceTopics.contains(topic) {
            send(MQTTMessage(topic: topic, text: "", qos: 1, retain: true), &out)
            out.log.append(LogEntry(.info, "deleted stale presence the broker brought back", ["topic": topic]))
        }
        return out
    }

    private var currentPresenceTopics: Set<String> {
        Set(tracker.tracks.values.map { topics.presence(of: $0.id.ref, seenBy: gatewayID) })
    }

    /// Deletes presence left by an earlier run for beacons not seen again within one exit
    /// timeout of connecting; `readBackEnded` is set when that phase has just ended, and
    /// again one exit timeout after each reconnect, when its read-back ends.
    public mutating func settleInheritedPresence(at now: WallTime) -> GatewayOutput {
        var out = GatewayOutput()
        if let deadline = rereadDeadline, now >= deadline {
            rereadDeadline = nil
            out.readBackEnded = true
        }
        guard !inheritanceSettled, let deadline = inheritedDeadline, now >= deadline else { return out }
        inheritanceSettled = true
        out.readBackEnded = true
        let stale = inherited.subtracting(currentPresenceTopics)
        for topic in stale.sorted() {
            send(MQTTMessage(topic: topic, text: "", qos: 1, retain: true), &out)
        }
        if !inherited.isEmpty {
            out.log.append(LogEntry(.info, "cleared presence left by an earlier run", ["count": "\(stale.count)"]))
        }
        inherited.removeAll()
        return out
    }

    /// The health message for `gateways/<id>/health`, with rates since the previous one;
    /// `published` is the service's count of messages handed to the broker. Send it with
    /// `publish`.
    public mutating func health(at now: WallTime, uptime: Double, version: String, sourceName: String,
                                published: Int) -> MQTTMessage {
        let counters = decoder.counters
        var reportRate = 0.0
        var beaconRate = 0.0
        if let last = lastHealth, now > last.time {
            let elapsed = now.seconds(since: last.time)
            reportRate = Double(counters.reports - last.reports) / elapsed
            beaconRate = Double(counters.beacons - last.beacons) / elapsed
        }
        lastHealth = (now, counters.reports, counters.beacons)
        let health = GatewayHealth(
            gateway: gatewayID, version: version, uptime: uptime, source: sourceName,
            sourceState: scanningPaused ? SourceState.paused.rawValue : sourceState.rawValue,
            advertsPerSecond: reportRate, decodedPerSecond: beaconRate, dropped: outbox.dropped,
            malformed: counters.malformed, queueDepth: outbox.depth, tracked: tracker.count,
            published: published, ts: now)
        return MQTTMessage(topic: topics.health(ofGateway: gatewayID), text: health.json, qos: 0, retain: true)
    }

    /// A message of the service's own (a command's answer) through the engine's ordering
    /// and outage queue.
    public mutating func publish(_ message: MQTTMessage) -> GatewayOutput {
        var out = GatewayOutput()
        send(message, &out)
        return out
    }

    /// Withdraws every presence and says `offline`: the clean-shutdown sequence.
    public mutating func withdraw() -> GatewayOutput {
        var out = GatewayOutput()
        for track in tracks {
            send(MQTTMessage(topic: topics.presence(of: track.id.ref, seenBy: gatewayID), text: "", qos: 1, retain: true), &out)
        }
        send(MQTTMessage(topic: topics.status(ofGateway: gatewayID), text: "offline", qos: 1, retain: true), &out)
        return out
    }

    /// Applies a new fleet config (from `fleet/config` or a reload) and reports it on
    /// `gateways/<id>/events`. The source and the broker cannot change without a restart;
    /// the report says so.
    ///
    /// `superseded`: pushes dropped unread because this newer one came first
    /// (`MQTTClient.newest(on:)`), said in the report.
    public mutating func apply(_ new: FleetConfig, origin: String, superseded: Int = 0, at now: WallTime) -> GatewayOutput {
        var out = GatewayOutput()
        guard let mine = new.gateway(id: gatewayID) else {
            report(.rejected(["the new config has no gateway \"\(gatewayID)\""]), origin: origin, superseded: superseded,
                   at: now, &out)
            return out
        }
        var needsRestart: [String] = []
        if mine.source != gateway.source { needsRestart.append("source") }
        if mine.scan != gateway.scan { needsRestart.append("scan") }
        if !brokerFromCommandLine, new.broker(forGateway: gatewayID) != config.broker(forGateway: gatewayID) {
            needsRestart.append("broker")
        }
        if new.topicPrefix != config.topicPrefix { needsRestart.append("topicPrefix") }
        let previousTracks = tracker.tracks
        let zoneChanged = (mine.zone ?? gatewayID) != (gateway.zone ?? gatewayID)
        config = new
        gateway.tracker = mine.tracker
        gateway.healthInterval = mine.healthInterval
        gateway.zone = mine.zone
        gateway.reportInterval = mine.reportInterval
        reporter.interval = mine.reportInterval
        registry = Self.registry(new)
        var tracker = Self.tracker(new, mine)
        // Keep what is in range; beacons the new allow-list rejects exit now.
        for track in previousTracks.values.sorted(by: { $0.id < $1.id }) where !new.accepts(track.id) {
            send(MQTTMessage(topic: topics.presence(of: track.id.ref, seenBy: gatewayID), text: "", qos: 1, retain: true), &out)
        }
        tracker.restore(previousTracks.values.filter { new.accepts($0.id) })
        self.tracker = tracker
        if zoneChanged {
            // The retained presence names the zone: what is in range now says the new name.
            for track in tracker.tracks.values.sorted(by: { $0.id < $1.id }) { send(presenceMessage(track), &out) }
        }
        report(.applied(needsRestart: needsRestart), origin: origin, superseded: superseded, at: now, &out)
        return out
    }

    /// A fleet config that did not parse: reported on `gateways/<id>/events`; the last
    /// good one stays. `superseded` as for `apply`.
    public mutating func reject(_ errors: [String], origin: String, superseded: Int = 0, at now: WallTime) -> GatewayOutput {
        var out = GatewayOutput()
        report(.rejected(errors), origin: origin, superseded: superseded, at: now, &out)
        return out
    }

    public mutating func setScanningPaused(_ paused: Bool) {
        scanningPaused = paused
    }

    // MARK: - Decisions

    private mutating func observe(_ beacon: Beacon, address: BluetoothAddress, rssi: Int8?, at time: CaptureTime,
                                  _ out: inout GatewayOutput) {
        if case .eddystoneTLM(let tlm) = beacon {
            telemetry(tlm, address: address, at: time, &out)
            return
        }
        guard let id = beacon.id else { return }
        guard config.accepts(id) else {
            filtered += 1
            return
        }
        if case .eddystone = id { eddystoneAddresses[address] = id }
        let update = tracker.observe(id, address: address, rssi: rssi, measuredPower: beacon.measuredPower,
                                     txPower: beacon.txPower, at: time)
        reporter.add(id, rssi: rssi.map { Double($0) + gateway.tracker.rssiOffset }, at: time)
        for timeout in update.timeouts { handle(timeout, &out) }
        if update.entered, logsBeacons {
            out.log.append(LogEntry(.debug, "enter", ["beacon": "\(id)"]))
        }
        if update.entered || update.proximityChangedFrom != nil {
            send(presenceMessage(update.track), &out)
        }
        if update.publish {
            // Bytes straight into the message: no String, no second copy (raw mode sends every advert).
            let payload = Payloads.sightingBytes(update.track, gateway: gatewayID, entry: registry[id], at: time)
            send(MQTTMessage(topic: topics.sightings(of: id.ref), payload: payload, qos: 0, retain: false), &out)
        }
    }

    /// An Eddystone-TLM frame: it carries no identity, so it is the telemetry of the
    /// Eddystone-UID beacon tracked at the same address (a TLM frame before the beacon's
    /// UID was heard is dropped; the next one comes). Retained on
    /// `eddystone/<namespace>/<instance>/telemetry`, at most once per `telemetryInterval`
    /// per beacon (TLM changes slowly; beacons send it every few seconds).
    private mutating func telemetry(_ tlm: EddystoneTLM, address: BluetoothAddress, at time: CaptureTime,
                                    _ out: inout GatewayOutput) {
        guard let id = eddystoneAddresses[address], tracker.tracks[id] != nil else { return }
        if let last = telemetrySent[id], time.seconds(since: last) < Self.telemetryInterval { return }
        telemetrySent[id] = time
        send(MQTTMessage(topic: topics.telemetry(of: id.ref), text: Payloads.telemetry(tlm, gateway: gatewayID, at: time),
                         qos: 1, retain: true), &out)
    }

    /// Publishes the report of every window that ended by `now`, at QoS 0 (a stream: QoS 1
    /// would hold presence and exits back behind it in the client's in-flight window).
    /// While the broker is away they wait in `reportBacklog`, the latest
    /// `reportBacklogSeconds` of them; older ones are dropped (the brain takes what is
    /// missing as unknown, not as silence).
    private mutating func report(upTo now: CaptureTime, _ out: inout GatewayOutput) {
        let tracker = self.tracker
        let reports = reporter.close(upTo: now, gateway: gatewayID) { tracker.tracks[$0] }
        let topic = topics.rssiReports(ofGateway: gatewayID)
        for report in reports {
            let message = MQTTMessage(topic: topic, text: report.json, qos: 0, retain: false)
            if isConnected {
                out.messages.append(message)
                recentReports.append((report.to, message))
            } else {
                reportBacklog.append((report.to, message))
            }
        }
        Self.dropExpired(&recentReports, at: now)
        Self.dropExpired(&reportBacklog, at: now)
    }

    /// Drops the reports older than `reportBacklogSeconds` at `now` from a list kept in
    /// capture order (the sent ones kept for a resend, or the backlog): its first tells whether
    /// there is any.
    private static func dropExpired(_ reports: inout [(to: CaptureTime, message: MQTTMessage)], at now: CaptureTime) {
        guard let first = reports.first, now.seconds(since: first.to) > reportBacklogSeconds else { return }
        reports.removeAll { now.seconds(since: $0.to) > reportBacklogSeconds }
    }

    /// RSSI reports waiting for the broker (`reportBacklog`).
    public var reportsWaiting: Int { reportBacklog.count }

    private mutating func handle(_ timeout: TrackTimeout, _ out: inout GatewayOutput) {
        switch timeout {
        case .stale(let track, _):
            send(presenceMessage(track), &out)
        case .exit(let track, let at):
            if logsBeacons { out.log.append(LogEntry(.debug, "exit", ["beacon": "\(track.id)"])) }
            if eddystoneAddresses[track.address] == track.id { eddystoneAddresses[track.address] = nil }
            telemetrySent[track.id] = nil
            let topic = topics.presence(of: track.id.ref, seenBy: gatewayID)
            send(MQTTMessage(topic: topic, text: "", qos: 1, retain: true), &out)
            recentDeletions.removeAll { $0.topic == topic || at.seconds(since: $0.at) > Self.reportBacklogSeconds }
            recentDeletions.append((topic, at))
        }
    }

    private func presenceMessage(_ track: Track) -> MQTTMessage {
        MQTTMessage(topic: topics.presence(of: track.id.ref, seenBy: gatewayID),
                    text: Payloads.gatewayPresence(track, gateway: gatewayID, zone: gateway.zone ?? gatewayID),
                    qos: 1, retain: true)
    }

    private mutating func report(_ result: ConfigApplyResult, origin: String, superseded: Int, at now: WallTime,
                                 _ out: inout GatewayOutput) {
        out.config = result
        var metadata = ["origin": origin]
        if superseded > 0 { metadata["superseded"] = "\(superseded)" }
        switch result {
        case .applied:
            out.log.append(LogEntry(.info, "applied a new fleet config", metadata))
        case .rejected(let errors):
            metadata["errors"] = errors.joined(separator: "; ")
            out.log.append(LogEntry(.error, "rejected a fleet config; keeping the last good one", metadata))
        }
        let text = Payloads.configReport(result, origin: origin, superseded: superseded, at: now)
        send(MQTTMessage(topic: topics.events(ofGateway: gatewayID), text: text, qos: 1, retain: false), &out)
    }

    /// Out now while connected; otherwise kept for the reconnect.
    private mutating func send(_ message: MQTTMessage, _ out: inout GatewayOutput) {
        if isConnected { out.messages.append(message) } else { queue(message) }
    }

    private mutating func queue(_ message: MQTTMessage) {
        outbox.queue(message)
    }
}

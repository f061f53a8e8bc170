// Over 500 lines: the decision step's state (evidence, beacons, the report clock, pending samples) is private to FleetPresence and every step reads and changes all of it; ZoneFusion.swift and ZoneModel.swift hold what stands alone.
public import BeaconKit
public import Contract
import Tracking
public import Config

/// One gateway's view of a beacon, as the brain knows it.
public struct GatewayView: Sendable, Equatable {
    public var gateway: String
    /// The gateway's zone name ("Counter"), from its presence payload or the fleet config.
    public var zoneName: String
    public var proximity: Proximity
    /// Smoothed RSSI, dBm; `nil` when the gateway's controller reports none.
    public var rssiSmoothed: Double?
    /// Estimated distance, metres.
    public var distance: Double?
    /// Known from the gateway's retained presence only, not (yet) from its reports: it
    /// lasts until the gateway deletes its presence or goes offline. A view the gateway's
    /// reports keep (`announced == false`) ends when the reports stop hearing the beacon
    /// for the gateway's `exitTimeout` (capture time).
    public var announced: Bool
    /// When the gateway last said something about the beacon: capture time of its report,
    /// or the brain's time of its presence message.
    public var lastUpdate: CaptureTime

    public init(gateway: String, zoneName: String, proximity: Proximity, rssiSmoothed: Double?, distance: Double?,
                announced: Bool, lastUpdate: CaptureTime) {
        self.gateway = gateway
        self.zoneName = zoneName
        self.proximity = proximity
        self.rssiSmoothed = rssiSmoothed
        self.distance = distance
        self.announced = announced
        self.lastUpdate = lastUpdate
    }

    /// Whether this view is the stronger signal: smoothed RSSI when both have one (then
    /// proximity), proximity classes otherwise (emulated controllers report no RSSI), and
    /// the gateway id last so that the choice never depends on dictionary order.
    public func isStronger(than other: GatewayView) -> Bool {
        if let a = rssiSmoothed, let b = other.rssiSmoothed, a != b { return a > b }
        if proximity != other.proximity { return proximity < other.proximity }
        if (rssiSmoothed == nil) != (other.rssiSmoothed == nil) { return rssiSmoothed != nil }
        return gateway < other.gateway
    }
}

/// A beacon present somewhere in the fleet.
public struct FleetBeacon: Sendable, Equatable {
    public let ref: BeaconRef
    /// From the gateways' payloads (topics carry none).
    public var uuid: BeaconUUID?
    /// Every gateway that sees the beacon, by gateway id; never empty.
    public internal(set) var views: GatewayMap<GatewayView>
    /// The gateway holding the zone.
    public internal(set) var zone: String
    /// The fleet proximity: the zone gateway's.
    public internal(set) var proximity: Proximity
    /// When this visit began: capture time of the first advertisement (the brain's clock
    /// for a visit known from retained presence only).
    public internal(set) var since: CaptureTime

    public var zoneView: GatewayView? { views[zone] }

    /// The retained fleet presence for this beacon.
    public var report: FleetPresenceReport {
        FleetPresenceReport(
            beacon: ref, uuid: uuid, zone: zone, zoneName: zoneView?.zoneName ?? zone,
            gateways: views.values.sorted { $0.gateway < $1.gateway }.map {
                FleetPresenceReport.View(gateway: $0.gateway, zone: $0.zoneName, proximity: $0.proximity,
                                         rssiSmoothed: $0.rssiSmoothed, distance: $0.distance)
            },
            proximity: proximity, since: since)
    }
}

/// What a change in fleet presence means, in the order it happened.
public enum FleetEvent: Sendable, Equatable {
    /// The beacon is now seen by a gateway of the fleet after being seen by none.
    case enter(BeaconRef)
    /// No gateway sees the beacon any more; the beacon as it was last.
    case exit(FleetBeacon)
    case zoneChanged(BeaconRef, from: String, to: String)
    /// A gateway began or stopped seeing a beacon that stays present, or what a view says
    /// of it (its proximity, its zone's name) or its UUID changed.
    case viewsChanged(BeaconRef)
    /// The fleet proximity changed (on enter: from `unknown`).
    case proximity(BeaconRef, from: Proximity, to: Proximity)
    /// A report window in which the zone gateway heard the beacon (at most one per its
    /// `publishInterval`, as its sightings): one "update" for `update` rules and cooldowns
    /// such as "after 3 updates at near", reported whether or not anything changed; `at` is
    /// the capture time of the decision step, so updates decided together stay apart.
    case update(BeaconRef, Proximity, at: CaptureTime)

    public var beacon: BeaconRef {
        switch self {
        case .enter(let ref), .zoneChanged(let ref, _, _), .viewsChanged(let ref), .proximity(let ref, _, _),
             .update(let ref, _, _): ref
        case .exit(let beacon): beacon.ref
        }
    }
}

/// Fleet-wide presence: fuses every gateway's reports of every beacon into one zone per
/// beacon, decided in capture time (docs/presence.md has the model and its parameters).
///
/// - Evidence accumulates per beacon and gateway in a Kalman filter on RSSI
///   (`LinkEstimate`). The zone moves to another gateway when the brain is at least
///   `zoneConfidence` sure that it hears the beacon louder than the zone's gateway (the
///   difference of their levels against the uncertainty of both), `zoneUpdates` report
///   windows in a row; `zoneConfidenceWalking` sure while that gateway's level rises
///   against the zone's (a walker). A gateway silent for `zoneStaleAfter` cannot take the
///   zone, and a zone gateway silent that long loses it to any that still hears the beacon.
/// - A new beacon enters after `entryWindow` seconds of evidence, in the zone of the
///   loudest gateway then, not of whichever report came first; in a store with an
///   entrance, once an entrance gateway has heard it or `entranceWait` has passed.
/// - It leaves when no gateway has heard it for as long as it takes to miss `exitSamples`
///   advertisements in a row at the rate they were arriving (at least `exitMinimum`, at
///   most the gateways' `exitTimeout`), at that deadline, in the zone it had: silence moves
///   nobody.
/// - Decisions wait until every gateway has reported the moment (`ReportClock`).
///
/// A gateway known only from its retained presence (before its reports arrive, or one
/// without reports) holds a view that lasts until the gateway deletes it or goes
/// offline. A value owned by one task; time is passed in.
public struct FleetPresence: Sendable {
    public struct Settings: Sendable, Equatable {
        public var brain: BrainConfig
        /// Per gateway: how long its view lasts after its reports stop hearing a beacon (its
        /// `exitTimeout`); `defaultViewTimeout` for gateways not in the config.
        public var viewTimeouts: [String: Double] { didSet { shortestViewTimeout = Self.shortest(viewTimeouts, defaultViewTimeout) } }
        public var defaultViewTimeout: Double { didSet { shortestViewTimeout = Self.shortest(viewTimeouts, defaultViewTimeout) } }
        /// The shortest view timeout of any gateway: a beacon silent for less has lost no
        /// view, and has not left, wherever it was heard (no per-gateway look-up needed).
        public private(set) var shortestViewTimeout: Double
        /// Seconds between decisions: the shortest report interval of the fleet.
        public var step: Double
        /// Gateways by the door (`entrance`): new beacons enter in their zone unless another
        /// gateway is clearly louder.
        public var entrances: Set<String> = []
        /// Per gateway: its store (absent: not set, the fleet's one store). A new beacon that a
        /// store with an entrance heard waits `brain.entranceWait` for the entrance to hear it.
        public var stores: [String: UInt16] = [:]
        /// Per gateway: seconds between two "updates" (its `publishInterval`, 0 in raw mode),
        /// so rules counting updates count one a second, as they counted sightings.
        public var updateIntervals: [String: Double] = [:]
        /// Per gateway: where it stands on the floor (the zone HMM's adjacency).
        public var positions: [String: FloorPosition] = [:]
        /// Gateways that send no RSSI reports (`reportInterval` 0): after the brain's
        /// reconnect nothing is waited for from them (`reconnected`).
        public var reportsOff: Set<String> = []
        /// A hole in a gateway's live reports is asked for again (`takeResendRequests`) and
        /// waited for (`holeWait`) before it is decided as a gap: the live brain, whose
        /// gateways answer. Off where nobody answers (`beaconctl score` replays in process).
        public var asksAgainForHoles = false

        public init(_ brain: BrainConfig = BrainConfig(), viewTimeouts: [String: Double] = [:],
                    defaultViewTimeout: Double = 10, step: Double = 0.5) {
            self.brain = brain
            self.viewTimeouts = viewTimeouts
            self.defaultViewTimeout = defaultViewTimeout
            shortestViewTimeout = Self.shortest(viewTimeouts, defaultViewTimeout)
            self.step = max(0.05, step)
        }

        private static func shortest(_ timeouts: [String: Double], _ fallback: Double) -> Double {
            timeouts.values.reduce(fallback, min)
        }

        public init(_ config: FleetConfig) {
            let timeouts = Dictionary(config.gateways.map { ($0.id, $0.tracker.exitTimeout) }, uniquingKeysWith: { a, _ in a })
            let intervals = config.gateways.map(\.reportInterval).filter { $0 > 0 }
            self.init(config.brain, viewTimeouts: timeouts,
                      defaultViewTimeout: config.gateways.map(\.tracker.exitTimeout).max() ?? 10,
                      step: intervals.min() ?? 0.5)
            stores = Dictionary(config.gateways.compactMap { g in g.store.map { (g.id, $0) } }, uniquingKeysWith: { a, _ in a })
            entrances = Set(config.gateways.filter(\.entrance).map(\.id))
            reportsOff = Set(config.gateways.filter { $0.reportInterval == 0 }.map(\.id))
            positions = Dictionary(config.gateways.compactMap { g in g.position.map { (g.id, $0) } }, uniquingKeysWith: { a, _ in a })
            updateIntervals = Dictionary(config.gateways.map { ($0.id, $0.tracker.raw ? 0 : $0.tracker.publishInterval) },
                                         uniquingKeysWith: { a, _ in a })
        }

        func updateInterval(_ gateway: String) -> Double { updateIntervals[gateway] ?? 1 }

        func viewTimeout(_ gateway: String) -> Double { viewTimeouts[gateway] ?? defaultViewTimeout }
        var zScore: (still: Double, walking: Double) {
            (normalQuantile(brain.zoneConfidence), normalQuantile(brain.zoneConfidenceWalking))
        }
    }

    public var settings: Settings {
        didSet { zScore = settings.zScore }
    }
    public private(set) var beacons: [BeaconRef: FleetBeacon] = [:]
    /// Gateways whose status is `offline`: their retained presence is stale.
    public private(set) var offlineGateways: Set<String> = []
    /// Gateway names for reports: the config's zone names.
    public var zoneNames: [String: String] = [:] {
        didSet { zoneNamesVersion &+= 1 }
    }
    /// Counts the changes of `zoneNames`: a sample keeps its gateway's zone name as it was when
    /// its report came, and a step takes it from there while this is unchanged, instead of
    /// looking it up by gateway id for every sample (SipHash of the id, a fortieth of the
    /// brain's instructions: docs/PERFORMANCE.md §11).
    private var zoneNamesVersion = 0

    private var zScore: (still: Double, walking: Double)
    private var evidence: [BeaconRef: Evidence] = [:]
    /// The keys of `evidence` in order (`BeaconRef`'s), which is the order a decision step
    /// goes through them and so the order of its events; it may still hold a few whose
    /// evidence ended outside a step (skipped, dropped by the next step). Kept as beacons come
    /// and go rather than sorted at every step, which cost a few thousand instructions per
    /// message received (docs/PERFORMANCE.md, section 11).
    private var evidenceOrder: [BeaconRef] = []
    private var clock = ReportClock()
    private var pending: [PendingSample] = []
    private var sequence = 0
    /// The last decision step processed.
    private var processed: CaptureTime?
    private var decisions: [ZoneDecision] = []
    private var gaps: [ReportGap] = []
    /// Capture time of each beacon's last exit (the last few minutes'), to tell a
    /// gateway's late presence from a visit the reports missed.
    private var lastExits: [BeaconRef: CaptureTime] = [:]
    /// Seconds a gateway's reports may trail its presence.
    static let reportSlack = 2.0
    /// Shortest gap in a gateway's reports that is reported (`takeGaps`), seconds: a lost
    /// window or two changes no decision worth telling.
    public static let reportedGap = 2.0
    /// After the brain's own reconnect (`reconnected`): the gateways whose reports it had or
    /// whose presence it holds (unless their reports are off), or that said `online` live
    /// since (back from their own outage: `gatewayIsBack`), and
    /// until when (the brain's running clock) it waits for them to send again what they sent
    /// while it was away (`resendAfter`, `{"reports":{"after":…}}`): a gateway whose own
    /// connection stayed up published those reports to no one. Meanwhile a live report of one
    /// of them that leaves a hole after what the brain has (`from` past its watermark) waits
    /// in `resendHeld` for the resent ones to fill it, instead of making the hole a gap;
    /// and its retained presence read back is taken as a live one (the reports will say).
    private var awaitingResend: Set<String> = []
    /// Of those, the ones back from their own outage (`gatewayIsBack`).
    private var backFromOutage: Set<String> = []
    private var resendUntil: WallTime?
    private var resendHeld: [String: [RSSIReport]] = [:]
    /// Gateways still waited for when a wait after a reconnect ended at `resendUntil`: their
    /// reports sent again never came (`takeUnansweredResends`).
    private var unansweredResends: [String] = []
    /// Presence deletions of those gateways that came meanwhile (`gatewayPresenceDeleted`),
    /// each with the capture time its gateway's reports had reached when it came (`made`).
    private var deferredDeletions: [(ref: BeaconRef, gateway: String, made: CaptureTime?)] = []
    /// Presences of new beacons from those gateways, none of whose reports the brain has yet
    /// (`gatewayPresence`): taken when the wait ends, before the deletions.
    private var deferredPresences: [(report: GatewayPresenceReport, retained: Bool, at: CaptureTime)] = []
    /// A hole in one gateway's live reports while the brain stayed connected (its store's
    /// bridge moved to another node of the centre, a QoS 0 report lost on the way): with
    /// `Settings.asksAgainForHoles` the gateway is asked for its reports after the brain's
    /// watermark again (`takeResendRequests`, `{"reports":{"after":…}}`: a gateway keeps
    /// what it sent for `reportBacklogSeconds`), and its live reports wait in `resendHeld`
    /// until the resent ones fill the hole, `holeWait` at most (running seconds); its
    /// presence deletions wait with them. Its held reports count as heard, so the clock does
    /// not let it go meanwhile: the decisions wait for it, and are those of a run without
    /// the loss (issue 22 item 3: killing the node a store's bridge was on lost the report
    /// of 100/9's last advertisement, and its exit came 0.25 s early).
    private var holeWaits: [String: HoleWait] = [:]
    private struct HoleWait {
        var until: WallTime
        /// A report sent again has come since the request.
        var answered = false
    }
    private var resendRequests: [(gateway: String, after: CaptureTime)] = []
    /// Gateways of a store whose bridge connected again (`storeReconnected`), to be asked for
    /// their reports when their first live report comes through it.
    private var askOnFirstReport: Set<String> = []
    /// Per gateway, hole waits in a row that ended without a report sent again (a version
    /// that does not answer, or requests lost): from `unansweredLimit` on, its holes are gaps
    /// at once, until it sends a report again marked resent (after a reconnect, its own or
    /// the brain's).
    private var unanswered: [String: Int] = [:]
    static let unansweredLimit = 2
    /// How long the brain waits for the reports of a hole sent again, at most (running
    /// seconds). A gateway that answers sends at least the held report again (it is among
    /// those it keeps), normally within one round trip, and a hole it no longer keeps is
    /// then decided as a gap; only one that does not answer lasts this long, holding every
    /// decision back meanwhile.
    static let holeWait = 3.0
    /// How long the brain waits for the reports sent again after its reconnect, at most
    /// (running seconds): one round trip of a command normally; a gateway of an older
    /// version sends none, and its held reports are then taken with the hole as a gap.
    static let resendWait = 10.0
    /// Visits a restarted brain continues (`restore`), with the zone it restored: until
    /// `restoreWarmup` seconds of capture time have been decided, the evidence rebuilds
    /// silently and the zone holds (no zone decisions from a few samples after a restart).
    private var restoring: [BeaconRef: (zone: String?, until: CaptureTime?)] = [:]

    public init(settings: Settings = .init()) {
        self.settings = settings
        zScore = settings.zScore
    }

    /// Reports dropped because the brain already had the capture time they cover
    /// (`report`): resent after a reconnect, a QoS 1 duplicate, a bridge's queue delivered
    /// after the live reports.
    public private(set) var staleReports = 0

    /// Reports of a gateway the brain had let go (late or restarted) with samples from before
    /// the capture time it has decided: those samples are dropped (`report`).
    public private(set) var behindReports = 0

    public subscript(ref: BeaconRef) -> FleetBeacon? { beacons[ref] }

    /// Capture time up to which the brain has decided.
    public var decidedUntil: CaptureTime? { processed }

    /// The gateways the brain's decisions wait for, and those it has stopped waiting for
    /// because their reports were late.
    public var reportingGateways: (waited: [String], late: [String]) { (clock.waitedFor, clock.excluded.sorted()) }

    /// The gaps in the gateways' reports found since the last call: spans of capture time
    /// whose evidence never arrived (lost, or older than a gateway's backlog), decided as
    /// unknown. The brain reports them (`brain/events`) rather than inventing decisions.
    public mutating func takeGaps() -> [ReportGap] {
        defer { gaps = [] }
        return gaps
    }

    /// The gateways asked for their reports again after a reconnect (the brain's own or a
    /// store bridge's) that had sent none when the wait for them ended (`resendWait`), since
    /// the last call: what they held back was decided without them (the request or the
    /// answer lost, or a version that does not answer). The brain logs them.
    public mutating func takeUnansweredResends() -> [String] {
        defer { unansweredResends = [] }
        return unansweredResends
    }

    /// The decisions made since the last call, in order.
    public mutating func takeDecisions() -> [ZoneDecision] {
        defer { decisions = [] }
        return decisions
    }

    // MARK: - Reports

    /// A gateway's report (`gateways/<id>/rssi`). Its entries wait until every gateway
    /// has reported their moment; the decisions that become possible are made now.
    /// `accepts` filters the beacons this brain handles; `held` says which views must not
    /// end by silence (their store is cut off).
    public mutating func report(_ report: RSSIReport, receivedAt wall: WallTime, accepts: (BeaconRef) -> Bool = { _ in true },
                                holding held: (BeaconRef, String) -> Bool = { _, _ in false }) -> [FleetEvent] {
        take(report, receivedAt: wall, accepts: accepts, holding: held, askingForHoles: settings.asksAgainForHoles)
    }

    /// `report`; `ask`: a hole is asked for again (`holeWaits`) rather than decided as a gap
    /// (not for reports held until a wait ended: it was asked for).
    private mutating func take(_ report: RSSIReport, receivedAt wall: WallTime, accepts: (BeaconRef) -> Bool = { _ in true },
                               holding held: (BeaconRef, String) -> Bool, askingForHoles ask: Bool) -> [FleetEvent] {
        offlineGateways.remove(report.gateway)
        clock.isOnline(report.gateway)
        // A report whose window this brain already has is no news: a gateway resends its last
        // reports after a disconnect (they may have been lost in flight), QoS 1 may deliver
        // one twice, a store's bridge may deliver its queue after the live reports. Decided
        // again, it would bring back a beacon that already left. (A busy window's first parts
        // end where they begin, at the watermark: they are not late.) One exception: after
        // the gateway's connection ended (`gatewayDisconnected`), its first report not marked
        // resent may start over from an earlier capture time (a replay or capture restarted):
        // its capture time starts over with it, and the brain, which has decided past it,
        // goes on without it until it catches up.
        if let mark = clock.watermarks[report.gateway],
           report.resent ? report.to <= mark : report.to < mark || (report.to == mark && report.from < report.to) {
            guard !report.resent, clock.restarted.contains(report.gateway) else {
                staleReports += 1
                // The answer of a gateway waited for after a reconnect, whose live reports
                // came on with no hole (none held): the brain already has every report it sends
                // again, so its wait ends here. Waiting for a resent report past the watermark,
                // which a gateway answering at once never sends, held its deletions to the end
                // of everyone's wait (NATSNodeFaultTests, the bridge's node killed and the bridge
                // back within 2 s: its reports held up behind the bridge's reconnect came
                // before the request, and 100/9's exit came at 11.5 s instead of 3.5 s).
                if answersItsWait(report) { return endAwaiting(report.gateway, at: wall, holding: held) }
                return []
            }
            clock.setWatermark(report.gateway, nil)
            clock.exclude(report.gateway)
        }
        if !report.resent { clock.restarted.remove(report.gateway) }
        var events = endResendWait(at: wall, holding: held)
        events += endHoleWaits(at: wall, holding: held)
        if report.resent {
            holeWaits[report.gateway]?.answered = true
            unanswered[report.gateway] = nil
        } else if !askOnFirstReport.isEmpty, askOnFirstReport.remove(report.gateway) != nil,
                  let after = resendAfter(report.gateway) {
            resendRequests.append((report.gateway, after))
        }
        // A gateway the brain has no report of yet, asked for all it kept after the brain's
        // reconnect (`resendAfter`, the epoch): its live reports wait for those too, or the
        // first live one would set its watermark past them and they would come as stale
        // (NATSNodeFaultTests, the brain's node killed at the first effects: the counter's
        // 100/9 of 0–0.5 s lost, its exit at 11 s instead of 3.5 s). Not one back from its own
        // outage: it sends its backlog live, unmarked, on the brain's request.
        let mark = clock.watermarks[report.gateway]
        if !report.resent, mark.map({ report.from > $0 }) ?? (!awaitingResend.isEmpty && awaitingResend.contains(report.gateway)
                                                                && !backFromOutage.contains(report.gateway)) {
            // A hole after `mark` (asked for now, unless a wait is on or the gateway does not
            // answer), or no report of it yet while the brain waits for all it kept: held.
            let awaited = awaitingResend.contains(report.gateway)
            if let mark, !awaited, holeWaits[report.gateway] == nil, ask,
               unanswered[report.gateway, default: 0] < Self.unansweredLimit {
                holeWaits[report.gateway] = HoleWait(until: wall + Self.holeWait)
                resendRequests.append((report.gateway, mark))
            }
            if awaited || holeWaits[report.gateway] != nil {
                var waiting = report
                waiting.entries.removeAll { !accepts($0.beacon) }
                resendHeld[report.gateway, default: []].append(waiting)
                // Its reports come: it is not late, and is not let go while they wait.
                clock.heard(report.gateway, at: wall)
                return events
            }
        }
        if let mark, report.from > mark {
            gap(report.gateway, from: mark, to: report.from)
            if report.from.seconds(since: mark) >= Self.reportedGap {
                gaps.append(ReportGap(gateway: report.gateway, from: mark, to: report.from))
            }
        }
        // Samples from before what the brain has decided (a gateway it let go, coming back
        // further behind than that): decided now, each would open a visit in the past that
        // its own silence ends at once, an enter and an exit at every report. The brain does
        // not decide in the past: they are dropped and the report counted (`behindReports`),
        // and the gateway rejoins when its reports reach the brain's time
        // (`ReportClock.reported`). Only a gateway let go: one waited for never reports
        // behind it, and a gateway's very first report, a moment after the brain decided
        // without knowing it, is still taken.
        var late = false
        let letGo = clock.excluded.contains(report.gateway)
        let zoneName = zoneNames[report.gateway] ?? report.gateway
        for entry in report.entries {
            let ref = entry.beacon
            guard accepts(ref) else { continue }
            let time = report.from + max(0, entry.at)
            if letGo, let processed, time < processed {
                late = true
                continue
            }
            sequence += 1
            pending.append(PendingSample(time: time, gateway: report.gateway, ref: ref, entry: entry, sequence: sequence,
                                         zoneName: zoneName, zoneNamesVersion: zoneNamesVersion))
        }
        if late { behindReports += 1 }
        clock.reported(report.gateway, upTo: report.to, at: wall)
        decide(&events, holding: held)
        // Reports held for a hole the resent ones have now filled (or covered: then stale).
        while let next = resendHeld[report.gateway]?.first, let mark = clock.watermarks[report.gateway], next.from <= mark {
            resendHeld[report.gateway]?.removeFirst()
            events += take(next, receivedAt: wall, holding: held, askingForHoles: false)
        }
        if holeWaits[report.gateway] != nil, resendHeld[report.gateway]?.isEmpty ?? true {
            events += endHoleWait(report.gateway, at: wall, holding: held)
        }
        if answersItsWait(report) { events += endAwaiting(report.gateway, at: wall, holding: held) }
        return events
    }

    /// Whether `report` is a gateway's answer that ends its wait after a reconnect
    /// (`awaitingResend`): sent again, with none of its live reports left held for a hole.
    private func answersItsWait(_ report: RSSIReport) -> Bool {
        report.resent && awaitingResend.contains(report.gateway) && resendHeld[report.gateway]?.isEmpty ?? true
    }

    /// A gateway waited for after a reconnect (`awaitingResend`) has sent its reports again
    /// and the live ones held for them are taken: its wait ends now rather than with
    /// everyone's at `resendUntil`. Its presences and deletions that waited are taken, and
    /// later ones at once: a deletion the gateway made after the hole was filled is live
    /// news (NATSNodeFaultTests, the bridge's node killed and the bridge back 1.7 s later:
    /// the counter's deletion of 100/9, made at 3.5 s, waited to the end of the 10 s wait,
    /// and the exit came at 11.5 s).
    private mutating func endAwaiting(_ gateway: String, at wall: WallTime, holding held: (BeaconRef, String) -> Bool) -> [FleetEvent] {
        awaitingResend.remove(gateway)
        backFromOutage.remove(gateway)
        askOnFirstReport.remove(gateway)
        var events = takeDeferredPresences { $0 == gateway }
        guard holeWaits[gateway] == nil else { return events }
        events += takeDeferredDeletions { $0 == gateway }
        return events
    }

    /// The presences that waited (`deferredPresences`) of the gateways `released` picks, taken now.
    private mutating func takeDeferredPresences(of released: (String) -> Bool) -> [FleetEvent] {
        let presences = deferredPresences.filter { released($0.report.gateway) }
        deferredPresences.removeAll { released($0.report.gateway) }
        var events: [FleetEvent] = []
        for presence in presences { events += gatewayPresence(presence.report, retained: presence.retained, at: presence.at) }
        return events
    }

    /// The deletions that waited (`deferredDeletions`) of the gateways `released` picks, taken now.
    private mutating func takeDeferredDeletions(of released: (String) -> Bool) -> [FleetEvent] {
        let deletions = deferredDeletions.filter { released($0.gateway) }
        deferredDeletions.removeAll { released($0.gateway) }
        var events: [FleetEvent] = []
        for deletion in deletions { events += presenceDeleted(deletion.ref, gateway: deletion.gateway, made: deletion.made) }
        return events
    }

    /// The gateways to ask for their reports after a capture time again, since the last call
    /// (`holeWaits`): `GatewayCommand.sendReports(after:)`.
    public mutating func takeResendRequests() -> [(gateway: String, after: CaptureTime)] {
        defer { resendRequests = [] }
        return resendRequests
    }

    /// The hole waits past their time end (`endHoleWait`).
    private mutating func endHoleWaits(at wall: WallTime, holding held: (BeaconRef, String) -> Bool) -> [FleetEvent] {
        guard !holeWaits.isEmpty else { return [] }
        var events: [FleetEvent] = []
        for gateway in holeWaits.keys.sorted() where holeWaits[gateway].map({ wall >= $0.until }) ?? false {
            if holeWaits[gateway]?.answered == false { unanswered[gateway, default: 0] += 1 }
            events += endHoleWait(gateway, at: wall, holding: held)
        }
        return events
    }

    /// A gateway's hole wait ends (filled, or past its time): the reports still held are taken
    /// in order, a hole still left a gap (`gap`), then its deletions that waited.
    private mutating func endHoleWait(_ gateway: String, at wall: WallTime, holding held: (BeaconRef, String) -> Bool) -> [FleetEvent] {
        holeWaits[gateway] = nil
        var events: [FleetEvent] = []
        if !awaitingResend.contains(gateway) {
            let waiting = resendHeld[gateway] ?? []
            resendHeld[gateway] = nil
            for report in waiting { events += take(report, receivedAt: wall, holding: held, askingForHoles: false) }
        }
        guard !awaitingResend.contains(gateway) else { return events }
        return events + takeDeferredDeletions { $0 == gateway }
    }

    /// A live `online` of `gateway`: back from its own outage, it sends what it kept when the
    /// brain asks, and what its client was handed before it noticed the outage (QoS 1
    /// presence) at once. During the wait after the brain's reconnect, its deletions wait for
    /// its reports too (`gatewayPresenceDeleted`).
    /// Not while its store's bridge has just come back and none of its live reports has come
    /// through it yet (`askOnFirstReport`): a store's Mosquitto hands its bridge the retained
    /// messages as it connects, and that `online` is the gateway's old status replayed, not
    /// the gateway back. Taken for a return, it let the gateway's live reports through
    /// unheld, past the hole the brain had asked it to fill (NATSNodeFaultTests, the bridge's
    /// node killed before any report reached the brain: the reports of 0–1.5 s sent again
    /// came after the brain had decided up to 5.5 s, and 100/9 exited there, not at 3.5 s).
    public mutating func gatewayIsBack(_ gateway: String) {
        guard !askOnFirstReport.contains(gateway) else { return }
        if resendUntil != nil, !settings.reportsOff.contains(gateway) {
            awaitingResend.insert(gateway)
            backFromOutage.insert(gateway)
        }
    }

    /// A store's bridge connected again (a live `1` on `stores/<major>/bridge`) while the
    /// brain stayed connected: what `gateways` sent while it was down, or into a connection
    /// the centre had lost without telling, reached no one (NATSNodeFaultTests, the bridge's
    /// node cut off at the first effects: the bridge noticed by its keepalive only, 21 s
    /// later; the brain had none of the store's reports yet, so it saw no hole, and the
    /// store's queued deletions ended 100/2 and 100/9 at 0 s). With
    /// `Settings.asksAgainForHoles`, those it had reports of or holds presence of are
    /// waited for as after the brain's own reconnect (`reconnected`): their live reports
    /// and deletions wait, up to `resendWait` (running seconds), for the reports asked for
    /// again (`resendAfter`: after the brain's last of each, or all it kept). Each is asked
    /// when its first live report comes (`takeResendRequests`), not at the `1`: a NATS centre
    /// may not route a command to the bridge's new subscriptions yet then (the bridge's node
    /// killed: requests sent at the `1` were lost, and 100/9's exit came 12 s late, from its
    /// queued deletion at the wait's end).
    public mutating func storeReconnected(_ gateways: some Sequence<String>, at wall: WallTime) {
        guard settings.asksAgainForHoles else { return }
        let awaited = Set(gateways).intersection(knownGateways).subtracting(settings.reportsOff)
        guard !awaited.isEmpty else { return }
        awaitingResend.formUnion(awaited)
        askOnFirstReport.formUnion(awaited)
        for gateway in awaited { holeWaits[gateway] = nil }
        resendUntil = max(resendUntil ?? wall, wall + Self.resendWait)
    }

    /// The gateways the brain has reports of, or holds a view of some beacon from.
    private var knownGateways: Set<String> {
        var known = Set(clock.watermarks.keys)
        for beacon in beacons.values { known.formUnion(beacon.views.keys) }
        return known
    }

    /// The capture time to ask `gateway` to send its reports again after (`GatewayCommand
    /// .sendReports(after:)`): the brain's last of it, while it waits for them after its own
    /// reconnect, or the epoch (all it kept) when the brain has none of its reports yet (it
    /// knew the gateway from its presence only: its node killed at the first effects, the
    /// brain had the door's first report and not the counter's, the counter was asked plainly
    /// and sent nothing again, and 100/9's exit came at 11.5 s instead of 3.5 s); `nil`
    /// otherwise (a plain request).
    public func resendAfter(_ gateway: String) -> CaptureTime? {
        awaitingResend.contains(gateway) ? clock.watermarks[gateway] ?? .epoch : nil
    }

    /// Past `resendUntil`, the wait for resent reports ends: the reports still held are taken
    /// in order, their hole a gap (decided as unknown, `gap`), as without the wait; in the
    /// live brain (`Settings.asksAgainForHoles`) the hole is first asked for once more.
    private mutating func endResendWait(at wall: WallTime, holding held: (BeaconRef, String) -> Bool) -> [FleetEvent] {
        guard let until = resendUntil, wall >= until else { return [] }
        resendUntil = nil
        unansweredResends += awaitingResend.sorted()
        awaitingResend = []
        backFromOutage = []
        askOnFirstReport = []
        // (A gateway whose hole is asked for keeps its reports until that wait ends.)
        let waiting = resendHeld.filter { holeWaits[$0.key] == nil }
        for gateway in waiting.keys { resendHeld[gateway] = nil }
        var events: [FleetEvent] = []
        for gateway in waiting.keys.sorted() {
            // A hole still left is asked for once more (the request may have been lost with
            // the node the brain was on; a gateway that does not answer is soon not asked).
            for report in waiting[gateway] ?? [] {
                events += take(report, receivedAt: wall, holding: held, askingForHoles: settings.asksAgainForHoles)
            }
        }
        events += takeDeferredPresences { _ in true }
        let holes = holeWaits
        return events + takeDeferredDeletions { holes[$0] == nil }
    }

    /// The gateway's reports from `start` to `end` never arrived (its broker or the brain's
    /// was away, or they were lost): the beacons it was hearing are not silent there, just
    /// unknown. They neither exit nor lose the zone for it before `end`.
    /// Its entries still waiting for another gateway's reports (an outage that began before
    /// the brain could decide them) carry the gap into the link they will update.
    private mutating func gap(_ gateway: String, from start: CaptureTime, to end: CaptureTime) {
        for ref in evidence.keys.sorted() {
            guard let link = evidence[ref]?.links[gateway],
                  start.seconds(since: link.lastHeard) < settings.viewTimeout(gateway) else { continue }
            evidence[ref]?.links[gateway]?.unknownUntil = max(link.unknownUntil ?? end, end)
        }
        for i in pending.indices where pending[i].gateway == gateway
            && start.seconds(since: pending[i].time) < settings.viewTimeout(gateway) {
            pending[i].unknownUntil = max(pending[i].unknownUntil ?? end, end)
        }
    }

    /// A gateway's retained presence. It makes a beacon present only when nothing else can:
    /// from a gateway that sends no reports, or read back from the broker; otherwise it
    /// names the view. A retained one from a gateway known to be offline is what it left
    /// behind when it died and is ignored; a live one proves it is back.
    public mutating func gatewayPresence(_ report: GatewayPresenceReport, retained: Bool, at now: CaptureTime) -> [FleetEvent] {
        if offlineGateways.contains(report.gateway) {
            guard !retained else { return [] }
            offlineGateways.remove(report.gateway)
        }
        var events: [FleetEvent] = []
        let ref = report.beacon
        // Set only when it changes: a change makes every sample waiting look its name up again.
        if zoneNames[report.gateway] != report.zone { zoneNames[report.gateway] = report.zone }
        if var beacon = beacons[ref] {
            if let uuid = report.uuid { beacon.uuid = uuid }
            if var view = beacon.views[report.gateway] {
                view.zoneName = report.zone
                if view.announced {
                    view.proximity = report.proximity
                    view.rssiSmoothed = report.rssiSmoothed
                    view.distance = report.distance
                }
                // Either way the gateway confirms it sees the beacon (a store's replay after
                // its bridge was down reconciles by this).
                view.lastUpdate = max(view.lastUpdate, now)
                beacon.views[report.gateway] = view
            } else if evidence[ref]?.links[report.gateway] == nil {
                beacon.views[report.gateway] = announcedView(report, at: now)
                events.append(.viewsChanged(ref))
            }
            if evidence[ref] == nil { refreshZone(&beacon, &events) }
            refreshProximity(&beacon, &events)
            beacons[ref] = beacon
            return events
        }
        // A gateway that reports decides with its reports; its presence starts a visit only
        // where they cannot have: the gateway's visit began well before what its reports
        // cover yet the brain never heard the beacon, or its reports are late (a store cut
        // off, a broker outage: the reports were dropped, its presence was queued); and only
        // after the brain's last exit of it (else it is the late echo of a visit the reports
        // already ended).
        // Nor where its reports of the beacon are here and held (they wait for a hole to be
        // filled, or for what a gateway the brain has no report of yet sends again): they
        // will decide (BrokerOutageTests, 60 s from the first effects: the counter's
        // backlog held, its queued presence of 100/3 entered it at 15.0 s, not 15.25 s).
        guard evidence[ref] == nil, !pending.contains(where: { $0.ref == ref }), !heldReportsHear(ref, report.gateway) else {
            return []
        }
        // Nor while the brain waits for all a gateway kept and has none of its reports yet,
        // held or taken (`resendAfter`, the epoch): they will say whether it heard the beacon
        // (NATSNodeFaultTests, the bridge's node cut off at the first effects: the store's
        // queue brought the counter's presence of 100/3 before any of its reports, and it
        // entered at 15.0 s, not 15.25 s). It waits for the end of the wait, with the
        // gateway's deletions, and then starts the visit only if the reports did not.
        if awaitingResend.contains(report.gateway), clock.watermarks[report.gateway] == nil,
           resendHeld[report.gateway]?.isEmpty ?? true {
            deferredPresences.append((report, retained, now))
            return []
        }
        // (Without a report of it taken yet, its held reports' start stands for its watermark:
        // the presence of a beacon they have not heard yet but will, published a window
        // before them, must not start the visit.)
        if !retained || awaitingResend.contains(report.gateway),
           let mark = clock.watermarks[report.gateway] ?? resendHeld[report.gateway]?.first?.from {
            guard let since = report.since, since < mark - Self.reportSlack || clock.excluded.contains(report.gateway),
                  lastExits[ref].map({ since > $0 }) ?? true else { return [] }
        }
        let view = announcedView(report, at: now)
        // Dated in capture time like every decision: the gateway's `since` (when it began
        // hearing the beacon), else the brain's last decided step; the wall clock only when
        // nothing has told capture time yet (a replay a year old must not enter today).
        let since = report.since ?? processed ?? clock.time ?? now
        beacons[ref] = FleetBeacon(ref: ref, uuid: report.uuid, views: [view.gateway: view], zone: view.gateway,
                                   proximity: view.proximity, since: since)
        events.append(.enter(ref))
        if view.proximity != .unknown { events.append(.proximity(ref, from: .unknown, to: view.proximity)) }
        record(.enter, beacons[ref]!, from: nil, at: since)
        return events
    }

    /// The gateway deleted its presence: the beacon left its range. A view its reports keep
    /// ends with the reports instead (the deletion may arrive before the brain has decided
    /// up to that moment), unless its reports are late (a store cut off: the deletion was
    /// queued, the reports were not).
    public mutating func gatewayPresenceDeleted(_ ref: BeaconRef, gateway: String) -> [FleetEvent] {
        presenceDeleted(ref, gateway: gateway, made: nil)
    }

    /// `gatewayPresenceDeleted`; `made`: when a deletion that waited was made (`deferredDeletions`).
    private mutating func presenceDeleted(_ ref: BeaconRef, gateway: String, made: CaptureTime?) -> [FleetEvent] {
        guard let view = beacons[ref]?.views[gateway], view.announced || clock.excluded.contains(gateway) else { return [] }
        // The view is still the presence's, but the gateway's reports of the beacon are here
        // and wait for another gateway's (after an outage the gateway sends what it kept,
        // then its presence): they turn it into a report view and end it by their silence,
        // dated in capture time, as in a run without the outage.
        if awaitsItsReports(ref, gateway: gateway) { return [] }
        // After the brain's own reconnect the reports of a gateway that reported, or is back
        // from its own outage, may come after its deletion: QoS 1 presence it handed its client
        // before it noticed the outage is sent at once, while the reports wait for the
        // brain's request (BrokerOutageTests,
        // the broker paused 8 s at the first effects: 100/9 entered from presence, deleted
        // before its reports came, then entered again from them: two visits). The deletion
        // waits with them (`resendWait`); a view the reports have taken over by then ends by
        // their silence instead. It is dated when the gateway made it: at the capture time
        // its reports, held or taken, had reached when it came, not when the wait ended
        // (NATSNodeFaultTests, the bridge's node killed with the brain's request for the
        // counter's reports: the request was lost, the counter's deletion of 100/9, made at
        // 3.5 s, waited the 10 s, and the exit was dated 11.5 s).
        if awaitingResend.contains(gateway) || holeWaits[gateway] != nil {
            let reached = [clock.watermarks[gateway], resendHeld[gateway]?.last?.to].compactMap { $0 }.max()
            deferredDeletions.append((ref, gateway, made ?? reached))
            return []
        }
        var events: [FleetEvent] = []
        remove(gateway, from: ref, &events, made: made)
        return events
    }

    /// Whether the gateway's reports keep this view and still come: its end is then decided
    /// in capture time from them (a reconnect's backlog), not when a reconnect did not
    /// confirm it.
    public func reportsKeep(_ ref: BeaconRef, gateway: String) -> Bool {
        guard let view = beacons[ref]?.views[gateway], clock.watermarks[gateway] != nil,
              !clock.excluded.contains(gateway) else { return false }
        return !view.announced || awaitsItsReports(ref, gateway: gateway)
    }

    /// Whether reports of the gateway that hear the beacon have arrived and are not decided
    /// yet (a store's gateways are decided together, moment by moment).
    /// Held reports (a hole asked for, the wait after the brain's reconnect) count: they are
    /// taken once the hole is filled.
    private func awaitsItsReports(_ ref: BeaconRef, gateway: String) -> Bool {
        guard !clock.excluded.contains(gateway) else { return false }
        return pending.contains { $0.ref == ref && $0.gateway == gateway } || heldReportsHear(ref, gateway)
    }

    /// Whether reports of `gateway` held in `resendHeld` hear the beacon.
    private func heldReportsHear(_ ref: BeaconRef, _ gateway: String) -> Bool {
        resendHeld[gateway]?.contains { $0.entries.contains { $0.beacon == ref } } == true
    }

    /// A view ends whatever kept it (a reconnect that did not confirm it).
    public mutating func endView(_ ref: BeaconRef, gateway: String) -> [FleetEvent] {
        var events: [FleetEvent] = []
        remove(gateway, from: ref, &events)
        return events
    }

    /// `gateways/<id>/status`: `online` makes the brain wait for its reports; `offline`
    /// (its last will, or a clean stop) drops every view of that gateway at once; beacons
    /// only it saw exit.
    public mutating func gatewayStatus(_ gateway: String, online: Bool) -> [FleetEvent] {
        guard !online else {
            offlineGateways.remove(gateway)
            clock.isOnline(gateway)
            return []
        }
        offlineGateways.insert(gateway)
        clock.remove(gateway)
        pending.removeAll { $0.gateway == gateway }
        awaitingResend.remove(gateway)
        backFromOutage.remove(gateway)
        holeWaits[gateway] = nil
        resendHeld[gateway] = nil
        deferredDeletions.removeAll { $0.gateway == gateway }
        deferredPresences.removeAll { $0.report.gateway == gateway }
        askOnFirstReport.remove(gateway)
        var events: [FleetEvent] = []
        for ref in evidence.keys.sorted() where evidence[ref]?.links[gateway] != nil {
            evidence[ref]?.links[gateway] = nil
            if evidence[ref]?.links.isEmpty == true, beacons[ref] == nil { evidence[ref] = nil }
        }
        for ref in beacons.keys.sorted() where beacons[ref]?.views[gateway] != nil {
            remove(gateway, from: ref, &events)
        }
        decide(&events, holding: { _, _ in false })
        return events
    }

    /// The gateway's connection ended (a live `offline`) but its views are held for its
    /// grace: should it come back as a new run (a restarted replay or capture), its reports
    /// may start over from an earlier capture time, and are then not late copies (`report`).
    public mutating func gatewayDisconnected(_ gateway: String) {
        if clock.watermarks[gateway] != nil { clock.restarted.insert(gateway) }
    }

    /// The brain's broker connection came back at `wall` (the brain's running clock, as for
    /// `advance(to:)`): every gateway sends the reports it
    /// kept while away (`GatewayEngine`), some only after their reconnect back-off, so until
    /// `wall + patience` a late gateway holds decisions back however long (`clockHold` does
    /// not apply): decided with every gateway's reports, they are those of a run without the
    /// outage. One that sends nothing by then is let go as usual.
    public mutating func reconnected(at wall: WallTime, patience: Double) {
        clock.patientUntil = wall + patience
        clock.heldSince = nil
        // The gateways' reports sent while the brain was away (`awaitingResend`): of those it
        // had reports of, and of those it knows only from their presence so far (a visit
        // entered from presence just before the outage, its reports not yet in: the counter's
        // deletion of 100/9 came before its live `online` and its reports, BrokerOutageTests
        // with the broker paused at the first effects), unless they send none.
        // (Holes asked for before are asked for again with the rest: `resendAfter`.)
        holeWaits = [:]
        backFromOutage = []
        askOnFirstReport = []
        awaitingResend = knownGateways.subtracting(settings.reportsOff)
        resendUntil = wall + min(patience, Self.resendWait)
    }

    /// The brain's running clock passes (`WallTime`, not capture time: capture time advances
    /// only with the gateways' reports, and stands still while a late gateway holds it back).
    /// A gateway whose reports are late stops holding decisions back after `clockHold`
    /// seconds of it; the decisions that then become possible are made in capture time, up
    /// to what the other gateways have reported. `held` as for `report`.
    ///
    /// Live, `wall` is the service's clock; in a replay or a scoring run, the time the replay
    /// has reached, read as the pace it runs at (`CaptureTime.asWallTime()` at the caller).
    public mutating func advance(to wall: WallTime,
                                 holding held: (BeaconRef, GatewayView) -> Bool = { _, _ in false }) -> [FleetEvent] {
        var events: [FleetEvent] = []
        if let until = resendUntil, wall >= until {
            let beacons = self.beacons
            events = endResendWait(at: wall, holding: { ref, gateway in beacons[ref]?.views[gateway].map { held(ref, $0) } ?? false })
        }
        if !holeWaits.isEmpty {
            let beacons = self.beacons
            events += endHoleWaits(at: wall, holding: { ref, gateway in beacons[ref]?.views[gateway].map { held(ref, $0) } ?? false })
        }
        clock.check(wall: wall, hold: settings.brain.clockHold)
        let beacons = self.beacons
        decide(&events, holding: { ref, gateway in beacons[ref]?.views[gateway].map { held(ref, $0) } ?? false })
        return events
    }

    /// Drops every view `condition` picks, with the events that follow; not one its gateway's
    /// reports keep (`reportsKeep`): their silence ends it, in capture time (a store's bridge
    /// back whose replay did not confirm 100/9's view at the counter, while the counter's
    /// reports of it waited for those sent again after the brain's own reconnect: a rolling
    /// restart of a NATS centre ended the visit at 0 s instead of 3.5 s).
    public mutating func dropViews(where condition: (BeaconRef, GatewayView) -> Bool) -> [FleetEvent] {
        var events: [FleetEvent] = []
        for ref in beacons.keys.sorted() {
            guard let beacon = beacons[ref] else { continue }
            for view in beacon.views.values.sorted(by: { $0.gateway < $1.gateway })
            where condition(ref, view) && !reportsKeep(ref, gateway: view.gateway) {
                remove(view.gateway, from: ref, &events)
            }
        }
        return events
    }

    /// Continues a visit a previous run of the brain began: its `since`, and its zone when
    /// that gateway still sees the beacon (so a restart does not move anyone).
    /// The zone holds while the evidence rebuilds (`restoreWarmup`), also when its gateway's
    /// reports come only after the restart: the first of them takes the zone back silently.
    public mutating func restore(_ ref: BeaconRef, since: CaptureTime?, zone: String?) {
        guard var beacon = beacons[ref] else { return }
        if let since { beacon.since = since }
        if let zone, beacon.views[zone] != nil { beacon.zone = zone }
        restoring[ref] = (zone, nil)
        beacon.proximity = beacon.zoneView?.proximity ?? .unknown
        evidence[ref]?.challenger = nil
        evidence[ref]?.passes = 0
        evidence[ref]?.belief = nil
        beacons[ref] = beacon
    }

    /// Forgets a beacon without events (it is no longer this brain's to handle).
    public mutating func forget(_ ref: BeaconRef) {
        restoring[ref] = nil
        beacons[ref] = nil
        evidence[ref] = nil
        pending.removeAll { $0.ref == ref }
    }

    // MARK: - Deciding

    /// Processes every decision step the clock allows.
    private mutating func decide(_ events: inout [FleetEvent], holding held: (BeaconRef, String) -> Bool) {
        guard let time = clock.time else { return }
        let step = settings.step
        while true {
            var next: CaptureTime
            if let processed {
                next = processed + step
                if evidence.isEmpty, let first = pending.map(\.time).min(), first > next {
                    // Nothing to watch: skip to the step before the next advertisement.
                    next = Self.boundary(first, step)
                }
            } else {
                guard let first = pending.map(\.time).min() else { return }
                next = Self.boundary(first, step)
            }
            guard next <= time else { return }
            process(upTo: next, &events, holding: held)
            processed = next
        }
    }

    /// The first step boundary after `time`.
    static func boundary(_ time: CaptureTime, _ step: Double) -> CaptureTime {
        let n = Int64((step * 1e9).rounded())
        let t = time.nanoseconds
        return CaptureTime(nanoseconds: ((t >= 0 ? t / n : (t - n + 1) / n) + 1) * n)
    }

    /// One decision step: the advertisements before `end`, then entries, exits and zones.
    private mutating func process(upTo end: CaptureTime, _ events: inout [FleetEvent],
                                  holding held: (BeaconRef, String) -> Bool) {
        let brain = settings.brain
        // The samples before `end`, in capture time, arrival order on equal times: their keys
        // are sorted, not the samples (a few hundred bytes each, which the sort moved about),
        // and they are read where they wait in `pending` (nothing adds to it or takes from it
        // until they have all been taken), then dropped from it at once.
        var order: [(time: Int64, sequence: Int, index: Int)] = []
        order.reserveCapacity(pending.count)
        for index in pending.indices where pending[index].time < end {
            order.append((pending[index].time.nanoseconds, pending[index].sequence, index))
        }
        order.sort { ($0.time, $0.sequence) < ($1.time, $1.sequence) }
        // Each beacon heard is marked in its evidence (`heardInStep`), and so is one whose presence
        // report changed in what it says of a view (its proximity or zone name) or in its UUID
        // (`viewsChangedInStep`): a `viewsChanged` each, once. A view's RSSI and distance
        // change at every sample and are published only with the next change that counts
        // (`FleetPresenceReport.signature`), so a beacon merely heard again is no event.
        // Evidence and views are changed where they are stored (`values[index]`, the
        // `default:` subscript): a copy taken out and written back shared its links and
        // views with the stored one, and the first change copied those dictionaries whole,
        // for every sample and every beacon at every step.
        // Beacons whose evidence this step begins, to be put in `evidenceOrder`.
        var begun: [BeaconRef] = []
        for key in order {
            let sample = pending[key.index]
            let ref = sample.ref
            // Looked up once, and not through `subscript(_:default:)`: its default (a closure
            // holding the sample) was allocated and freed for every sample.
            let slot: [BeaconRef: Evidence].Index
            if let found = evidence.index(forKey: ref) {
                slot = found
            } else {
                evidence[ref] = Evidence(at: sample.time)
                slot = evidence.index(forKey: ref)!
                begun.append(ref)
            }
            let link = Self.take(sample, into: &evidence.values[slot], brain: brain)
            if let index = beacons.index(forKey: ref) {
                let view = reportView(sample.gateway, link, zoneName: sample.zoneNamesVersion == zoneNamesVersion ? sample.zoneName : nil)
                if let uuid = sample.entry.uuid, beacons.values[index].uuid != uuid {
                    beacons.values[index].uuid = uuid
                    evidence.values[slot].viewsChangedInStep = true
                }
                if let old = beacons.values[index].views.updateValue(view, forKey: sample.gateway) {
                    if old.proximity != view.proximity || old.zoneName != view.zoneName { evidence.values[slot].viewsChangedInStep = true }
                } else {
                    events.append(.viewsChanged(ref))
                }
            }
        }
        if !order.isEmpty { pending.removeAll { $0.time < end } }
        evidenceOrder = Self.merged(evidenceOrder, begun)
        // The beacons whose evidence outlives the step, in order: the next step's.
        var kept: [BeaconRef] = []
        kept.reserveCapacity(evidenceOrder.count)
        for ref in evidenceOrder {
            guard let index = evidence.index(forKey: ref) else { continue }
            Self.closeStep(&evidence.values[index], at: end, step: settings.step)
            // Read and cleared in place: each read through `values[index]` copied the evidence out.
            let (heard, viewsChanged) = Self.takeStepMarks(&evidence.values[index])
            var e = evidence.values[index]
            if var beacon = beacons[ref] {
                if viewsChanged { events.append(.viewsChanged(ref)) }
                if exitDue(e, beacon, at: end, &events, holding: held) { continue }
                let decided = decisions.count
                expireViews(&beacon, e, at: end, &events, holding: held)
                if !rebuilding(&beacon, at: end, &events), !unheard(beacon.zone, at: end) {
                    switch brain.zoneModel {
                    case .pairwise: contest(&beacon, &e, at: end, &events)
                    case .hmm: follow(&beacon, &e, at: end, &events)
                    }
                }
                if decisions.count > decided { e.lastDecided = end }
                refreshProximity(&beacon, &events)
                if heard, let zoneLink = e.links[beacon.zone], zoneLink.lastHeard >= end - settings.step,
                   updateDue(&e, gateway: beacon.zone, at: end) {
                    events.append(.update(ref, beacon.proximity, at: end))
                }
                beacons[ref] = beacon
                evidence[ref] = e
            } else if end.seconds(since: e.firstHeard) >= brain.entryWindow, !awaitsEntrance(e, at: end) {
                enter(ref, e, at: end, &events)
            } else if end.seconds(since: e.lastHeard) > max(brain.entryWindow, settings.step) + settings.defaultViewTimeout {
                evidence[ref] = nil
                continue
            }
            kept.append(ref)
        }
        evidenceOrder = kept
    }

    /// `order` (sorted, without repeats) with `added` in their places; those it holds already
    /// are not added again.
    static func merged(_ order: [BeaconRef], _ added: [BeaconRef]) -> [BeaconRef] {
        guard !added.isEmpty else { return order }
        let added = added.sorted()
        var result: [BeaconRef] = []
        result.reserveCapacity(order.count + added.count)
        var i = 0
        for ref in added {
            while i < order.count, order[i] < ref {
                result.append(order[i])
                i += 1
            }
            if i < order.count, order[i] == ref { continue }
            if result.last != ref { result.append(ref) }
        }
        result.append(contentsOf: order[i...])
        return result
    }

    /// One sample into its beacon's evidence: the link of its gateway updated in place.
    /// Returns the link as it is now.
    private static func take(_ sample: PendingSample, into e: inout Evidence, brain: BrainConfig) -> LinkEstimate {
        func update(_ link: inout LinkEstimate) {
            if let rssi = sample.entry.rssi {
                link.update(mean: rssi, count: sample.entry.count, at: sample.time,
                            processNoise: brain.rssiProcessNoise, measurementNoise: brain.rssiMeasurementNoise,
                            trendNoise: brain.rssiTrendNoise)
                link.stepRSSISum += rssi * Double(sample.entry.count)
                link.stepRSSICount += sample.entry.count
            }
            link.lastHeard = max(link.lastHeard, sample.time)
            if let until = sample.unknownUntil { link.unknownUntil = max(link.unknownUntil ?? until, until) }
            link.stepCount += sample.entry.count
            link.rssiSmoothed = sample.entry.rssiSmoothed
            link.distance = sample.entry.distance
            link.proximity = sample.entry.proximity
        }
        update(&e.links[sample.gateway, default: LinkEstimate(at: sample.time)])
        e.heardInStep = true
        e.lastHeard = max(e.lastHeard, sample.time)
        e.stepCount += sample.entry.count
        if let uuid = sample.entry.uuid { e.uuid = uuid }
        return e.links[sample.gateway]!
    }

    /// Whether the step heard the beacon and changed what its presence says of a view, cleared
    /// for the next step.
    private static func takeStepMarks(_ e: inout Evidence) -> (heard: Bool, viewsChanged: Bool) {
        defer {
            e.heardInStep = false
            e.viewsChangedInStep = false
        }
        return (e.heardInStep, e.viewsChangedInStep)
    }

    /// The end of a decision step for one beacon's evidence: its rates, in place.
    private static func closeStep(_ e: inout Evidence, at end: CaptureTime, step: Double) {
        // The rate of advertisements, an average over about 10 s, never above what arrived
        // after the first step that heard the beacon over the time since: one step's burst
        // is no rate (a fob heard once every 3 s by three gateways read 6/s, and left
        // before its next advertisement, again and again).
        let sampleRate = Double(e.stepCount) / step
        let weight = min(1, step / 10)
        e.rate = e.rate.map { $0 + weight * (sampleRate - $0) } ?? sampleRate
        e.burst.count(e.stepCount, at: end)
        if e.stepCount > 0 { e.rateWhenLastHeard = e.burst.bound(e.rate ?? 0, at: end, step: step) }
        e.stepCount = 0
        e.links.modifyEach { link in
            let linkRate = Double(link.stepCount) / step
            let average = link.average.map { $0 + weight * (linkRate - $0) } ?? linkRate
            link.average = average
            link.burst.count(link.stepCount, at: end)
            link.rate = link.burst.bound(average, at: end, step: step)
            link.stepCount = 0
            link.fresh = link.stepRSSICount > 0 ? .init(mean: link.stepRSSISum / Double(link.stepRSSICount), count: link.stepRSSICount) : nil
            link.stepRSSISum = 0
            link.stepRSSICount = 0
        }
    }

    /// Seconds of capture time a restarted brain rebuilds a continued visit's evidence before
    /// it decides its zone aloud (`restoring`).
    public var restoreWarmup: Double { max(settings.brain.zoneStaleAfter, settings.step) }

    /// Whether the visit is one a restarted brain continues and its evidence still rebuilds:
    /// the restored zone is taken back (silently) as soon as its gateway's view is there.
    private mutating func rebuilding(_ beacon: inout FleetBeacon, at end: CaptureTime, _ events: inout [FleetEvent]) -> Bool {
        guard let restored = restoring[beacon.ref] else { return false }
        let zone = restored.zone, deadline = restored.until ?? end + restoreWarmup
        if let zone, zone != beacon.zone, beacon.views[zone] != nil {
            beacon.zone = zone
            events.append(.viewsChanged(beacon.ref))
        }
        guard end < deadline else {
            restoring[beacon.ref] = nil
            return false
        }
        restoring[beacon.ref] = (zone, deadline)
        evidence[beacon.ref]?.challenger = nil
        evidence[beacon.ref]?.passes = 0
        return true
    }

    /// Seconds of capture time a gateway that stopped reporting (hung, cut off, its reports
    /// late) is *unheard*: its views neither end nor lose their zone for its silence, since
    /// it has not said the beacon left. Past the bound it is taken as not hearing anything:
    /// its beacons' exits are decided (dated when their silence became telling) and the
    /// zone may move. Its `exitTimeout`, the silence after which it would itself have said
    /// a beacon left; its last will (`offline`) ends its views earlier.
    public func unheardBound(_ gateway: String) -> Double { settings.viewTimeout(gateway) }

    /// Whether `gateway` is unheard at `end`: the brain stopped waiting for its late reports,
    /// and its silence is within `unheardBound`.
    private func unheard(_ gateway: String, at end: CaptureTime) -> Bool {
        guard clock.excluded.contains(gateway), let mark = clock.watermarks[gateway] else { return false }
        return end.seconds(since: mark) <= unheardBound(gateway)
    }

    /// Whether a new beacon still waits for an entrance gateway: customers come in at the
    /// door, and a far gateway may catch the first advertisement the door's missed (20 %
    /// are lost). It waits when a gateway of a store with an entrance heard it, no
    /// entrance gateway has an RSSI for it yet, and it was first heard less than
    /// `brain.entranceWait` ago.
    private func awaitsEntrance(_ e: Evidence, at end: CaptureTime) -> Bool {
        guard !settings.entrances.isEmpty, end.seconds(since: e.firstHeard) < settings.brain.entranceWait else { return false }
        if e.links.contains(where: { settings.entrances.contains($0.key) && $0.value.level != nil }) { return false }
        let withEntrance = Set(settings.entrances.map { settings.stores[$0] })
        return e.links.keys.contains { withEntrance.contains(settings.stores[$0]) }
    }

    /// Ends the visit when the beacon has been silent long enough; true when it did.
    private mutating func exitDue(_ e: Evidence, _ beacon: FleetBeacon, at end: CaptureTime, _ events: inout [FleetEvent],
                                  holding held: (BeaconRef, String) -> Bool) -> Bool {
        var latest = e.lastHeard
        for link in e.links.values { latest = max(latest, link.quietSince) }
        // The silence is never shorter than this bound: a beacon heard lately is not due,
        // without looking its gateways' timeouts up (most beacons, most steps).
        guard latest + min(settings.shortestViewTimeout, settings.brain.exitMinimum) <= end else { return false }
        let quiet = silence(e, beacon)
        let deadline = latest + quiet
        guard deadline <= end else { return false }
        if beacon.views.keys.contains(where: { held(beacon.ref, $0) }) { return false }
        // A gateway the brain stopped waiting for (its reports are late: its store's link or
        // its broker may be down, or its capture time lags) has not said the beacon is gone
        // while it heard it lately by its own clock: the visit waits for it (its last will,
        // or its reports without the beacon, end the wait).
        // Past `unheardBound` its silence counts as silence: the exit goes out then, not
        // when (if ever) it resumes.
        if e.links.contains(where: { gateway, link in
            guard unheard(gateway, at: end) else { return false }
            return (clock.watermarks[gateway] ?? link.quietSince).seconds(since: link.quietSince) < quiet + settings.step
        }) {
            return false
        }
        restoring[beacon.ref] = nil
        beacons[beacon.ref] = nil
        evidence[beacon.ref] = nil
        events.append(.exit(beacon))
        // Dated when the silence became telling, but not before a decision this beacon had
        // already: an exit that waited (a cut-off store's view, a late gateway) can come
        // after a zone change made meanwhile, and consumers line decisions up by capture time.
        record(.exit, beacon, from: nil, at: max(deadline, e.lastDecided ?? deadline))
        return true
    }

    /// How long a beacon must be silent to have left.
    private func silence(_ e: Evidence, _ beacon: FleetBeacon) -> Double {
        let brain = settings.brain
        var timeout: Double?
        for gateway in beacon.views.keys { timeout = max(timeout ?? -.infinity, settings.viewTimeout(gateway)) }
        let longest = timeout ?? settings.defaultViewTimeout
        guard let rate = e.rateWhenLastHeard, rate > 0 else { return longest }
        return min(longest, max(brain.exitMinimum, brain.exitSamples / rate))
    }

    /// Views kept by reports end when their gateway has not heard the beacon for its
    /// `exitTimeout`.
    private mutating func expireViews(_ beacon: inout FleetBeacon, _ e: Evidence, at end: CaptureTime,
                                      _ events: inout [FleetEvent], holding held: (BeaconRef, String) -> Bool) {
        func expired(_ gateway: String, _ view: GatewayView) -> Bool {
            guard !view.announced, let link = e.links[gateway] else { return false }
            let quiet = end.seconds(since: link.quietSince)
            return quiet >= settings.shortestViewTimeout && quiet >= settings.viewTimeout(gateway)
        }
        // No view has ended unless a link has been quiet for the shortest view timeout (most
        // beacons, most steps): then the views, each copied out to be checked, are not gone
        // through. Sorted (the order of the events) only in the rare step where a view ends.
        let quietLink = e.links.values.indices.contains {
            end.seconds(since: e.links.values[$0].quietSince) >= settings.shortestViewTimeout
        }
        if quietLink, beacon.views.contains(where: { expired($0.key, $0.value) }) {
            for (gateway, view) in beacon.views.sorted(by: { $0.key < $1.key }) where expired(gateway, view) {
                guard !held(beacon.ref, gateway), !unheard(gateway, at: end), beacon.views.count > 1 else { continue }
                beacon.views[gateway] = nil
                events.append(.viewsChanged(beacon.ref))
            }
        }
        if beacon.views[beacon.zone] == nil { refreshZone(&beacon, &events, at: end) }
    }

    /// The zone test: another gateway takes the zone when the brain is `zoneConfidence`
    /// sure it hears the beacon louder, `zoneUpdates` steps in a row.
    private mutating func contest(_ beacon: inout FleetBeacon, _ e: inout Evidence, at end: CaptureTime,
                                  _ events: inout [FleetEvent]) {
        let brain = settings.brain
        // The loudest fresh link but the zone's (on equal levels, the first gateway by name);
        // by its index, so that no link is copied out but the one found.
        let links = e.links
        var best: Int?
        for i in links.keys.indices where links.keys[i] != beacon.zone {
            guard let level = links.values[i].level, end.seconds(since: links.values[i].lastHeard) <= brain.zoneStaleAfter else { continue }
            if let current = best, let top = links.values[current].level,
               level < top || (level == top && links.keys[i] > links.keys[current]) {
                continue
            }
            best = i
        }
        guard let best else {
            e.challenger = nil
            e.passes = 0
            return
        }
        let candidate = links.keys[best], challenger = links.values[best]
        // The zone's gateway loses the zone to any that still hears the beacon once its own
        // silence has become telling: as long as it takes to miss `exitSamples / 2`
        // advertisements in a row at the rate it was hearing them (at least `zoneStaleAfter`).
        // Only to one that heard it after the zone's gateway did: when every view has gone
        // quiet the customer is leaving, and the zone stays (no ghost moves at the exit).
        var wins = true
        if let zone = e.links[beacon.zone], zone.level != nil {
            let telling = max(brain.zoneStaleAfter, (brain.exitSamples / 2) / max(zone.rate ?? 0, 1e-3))
            if end.seconds(since: zone.quietSince) < telling || challenger.lastHeard <= zone.lastHeard {
                // A customer who has held his zone `zoneSettle` seconds is standing: only surer
                // evidence moves him (docs/presence.md, "Settled customers").
                // (A visit a restarted brain continues has held its zone since it was first heard again.)
                let settled = brain.zoneSettle > 0 && end.seconds(since: e.zoneSince ?? e.firstHeard) >= brain.zoneSettle
                wins = louder(challenger, than: zone, at: end, settled: settled)
            }
        }
        guard wins else {
            e.challenger = nil
            e.passes = 0
            return
        }
        if e.challenger == candidate { e.passes += 1 } else {
            e.challenger = candidate
            e.passes = 1
        }
        guard e.passes >= brain.zoneUpdates else { return }
        move(&beacon, to: candidate, at: end, &events)
        e.zoneSince = end
        e.challenger = nil
        e.passes = 0
    }

    /// Standard deviations each confidence asks more once a beacon has held its zone
    /// `zoneSettle` seconds (0.97 becomes 0.998, 0.88 becomes 0.985).
    static let settledMargin = 1.0

    /// Whether the brain is `zoneConfidence` sure that `a` hears the beacon louder than `b`
    /// (by `zoneMargin`), given both estimates' uncertainty; `zoneConfidenceWalking` sure
    /// while `a`'s level rises against `b`'s (their trends differ by more than half the
    /// difference's standard deviation): the customer walks from `b` towards `a`. `settled`:
    /// each asks `settledMargin` standard deviations more (`zoneSettle`).
    private func louder(_ a: LinkEstimate, than b: LinkEstimate, at end: CaptureTime, settled: Bool = false) -> Bool {
        let brain = settings.brain
        guard let c = a.predicted(at: end, processNoise: brain.rssiProcessNoise, trendNoise: brain.rssiTrendNoise),
              let z = b.predicted(at: end, processNoise: brain.rssiProcessNoise, trendNoise: brain.rssiTrendNoise)
        else { return a.level != nil }
        let walking = a.slope - b.slope > Self.walkingTrend * (a.slopeVariance + b.slopeVariance).squareRoot()
        let score = (walking ? zScore.walking : zScore.still) + (settled ? Self.settledMargin : 0)
        return c.level - z.level - brain.zoneMargin > score * (c.variance + z.variance).squareRoot()
    }

    /// The zone HMM (`ZoneBelief`): the evidence of this step, then another zone takes the
    /// zone once its posterior has passed `zoneSwitch` for `zoneHold` seconds.
    private mutating func follow(_ beacon: inout FleetBeacon, _ e: inout Evidence, at end: CaptureTime,
                                 _ events: inout [FleetEvent]) {
        let brain = settings.brain
        let positions = settings.positions, stores = settings.stores
        let adjacency = { (a: String, b: String) in ZoneBelief.adjacent(a, b, positions: positions, stores: stores) }
        if e.belief == nil {
            e.belief = ZoneBelief(zones: e.links.keys.sorted(), at: end, concentratedOn: beacon.zone,
                                  mass: Self.beliefOnEntry, adjacency: adjacency)
        }
        guard var belief = e.belief else { return }
        e.belief = nil
        for gateway in e.links.keys where belief.index(of: gateway) == nil { belief.add(gateway, adjacency: adjacency) }
        let links = e.links, zones = belief.zones
        belief.update(at: end, ZoneBelief.Parameters(brain)) { i in
            guard let link = links[zones[i]], link.level != nil else { return .silent }
            if let fresh = link.fresh { return .fresh(fresh.mean, variance: brain.rssiMeasurementNoise / Double(fresh.count)) }
            let telling = max(brain.zoneStaleAfter, (brain.exitSamples / 2) / max(link.rate ?? 0, 1e-3))
            guard end.seconds(since: link.quietSince) < telling,
                  let now = link.predicted(at: end, processNoise: brain.rssiProcessNoise, trendNoise: brain.rssiTrendNoise)
            else { return .silent }
            return .known(now.level, variance: now.variance)
        }
        defer { e.belief = belief }
        guard let (best, p) = belief.best, best != beacon.zone, p >= brain.zoneSwitch, links[best]?.level != nil else {
            belief.leader = nil
            belief.leaderSince = nil
            return
        }
        if belief.leader != best {
            belief.leader = best
            belief.leaderSince = end
        }
        guard end.seconds(since: belief.leaderSince ?? end) >= brain.zoneHold else { return }
        move(&beacon, to: best, at: end, &events)
        belief.leader = nil
        belief.leaderSince = nil
    }

    /// The zone HMM's posterior on the zone a beacon entered in (or a restarted brain
    /// restored), the rest shared by the other gateways that heard it.
    static let beliefOnEntry = 0.6

    /// How many standard deviations the trends must differ by to count as walking.
    static let walkingTrend = 0.5

    private mutating func move(_ beacon: inout FleetBeacon, to gateway: String, at time: CaptureTime, _ events: inout [FleetEvent]) {
        guard gateway != beacon.zone else { return }
        let from = beacon.zone
        if beacon.views[gateway] == nil, let link = evidence[beacon.ref]?.links[gateway] {
            beacon.views[gateway] = reportView(gateway, link)
        }
        beacon.zone = gateway
        events.append(.zoneChanged(beacon.ref, from: from, to: gateway))
        record(.zone, beacon, from: from, at: time)
    }

    /// A beacon heard for `entryWindow`: it enters in the zone of the loudest gateway.
    private mutating func enter(_ ref: BeaconRef, _ e: Evidence, at end: CaptureTime, _ events: inout [FleetEvent]) {
        var views: GatewayMap<GatewayView> = [:]
        for (gateway, link) in e.links { views[gateway] = reportView(gateway, link) }
        guard var zone = strongestLink(e.links) ?? views.keys.min() else { return }
        // By the door: the entrance's zone, unless the loudest is clearly louder.
        let doors = e.links.filter { settings.entrances.contains($0.key) && $0.value.level != nil }
        if !settings.entrances.contains(zone), let door = strongestLink(doors), let loud = e.links[zone], let quiet = e.links[door],
           !louder(loud, than: quiet, at: end) {
            zone = door
        }
        var e = e
        e.zoneSince = end
        _ = updateDue(&e, gateway: zone, at: end)
        e.lastDecided = end
        evidence[ref] = e
        let beacon = FleetBeacon(ref: ref, uuid: e.uuid, views: views, zone: zone, proximity: views[zone]?.proximity ?? .unknown,
                                 since: e.firstHeard)
        beacons[ref] = beacon
        events.append(.enter(ref))
        if beacon.proximity != .unknown { events.append(.proximity(ref, from: .unknown, to: beacon.proximity)) }
        events.append(.update(ref, beacon.proximity, at: end))
        record(.enter, beacon, from: nil, at: end)
    }

    /// Whether an update of the zone gateway is due: at most one per its `publishInterval`
    /// (half a step early is on time: steps do not fall on the interval's grid).
    private func updateDue(_ e: inout Evidence, gateway: String, at end: CaptureTime) -> Bool {
        if let last = e.lastUpdate, end.seconds(since: last) < settings.updateInterval(gateway) - settings.step / 2 {
            return false
        }
        e.lastUpdate = end
        return true
    }

    /// The gateway with the loudest level (RSSI), else the closest proximity class.
    private func strongestLink(_ links: GatewayMap<LinkEstimate>) -> String? {
        let withLevel = links.filter { $0.value.level != nil }
        if let best = withLevel.max(by: { a, b in
            a.value.level! != b.value.level! ? a.value.level! < b.value.level! : a.key > b.key
        }) { return best.key }
        return links.min { a, b in
            a.value.proximity != b.value.proximity ? a.value.proximity < b.value.proximity : a.key < b.key
        }?.key
    }

    /// After the zone's view ended: the loudest remaining gateway, by its reports if any,
    /// else the strongest view.
    private mutating func refreshZone(_ beacon: inout FleetBeacon, _ events: inout [FleetEvent], at time: CaptureTime? = nil) {
        guard beacon.views[beacon.zone] == nil else { return }
        let links = evidence[beacon.ref]?.links.filter { beacon.views[$0.key] != nil } ?? [:]
        let next = strongestLink(links) ?? beacon.views.values.max { $1.isStronger(than: $0) }?.gateway
        guard let next else { return }
        move(&beacon, to: next, at: time ?? processed ?? beacon.since, &events)
    }

    /// The view a gateway's reports give of a beacon; `zoneName`: the gateway's, when known
    /// to be current (`PendingSample.zoneName`).
    private func reportView(_ gateway: String, _ link: LinkEstimate, zoneName: String? = nil) -> GatewayView {
        GatewayView(gateway: gateway, zoneName: zoneName ?? zoneNames[gateway] ?? gateway, proximity: link.proximity,
                    rssiSmoothed: link.rssiSmoothed, distance: link.distance, announced: false, lastUpdate: link.lastHeard)
    }

    private func announcedView(_ report: GatewayPresenceReport, at now: CaptureTime) -> GatewayView {
        GatewayView(gateway: report.gateway, zoneName: report.zone, proximity: report.proximity,
                    rssiSmoothed: report.rssiSmoothed, distance: report.distance, announced: true, lastUpdate: now)
    }

    private func refreshProximity(_ beacon: inout FleetBeacon, _ events: inout [FleetEvent]) {
        let proximity = beacon.zoneView?.proximity ?? .unknown
        if proximity != beacon.proximity {
            events.append(.proximity(beacon.ref, from: beacon.proximity, to: proximity))
            beacon.proximity = proximity
        }
    }

    private mutating func record(_ kind: ZoneDecision.Kind, _ beacon: FleetBeacon, from: String?, at time: CaptureTime) {
        if kind == .exit {
            if lastExits.count > 1000 { lastExits = lastExits.filter { time.seconds(since: $0.value) < 600 } }
            lastExits[beacon.ref] = max(lastExits[beacon.ref] ?? time, time)
        }
        decisions.append(ZoneDecision(kind: kind, beacon: beacon.ref, zone: beacon.zone,
                                      zoneName: beacon.zoneView?.zoneName ?? zoneNames[beacon.zone] ?? beacon.zone,
                                      from: from, since: beacon.since, at: time))
    }

    /// `made`: when a deletion that waited was made. What it decides is dated then, though
    /// never before the beacon's last decision nor after the brain's decided time.
    private mutating func remove(_ gateway: String, from ref: BeaconRef, _ events: inout [FleetEvent], made: CaptureTime? = nil) {
        guard var beacon = beacons[ref], beacon.views[gateway] != nil else { return }
        let before = beacon
        let time = made.map { made in
            let after = max(made, decisions.last { $0.beacon == ref }?.at ?? before.since, before.since)
            return processed.map { min(after, $0) } ?? after
        } ?? processed ?? before.since
        beacon.views[gateway] = nil
        evidence[ref]?.links[gateway] = nil
        // What the gateway reported of the beacon before its view ended and the brain has
        // not decided yet (it waits for other gateways' reports) ended with the view: decided
        // later it would bring the view, or the visit, back.
        pending.removeAll { $0.ref == ref && $0.gateway == gateway }
        if evidence[ref]?.challenger == gateway {
            evidence[ref]?.challenger = nil
            evidence[ref]?.passes = 0
        }
        guard !beacon.views.isEmpty else {
            beacons[ref] = nil
            evidence[ref] = nil
            restoring[ref] = nil
            events.append(.exit(before))
            record(.exit, before, from: nil, at: time)
            return
        }
        events.append(.viewsChanged(ref))
        refreshZone(&beacon, &events, at: time)
        refreshProximity(&beacon, &events)
        beacons[ref] = beacon
    }
}

/// A span of capture time one gateway's reports never covered (`FleetPresence.takeGaps`).
public struct ReportGap: Sendable, Equatable {
    public var gateway: String
    public var from: CaptureTime
    public var to: CaptureTime

    public init(gateway: String, from: CaptureTime, to: CaptureTime) {
        self.gateway = gateway
        self.from = from
        self.to = to
    }

    /// `brain/events`: `{"event":"gap","gateway","from","to","seconds"}` (at least `FleetPresence.reportedGap`): what the brain could
    /// not decide from evidence, said instead of guessed.
    public var event: BrainEvent { .gap(gateway: gateway, from: from, to: to) }
}

public import BeaconKit
public import Tracking
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
    /// The gateway holds a retained presence for the beacon. A view known from sightings
    /// only is dropped when its sightings stop (`FleetPresence.Settings.sightingTimeout`);
    /// an announced one lasts until the gateway deletes its presence or goes offline.
    public var announced: Bool
    /// The brain's time of the last presence or sighting from this gateway.
    public var lastUpdate: Instant

    public init(gateway: String, zoneName: String, proximity: Proximity, rssiSmoothed: Double?, distance: Double?,
                announced: Bool, lastUpdate: Instant) {
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
    public internal(set) var views: [String: GatewayView]
    /// The gateway holding the zone.
    public internal(set) var zone: String
    /// The fleet proximity: the zone gateway's.
    public internal(set) var proximity: Proximity
    /// When the brain saw this visit begin (the brain's clock).
    public internal(set) var since: Instant
    /// The gateway currently beating the zone by the margin, and on how many updates in a row.
    var challenger: String?
    var wins = 0

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
    /// A gateway began or stopped seeing a beacon that stays present.
    case viewsChanged(BeaconRef)
    /// The fleet proximity changed (on enter: from `unknown`).
    case proximity(BeaconRef, from: Proximity, to: Proximity)
    /// A sighting from the zone gateway: one "update" for cooldowns such as "after 3
    /// updates at near", reported whether or not anything changed.
    case update(BeaconRef, Proximity)

    public var beacon: BeaconRef {
        switch self {
        case .enter(let ref), .zoneChanged(let ref, _, _), .viewsChanged(let ref), .proximity(let ref, _, _),
             .update(let ref, _): ref
        case .exit(let beacon): beacon.ref
        }
    }
}

/// Fleet-wide presence: fuses every gateway's view of every beacon into one zone per
/// beacon, with hysteresis so that a customer standing between two gateways does not
/// flap between them.
///
/// The zone is the first gateway to see a beacon. Another gateway takes it over only
/// after beating the zone's smoothed RSSI by `zoneMargin` dB on `zoneUpdates` consecutive
/// sightings of its own; a sighting from any gateway that leaves it short of the margin
/// resets the count. Without RSSI on either side, a strictly closer proximity class wins
/// instead.
/// When the zone gateway stops seeing the beacon, the strongest remaining view takes the
/// zone at once. A value owned by one task; time is passed in.
public struct FleetPresence: Sendable {
    public struct Settings: Sendable, Equatable {
        /// dB by which a challenger must beat the zone's smoothed RSSI.
        public var zoneMargin: Double
        /// Consecutive sightings of its own a challenger must win by the margin before the
        /// zone moves.
        public var zoneUpdates: Int
        /// Seconds without a sighting after which a view known only from sightings is
        /// dropped (a gateway whose presence message was lost, or sightings that arrived
        /// after its presence was deleted).
        public var sightingTimeout: Double

        public init(zoneMargin: Double = 4, zoneUpdates: Int = 3, sightingTimeout: Double = 30) {
            self.zoneMargin = zoneMargin
            self.zoneUpdates = max(1, zoneUpdates)
            self.sightingTimeout = sightingTimeout
        }

        public init(_ brain: BrainConfig, sightingTimeout: Double = 30) {
            self.init(zoneMargin: brain.zoneMargin, zoneUpdates: brain.zoneUpdates, sightingTimeout: sightingTimeout)
        }
    }

    public var settings: Settings
    public private(set) var beacons: [BeaconRef: FleetBeacon] = [:]
    /// Gateways whose status is `offline`: their retained presence is stale.
    public private(set) var offlineGateways: Set<String> = []

    public init(settings: Settings = .init()) { self.settings = settings }

    public subscript(ref: BeaconRef) -> FleetBeacon? { beacons[ref] }

    /// A gateway's retained presence. A retained one from a gateway known to be offline is
    /// what it left behind when it died and is ignored; a live one proves it is back.
    public mutating func gatewayPresence(_ report: GatewayPresenceReport, retained: Bool, at now: Instant) -> [FleetEvent] {
        if offlineGateways.contains(report.gateway) {
            guard !retained else { return [] }
            offlineGateways.remove(report.gateway)
        }
        let view = GatewayView(gateway: report.gateway, zoneName: report.zone, proximity: report.proximity,
                               rssiSmoothed: report.rssiSmoothed, distance: report.distance, announced: true,
                               lastUpdate: now)
        return upsert(report.beacon, uuid: report.uuid, view: view, sighting: false, at: now)
    }

    /// The gateway deleted its presence: the beacon left its range.
    public mutating func gatewayPresenceDeleted(_ ref: BeaconRef, gateway: String) -> [FleetEvent] {
        var events: [FleetEvent] = []
        remove(gateway, from: ref, &events)
        return events
    }

    /// A sighting: refreshes (or creates) the gateway's view and runs the zone contest.
    /// `zoneName` names the gateway's place for a view the gateway never announced.
    public mutating func sighting(_ report: SightingReport, zoneName: String, at now: Instant) -> [FleetEvent] {
        offlineGateways.remove(report.gateway)
        let existing = beacons[report.beacon]?.views[report.gateway]
        let view = GatewayView(gateway: report.gateway, zoneName: existing?.zoneName ?? zoneName,
                               proximity: report.proximity, rssiSmoothed: report.rssiSmoothed,
                               distance: report.distance, announced: existing?.announced ?? false, lastUpdate: now)
        return upsert(report.beacon, uuid: report.uuid, view: view, sighting: true, at: now)
    }

    /// `gateways/<id>/status`: `offline` (its last will, or a clean stop) drops every view
    /// of that gateway at once; beacons only it saw exit.
    public mutating func gatewayStatus(_ gateway: String, online: Bool) -> [FleetEvent] {
        guard !online else {
            offlineGateways.remove(gateway)
            return []
        }
        offlineGateways.insert(gateway)
        var events: [FleetEvent] = []
        for ref in beacons.keys.sorted() where beacons[ref]?.views[gateway] != nil {
            remove(gateway, from: ref, &events)
        }
        return events
    }

    /// Drops views known from sightings only whose sightings stopped, except those `held`
    /// (a store whose bridge is down: its silence says nothing).
    public mutating func advance(to now: Instant,
                                 holding held: (BeaconRef, GatewayView) -> Bool = { _, _ in false }) -> [FleetEvent] {
        let timeout = settings.sightingTimeout
        return dropViews { ref, view in
            !view.announced && now.seconds(since: view.lastUpdate) > timeout && !held(ref, view)
        }
    }

    /// Drops every view `condition` picks, with the events that follow.
    public mutating func dropViews(where condition: (BeaconRef, GatewayView) -> Bool) -> [FleetEvent] {
        var events: [FleetEvent] = []
        for ref in beacons.keys.sorted() {
            guard let beacon = beacons[ref] else { continue }
            for view in beacon.views.values.sorted(by: { $0.gateway < $1.gateway }) where condition(ref, view) {
                remove(view.gateway, from: ref, &events)
            }
        }
        return events
    }

    /// Continues a visit a previous run of the brain began: its `since`, and its zone when
    /// that gateway still sees the beacon (so a restart does not move anyone).
    public mutating func restore(_ ref: BeaconRef, since: Instant?, zone: String?) {
        guard var beacon = beacons[ref] else { return }
        if let since { beacon.since = since }
        if let zone, beacon.views[zone] != nil { beacon.zone = zone }
        beacon.challenger = nil
        beacon.wins = 0
        beacon.proximity = beacon.zoneView?.proximity ?? .unknown
        beacons[ref] = beacon
    }

    /// Forgets a beacon without events (it is no longer this brain's to handle).
    public mutating func forget(_ ref: BeaconRef) { beacons[ref] = nil }

    // MARK: -

    private mutating func upsert(_ ref: BeaconRef, uuid: BeaconUUID?, view: GatewayView, sighting: Bool,
                                 at now: Instant) -> [FleetEvent] {
        var events: [FleetEvent] = []
        guard var beacon = beacons[ref] else {
            beacons[ref] = FleetBeacon(ref: ref, uuid: uuid, views: [view.gateway: view], zone: view.gateway,
                                       proximity: view.proximity, since: now)
            events.append(.enter(ref))
            if view.proximity != .unknown { events.append(.proximity(ref, from: .unknown, to: view.proximity)) }
            if sighting { events.append(.update(ref, view.proximity)) }
            return events
        }
        if let uuid { beacon.uuid = uuid }
        let isNew = beacon.views[view.gateway] == nil
        beacon.views[view.gateway] = view
        if isNew { events.append(.viewsChanged(ref)) }
        if sighting { contest(&beacon, from: view.gateway, &events) }
        refreshProximity(&beacon, &events)
        if sighting && view.gateway == beacon.zone { events.append(.update(ref, beacon.proximity)) }
        beacons[ref] = beacon
        return events
    }

    private func contest(_ beacon: inout FleetBeacon, from gateway: String, _ events: inout [FleetEvent]) {
        guard let current = beacon.zoneView else { return }
        let best = beacon.views.values.filter { $0.gateway != beacon.zone }.max { $1.isStronger(than: $0) }
        guard let best, beats(best, current) else {
            beacon.challenger = nil
            beacon.wins = 0
            return
        }
        if beacon.challenger == best.gateway {
            if gateway == best.gateway { beacon.wins += 1 }
        } else {
            beacon.challenger = best.gateway
            beacon.wins = 1
        }
        if beacon.wins >= settings.zoneUpdates {
            events.append(.zoneChanged(beacon.ref, from: beacon.zone, to: best.gateway))
            beacon.zone = best.gateway
            beacon.challenger = nil
            beacon.wins = 0
        }
    }

    private func beats(_ challenger: GatewayView, _ zone: GatewayView) -> Bool {
        if let a = challenger.rssiSmoothed, let b = zone.rssiSmoothed { return a > b + settings.zoneMargin }
        return challenger.proximity < zone.proximity
    }

    private func refreshProximity(_ beacon: inout FleetBeacon, _ events: inout [FleetEvent]) {
        let proximity = beacon.zoneView?.proximity ?? .unknown
        if proximity != beacon.proximity {
            events.append(.proximity(beacon.ref, from: beacon.proximity, to: proximity))
            beacon.proximity = proximity
        }
    }

    private mutating func remove(_ gateway: String, from ref: BeaconRef, _ events: inout [FleetEvent]) {
        guard var beacon = beacons[ref], beacon.views[gateway] != nil else { return }
        let before = beacon
        beacon.views[gateway] = nil
        guard let strongest = beacon.views.values.max(by: { $1.isStronger(than: $0) }) else {
            beacons[ref] = nil
            events.append(.exit(before))
            return
        }
        events.append(.viewsChanged(ref))
        if beacon.zone == gateway {
            events.append(.zoneChanged(ref, from: gateway, to: strongest.gateway))
            beacon.zone = strongest.gateway
            beacon.challenger = nil
            beacon.wins = 0
        } else if beacon.challenger == gateway {
            beacon.challenger = nil
            beacon.wins = 0
        }
        refreshProximity(&beacon, &events)
        beacons[ref] = beacon
    }
}

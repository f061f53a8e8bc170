import Prometheus
import Synchronization

/// One metric BeaconBridge exports: its name (Prometheus conventions: `beaconbridge_`, the
/// unit in the name, `_total` for counters), its type and its `# HELP` text.
public struct MetricFamily: Sendable, Hashable {
    public enum Kind: String, Sendable { case counter, gauge }

    public let name: String
    public let kind: Kind
    public let help: String

    init(_ name: String, _ kind: Kind, _ help: String) {
        self.name = name
        self.kind = kind
        self.help = help
    }

    /// For the registry (the unit is already in `name`).
    var descriptor: MetricNameDescriptor { MetricNameDescriptor(metricName: name, unitName: "", helpText: help) }
}

/// Every metric the gateway, the brain and beacon-history export, from their typed statistics (no health
/// JSON is parsed). docs/metrics.md lists them; `deploy/grafana/beaconbridge.json` uses
/// only these names (`MetricsTests` checks every query against a scrape).
public enum MetricCatalog {
    // Both daemons.
    public static let buildInfo = MetricFamily("beaconbridge_build_info", .gauge,
        "Always 1: the program, its version and, for a gateway, its source, as labels.")

    // The gateway (label `gateway`).
    public static let gatewayAdverts = MetricFamily("beaconbridge_gateway_adverts_total", .counter,
        "Advertising reports received from the source (rate() gives adverts per second).")
    public static let gatewayDecoded = MetricFamily("beaconbridge_gateway_decoded_total", .counter,
        "Advertising reports that carried a beacon (iBeacon, AltBeacon, Eddystone).")
    public static let gatewayMalformed = MetricFamily("beaconbridge_gateway_malformed_total", .counter,
        "HCI events and advertising data skipped as malformed.")
    public static let gatewayDropped = MetricFamily("beaconbridge_gateway_dropped_total", .counter,
        "Sightings dropped while the broker was unreachable (presence changes are queued, not dropped).")
    public static let gatewayPublished = MetricFamily("beaconbridge_gateway_published_total", .counter,
        "MQTT messages handed to the broker.")
    public static let gatewayQueueDepth = MetricFamily("beaconbridge_gateway_queue_depth", .gauge,
        "Messages waiting for the broker to come back.")
    public static let gatewayTracked = MetricFamily("beaconbridge_gateway_tracked_beacons", .gauge,
        "Beacons the gateway tracks as in range.")
    public static let gatewayUptime = MetricFamily("beaconbridge_gateway_uptime_seconds", .gauge,
        "Seconds since the gateway started.")
    public static let gatewaySourceRunning = MetricFamily("beaconbridge_gateway_source_running", .gauge,
        "1 while the source delivers advertising reports; 0 while starting, retrying, paused or finished.")
    public static let gatewayConnected = MetricFamily("beaconbridge_gateway_broker_connected", .gauge,
        "1 while the gateway is connected to its broker.")

    // The brain (label `brain`, its client id).
    public static let brainReceived = MetricFamily("beaconbridge_brain_received_total", .counter,
        "MQTT messages the brain received.")
    public static let brainMalformed = MetricFamily("beaconbridge_brain_malformed_total", .counter,
        "Messages refused as malformed, by kind of input.")
    public static let brainOversized = MetricFamily("beaconbridge_brain_oversized_total", .counter,
        "Messages refused as larger than the brain's limits.")
    public static let brainJoinsAccepted = MetricFamily("beaconbridge_brain_joins_accepted_total", .counter,
        "Joins the brain answered.")
    public static let brainJoinsRejected = MetricFamily("beaconbridge_brain_joins_rejected_total", .counter,
        "Joins the brain refused (not permitted, malformed, too many).")
    public static let brainRulesFired = MetricFamily("beaconbridge_brain_rules_fired_total", .counter,
        "Rules that fired.")
    public static let brainInboxMessages = MetricFamily("beaconbridge_brain_inbox_messages_total", .counter,
        "Messages the brain sent to apps' inboxes.")
    public static let brainPublished = MetricFamily("beaconbridge_brain_published_total", .counter,
        "MQTT messages the brain handed to the broker.")
    public static let brainPublishFailures = MetricFamily("beaconbridge_brain_publish_failures_total", .counter,
        "Publications the MQTT client refused.")
    public static let brainBeacons = MetricFamily("beaconbridge_brain_beacons", .gauge,
        "Beacons present anywhere in the brain's part of the fleet.")
    public static let brainJoins = MetricFamily("beaconbridge_brain_joins", .gauge,
        "Apps joined to a beacon now.")
    public static let brainOccupancy = MetricFamily("beaconbridge_brain_occupancy_beacons", .gauge,
        "Beacons present by store and zone (the gateway holding their zone).")
    public static let brainSettled = MetricFamily("beaconbridge_brain_settled", .gauge,
        "1 once the brain has read the broker's retained state and decides.")
    public static let brainUptime = MetricFamily("beaconbridge_brain_uptime_seconds", .gauge,
        "Seconds since the brain started.")
    public static let brainConnected = MetricFamily("beaconbridge_brain_broker_connected", .gauge,
        "1 while the brain is connected to its broker.")

    // beacon-history (label `history`, its client id).
    public static let historyFootfallToday = MetricFamily("beaconbridge_history_footfall_today", .gauge,
        "Visits begun since the store's local midnight (history.utcOffsetMinutes), by store.")
    public static let historyOccupancy = MetricFamily("beaconbridge_history_occupancy", .gauge,
        "Visits begun and not ended, by store.")
    public static let historyStored = MetricFamily("beaconbridge_history_stored_total", .counter,
        "Decisions written to the history.")
    public static let historyDuplicates = MetricFamily("beaconbridge_history_duplicates_total", .counter,
        "Decisions received again (a redelivery, a replay) and kept once.")
    public static let historySkipped = MetricFamily("beaconbridge_history_skipped_total", .counter,
        "Decisions not kept, by reason (malformed, unknownStore, implausibleTime).")
    public static let historyDropped = MetricFamily("beaconbridge_history_dropped_total", .counter,
        "Decisions dropped while the database failed and more than pendingLimit waited.")
    public static let historyWriteFailures = MetricFamily("beaconbridge_history_write_failures_total", .counter,
        "Writes to the database that failed (their batch is kept and retried).")
    public static let historyUptime = MetricFamily("beaconbridge_history_uptime_seconds", .gauge,
        "Seconds since beacon-history started.")
    public static let historyConnected = MetricFamily("beaconbridge_history_broker_connected", .gauge,
        "1 while beacon-history is connected to its broker.")

    public static let gateway: [MetricFamily] = [
        buildInfo, gatewayAdverts, gatewayDecoded, gatewayMalformed, gatewayDropped, gatewayPublished, gatewayQueueDepth,
        gatewayTracked, gatewayUptime, gatewaySourceRunning, gatewayConnected,
    ]
    public static let brain: [MetricFamily] = [
        buildInfo, brainReceived, brainMalformed, brainOversized, brainJoinsAccepted, brainJoinsRejected, brainRulesFired,
        brainInboxMessages, brainPublished, brainPublishFailures, brainBeacons, brainJoins, brainOccupancy, brainSettled,
        brainUptime, brainConnected,
    ]
    public static let history: [MetricFamily] = [
        buildInfo, historyFootfallToday, historyOccupancy, historyStored, historyDuplicates, historySkipped, historyDropped,
        historyWriteFailures, historyUptime, historyConnected,
    ]
}

/// A gateway's figures at one moment, from its service's statistics.
public struct GatewayFigures: Sendable, Equatable {
    public var adverts = 0
    public var decoded = 0
    public var malformed = 0
    public var dropped = 0
    public var published = 0
    public var queueDepth = 0
    public var tracked = 0
    public var sourceRunning = false
    public var connected = false

    public init() {}
}

/// The brain's figures at one moment, from its service's statistics.
public struct BrainFigures: Sendable, Equatable {
    public struct Zone: Sendable, Hashable {
        public var store: String
        public var zone: String
        public init(store: String, zone: String) {
            self.store = store
            self.zone = zone
        }
    }

    public var received = 0
    /// By kind of input.
    public var malformed: [String: Int] = [:]
    public var oversized = 0
    public var joinsAccepted = 0
    public var joinsRejected = 0
    public var rulesFired = 0
    public var inboxMessages = 0
    public var published = 0
    public var publishFailures = 0
    public var beacons = 0
    public var joins = 0
    /// Beacons present by store and zone.
    public var occupancy: [Zone: Int] = [:]
    public var settled = false
    public var connected = false

    public init() {}
}

/// beacon-history's figures at one moment: its counters and, per store, today's footfall
/// and the visits open now.
public struct HistoryMetricFigures: Sendable, Equatable {
    public struct Store: Sendable, Equatable {
        public var store: String
        public var footfallToday: Int
        public var occupancy: Int
        public init(store: String, footfallToday: Int, occupancy: Int) {
            self.store = store
            self.footfallToday = footfallToday
            self.occupancy = occupancy
        }
    }

    /// `nil` when the database could not be read: the last values stay.
    public var stores: [Store]?
    public var stored = 0
    public var duplicates = 0
    /// By reason.
    public var skipped: [String: Int] = [:]
    public var dropped = 0
    public var writeFailures = 0
    public var connected = false

    public init() {}
}

/// Writes a daemon's figures into the Prometheus registry, each under its `MetricFamily`
/// with its help text. Running totals become counters increased by what they grew since
/// the last reading (a restarted count starts over); levels are gauges. Called on every
/// scrape, so `/metrics` shows the figures of that moment rather than of the last health
/// message.
public final class FigureRecorder: Sendable {
    let registry: PrometheusCollectorRegistry
    let label: (String, String)
    let started: ContinuousClock.Instant
    private let last = Mutex<[String: Int]>([:])
    /// Occupancy series written before: set to 0 when their zone empties.
    private let zones = Mutex<Set<BrainFigures.Zone>>([])

    init(registry: PrometheusCollectorRegistry, label: (String, String), info: [(String, String)]) {
        self.registry = registry
        self.label = label
        started = .now
        let family = MetricCatalog.buildInfo
        registry.makeGauge(descriptor: family.descriptor, labels: info).set(to: 1)
    }

    var uptime: Double {
        let elapsed = ContinuousClock.now - started
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    func gauge(_ family: MetricFamily, _ value: Double, _ labels: [(String, String)] = []) {
        registry.makeGauge(descriptor: family.descriptor, labels: [label] + labels).set(value)
    }

    func gauge(_ family: MetricFamily, _ flag: Bool) { gauge(family, flag ? 1 : 0) }

    func total(_ family: MetricFamily, _ value: Int, _ labels: [(String, String)] = []) {
        let key = ([family.name] + labels.map { "\($0.0)=\($0.1)" }).joined(separator: ",")
        let grown = last.withLock { seen -> Int in
            defer { seen[key] = value }
            guard let before = seen[key], value >= before else { return value }  // first, or restarted
            return value - before
        }
        registry.makeCounter(descriptor: family.descriptor, labels: [label] + labels).increment(by: Int64(grown))
    }

    public func record(_ f: GatewayFigures) {
        total(MetricCatalog.gatewayAdverts, f.adverts)
        total(MetricCatalog.gatewayDecoded, f.decoded)
        total(MetricCatalog.gatewayMalformed, f.malformed)
        total(MetricCatalog.gatewayDropped, f.dropped)
        total(MetricCatalog.gatewayPublished, f.published)
        gauge(MetricCatalog.gatewayQueueDepth, Double(f.queueDepth))
        gauge(MetricCatalog.gatewayTracked, Double(f.tracked))
        gauge(MetricCatalog.gatewayUptime, uptime)
        gauge(MetricCatalog.gatewaySourceRunning, f.sourceRunning)
        gauge(MetricCatalog.gatewayConnected, f.connected)
    }

    public func record(_ f: BrainFigures) {
        total(MetricCatalog.brainReceived, f.received)
        for (kind, count) in f.malformed { total(MetricCatalog.brainMalformed, count, [("kind", kind)]) }
        total(MetricCatalog.brainOversized, f.oversized)
        total(MetricCatalog.brainJoinsAccepted, f.joinsAccepted)
        total(MetricCatalog.brainJoinsRejected, f.joinsRejected)
        total(MetricCatalog.brainRulesFired, f.rulesFired)
        total(MetricCatalog.brainInboxMessages, f.inboxMessages)
        total(MetricCatalog.brainPublished, f.published)
        total(MetricCatalog.brainPublishFailures, f.publishFailures)
        gauge(MetricCatalog.brainBeacons, Double(f.beacons))
        gauge(MetricCatalog.brainJoins, Double(f.joins))
        let emptied = zones.withLock { known -> Set<BrainFigures.Zone> in
            let now = Set(f.occupancy.keys)
            defer { known.formUnion(now) }
            return known.subtracting(now)
        }
        for zone in emptied { gauge(MetricCatalog.brainOccupancy, 0, [("store", zone.store), ("zone", zone.zone)]) }
        for (zone, count) in f.occupancy {
            gauge(MetricCatalog.brainOccupancy, Double(count), [("store", zone.store), ("zone", zone.zone)])
        }
        gauge(MetricCatalog.brainSettled, f.settled)
        gauge(MetricCatalog.brainUptime, uptime)
        gauge(MetricCatalog.brainConnected, f.connected)
    }

    public func record(_ f: HistoryMetricFigures) {
        for store in f.stores ?? [] {
            gauge(MetricCatalog.historyFootfallToday, Double(store.footfallToday), [("store", store.store)])
            gauge(MetricCatalog.historyOccupancy, Double(store.occupancy), [("store", store.store)])
        }
        total(MetricCatalog.historyStored, f.stored)
        total(MetricCatalog.historyDuplicates, f.duplicates)
        for (reason, count) in f.skipped { total(MetricCatalog.historySkipped, count, [("reason", reason)]) }
        total(MetricCatalog.historyDropped, f.dropped)
        total(MetricCatalog.historyWriteFailures, f.writeFailures)
        gauge(MetricCatalog.historyUptime, uptime)
        gauge(MetricCatalog.historyConnected, f.connected)
    }
}

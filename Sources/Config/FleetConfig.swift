public import BeaconKit
public import Contract
public import Tracking

/// The whole fleet in one JSON document (README, "Fleet configuration"). Parsed and
/// validated here; every problem is reported with its JSON path, and unknown keys are errors.
public struct FleetConfig: Sendable, Equatable {
    /// Longest gateway zone name and registry beacon name, characters: they travel in
    /// every sighting and presence message, which the brain bounds (`BrainCore.Limits`).
    public static let maxNameLength = 200

    public var broker: BrokerConfig
    /// Topic prefix; empty for none.
    public var topicPrefix: String
    /// UUIDs to publish; empty accepts every beacon.
    public var uuids: [BeaconUUID]
    public var gateways: [GatewayConfig]
    public var beacons: [BeaconEntry]
    public var stores: [StoreEntry]
    public var rules: [Rule]
    public var brain: BrainConfig
    /// How store brokers reach the central broker (`beaconctl bridge`, docs/fleet.md).
    public var bridge = BridgeSettings()
    /// Home Assistant MQTT discovery (off unless the config turns it on).
    public var homeAssistant = HomeAssistantConfig()
    /// What beacon-history keeps and for how long (docs/history.md).
    public var history = HistoryConfig()
    /// What the central broker is: one Mosquitto, or a NATS cluster (docs/fleet.md).
    public var centre = CentreConfig()

    public var topics: Topics { Topics(prefix: topicPrefix) }

    public func gateway(id: String) -> GatewayConfig? { gateways.first { $0.id == id } }

    /// Registry lookup by full id (AltBeacon and iBeacon share the key space): the beacon's
    /// own entry, else its UUID's.
    public func beacon(_ id: BeaconID) -> BeaconEntry? { registry[id] }

    /// The registry as lookups.
    public var registry: BeaconRegistry { BeaconRegistry(beacons) }

    /// Whether a beacon passes the `uuids` allow-list.
    public func accepts(_ id: BeaconID) -> Bool {
        guard !uuids.isEmpty else { return true }
        guard let uuid = id.uuid else { return true }
        return uuids.contains(uuid)
    }
}

public struct BrokerConfig: Sendable, Equatable {
    public var url: BrokerURL
    /// The user name from a command line's `--broker mqtt://user@host`; `nil` in a fleet
    /// config, where every part logs in as itself (`BrokerIdentity`).
    public var username: String?
    /// A file holding the password (first line); `$CREDENTIALS_DIRECTORY/mqtt-password`
    /// and `BEACONBRIDGE_MQTT_PASSWORD` come first.
    public var passwordFile: String?
    public var tls: TLSConfig?
    /// Seconds between MQTT PINGREQs; also how soon the broker notices a dead gateway.
    public var keepalive: Int
    public var mqttVersion: MQTTVersion
    /// Plaintext MQTT to another host is refused unless this says the network is trusted.
    public var allowPlaintext: Bool

    public init(url: BrokerURL, username: String? = nil, passwordFile: String? = nil, tls: TLSConfig? = nil,
                keepalive: Int = 30, mqttVersion: MQTTVersion = .v311, allowPlaintext: Bool = false) {
        self.url = url
        self.username = username
        self.passwordFile = passwordFile
        self.tls = tls
        self.keepalive = keepalive
        self.mqttVersion = mqttVersion
        self.allowPlaintext = allowPlaintext
    }

    /// The user name a part logs in with: a command line's, else its own identity.
    public func username(default identity: String) -> String { username ?? identity }
}

extension MQTTClientOptions {
    /// The options a fleet config's `broker` section gives: URL, TLS, keepalive and MQTT
    /// version, for the part whose user name is `identity` (`BrokerIdentity`; a command
    /// line's `--broker mqtt://user@…` wins); the password comes from the caller.
    public init(_ broker: BrokerConfig, identity: String, clientID: String, password: String?) {
        self.init(broker: broker.url, clientID: clientID)
        username = broker.username(default: identity)
        self.password = password
        tls = broker.tls
        keepalive = broker.keepalive
        version = broker.mqttVersion
    }
}

/// How the controller scans.
public struct ScanConfig: Sendable, Equatable {
    /// Active scanning sends scan requests; passive (the default) only listens.
    public var active: Bool
    /// Scan interval and window in milliseconds (2.5–10240).
    public var intervalMs: Double
    public var windowMs: Double
    /// Seconds without any advertising report, while the adapter is up, after which the
    /// scan is restarted (another program may have turned it off or changed it); 0 turns
    /// the watchdog off.
    public var stallTimeout: Double

    public init(active: Bool = false, intervalMs: Double = 60, windowMs: Double = 60, stallTimeout: Double = 60) {
        self.active = active
        self.intervalMs = intervalMs
        self.windowMs = windowMs
        self.stallTimeout = stallTimeout
    }

    /// In the controller's 0.625 ms units.
    public var intervalUnits: UInt16 { UInt16((intervalMs / 0.625).rounded()) }
    public var windowUnits: UInt16 { UInt16((windowMs / 0.625).rounded()) }
}

/// A gateway that is also a beacon.
public struct AdvertiseConfig: Sendable, Equatable {
    public var beacon: IBeacon
    /// Milliseconds between advertisements (100–10240).
    public var intervalMs: Int
    /// The minor is the store's proof of presence (`"proof": true`): the gateway advertises
    /// the value of its major's store for the current time slot and changes it every slot
    /// (`PresenceProof`); `beacon.minor` is then that slot's value.
    public var proof: Bool

    public init(beacon: IBeacon, intervalMs: Int = 100, proof: Bool = false) {
        self.beacon = beacon
        self.intervalMs = intervalMs
        self.proof = proof
    }

    /// These settings with the minor of `proof` at `time` when the minor is a proof;
    /// unchanged otherwise.
    public func at(_ time: Instant, proof presence: PresenceProof?) -> AdvertiseConfig {
        guard proof, let presence else { return self }
        var copy = self
        copy.beacon.minor = presence.value(store: beacon.major, at: time)
        return copy
    }

    /// The `advertise` object of a gateway in the fleet config, or of the
    /// `{"advertise":{…}}` command: `uuid`, `major`, `minor`, optional `power` (dBm at
    /// 1 m, default -59) and `intervalMs` (default 100). Every problem is reported with
    /// its path under `path`.
    public static func parse(_ value: JSONValue, at path: String = "advertise") throws(ConfigErrors) -> AdvertiseConfig {
        var reader = ConfigReader()
        guard let config = FleetConfig.parseAdvertise(value, at: path, &reader), reader.errors.isEmpty else {
            throw ConfigErrors(reader.errors)
        }
        return config
    }
}

public struct GatewayConfig: Sendable, Equatable {
    public var id: String
    public var source: SourceURI?
    /// Human name of the place (room, counter, door); the gateway id when absent.
    public var zone: String?
    public var tracker: TrackerSettings
    public var scan: ScanConfig
    public var advertise: AdvertiseConfig?
    /// Customers come in here (a gateway by the door): a new beacon enters in this zone
    /// unless another gateway is clearly louder (`brain.zoneConfidence`).
    public var entrance: Bool = false
    /// Seconds per report window on `gateways/<id>/rssi` (the brain's zone fusion); 0: none.
    public var reportInterval: Double
    /// Seconds between health messages.
    public var healthInterval: Double
    /// Sightings held while the broker is down; the oldest are dropped first.
    public var queueLimit: Int
    /// The store (a major in `stores`) the gateway stands in: it connects to that store's
    /// broker when the store has one, and its topics cross that store's bridge.
    public var store: UInt16?
    /// Where it stands on its store's floor plan (`beacon-web`'s floor page; what
    /// calibration measures the distances between gateways with).
    public var position: FloorPosition?
    /// The config sets `rssiOffset` (on the gateway or in `defaults`): the operator's value
    /// stands, and the brain's calibration never corrects this gateway (docs/presence.md).
    public var rssiOffsetIsExplicit = false

    public init(id: String, source: SourceURI? = nil, zone: String? = nil, tracker: TrackerSettings = .init(),
                scan: ScanConfig = .init(), advertise: AdvertiseConfig? = nil, position: FloorPosition? = nil,
                reportInterval: Double = 0.25, healthInterval: Double = 30, queueLimit: Int = 10_000) {
        self.id = id
        self.source = source
        self.zone = zone
        self.tracker = tracker
        self.scan = scan
        self.advertise = advertise
        self.position = position
        self.reportInterval = reportInterval
        self.healthInterval = healthInterval
        self.queueLimit = queueLimit
    }
}

/// One entry of the registry: one beacon, or (as the navigation library registered beacons)
/// every beacon of a proximity UUID.
public struct BeaconEntry: Sendable, Equatable {
    /// Which beacons an entry describes.
    public enum Match: Hashable, Sendable {
        /// One beacon.
        case beacon(BeaconID)
        /// Every iBeacon or AltBeacon of this proximity UUID, whatever its major and minor.
        case uuid(BeaconUUID)
    }

    public var match: Match
    public var name: String?
    /// Calibrated RSSI at 1 m, dBm; overrides what the beacon advertises.
    public var measuredPower: Int?
    public var location: Location?
    /// The store (a major) this beacon belongs to; its own major when absent (a UUID-only
    /// entry's beacons always belong to their own major's store: see `resolved(for:)`); 0 for
    /// an Eddystone beacon without one (see `storeMajor`).
    public var store: UInt16 {
        didSet { explicitStore = store }
    }
    /// The `store` the config gave, if any.
    private var explicitStore: UInt16?

    /// The store this entry's beacon belongs to: `store`, else its major; `nil` for an
    /// Eddystone-UID beacon without a `store` (it has no major), which belongs to no store.
    public var storeMajor: UInt16? { explicitStore ?? id?.major }
    /// The standing offer, published retained on `beacons/<major>/<minor>/ad` (one beacon's
    /// entries only).
    public var ad: JSONValue?
    /// Where a fixed reference beacon hangs on its store's floor plan: the brain's
    /// calibration measures the store's gateways against it (needs `measuredPower`).
    public var position: FloorPosition?
    /// The observer (app user name = client id) this beacon belongs to: a customer's own
    /// beacon (key fob, phone). Only its owner may join it; `nil` for the store's beacons,
    /// which an observer may join while one of its own beacons is in the store (docs/security.md).
    public var owner: String?
    /// The owner's profile, shown on the roster of a store whose roster is driven by
    /// proximity (`stores[].roster`) while the beacon is there.
    public var profile: CustomerProfile?

    /// The one beacon the entry describes; `nil` for a UUID-only entry.
    public var id: BeaconID? {
        if case .beacon(let id) = match { return id }
        return nil
    }

    public init(id: BeaconID, name: String? = nil, measuredPower: Int? = nil, location: Location? = nil,
                store: UInt16? = nil, ad: JSONValue? = nil, owner: String? = nil) {
        match = .beacon(id)
        self.name = name
        self.measuredPower = measuredPower
        self.location = location
        self.store = store ?? id.major ?? 0
        explicitStore = store
        self.ad = ad
        self.owner = owner
    }

    /// An entry for every beacon of `uuid`.
    public init(uuid: BeaconUUID, name: String? = nil, measuredPower: Int? = nil, location: Location? = nil) {
        match = .uuid(uuid)
        self.name = name
        self.measuredPower = measuredPower
        self.location = location
        store = 0
    }

    /// The entry as it applies to the beacon `id`: a UUID-only entry names that beacon, and
    /// its store is the beacon's major.
    public func resolved(for id: BeaconID) -> BeaconEntry {
        guard case .uuid = match else { return self }
        var entry = self
        entry.match = .beacon(id)
        entry.store = id.major ?? 0
        entry.explicitStore = nil
        return entry
    }
}

/// The registry as lookups: a beacon's own entry, else its UUID's.
public struct BeaconRegistry: Sendable, Equatable {
    private var exact: [BeaconID: BeaconEntry] = [:]
    private var byUUID: [BeaconUUID: BeaconEntry] = [:]

    public init(_ entries: [BeaconEntry]) {
        for entry in entries {
            switch entry.match {
            case .beacon(let id): if exact[id] == nil { exact[id] = entry }
            case .uuid(let uuid): if byUUID[uuid] == nil { byUUID[uuid] = entry }
            }
        }
    }

    /// The entry for one beacon: its own, else its UUID's (resolved for it).
    public subscript(id: BeaconID) -> BeaconEntry? {
        if let entry = exact[id] { return entry }
        guard !byUUID.isEmpty, let uuid = id.uuid, let entry = byUUID[uuid] else { return nil }
        return entry.resolved(for: id)
    }

    /// The UUID-only entry of `uuid`.
    public func entry(forUUID uuid: BeaconUUID) -> BeaconEntry? { byUUID[uuid] }

    /// Calibrated measured power (dBm at 1 m) by beacon, and by UUID for UUID-only entries.
    public var calibration: (beacons: [BeaconID: Int], uuids: [BeaconUUID: Int]) {
        (exact.compactMapValues(\.measuredPower), byUUID.compactMapValues(\.measuredPower))
    }
}

public struct StoreEntry: Sendable, Equatable {
    public var major: UInt16
    public var name: String?
    /// The store-wide deal of the day, for beacons without an ad of their own.
    public var ad: JSONValue?
    /// The floor's size, for `beacon-web`'s floor page.
    public var floorPlan: FloorPlan?
    /// The store's own broker, bridged to the central one; `nil` when the store's gateways
    /// use the fleet's broker directly.
    public var broker: BrokerConfig?
    /// Who the store's bridge is at the central broker.
    public var bridge: StoreBridge?
    /// What puts customers on the store's greeter roster: joins (the default), proximity, or both.
    public var roster = StoreRoster()
    /// The store's proof of presence: where its secret is and how long a value lasts
    /// (`PresenceProof`); `nil`: the store's beacons carry none.
    public var proof: ProofConfig?

    public init(major: UInt16, name: String? = nil, ad: JSONValue? = nil, broker: BrokerConfig? = nil,
                bridge: StoreBridge? = nil) {
        self.major = major
        self.name = name
        self.ad = ad
        self.broker = broker
        self.bridge = bridge
    }
}

/// `stores[].proof`: a store whose beacon (a gateway with `advertise.proof`) carries a
/// rotating value an app quotes to prove it is near (`PresenceProof`, docs/security.md).
public struct ProofConfig: Sendable, Equatable {
    /// The file holding the store's secret (its first line, at least 16 characters:
    /// `beaconctl provision` writes one); read by the brain and by the store's advertising
    /// gateways where they run, never sent over MQTT.
    public var secretFile: String
    /// Seconds a value lasts (5–3600, default 30).
    public var slotSeconds: Int

    public init(secretFile: String, slotSeconds: Int = PresenceProof.defaultSlotSeconds) {
        self.secretFile = secretFile
        self.slotSeconds = slotSeconds
    }
}

/// Which estimator decides a beacon's zone (`brain.zoneModel`).
public enum ZoneModelKind: String, Sendable, Equatable, CaseIterable {
    /// Pairwise comparison of the gateways' smoothed levels against the zone's.
    case pairwise
    /// A hidden Markov model over the zones: dwell prior, adjacency, heavy-tailed evidence.
    case hmm
}

/// The brain's own tuning: how it fuses every gateway's reports into one zone per beacon
/// and decides entry and exit (docs/presence.md has the model and why the defaults).
public struct BrainConfig: Sendable, Equatable {
    /// How sure (a probability) the brain must be that another gateway hears a beacon louder
    /// than the zone's gateway before the zone moves.
    public var zoneConfidence: Double
    /// The same while the other gateway's level is rising against the zone's (the customer
    /// walks towards it): a walker crosses into the next zone, noise around a standing
    /// customer does not trend.
    public var zoneConfidenceWalking: Double
    /// dB the other gateway must be louder by, on top of the confidence test.
    public var zoneMargin: Double
    /// Report windows in a row the test must pass before the zone moves.
    public var zoneUpdates: Int
    /// Seconds without an advertisement after which a gateway can no longer take the zone.
    public var zoneStaleAfter: Double
    /// Which estimator decides the zone: the pairwise comparison of smoothed levels
    /// (`zoneConfidence`…), or the zone HMM (`zoneDwell`, `zoneSwitch`, `zoneHold`,
    /// `zoneNoise`; docs/presence.md, "The zone HMM").
    public var zoneModel: ZoneModelKind = .pairwise
    /// The zone HMM: seconds a customer typically stays in a zone (the dwell prior: leaving
    /// per second is about 1 / zoneDwell).
    public var zoneDwell: Double = 10
    /// The zone HMM: posterior probability another zone must reach to take the zone.
    public var zoneSwitch: Double = 0.8
    /// The zone HMM: seconds of capture time that zone must stay above `zoneSwitch` first.
    public var zoneHold: Double = 0
    /// The zone HMM: dB of noise on the difference of two gateways' levels on top of the
    /// measurements' own (shadowing, bodies), before the outlier tail.
    public var zoneNoise: Double = 6
    /// The brain's RSSI filter per beacon and gateway, a level and its trend: how fast the
    /// level may wander (dB²/s), how fast its trend may change (dB²/s³: a customer walking
    /// towards or away from the gateway) and how noisy one advertisement is (dB²).
    public var rssiProcessNoise: Double
    public var rssiTrendNoise: Double
    public var rssiMeasurementNoise: Double
    /// Seconds of evidence gathered before a new beacon's zone is chosen and it enters.
    public var entryWindow: Double
    /// In a store with an `entrance` gateway, how long a new beacon heard first by its other
    /// gateways waits for an entrance gateway to hear it before it enters (customers come in
    /// at the door; a far gateway may catch the first advertisement the door's missed).
    public var entranceWait: Double
    /// A beacon leaves when it has been silent for as long as it takes to miss this many of
    /// its advertisements in a row (at the rate the gateways were hearing it), and at least
    /// `exitMinimum` seconds; never longer than the gateways' `exitTimeout`.
    public var exitSamples: Double
    public var exitMinimum: Double
    /// Wall-clock seconds a gateway whose reports are late may hold back the brain's
    /// decisions (which wait for every gateway's report of the same moment).
    public var clockHold: Double
    /// Which joins the brain accepts (docs/security.md).
    public var joins: JoinAccess
    /// Seconds after which a join ends however long the app keeps it: its profile leaves
    /// the broker.
    public var joinMaxAge: Double
    /// Brains splitting the fleet (`beacon-brain --shard NAME`), each standing in for the
    /// others when they die (docs/fleet.md).
    public var shards: [BrainShard] = []
    /// Learning the gateways' RSSI offsets and the path-loss exponent from reference
    /// beacons heard at known distances (docs/presence.md, "Calibration").
    public var calibration = CalibrationSettings()
    /// A registry beacon whose Eddystone-TLM battery reads below this (mV) is reported once
    /// on `brain/events` (`battery-low`), again only after it read 100 mV above it.
    public var lowBattery: Int = 2500
    /// A registry beacon not seen by any gateway for this long (s) is reported once on
    /// `brain/events` (`beacon-missing`), again only after it was seen.
    public var missingAfter: Double = 86_400

    public init(zoneConfidence: Double = 0.97, zoneConfidenceWalking: Double = 0.88, zoneMargin: Double = 0,
                zoneUpdates: Int = 1, zoneStaleAfter: Double = 3,
                rssiProcessNoise: Double = 20, rssiTrendNoise: Double = 2, rssiMeasurementNoise: Double = 9,
                entryWindow: Double = 0, entranceWait: Double = 1,
                exitSamples: Double = 14, exitMinimum: Double = 2, clockHold: Double = 2, joins: JoinAccess = .proof,
                joinMaxAge: Double = 4 * 3600) {
        self.zoneConfidence = zoneConfidence
        self.zoneConfidenceWalking = zoneConfidenceWalking
        self.zoneMargin = zoneMargin
        self.zoneUpdates = zoneUpdates
        self.zoneStaleAfter = zoneStaleAfter
        self.rssiProcessNoise = rssiProcessNoise
        self.rssiTrendNoise = rssiTrendNoise
        self.rssiMeasurementNoise = rssiMeasurementNoise
        self.entryWindow = entryWindow
        self.entranceWait = entranceWait
        self.exitSamples = exitSamples
        self.exitMinimum = exitMinimum
        self.clockHold = clockHold
        self.joins = joins
        self.joinMaxAge = joinMaxAge
    }
}

/// How the brain calibrates the gateways (`brain.calibration`): from the advertisements of
/// transmitters at known positions (gateways that advertise, registry beacons with a
/// `position`) heard by the other gateways of their store, it fits each gateway's RSSI
/// offset and the store's path-loss exponent by robust least squares, and corrects the
/// gateways' reports before the zone fusion.
public struct CalibrationSettings: Sendable, Equatable {
    public var enabled: Bool
    /// Advertisements a gateway must have heard from reference transmitters before it is
    /// calibrated.
    public var minSamples: Int
    /// Seconds of capture time from the first reference advertisement before the first fit.
    public var minSeconds: Double
    /// Seconds of capture time between two fits.
    public var interval: Double
    /// Largest correction, dB either way; a gateway reading further off is clamped and warned about.
    public var maxOffset: Double
    /// Bounds on the fitted path-loss exponent.
    public var minExponent: Double
    public var maxExponent: Double
    /// dB (and a twentieth of it in exponent) a new fit must differ by before it replaces
    /// the applied one: no republishing for noise.
    public var minChange: Double

    public init(enabled: Bool = true, minSamples: Int = 60, minSeconds: Double = 60, interval: Double = 30,
                maxOffset: Double = 15, minExponent: Double = 1.5, maxExponent: Double = 4.5, minChange: Double = 0.5) {
        self.enabled = enabled
        self.minSamples = minSamples
        self.minSeconds = minSeconds
        self.interval = interval
        self.maxOffset = maxOffset
        self.minExponent = minExponent
        self.maxExponent = maxExponent
        self.minChange = minChange
    }
}

/// Which observers may join which beacons.
public enum JoinAccess: String, Sendable, Equatable, CaseIterable {
    /// The default: as `owned-or-near`, and also a store's beacon by an app that proves it is
    /// near: its join names the store's current rotating value (`stores[].proof`, which a
    /// gateway advertises as its iBeacon minor: `PresenceProof`), so a phone that owns no
    /// beacon gets the store's answer at the counter, and nobody elsewhere does.
    case proof
    /// A beacon with an `owner` only by its owner; a store's beacon only by an observer one
    /// of whose own beacons is in that store now. The join lasts while that is so.
    case ownedOrNear = "owned-or-near"
    /// Any observer any beacon (a demo, a kiosk): an app can join from anywhere and learn
    /// when other customers' beacons come and go. Warned about.
    case open
}

// MARK: - Rules

public struct Rule: Sendable, Equatable {
    public enum Trigger: Sendable, Equatable {
        case enter, exit, join, leave
        /// Proximity reaching this class (from any other).
        case proximity(Proximity)
        /// Every update of the beacon (a sighting from its zone gateway: proximity, RSSI,
        /// distance), whether or not anything changed; the navigation library's per-beacon
        /// callback. Rate-limited only by a `cooldown` in seconds: see `Rule.updateInterval`.
        case update

        public init?(_ text: String) {
            switch text {
            case "update": self = .update
            case "enter": self = .enter
            case "exit": self = .exit
            case "join": self = .join
            case "leave": self = .leave
            case "proximity:immediate": self = .proximity(.immediate)
            case "proximity:near": self = .proximity(.near)
            case "proximity:far": self = .proximity(.far)
            default: return nil
            }
        }

        public static let names = ["enter", "exit", "join", "leave",
                                   "proximity:immediate", "proximity:near", "proximity:far", "update"]
    }

    public enum Action: Sendable, Equatable {
        /// The beacon's ad to the observer's inbox.
        case ad
        /// A templated text to the observer's inbox.
        case greeting(template: String)
        /// The beacon's location from the registry to the observer's inbox.
        case locationFix
        /// A templated message to a templated topic.
        case publish(topic: String, template: String, retain: Bool, qos: Int)

        /// Whether the action sends a templated text (the rule's `fallback` applies to it).
        public var usesTemplate: Bool {
            switch self {
            case .greeting, .publish: true
            case .ad, .locationFix: false
            }
        }
    }

    public enum Cooldown: Sendable, Equatable {
        case seconds(Double)
        /// Re-armed only after this many updates at exactly `proximity` (the navigation
        /// library's reset rule: "after 5 updates at near"); updates at other classes neither
        /// count nor reset the count.
        case updates(count: Int, at: Proximity)
    }

    /// A beacon named by major/minor and, optionally, UUID; or an Eddystone-UID beacon by
    /// namespace and instance (then `eddystone` is set and major/minor are 0).
    public struct BeaconKey: Sendable, Equatable {
        public var uuid: BeaconUUID?
        public var major: UInt16
        public var minor: UInt16
        /// An Eddystone-UID beacon (`BeaconID.eddystone`).
        public var eddystone: BeaconID?

        public init(uuid: BeaconUUID? = nil, major: UInt16, minor: UInt16) {
            self.uuid = uuid
            self.major = major
            self.minor = minor
        }

        public init(namespace: EddystoneNamespace, instance: EddystoneInstance) {
            self.init(major: 0, minor: 0)
            eddystone = .eddystone(namespace: namespace, instance: instance)
        }
    }

    public var name: String
    public var trigger: Trigger
    /// Empty lists mean "any".
    public var beacons: [BeaconKey]
    public var stores: [UInt16]
    public var names: [String]
    /// Only while the beacon's zone is held by one of these gateways (by id): "the deal at
    /// the counter" rather than wherever the customer first comes close.
    public var zones: [String]
    /// Only when the smoothed RSSI is above this, dBm.
    public var rssiAbove: Double?
    public var actions: [Action]
    /// At most once per visit (a beacon's presence, or an observer's join).
    public var once: Bool
    public var cooldown: Cooldown?
    /// The text a greeting or a publish of this rule sends instead when its template uses a
    /// variable without a value (a customer without a name, a beacon without a location), so
    /// nobody reads "Hello ! A  is on its way.". Without one such a greeting is skipped.
    public var fallback: String?

    public init(name: String, trigger: Trigger, beacons: [BeaconKey] = [], stores: [UInt16] = [], names: [String] = [],
                zones: [String] = [], rssiAbove: Double? = nil, actions: [Action], once: Bool = false,
                cooldown: Cooldown? = nil, fallback: String? = nil) {
        self.fallback = fallback
        self.name = name
        self.trigger = trigger
        self.beacons = beacons
        self.stores = stores
        self.names = names
        self.zones = zones
        self.rssiAbove = rssiAbove
        self.actions = actions
        self.once = once
        self.cooldown = cooldown
    }

    /// An `update` rule with a `cooldown` in seconds fires at most once per that many
    /// seconds per beacon; `nil` for other rules: an `update` rule without one fires on every
    /// update, as the navigation library's callback did.
    public var updateInterval: Double? {
        guard trigger == .update, case .seconds(let seconds)? = cooldown else { return nil }
        return seconds
    }

    /// Whether this rule concerns a beacon with this identity and registry entry, whose zone
    /// is held by the gateway `zone` (`nil`: the beacon is present nowhere).
    public func matches(major: UInt16, minor: UInt16, uuid: BeaconUUID?, entry: BeaconEntry?, zone: String? = nil) -> Bool {
        if !beacons.isEmpty, !beacons.contains(where: { key in
            key.eddystone == nil && key.major == major && key.minor == minor
                && (key.uuid == nil || uuid == nil || key.uuid == uuid)
        }) { return false }
        if !stores.isEmpty, !stores.contains(entry?.store ?? major) { return false }
        if !names.isEmpty, !names.contains(where: { $0 == entry?.name }) { return false }
        if !zones.isEmpty, !zones.contains(where: { $0 == zone }) { return false }
        return true
    }

    /// Whether this rule concerns the Eddystone-UID beacon `id`, with this registry entry (an
    /// Eddystone beacon is in a store only by its entry's `store`).
    public func matches(eddystone id: BeaconID, entry: BeaconEntry?, zone: String? = nil) -> Bool {
        if !beacons.isEmpty, !beacons.contains(where: { $0.eddystone == id }) { return false }
        if !stores.isEmpty, !(entry?.storeMajor.map(stores.contains) ?? false) { return false }
        if !names.isEmpty, !names.contains(where: { $0 == entry?.name }) { return false }
        if !zones.isEmpty, !zones.contains(where: { $0 == zone }) { return false }
        return true
    }
}

/// The variables a template may use, as `{name}`.
public enum Template {
    public static let variables: Set<String> = [
        "major", "minor", "uuid", "name", "store", "zone", "gateway", "proximity", "distance", "rssi",
        "client", "customer", "favorite", "lat", "lon", "heading", "floor", "rule", "ts", "namespace", "instance",
    ]

    /// The first unknown or unterminated variable, or `nil` when the template is fine.
    public static func problem(in template: String) -> String? {
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            guard let close = rest[open...].firstIndex(of: "}") else { return "has an unclosed '{'" }
            let name = String(rest[rest.index(after: open)..<close])
            guard variables.contains(name) else {
                return "uses {\(name)}; known: " + variables.sorted().map { "{\($0)}" }.joined(separator: " ")
            }
            rest = rest[rest.index(after: close)...]
        }
        return nil
    }

    /// The variables a template uses, in order.
    public static func names(in template: String) -> [String] {
        var names: [String] = []
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            names.append(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return names
    }

    /// Whether every variable the template uses has a non-empty value.
    public static func isComplete(_ template: String, _ values: [String: String]) -> Bool {
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            guard let value = values[String(rest[rest.index(after: open)..<close])], !value.isEmpty else { return false }
            rest = rest[rest.index(after: close)...]
        }
        return true
    }

    /// Replaces `{variable}` by its value; unknown or missing ones become empty.
    public static func render(_ template: String, _ values: [String: String]) -> String {
        var out = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            out += rest[..<open]
            out += values[String(rest[rest.index(after: open)..<close])] ?? ""
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }
}

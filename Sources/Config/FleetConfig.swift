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
    /// Seconds of a silent path to the broker after which a part gives the connection up and
    /// moves to the next node (`MQTTClientOptions.linkTimeout`); nil: 3 s to another host,
    /// off on loopback; 0: off.
    public var linkTimeout: Double?
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
    /// The options a fleet config's `broker` section gives: URL, TLS, keepalive, link timeout
    /// and MQTT version, for the part whose user name is `identity` (`BrokerIdentity`; a command
    /// line's `--broker mqtt://user@…` wins); the password comes from the caller.
    public init(_ broker: BrokerConfig, identity: String, clientID: String, password: String?) {
        self.init(broker: broker.url, clientID: clientID)
        username = broker.username(default: identity)
        self.password = password
        tls = broker.tls
        keepalive = broker.keepalive
        linkTimeout = broker.linkTimeout
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

    /// These settings with the minor of `proof` at `time` (the gateway's clock: it goes on the
    /// air now) when the minor is a proof; unchanged otherwise.
    public func at(_ time: WallTime, proof presence: PresenceProof?) -> AdvertiseConfig {
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

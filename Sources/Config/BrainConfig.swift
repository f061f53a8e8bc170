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
    /// `pairwise`: seconds a beacon must have held its zone before each confidence asks one
    /// standard deviation more (0: never). Fewer flaps for customers who stand between
    /// gateways, later moves for walkers (docs/presence.md, "Settled customers").
    public var zoneSettle: Double = 0
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

public import BeaconKit
public import Contract

/// A transmitter at a known place on a store's floor: a gateway that advertises its own
/// iBeacon (`gateways[].advertise` with a `position`), or a registry beacon with a
/// `position` and `measuredPower`. The other gateways of its store hear it at known
/// distances: what calibration learns from.
public struct ReferenceTransmitter: Sendable, Equatable {
    public var beacon: BeaconRef
    public var uuid: BeaconUUID?
    public var store: UInt16
    public var position: FloorPosition
    /// Its RSSI at 1 m, dBm (the gateway's advertised `power`, the registry's `measuredPower`).
    public var power: Double
    /// The gateway it is, if one: it does not calibrate against itself.
    public var gateway: String?

    public init(beacon: BeaconRef, uuid: BeaconUUID?, store: UInt16, position: FloorPosition, power: Double,
                gateway: String? = nil) {
        self.beacon = beacon
        self.uuid = uuid
        self.store = store
        self.position = position
        self.power = power
        self.gateway = gateway
    }

    /// Every reference transmitter a fleet config describes (of the stores `stores`; empty: all).
    public static func all(in config: FleetConfig, stores: Set<UInt16> = []) -> [ReferenceTransmitter] {
        var out: [ReferenceTransmitter] = []
        for gateway in config.gateways {
            guard let advertise = gateway.advertise, let position = gateway.position, let store = gateway.store else { continue }
            let b = advertise.beacon
            out.append(ReferenceTransmitter(beacon: BeaconRef(major: b.major, minor: b.minor), uuid: b.uuid, store: store,
                                            position: position, power: Double(b.txPower), gateway: gateway.id))
        }
        for entry in config.beacons {
            guard let position = entry.position, let power = entry.measuredPower, let id = entry.id,
                  let major = id.major, let minor = id.minor, let store = entry.storeMajor else { continue }
            out.append(ReferenceTransmitter(beacon: BeaconRef(major: major, minor: minor), uuid: id.uuid, store: store,
                                            position: position, power: Double(power)))
        }
        return out.filter { stores.isEmpty || stores.contains($0.store) }
    }
}

extension FleetConfig {
    /// What `beaconctl config check` says about calibration: per store with reference
    /// transmitters, what calibrates what; and advertising gateways calibration cannot use.
    public var calibrationNotes: [String] {
        let transmitters = ReferenceTransmitter.all(in: self)
        var notes: [String] = []
        for store in Set(transmitters.map(\.store)).sorted() {
            let references = transmitters.filter { $0.store == store }
            let placed = gateways.filter { $0.store == store && $0.position != nil }
            let pinned = placed.filter(\.rssiOffsetIsExplicit).map(\.id)
            var note = "store \(store): calibration from \(references.count) reference transmitter\(references.count == 1 ? "" : "s") ("
                + references.map { $0.gateway.map { "gateway " + $0 } ?? "beacon \($0.beacon)" }.joined(separator: ", ")
                + ") of \(placed.count) placed gateway\(placed.count == 1 ? "" : "s")"
            if !pinned.isEmpty { note += "; pinned by their rssiOffset: " + pinned.joined(separator: ", ") }
            if !brain.calibration.enabled { note += "; off (brain.calibration.enabled)" }
            notes.append(note)
        }
        for gateway in gateways where gateway.advertise != nil && gateway.store != nil && gateway.position == nil {
            notes.append("note: gateway \(gateway.id) advertises but has no position: calibration cannot use its beacon")
        }
        return notes
    }
}

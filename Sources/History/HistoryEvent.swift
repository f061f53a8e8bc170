public import BeaconKit
public import Contract
public import Config

/// One of the brain's zone decisions as the history keeps it: which store, which beacon,
/// which zone, when the visit began and when the decision was made (capture times).
public struct HistoryEvent: Sendable, Equatable {
    public var kind: ZoneDecision.Kind
    /// The store (a major) the visit is in.
    public var store: UInt16
    public var beacon: BeaconRef
    /// The zone gateway after the decision (the last one, for an exit).
    public var zone: String
    public var zoneName: String
    /// When the visit began: with the store and the visitor, the visit's natural key.
    public var since: CaptureTime
    /// Capture time of the decision.
    public var at: CaptureTime

    public init(kind: ZoneDecision.Kind, store: UInt16, beacon: BeaconRef, zone: String, zoneName: String,
                since: CaptureTime, at: CaptureTime) {
        self.kind = kind
        self.store = store
        self.beacon = beacon
        self.zone = zone
        self.zoneName = zoneName
        self.since = since
        self.at = at
    }

    /// A beacon's id as the pseudonym's key hashes it: `<major>/<minor>` or
    /// `eddystone/<namespace>/<instance>`.
    public var beaconKey: String { Self.key(of: beacon) }

    public static func key(of beacon: BeaconRef) -> String { beacon.recordLevels }
}

/// Why a message on a decision topic was not kept (each is counted, none stops the service).
public enum HistorySkip: String, Error, Sendable, CaseIterable {
    /// Not JSON, or not a decision (`event`, `zone`, `since`, `ts`), or a beacon other than the topic's.
    case malformed
    /// A decision about a beacon whose store the fleet config does not list.
    case unknownStore
    /// A decision dated before its visit began.
    case implausibleTime
}

/// Reads the brain's decisions (`beacons/<major>/<minor>/events`,
/// `eddystone/<namespace>/<instance>/events`) into history events.
public struct DecisionReader: Sendable {
    public let topics: Topics
    /// Stores the config lists; empty accepts every store.
    let stores: Set<UInt16>
    let registry: BeaconRegistry

    public init(config: FleetConfig) {
        topics = config.topics
        stores = Set(config.stores.map(\.major))
        registry = config.registry
    }

    /// The subscriptions that bring every decision of the fleet.
    public var filters: [String] { [topics.zoneEvents(of: .anyIBeacon), topics.zoneEvents(of: .anyEddystone)] }

    /// The beacon a decision topic is about; `nil` for any other topic.
    public func beacon(ofDecisionTopic topic: String) -> BeaconRef? {
        guard case let .beacon(ref, .zoneEvents)? = topics.parse(topic) else { return nil }
        return ref
    }

    /// The event a message carries, or why it is skipped.
    public func read(topic: String, payload: [UInt8]) -> Result<HistoryEvent, HistorySkip> {
        guard let beacon = beacon(ofDecisionTopic: topic), let json = try? JSONParser().parse(payload),
              let decision = try? ZoneDecision(parsing: json, topic: beacon) else { return .failure(.malformed) }
        guard decision.at >= decision.since else { return .failure(.implausibleTime) }
        guard let store = store(of: beacon) else { return .failure(.unknownStore) }
        return .success(HistoryEvent(kind: decision.kind, store: store, beacon: beacon, zone: decision.zone,
                                     zoneName: decision.zoneName, since: decision.since, at: decision.at))
    }

    /// The store a beacon's visit is in: its registry entry's, else its major; an
    /// Eddystone-UID beacon needs a registry entry with a store.
    public func store(of beacon: BeaconRef) -> UInt16? {
        let store: UInt16?
        if let eddystone = beacon.eddystone {
            store = registry[.eddystone(namespace: eddystone.namespace, instance: eddystone.instance)]?.storeMajor
        } else {
            store = beacon.major
        }
        guard let store, stores.isEmpty || stores.contains(store) else { return nil }
        return store
    }
}

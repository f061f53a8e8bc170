public import BeaconKit
public import Contract
public import Config

/// What the fleet config says about beacons, stores and gateways, indexed for the brain:
/// which registry entry a beacon has, which store it belongs to, whether this brain
/// (`--stores`) handles it, its standing ad. A value rebuilt whole from each config.
public struct BeaconDirectory: Sendable {
    /// The stores (majors) this brain handles; empty for all.
    public let stores: Set<UInt16>
    private var registry: [BeaconRef: [BeaconEntry]] = [:]
    /// The registry's UUID-only entries: any major and minor of that UUID.
    private var uuidEntries: [BeaconUUID: BeaconEntry] = [:]
    private var storeEntries: [UInt16: StoreEntry] = [:]
    /// `gateways[].store`, by gateway id.
    private var gatewayStores: [String: UInt16] = [:]

    public init(config: FleetConfig, stores: Set<UInt16>) {
        self.stores = stores
        for entry in config.beacons {
            switch entry.match {
            case .uuid(let uuid): uuidEntries[uuid] = entry
            case .beacon(let id): registry[id.ref, default: []].append(entry)
            }
        }
        storeEntries = Dictionary(config.stores.map { ($0.major, $0) }, uniquingKeysWith: { first, _ in first })
        for gateway in config.gateways { gatewayStores[gateway.id] = gateway.store }
    }

    /// The registry entry of a beacon; with a UUID, only an entry with that UUID, else the
    /// UUID-only entry of that UUID (topics carry no UUID: such an entry applies once a
    /// gateway's payload has told the beacon's UUID).
    public func entry(_ ref: BeaconRef, uuid: BeaconUUID? = nil) -> BeaconEntry? {
        let entries = registry[ref]
        guard let uuid else { return entries?.first }
        if let own = entries?.first(where: { $0.id?.uuid == uuid }) { return own }
        guard ref.eddystone == nil else { return nil }
        return uuidEntries[uuid]?.resolved(for: BeaconID(uuid: uuid, major: ref.major, minor: ref.minor))
    }

    /// Whether the registry names this beacon by its major and minor (or namespace and instance).
    public func isRegistered(_ ref: BeaconRef) -> Bool { registry[ref] != nil }

    /// The registry's beacons this brain handles, in order.
    public var ownBeacons: [BeaconRef] { registry.keys.filter(owns).sorted() }

    /// The store (a major) a beacon belongs to: its registry `store`, else its major. An
    /// Eddystone beacon has no major: it belongs to its registry entry's `store`, or to none.
    public func store(of ref: BeaconRef) -> UInt16? {
        if let store = registry[ref]?.first?.storeMajor { return store }
        return ref.eddystone == nil ? ref.major : nil
    }

    /// The config's entry of a store.
    public func storeEntry(_ major: UInt16) -> StoreEntry? { storeEntries[major] }

    /// The majors of the stores the config lists.
    public var configuredStores: Dictionary<UInt16, StoreEntry>.Keys { storeEntries.keys }

    /// The store a gateway belongs to (`gateways[].store`).
    public func store(ofGateway gateway: String) -> UInt16? { gatewayStores[gateway] }

    /// Whether this brain handles the beacon (`--stores`; a beacon of no store is handled only
    /// by a brain of every store).
    public func owns(_ ref: BeaconRef) -> Bool {
        store(of: ref).map(handles(store:)) ?? stores.isEmpty
    }

    /// Whether this brain handles the store (`--stores`).
    public func handles(store major: UInt16) -> Bool { stores.isEmpty || stores.contains(major) }

    /// The beacon's standing offer: its registry entry's ad, else its store's. Keyed by
    /// major/minor like the `ad` topic, so the reply to a join and the retained ad agree.
    public func ad(of ref: BeaconRef) -> JSONValue? {
        entry(ref)?.ad ?? store(of: ref).flatMap { storeEntries[$0]?.ad }
    }

    /// The majors whose topics this brain needs: its stores and the majors of registry
    /// beacons assigned to them; `nil` for every major.
    public var majors: [UInt16]? {
        guard !stores.isEmpty else { return nil }
        var majors = stores
        for ref in registry.keys where owns(ref) && ref.eddystone == nil { majors.insert(ref.major) }
        return majors.sorted()
    }

    /// The Eddystone beacons whose topics this brain needs (registry beacons of its stores);
    /// `nil` for every Eddystone beacon.
    public var eddystoneBeacons: [BeaconRef]? {
        guard !stores.isEmpty else { return nil }
        return registry.keys.filter { $0.eddystone != nil && owns($0) }.sorted()
    }

    /// The store a gateway's view of a beacon comes from: the gateway's store, else the
    /// beacon's. A value, for closures that run while the fleet presence changes.
    public var viewStore: @Sendable (BeaconRef, String) -> UInt16? {
        let (gatewayStores, registry) = (self.gatewayStores, self.registry)
        return { ref, gateway in
            gatewayStores[gateway] ?? registry[ref]?.first?.storeMajor ?? (ref.eddystone == nil ? ref.major : nil)
        }
    }
}

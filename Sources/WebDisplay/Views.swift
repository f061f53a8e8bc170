public import BeaconKit
public import Contract
public import Config
import RealModule
import Tracking

/// The three pages' data, as the JSON their scripts render (the first paint embeds it, the
/// live stream sends it again on each change). Times are ISO-8601 UTC; `now` is the
/// server's clock so that a tablet with a wrong clock still counts minutes right.
extension FleetState {
    // MARK: - Greeter

    /// A customer on the greeter display.
    public struct GreeterEntry: Sendable, Equatable {
        public var client: String
        public var name: String?
        public var favorite: String?
        /// The URL of the photo (behind the login), `nil` without one.
        public var photoURL: String?
        public var beacon: BeaconRef
        /// The zone's place name (the zone gateway's `zone`), `nil` while no gateway hears the beacon.
        public var zone: String?
        /// When the visit began: the first join (or proximity visit) of it, or, for the
        /// customer's own tag (registry `owner`), when the tag came into the store if earlier.
        /// Steady through drop-outs (`GreeterCards`).
        public var since: CaptureTime
        /// Since when the beacon has been in `zone` (never before `since`); `nil` without a zone.
        public var zoneSince: CaptureTime?
        /// In the store: the beacon is heard there (or is the store's proof beacon). App users
        /// whose tag is not in the store are listed apart, never in a zone.
        public var inRange: Bool
        /// Off the roster for less than the store's exit timeout: a drop-out, held steady.
        public var away: Bool
    }

    /// Customers on a store's greeter, newest first: those in the store, then (with
    /// `inRange` false) app users whose tag is not in the store.
    public func greeter(store: UInt16) -> [GreeterEntry] {
        let entries = cards.cards(inStore: store).reversed().map { card in
            let c = card.customer
            let report = presence[c.beacon]
            // Versioned by content, so the browser may keep it and a new photo is fetched anew.
            let url = c.photo.flatMap { photos[$0] }.map {
                Self.photoPath(store: store, client: c.client) + "?v=" + JoinRequest.fingerprint($0)
            }
            let since = card.inStoreSince
            let zoneSince = report == nil ? nil : max(self.zoneSince[c.beacon] ?? since, since)
            return GreeterEntry(client: c.client, name: c.name, favorite: c.favorite, photoURL: url,
                                beacon: c.beacon, zone: report.map { $0.zoneName }, since: since, zoneSince: zoneSince,
                                inRange: card.inRange, away: card.away != nil)
        }
        return entries.filter(\.inRange) + entries.filter { !$0.inRange }
    }

    /// Where a customer's photo is served (the server checks the login first).
    public static func photoPath(store: UInt16, client: String) -> String {
        "/photos/\(store)/\(PercentEncoding.encode(client))"
    }

    /// The photo of a customer present in a store.
    public func photo(store: UInt16, client: String) -> [UInt8]? {
        guard let topic = cards.cards(inStore: store).first(where: { $0.customer.client == client })?.customer.photo
        else { return nil }
        return photos[topic]
    }

    public func greeterJSON(store: UInt16, at now: WallTime) -> String {
        var writer = JSONWriter(capacity: 4096)
        writer.object { o in
            o("page", "greeter")
            o("live", brokerConnected)
            o("store", Int(store))
            o("name", storeName(store))
            o("now", now)
            o("customers", objects: greeter(store: store)) { c, entry in
                c("client", entry.client)
                c("name", entry.name)
                c("favorite", entry.favorite)
                c("photo", entry.photoURL)
                c("beacon", entry.beacon.description)
                c("zone", entry.zone)
                c("since", entry.since)
                c("zoneSince", entry.zoneSince.map { JSONValue.string($0.iso8601) } ?? .null)
                c("inRange", entry.inRange)
                c("away", entry.away)
            }
        }
        return writer.text
    }

    // MARK: - Floor

    /// A gateway on a floor: where it stands (placed by the config, else in a row along
    /// the bottom edge) and whether it is up.
    public struct FloorGateway: Sendable, Equatable {
        public var id: String
        public var zone: String
        public var position: FloorPosition
        public var placed: Bool
        public var condition: GatewayCondition
    }

    /// A beacon present in the store, drawn as a dot around its zone gateway.
    public struct FloorDot: Sendable, Equatable {
        public var beacon: BeaconRef
        /// The customers joined to it (their names), else the registry name, else `major/minor`.
        public var label: String
        public var isCustomer: Bool
        /// The gateway holding the zone.
        public var zone: String
        public var position: FloorPosition
    }

    public struct Floor: Sendable, Equatable {
        public var plan: FloorPlan
        public var gateways: [FloorGateway]
        public var dots: [FloorDot]
    }

    public func floor(store: UInt16, at now: WallTime) -> Floor {
        let inStore = presence.filter { config.store(of: $0.key) == store }.sorted { $0.key < $1.key }
        // Gateways of the store, then any other gateway that holds the zone of one of its beacons.
        var ids = config.gateways(inStore: store).map(\.id)
        var listed = Set(ids)
        for (_, report) in inStore where !listed.contains(report.zone) {
            ids.append(report.zone)
            listed.insert(report.zone)
        }

        var plan = config.storeEntry(store)?.floorPlan
        let placedPositions = ids.compactMap { config.gateway(id: $0)?.position }
        if plan == nil {
            let width = max(12, (placedPositions.map(\.x).max() ?? 0) + 2)
            let height = max(8, (placedPositions.map(\.y).max() ?? 0) + 2)
            plan = FloorPlan(width: width, height: height)
        }
        let floorPlan = plan!
        let unplaced = ids.filter { config.gateway(id: $0)?.position == nil }
        var gateways: [FloorGateway] = []
        for id in ids {
            let gateway = config.gateway(id: id)
            let position: FloorPosition
            if let placed = gateway?.position {
                position = placed
            } else {
                let index = Double(unplaced.firstIndex(of: id) ?? 0)
                position = FloorPosition(x: floorPlan.width * (index + 1) / Double(unplaced.count + 1),
                                         y: floorPlan.height * 0.85)
            }
            gateways.append(FloorGateway(id: id, zone: gateway?.zone ?? id, position: position,
                                         placed: gateway?.position != nil,
                                         condition: condition(ofGateway: id, at: now)))
        }

        // Looked up once each: a busy store has hundreds of beacons.
        let present = Dictionary(grouping: customers.customers(inStore: store), by: \.beacon)
        var registryNames: [BeaconRef: String] = [:]
        for entry in config.beacons {
            if let major = entry.id?.major, let minor = entry.id?.minor, let name = entry.name {
                registryNames[BeaconRef(major: major, minor: minor)] = name
            }
        }
        let centres = Dictionary(gateways.map { ($0.id, $0.position) }, uniquingKeysWith: { first, _ in first })
        var dots: [FloorDot] = []
        var perZone: [String: Int] = [:]
        for (ref, report) in inStore {
            let names = (present[ref] ?? []).map { $0.name ?? $0.client }
            let registry = registryNames[ref]
            let centre = centres[report.zone] ?? FloorPosition(x: 0, y: 0)
            let index = perZone[report.zone, default: 0]
            perZone[report.zone] = index + 1
            dots.append(FloorDot(beacon: ref, label: names.isEmpty ? (registry ?? ref.description) : names.joined(separator: ", "),
                                 isCustomer: !names.isEmpty, zone: report.zone,
                                 position: Self.around(centre, index: index, within: floorPlan)))
        }
        return Floor(plan: floorPlan, gateways: gateways, dots: dots)
    }

    /// The `index`th place on a sunflower spiral around a gateway, kept on the floor.
    static func around(_ centre: FloorPosition, index: Int, within plan: FloorPlan) -> FloorPosition {
        let radius = 0.9 + 0.45 * Double(index).squareRoot()
        let angle = Double(index) * 2.399963  // the golden angle, in radians
        let x = min(max(centre.x + radius * Double.cos(angle), 0.2), plan.width - 0.2)
        let y = min(max(centre.y + radius * Double.sin(angle), 0.2), plan.height - 0.2)
        return FloorPosition(x: x, y: y)
    }

    public func floorJSON(store: UInt16, at now: WallTime) -> String {
        let floor = floor(store: store, at: now)
        var writer = JSONWriter(capacity: 4096)
        writer.object { o in
            o("page", "floor")
            o("live", brokerConnected)
            o("store", Int(store))
            o("name", storeName(store))
            o("now", now)
            o("plan", .object(["width": .number(floor.plan.width), "height": .number(floor.plan.height)]))
            o("gateways", objects: floor.gateways) { g, gateway in
                g("id", gateway.id)
                g("zone", gateway.zone)
                g("x", gateway.position.x, places: 2)
                g("y", gateway.position.y, places: 2)
                g("placed", gateway.placed)
                g("condition", gateway.condition.rawValue)
            }
            o("dots", objects: floor.dots) { d, dot in
                d("beacon", dot.beacon.description)
                d("label", dot.label)
                d("customer", dot.isCustomer)
                d("zone", dot.zone)
                d("x", dot.position.x, places: 2)
                d("y", dot.position.y, places: 2)
            }
        }
        return writer.text
    }

    // MARK: - Fleet

    /// A gateway at a glance, worst first: what a fleet operator looks for.
    public enum GatewayCondition: String, Sendable, Equatable, CaseIterable {
        /// Status `offline` (its last will, or a clean stop).
        case offline
        /// Online, but its health is overdue (more than 2.5 health intervals old): hung?
        case late
        /// Its source is not delivering (starting, retrying, a replay finished).
        case stalled
        /// Scanning paused by an operator.
        case paused
        /// Running, but hearing nothing.
        case quiet
        case ok
        /// Nothing heard from it yet.
        case unknown

        /// Stands out on the dashboard.
        public var needsAttention: Bool { self == .offline || self == .late || self == .stalled }

        /// Its last health is not a current figure: the gateway is offline or its health is
        /// overdue, so the dashboard greys the figures and dates them instead of showing them
        /// as now.
        public var figuresAreStale: Bool { self == .offline || self == .late }
    }

    public func condition(ofGateway id: String, at now: WallTime) -> GatewayCondition {
        let status = gateways[id]
        if status?.online == false { return .offline }
        guard let status, status.online != nil || status.health != nil else { return .unknown }
        if let health = status.health {
            let interval = config.gateway(id: id)?.healthInterval ?? 30
            if let heard = status.healthReceived, now.seconds(since: heard) > 2.5 * interval { return .late }
            switch health.sourceState {
            case "running"?: return (health.advertsPerSecond ?? 1) > 0 ? .ok : .quiet
            case "paused"?: return .paused
            case nil: return .ok
            default: return .stalled
            }
        }
        return .ok
    }

    /// Every gateway: the config's in config order, then any other heard from, by id.
    public var gatewayIDs: [String] {
        let configured = config.gateways.map(\.id)
        return configured + gateways.keys.filter { !configured.contains($0) }.sorted()
    }

    public func fleetJSON(at now: WallTime) -> String {
        let ids = gatewayIDs
        let conditions = ids.map { condition(ofGateway: $0, at: now) }
        var writer = JSONWriter(capacity: 256 + 400 * ids.count)
        writer.object { o in
            o("page", "fleet")
            o("live", brokerConnected)
            o("now", now)
            o("brain", brainOnline.map { $0 ? "online" : "offline" } ?? "unknown")
            o("attention", conditions.filter(\.needsAttention).count)
            o("online", conditions.filter { $0 != .offline && $0 != .unknown }.count)
            // Messages on the fleet's topics that beacon-web could not read, and the last one.
            o("malformed", malformed)
            o("lastMalformed", lastMalformed.map { m -> JSONValue in
                .object(["topic": .string(m.topic), "reason": .string(m.reason), "at": .string(m.at.iso8601)])
            } ?? .null)
            o("stores", .array(knownStores.map { store in
                .object(["store": .number(Double(store)), "name": storeName(store).map(JSONValue.string) ?? .null,
                         "customers": .number(Double(customers.customers(inStore: store).count)),
                         "beacons": .number(Double(presence.keys.filter { config.store(of: $0) == store }.count))])
            }))
            // Every registry beacon: battery (mV, null when it never said) and when it was last seen.
            o("beacons", objects: registryBeacons) { b, item in
                let (ref, entry) = item
                let health = beaconHealth[ref]
                b("beacon", ref.description)
                b("name", entry.name)
                b("store", entry.storeMajor.map(Int.init))
                b("present", presence[ref] != nil || health?.present == true)
                b("lastSeen", health?.lastSeen.map { JSONValue.string($0.iso8601) } ?? .null)
                b("battery", health?.battery)
                b("batteryLow", health?.batteryLow == true)
                b("missing", health?.missing == true)
            }
            o("gateways", objects: zip(ids, conditions)) { g, item in
                let (id, condition) = item
                let gateway = config.gateway(id: id)
                let status = gateways[id]
                let health = status?.health
                g("id", id)
                g("zone", gateway?.zone)
                g("store", gateway?.store.map(Int.init))
                g("condition", condition.rawValue)
                g("attention", condition.needsAttention)
                g("stale", condition.figuresAreStale && health != nil)
                g("status", status?.online.map { $0 ? "online" : "offline" })
                g("source", health?.source ?? gateway?.source.map { "\($0)" })
                g("sourceState", health?.sourceState)
                g("advertsPerSecond", health?.advertsPerSecond, places: 1)
                g("decodedPerSecond", health?.decodedPerSecond, places: 1)
                g("malformed", health?.malformed)
                g("dropped", health?.dropped)
                g("queueDepth", health?.queueDepth)
                g("tracked", health?.tracked)
                g("version", health?.version)
                g("uptime", health?.uptime, places: 0)
                g("lastHealth", health?.ts?.iso8601 ?? status?.healthReceived?.iso8601)
                g("healthAge", status?.healthReceived.map { now.seconds(since: $0) }, places: 1)
                if let tracker = gateway?.tracker {
                    g("calibration", .object([
                        "pathLossExponent": .number(tracker.pathLossExponent),
                        "rssiOffset": .number(tracker.rssiOffset),
                        "distanceModel": .string(tracker.distanceModel.rawValue),
                    ]))
                } else {
                    g("calibration", .null)
                }
                // The brain's correction on top of the config's offset, and the store's exponent.
                g("learned", status?.calibration.map { record -> JSONValue in
                    .object([
                        "rssiOffset": .number(rounded(record.rssiOffset, 1)),
                        "pathLossExponent": .number(rounded(record.pathLossExponent, 2)),
                        "pinned": .bool(record.pinned),
                        "since": .string(record.values.since.iso8601),
                    ])
                } ?? .null)
            }
        }
        return writer.text
    }

    /// The registry's single beacons (UUID-only entries name none), by store and id.
    var registryBeacons: [(BeaconRef, BeaconEntry)] {
        config.beacons.compactMap { entry in entry.id.map { ($0.ref, entry) } }
            .sorted { ($0.1.storeMajor ?? 0, $0.0) < ($1.1.storeMajor ?? 0, $1.0) }
    }

    /// The page's JSON.
    public func json(for page: Page, at now: WallTime) -> String {
        switch page {
        case .greeter(let store): greeterJSON(store: store, at: now)
        case .floor(let store): floorJSON(store: store, at: now)
        case .fleet: fleetJSON(at: now)
        }
    }
}

/// `encodeURIComponent` for one path segment.
public enum PercentEncoding {
    public static func encode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                 UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return out
    }
}

public import BeaconKit
import Tracking

/// What puts a customer on a store's greeter roster (`stores[].roster`, docs/brain.md):
/// an app's join (the default), the customer's own beacon coming close to the store's
/// gateways (the storefront greeter's way), or both.
public struct StoreRoster: Sendable, Equatable {
    public enum Source: String, Sendable, Equatable, CaseIterable {
        /// An observer app's join of a beacon of the store (what the brain always did).
        case joins
        /// A registry beacon with an `owner` seen close by a gateway of the store.
        case proximity
        /// Either.
        case both

        public var usesJoins: Bool { self != .proximity }
        public var usesProximity: Bool { self != .joins }
    }

    public var source: Source
    /// A customer's beacon enters the roster when a counting gateway sees it at this class or
    /// closer (`immediate` or `near`)…
    public var enter: Proximity
    /// …and leaves when no counting gateway sees it closer than this (`near` or `far`; always
    /// farther than `enter`, so a customer on the border between the two classes stays put),
    /// or at once when no gateway of the store sees it any more.
    public var leave: Proximity
    /// The gateways that count (the greeting spot: the counter's); empty: every gateway of
    /// the store.
    public var gateways: [String]
    /// Seconds the beacon must stay at `enter` before it enters (a customer walking past the
    /// counter is not greeted).
    public var enterAfter: Double
    /// Seconds the beacon must stay at `leave` (or unheard by the counting gateways) before
    /// it leaves: one stray far reading does not take a customer off the roster.
    public var leaveAfter: Double

    public init(source: Source = .joins, enter: Proximity = .immediate, leave: Proximity = .far, gateways: [String] = [],
                enterAfter: Double = 0, leaveAfter: Double = 3) {
        self.source = source
        self.enter = enter
        self.leave = leave
        self.gateways = gateways
        self.enterAfter = enterAfter
        self.leaveAfter = leaveAfter
    }
}

/// A customer's profile in the registry (`beacons[].profile`): what a proximity roster shows
/// for the beacon's owner, who joined with no app. No photo: the fleet config is retained
/// on `fleet/config` for as long as it applies, and a photo is personal data that may live
/// on the broker only during a visit (an app's join brings one, and takes it away).
public struct CustomerProfile: Sendable, Equatable {
    public var name: String?
    public var favorite: String?

    public init(name: String? = nil, favorite: String? = nil) {
        self.name = name
        self.favorite = favorite
    }
}

extension FleetConfig {
    static let rosterKeys = ["from", "enter", "leave", "gateways", "enterAfter", "leaveAfter"]
    static let profileKeys = ["name", "favorite"]

    /// `stores[i].roster`: `"joins" | "proximity" | "both"`, or an object with `from` and the
    /// proximity settings.
    static func parseStoreRoster(_ value: JSONValue?, at path: String, _ r: inout ConfigReader) -> StoreRoster {
        var roster = StoreRoster()
        guard let value else { return roster }
        let sources = StoreRoster.Source.allCases.map(\.rawValue)
        if case .string = value {
            if let from = r.oneOf(value, at: path, sources) { roster.source = StoreRoster.Source(rawValue: from)! }
            return roster
        }
        guard let o = r.object(value, at: path, keys: rosterKeys) else { return roster }
        if let from = r.required(o, "from", at: path).flatMap({ r.oneOf($0, at: path + ".from", sources) }) {
            roster.source = StoreRoster.Source(rawValue: from)!
        }
        if roster.source == .joins {
            for key in rosterKeys where key != "from" && o[key] != nil {
                r.fail(path + "." + key, "applies to a roster driven by proximity (\"from\": \"proximity\" or \"both\")")
            }
        }
        if let v = r.oneOf(o["enter"], at: path + ".enter", ["immediate", "near"]) { roster.enter = Proximity(rawValue: v)! }
        if let v = r.oneOf(o["leave"], at: path + ".leave", ["near", "far"]) { roster.leave = Proximity(rawValue: v)! }
        if roster.leave <= roster.enter {
            r.fail(path + ".leave", "\"\(roster.leave.rawValue)\" must be farther than enter (\"\(roster.enter.rawValue)\"): "
                   + "a customer standing on the border would come and go")
        }
        roster.gateways = (r.array(o["gateways"], at: path + ".gateways") ?? []).enumerated().compactMap { i, v in
            r.string(v, at: path + ".gateways[\(i)]")
        }
        if let v = r.number(o["enterAfter"], at: path + ".enterAfter", in: 0...60, unit: " s") { roster.enterAfter = v }
        if let v = r.number(o["leaveAfter"], at: path + ".leaveAfter", in: 0...600, unit: " s") { roster.leaveAfter = v }
        return roster
    }

    static func parseProfile(_ value: JSONValue?, at path: String, _ r: inout ConfigReader) -> CustomerProfile? {
        guard let value, let o = r.object(value, at: path, keys: profileKeys) else { return nil }
        // The limits of an app's join profile: the roster entry is the same payload.
        return CustomerProfile(name: r.string(o["name"], at: path + ".name", maxLength: 100),
                               favorite: r.string(o["favorite"], at: path + ".favorite", maxLength: 100))
    }

    /// What `config check` says about rosters driven by proximity: whom each greets where.
    /// A store greeting by proximity with no customer beacon in the registry greets nobody.
    public var rosterNotes: [String] {
        let customers = beacons.filter { $0.owner != nil }.count
        return stores.filter { $0.roster.source.usesProximity }.map { store in
            let roster = store.roster
            let spot = roster.gateways.isEmpty ? "any gateway of the store" : roster.gateways.joined(separator: ", ")
            let whom = customers == 0 ? "nobody: no registry beacon has an owner (beacons[].owner)"
                : "\(customers) customer beacon\(customers == 1 ? "" : "s")"
            var note = "store \(store.major)'s roster (\(roster.source.rawValue)): \(whom) at \(roster.enter.rawValue) at \(spot), "
                + "off at \(roster.leave.rawValue) after \(format(roster.leaveAfter)) s or when out of the store"
            if !gateways.contains(where: { $0.store == store.major }) {
                // A gateway without a store counts for the store of the beacon it hears: a
                // customer's own beacon is seldom registered in the store they walk into.
                note += "; note: no gateway says \"store\": \(store.major), so only beacons of store \(store.major) "
                    + "(beacons[].store) are seen there"
            }
            return note
        }
    }

    /// A proximity roster's gateways are gateways of its store; one needs registry beacons
    /// with an owner to have anyone to show.
    static func checkRosters(_ config: FleetConfig, _ r: inout ConfigReader) {
        for (i, store) in config.stores.enumerated() where store.roster.source.usesProximity {
            let path = "stores[\(i)].roster"
            for (j, id) in store.roster.gateways.enumerated() {
                guard let gateway = config.gateway(id: id) else {
                    let known = config.gateways.map(\.id)
                    r.fail(path + ".gateways[\(j)]", "\"\(id)\" is not a gateway id"
                           + (known.isEmpty ? " (the config lists no gateways)" : "; the gateways are \(known.joined(separator: ", "))"))
                    continue
                }
                if let other = gateway.store, other != store.major {
                    r.fail(path + ".gateways[\(j)]", "\"\(id)\" stands in store \(other), not \(store.major)")
                }
            }
        }
        for (i, entry) in config.beacons.enumerated() where entry.profile != nil && entry.owner == nil {
            r.fail("beacons[\(i)].profile", "needs an owner: a profile is the customer's who owns the beacon")
        }
    }
}

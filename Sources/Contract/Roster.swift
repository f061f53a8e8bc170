public import BeaconKit

/// The greeter view on `stores/<store>/roster` (retained), a bounded summary:
///
/// `{"store":major,"name":storeName|null,"count":n,"customers":[{"client","name","favorite","photo",
/// "beacon":{"major","minor"},"since"}…],"ts"}`
///
/// `count` is every customer present in the store; `customers` the `limit` (default 50)
/// who arrived last, oldest first, so the message stays small however full the shop is.
/// Every customer also has a retained topic of their own, `stores/<store>/customers/<client>`,
/// holding one `Customer` (see `Roster.Customer.json`): a greeter that needs everyone
/// subscribes to `stores/<store>/customers/+`. `photo` is the topic of the retained join that
/// holds the photo (subscribe to it to show the picture), `null` when the profile has none;
/// `since` is when the client's first join in this store was answered. An empty
/// `customers` list means nobody with a join is inside.
public struct Roster: Sendable, Equatable {
    /// One customer: an entry of the summary and the payload of `stores/<store>/customers/<client>`,
    /// `{"client","name","favorite","photo","beacon":{"major","minor"},"since"}`.
    public struct Customer: Sendable, Equatable {
        public var client: String
        public var name: String?
        public var favorite: String?
        /// The join topic holding the photo.
        public var photo: String?
        public var beacon: BeaconRef
        public var since: CaptureTime

        public init(client: String, name: String?, favorite: String?, photo: String?, beacon: BeaconRef, since: CaptureTime) {
            self.client = client
            self.name = name
            self.favorite = favorite
            self.photo = photo
            self.beacon = beacon
            self.since = since
        }

        public var json: JSONValue {
            .object(["client": .string(client), "name": name.map(JSONValue.string) ?? .null,
                     "favorite": favorite.map(JSONValue.string) ?? .null,
                     "photo": photo.map(JSONValue.string) ?? .null,
                     "beacon": beacon.json, "since": .string(since.iso8601)])
        }

        public init(parsing value: JSONValue, at path: String = "") throws(PayloadError) {
            let r = PayloadReader(path: path)
            let c = try r.object(value)
            client = try r.segment(c["client"], "client")
            name = try r.optionalString(c["name"], "name", maxLength: JoinRequest.maxTextLength)
            favorite = try r.optionalString(c["favorite"], "favorite", maxLength: JoinRequest.maxTextLength)
            photo = try r.optionalString(c["photo"], "photo", maxLength: 1000)
            beacon = try BeaconRef(json: c["beacon"], at: r.name("beacon"))
            since = try r.instant(c["since"], "since")
        }
    }

    public var store: UInt16
    public var name: String?
    /// Every customer present, also those left out of `customers`.
    public var count: Int
    public var customers: [Customer]

    public init(store: UInt16, name: String?, count: Int? = nil, customers: [Customer]) {
        self.store = store
        self.name = name
        self.count = count ?? customers.count
        self.customers = customers
    }

    /// The payload; without `ts` it is the signature that decides whether to republish.
    public func json(at ts: CaptureTime?) -> String {
        var writer = JSONWriter()
        writer.object { o in
            o("store", Int(store))
            o("name", name)
            o("count", count)
            o("customers", .array(customers.map(\.json)))
            if let ts { o("ts", ts) }
        }
        return writer.text
    }

    /// Parses a summary; `count` may be missing (rosters written before it existed).
    public init(parsing value: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        store = try r.u16(o["store"], "store")
        name = try r.optionalString(o["name"], "name", maxLength: 1000)
        guard case .array(let list)? = o["customers"] else { throw PayloadError("customers must be an array") }
        var customers: [Customer] = []
        for (i, item) in list.enumerated() {
            customers.append(try Customer(parsing: item, at: "customers[\(i)]"))
        }
        self.customers = customers
        if let value = o["count"] {
            let total = try r.number(value, "count")
            guard total == total.rounded(), total >= Double(customers.count), total <= 1e9 else {
                throw PayloadError("count must be a whole number of at least the customers listed")
            }
            count = Int(total)
        } else {
            count = customers.count
        }
    }
}

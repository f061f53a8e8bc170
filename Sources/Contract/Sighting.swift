public import BeaconKit

/// A gateway's sighting of a beacon (README "MQTT contract"): what `beacons/<major>/<minor>`
/// and `eddystone/<namespace>/<instance>` carry (QoS 0, not retained). Written by the gateway
/// for every advertisement in raw mode, read by apps and `beaconctl score`; the brain hears
/// the gateways through their RSSI reports instead.
///
/// `{"uuid","major","minor","gateway","address","rssi","rssiSmoothed","txPower","distance",
/// "proximity","ts","seq","name"?,"location"?}`; an Eddystone-UID beacon carries `namespace`
/// and `instance` in place of `uuid`, `major`, `minor`.
public struct Sighting: Sendable, Equatable {
    public var beacon: BeaconRef
    /// The iBeacon's proximity UUID (topics carry none); `nil` for Eddystone.
    public var uuid: BeaconUUID?
    public var gateway: String
    /// The advertiser's Bluetooth address.
    public var address: BluetoothAddress
    /// The advertisement's RSSI in dBm; `nil` when the controller reports none.
    public var rssi: Int?
    /// The gateway's smoothed RSSI in dBm (one decimal on the wire); `nil` without RSSI.
    public var rssiSmoothed: Double?
    /// The Tx power the beacon advertises, dBm.
    public var txPower: Int?
    /// Estimated distance in metres (two decimals on the wire).
    public var distance: Double?
    public var proximity: Proximity
    /// Capture time of the advertisement (`ts`).
    public var at: CaptureTime
    /// The track's count of publications (`seq`).
    public var sequence: Int
    /// The registry's name for the beacon.
    public var name: String?
    /// The registry's location of the beacon, `{"lat","lon","heading","floor"}` as written
    /// (Config's `Location.json`).
    public var location: JSONValue?

    public init(beacon: BeaconRef, uuid: BeaconUUID?, gateway: String, address: BluetoothAddress, rssi: Int?,
                rssiSmoothed: Double?, txPower: Int?, distance: Double?, proximity: Proximity, at: CaptureTime, sequence: Int,
                name: String? = nil, location: JSONValue? = nil) {
        self.beacon = beacon
        self.uuid = uuid
        self.gateway = gateway
        self.address = address
        self.rssi = rssi
        self.rssiSmoothed = rssiSmoothed
        self.txPower = txPower
        self.distance = distance
        self.proximity = proximity
        self.at = at
        self.sequence = sequence
        self.name = name
        self.location = location
    }

    /// The payload as UTF-8 bytes, ready for the wire without another copy: written directly
    /// (no `JSONValue` built), since the gateway writes one per advertisement.
    public var bytes: [UInt8] {
        var writer = JSONWriter(capacity: 320)
        writer.object { o in
            writeIdentity(beacon, uuid: uuid, into: &o)
            o("gateway", gateway)
            o("address", address)
            o("rssi", rssi)
            o("rssiSmoothed", rssiSmoothed, places: 1)
            o("txPower", txPower)
            o("distance", distance, places: 2)
            o("proximity", proximity.rawValue)
            o("ts", at)
            o("seq", sequence)
            if let name { o("name", name) }
            if let location { o("location", location) }
        }
        return writer.takeBytes()
    }

    public var json: String { String(decoding: bytes, as: UTF8.self) }

    /// Parses the payload of `beacon`'s topic; the payload must name the same beacon. Keys
    /// not listed above are ignored (a newer gateway may add some); those listed must have
    /// their documented type.
    public init(parsing value: JSONValue, topic beacon: BeaconRef) throws(PayloadError) {
        let view = try GatewayView(parsing: value, topic: beacon)
        let r = view.reader, o = view.object
        let address = try r.string(o["address"], "address", maxLength: 17)
        guard let parsed = BluetoothAddress(address) else { throw PayloadError("address is not AA:BB:CC:DD:EE:FF") }
        self.beacon = beacon
        uuid = view.uuid
        gateway = view.gateway
        self.address = parsed
        rssi = try r.optionalInteger(o["rssi"], "rssi", in: Int(Int16.min)...Int(Int16.max))
        rssiSmoothed = view.rssiSmoothed
        txPower = try r.optionalInteger(o["txPower"], "txPower", in: Int(Int16.min)...Int(Int16.max))
        distance = view.distance
        proximity = view.proximity
        at = try r.instant(o["ts"], "ts")
        guard let seq = try r.optionalInteger(o["seq"], "seq", in: -(1 << 53)...(1 << 53)) else {
            throw PayloadError("seq is required")
        }
        sequence = seq
        name = try r.optionalString(o["name"], "name", maxLength: 1000)
        location = try o["location"].flatMap { value throws(PayloadError) -> JSONValue? in
            guard value != .null else { return nil }
            guard case .object = value else { throw PayloadError("location must be a JSON object, found \(value.typeName)") }
            return value
        }
    }
}

/// A gateway's retained view of a beacon on `beacons/<major>/<minor>/presence/<gateway>`
/// (README "MQTT contract"), written by the gateway when the beacon's proximity changes and
/// deleted when it leaves; read by the brain (fleet presence) and beacon-web:
/// `{"uuid","major","minor","gateway","zone","proximity","rssiSmoothed","distance","since"}`
/// (`namespace` and `instance` for an Eddystone beacon).
public struct GatewayPresenceReport: Sendable, Equatable {
    public var beacon: BeaconRef
    public var uuid: BeaconUUID?
    public var gateway: String
    /// The gateway's zone name ("Counter").
    public var zone: String
    public var proximity: Proximity
    /// dBm (one decimal on the wire); `nil` without RSSI.
    public var rssiSmoothed: Double?
    /// Metres (two decimals on the wire).
    public var distance: Double?
    /// When the gateway's visit began (the gateway's clock).
    public var since: CaptureTime?

    public init(beacon: BeaconRef, uuid: BeaconUUID? = nil, gateway: String, zone: String, proximity: Proximity,
                rssiSmoothed: Double?, distance: Double? = nil, since: CaptureTime? = nil) {
        self.beacon = beacon
        self.uuid = uuid
        self.gateway = gateway
        self.zone = zone
        self.proximity = proximity
        self.rssiSmoothed = rssiSmoothed
        self.distance = distance
        self.since = since
    }

    public var json: String {
        var writer = JSONWriter(capacity: 256)
        writer.object { o in
            writeIdentity(beacon, uuid: uuid, into: &o)
            o("gateway", gateway)
            o("zone", zone)
            o("proximity", proximity.rawValue)
            o("rssiSmoothed", rssiSmoothed, places: 1)
            o("distance", distance, places: 2)
            if let since { o("since", since) } else { o("since", JSONValue.null) }
        }
        return writer.text
    }

    /// `init(parsing:topic:gateway:)` of the payload, read straight from its bytes without
    /// building the JSON tree: the brain reads a gateway's presence whenever a beacon's
    /// proximity changes there, and the tree was a tenth of its work (docs/PERFORMANCE.md §11).
    /// `nil` for anything but an iBeacon's view in the keys gateways write (in any order, each
    /// once): another key, an Eddystone beacon, a value of another type, any error. The caller
    /// then parses the payload the general way, so what is accepted, and why anything is
    /// refused, stays `init(parsing:…)`'s; `GatewayPresenceDecodingTests` checks the two agree.
    public init?(decoding payload: UnsafeRawBufferPointer, topic beacon: BeaconRef, gateway topicGateway: String) {
        guard beacon.eddystone == nil else { return nil }
        var s = JSONScanner(payload)
        let r = PayloadReader(path: "")
        var major: UInt16?, minor: UInt16?, uuid: BeaconUUID??, gateway: String?, zone: String?, proximity: Proximity?
        var rssi: Double??, distance: Double??, since: CaptureTime??
        guard s.take(UInt8(ascii: "{")), !s.take(UInt8(ascii: "}")) else { return nil }
        repeat {
            guard let key = s.key() else { return nil }
            if JSONScanner.key(key, is: "major"), major == nil {
                guard let n = s.number(), let value = try? r.u16(.number(n), "major") else { return nil }
                major = value
            } else if JSONScanner.key(key, is: "minor"), minor == nil {
                guard let n = s.number(), let value = try? r.u16(.number(n), "minor") else { return nil }
                minor = value
            } else if JSONScanner.key(key, is: "uuid"), uuid == nil {
                if s.null() {
                    uuid = .some(nil)
                } else {
                    guard let (text, _) = Self.string(&s, maxLength: 40), let value = BeaconUUID(text) else { return nil }
                    uuid = value
                }
            } else if JSONScanner.key(key, is: "gateway"), gateway == nil {
                guard let (text, plain) = Self.string(&s, maxLength: 128) else { return nil }
                // Plain ASCII has no control character: the rest of `Topics.problem(withSegment:)`.
                if plain {
                    guard !text.isEmpty, text.utf8.first != UInt8(ascii: "$"),
                          !text.utf8.contains(where: { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") || $0 == UInt8(ascii: "/") })
                    else { return nil }
                    gateway = text
                } else {
                    guard let value = try? r.segment(.string(text), "gateway") else { return nil }
                    gateway = value
                }
            } else if JSONScanner.key(key, is: "zone"), zone == nil {
                guard let (text, _) = Self.string(&s, maxLength: 128) else { return nil }
                zone = text
            } else if JSONScanner.key(key, is: "proximity"), proximity == nil {
                guard let (text, _) = Self.string(&s, maxLength: 16), let value = Proximity(rawValue: text) else { return nil }
                proximity = value
            } else if JSONScanner.key(key, is: "rssiSmoothed"), rssi == nil {
                if s.null() { rssi = .some(nil) } else {
                    guard let n = s.number(), (-200...50).contains(n) else { return nil }
                    rssi = n
                }
            } else if JSONScanner.key(key, is: "distance"), distance == nil {
                if s.null() { distance = .some(nil) } else {
                    guard let n = s.number(), n >= 0 else { return nil }
                    distance = n
                }
            } else if JSONScanner.key(key, is: "since"), since == nil {
                if s.null() { since = .some(nil) } else {
                    guard let text = s.string(), let value = try? r.instant(.string(text), "since") else { return nil }
                    since = value
                }
            } else {
                return nil
            }
        } while s.take(UInt8(ascii: ","))
        guard s.take(UInt8(ascii: "}")), s.atEnd(), let major, let minor, BeaconRef(major: major, minor: minor) == beacon,
              let gateway, gateway == topicGateway, let zone, let proximity else { return nil }
        self.init(beacon: beacon, uuid: uuid ?? nil, gateway: gateway, zone: zone, proximity: proximity,
                  rssiSmoothed: rssi ?? nil, distance: distance ?? nil, since: since ?? nil)
    }

    /// A string value of at most `maxLength` characters (`PayloadReader.string`'s count), and
    /// whether it was plain printable ASCII, whose characters are its bytes: counted without
    /// walking graphemes.
    private static func string(_ s: inout JSONScanner, maxLength: Int) -> (text: String, plain: Bool)? {
        let mark = s.offset
        if let raw = s.plainString() {
            guard raw.count <= maxLength else { return nil }
            return (String(decoding: raw, as: UTF8.self), true)
        }
        s.offset = mark
        guard let text = s.string(), text.count <= maxLength else { return nil }
        return (text, false)
    }

    /// Parses the payload of `topic`'s gateway and beacon; both must match the payload.
    public init(parsing value: JSONValue, topic beacon: BeaconRef, gateway topicGateway: String) throws(PayloadError) {
        let view = try GatewayView(parsing: value, topic: beacon)
        guard view.gateway == topicGateway else { throw PayloadError("gateway \"\(view.gateway)\" does not match the topic's") }
        self.beacon = beacon
        uuid = view.uuid
        gateway = view.gateway
        proximity = view.proximity
        rssiSmoothed = view.rssiSmoothed
        distance = view.distance
        zone = try view.reader.string(view.object["zone"], "zone", maxLength: 128)
        since = try view.reader.optionalInstant(view.object["since"], "since")
    }
}

/// `uuid`, `major`, `minor` for an iBeacon (`uuid` null when not known), `namespace`,
/// `instance` for an Eddystone beacon: how the gateway's payloads begin.
private func writeIdentity(_ beacon: BeaconRef, uuid: BeaconUUID?, into o: inout JSONWriter.ObjectWriter) {
    if beacon.eddystone == nil {
        if let uuid { o("uuid", uuid) } else { o("uuid", JSONValue.null) }
    }
    beacon.write(into: &o)
}

/// What sightings and gateway presence share: a gateway's view of one beacon.
private struct GatewayView {
    let object: JSONObject
    let reader = PayloadReader(path: "")
    let uuid: BeaconUUID?
    let gateway: String
    let proximity: Proximity
    let rssiSmoothed: Double?
    let distance: Double?

    /// Checks the payload's beacon against the topic's and reads the common keys.
    init(parsing value: JSONValue, topic beacon: BeaconRef) throws(PayloadError) {
        let r = reader
        object = try r.object(value)
        let ref = try r.beacon(object)
        guard ref == beacon else { throw PayloadError("beacon \(ref) does not match the topic's \(beacon)") }
        uuid = beacon.eddystone == nil ? try r.uuid(object["uuid"], "uuid") : nil
        gateway = try r.segment(object["gateway"], "gateway")
        proximity = try r.proximity(object["proximity"], "proximity")
        rssiSmoothed = try r.optionalNumber(object["rssiSmoothed"], "rssiSmoothed")
        distance = try r.optionalNumber(object["distance"], "distance")
        if let rssi = rssiSmoothed, !(-200...50).contains(rssi) { throw PayloadError("rssiSmoothed is out of range") }
        if let d = distance, d < 0 { throw PayloadError("distance must not be negative") }
    }
}

public import BeaconKit

/// One MQTT message as the brain or the gateway receives it, decoded once: its topic parsed
/// by `Topics`, its payload by the Contract type of that topic (README "MQTT contract",
/// docs/brain.md "What it reads"). What is not a topic of the contract, or is too large to
/// read, is refused with the reason; a payload its topic does not allow is kept beside its
/// topic as `Body.invalid(reason)`, so the receiver (which knows whether it cares: a foreign
/// store's roster is not its business) decides whether to count it.
///
/// ```swift
/// let inbound = Inbound.decode(topic: message.topic, payload: message.payload, retained: message.retain)
/// if case .join(let beacon, let client, .value(let request)) = inbound.message { … }
/// ```
public struct Inbound: Sendable, Equatable {
    public var topic: String
    /// The payload as it came (a join's fingerprint, a sealed record's seal are over these bytes).
    public var payload: [UInt8]
    /// The broker delivered it from its store (state from before this connection).
    public var retained: Bool
    public var message: Message

    public init(topic: String, payload: [UInt8], retained: Bool, message: Message) {
        self.topic = topic
        self.payload = payload
        self.retained = retained
        self.message = message
    }

    /// Decodes with the default limits (`Decoder`).
    public static func decode(topic: String, payload: [UInt8], retained: Bool, topics: Topics = Topics()) -> Inbound {
        Decoder(topics: topics).decode(topic: topic, payload: payload, retained: retained)
    }

    /// A payload as its topic's type read it.
    public enum Body<Value: Sendable & Equatable>: Sendable, Equatable {
        case value(Value)
        /// No payload: a retained topic deleted, a join ended.
        case empty
        /// Not a payload of its topic, and why (short, safe to log and to report back).
        case invalid(String)

        public var value: Value? {
            if case .value(let value) = self { return value }
            return nil
        }
    }

    /// Why a message was refused before its payload was read.
    public enum Refusal: Sendable, Equatable {
        /// Not a topic of the contract (another prefix, a number spelled two ways, a level no
        /// id can be).
        case unknownTopic
        /// Larger than the decoder's limit for its topic (`kind`: what the topic is, when it
        /// is one of the contract's).
        case oversized(Topics.Kind?, bytes: Int, limit: Int)

        public var reason: String {
            switch self {
            case .unknownTopic: "not a topic of the contract"
            case .oversized(_, let bytes, let limit): "payload of \(bytes) bytes exceeds \(limit)"
            }
        }
    }

    /// `online` or `offline` (a last will), as gateways, observers and the brain say it.
    public enum Status: String, Sendable, Equatable {
        case online, offline
    }

    /// What a message is. The cases name who writes it; the brain reads most of them, the
    /// gateway its commands, the brain's status and its own retained presence.
    public enum Message: Sendable, Equatable {
        // A gateway's.
        /// `gateways/<gateway>/rssi`: its RSSI report for the zone fusion.
        case rssiReport(gateway: String, Body<RSSIReport>)
        /// `beacons/<major>/<minor>/presence/<gateway>` (or an Eddystone beacon's): its
        /// retained view of a beacon; empty when the beacon left.
        case gatewayPresence(BeaconRef, gateway: String, Body<GatewayPresenceReport>)
        /// `eddystone/<namespace>/<instance>/telemetry`: the beacon's last Eddystone-TLM.
        case telemetry(BeaconRef, Body<BeaconTelemetry>)
        /// `gateways/<gateway>/status`.
        case gatewayStatus(String, Body<Status>)
        /// `gateways/<gateway>/health`.
        case gatewayHealth(String, Body<GatewayHealth>)
        /// `gateways/<gateway>/calibration`: the brain's record of what it learned, sealed
        /// (`RecordSeal`), so the value is the sealed text, read once its seal is checked.
        case gatewayCalibration(String, Body<String>)
        /// `gateways/<gateway>/cmd`: an operator's or the brain's command.
        case gatewayCommand(String, Body<GatewayCommand>)

        // An observer's.
        /// `beacons/<major>/<minor>/observers/<client>`: a join; empty when it leaves.
        case join(BeaconRef, client: String, Body<JoinRequest>)
        /// `observers/<client>/status`.
        case observerStatus(String, Body<Status>)

        // A store's.
        /// `stores/<store>/roster`: the brain's summary of who is in.
        case roster(UInt16, Body<Roster>)
        /// `stores/<store>/customers/<client>`: one customer, sealed (the value is the sealed text).
        case customer(store: UInt16, client: String, Body<String>)
        /// `stores/<store>/bridge`: Mosquitto's bridge notification, `true` while connected.
        case bridgeStatus(UInt16, Body<Bool>)

        /// `fleet/config`: the config document (its meaning is `FleetConfig.parse`'s, in Config).
        case fleetConfig(Body<JSONValue>)

        // The brain's.
        /// `brain/status`.
        case brainStatus(Body<Status>)
        /// `beacons/<major>/<minor>/presence`: the fleet presence.
        case fleetPresence(BeaconRef, Body<FleetPresenceReport>)
        /// `beacons/<major>/<minor>/ad`: the beacon's standing offer (the payload as written).
        case ad(BeaconRef)
        /// `brain/visits/<beacon>`: a visit record, sealed (the value is the sealed text).
        case visitRecord(BeaconRef, Body<String>)
        /// `brain/answered/<beacon>/<client>`: an answered join, sealed (the value is the sealed text).
        case answeredRecord(BeaconRef, client: String, Body<String>)
        /// `brain/beacons/<beacon>`: a registry beacon's last sighting and battery (unsealed).
        case beaconHealth(BeaconRef, Body<BeaconHealthRecord>)

        /// A topic of the contract neither service acts upon (sightings, zone decisions,
        /// events, inboxes, health, sync markers, shards): its payload is not read.
        case other(Topics.Kind)
        /// Refused before its payload was read.
        case refused(Refusal)
    }

    /// Decodes messages under one prefix and one set of limits (the brain's `Limits`).
    public struct Decoder: Sendable {
        public var topics: Topics
        /// Deepest JSON nesting read (the fleet config excepted, which may nest to 64).
        public var maxDepth: Int
        /// Largest payload read, bytes; larger ones are refused.
        public var maxPayload: Int
        /// Largest `fleet/config` read, bytes.
        public var maxConfigPayload: Int

        public init(topics: Topics, maxDepth: Int = 8, maxPayload: Int = 64 * 1024, maxConfigPayload: Int = 4 * 1024 * 1024) {
            self.topics = topics
            self.maxDepth = maxDepth
            self.maxPayload = maxPayload
            self.maxConfigPayload = maxConfigPayload
        }

        public func decode(topic: String, payload: [UInt8], retained: Bool) -> Inbound {
            decode(topic: topic, kind: topics.parse(topic), payload: payload, retained: retained)
        }

        /// `decode(topic:payload:retained:)` of a topic already parsed (`kind`, this decoder's
        /// `topics.parse(topic)`): the brain's service parses each topic once, to sort the
        /// message into its lane, and decodes it when its turn comes.
        public func decode(topic: String, kind: Topics.Kind?, payload: [UInt8], retained: Bool) -> Inbound {
            Inbound(topic: topic, payload: payload, retained: retained, message: message(kind: kind, payload: payload))
        }

        func message(kind: Topics.Kind?, payload: [UInt8]) -> Message {
            let limit = kind == .fleetConfig ? maxConfigPayload : maxPayload
            if payload.count > limit { return .refused(.oversized(kind, bytes: payload.count, limit: limit)) }
            guard let kind else { return .refused(.unknownTopic) }
            switch kind {
            case .gatewayRSSI(let gateway):
                return .rssiReport(gateway: gateway, rssiReport(payload, gateway: gateway))
            case .beacon(let ref, let about):
                return beacon(ref, about, payload)
            case .gatewayStatus(let gateway): return .gatewayStatus(gateway, status(payload))
            case .gatewayHealth(let gateway):
                return .gatewayHealth(gateway, body(payload) { bytes throws(PayloadError) in
                    guard let health = GatewayHealth(parsing: bytes) else { throw PayloadError("payload must be a JSON object") }
                    return health
                })
            case .gatewayCalibration(let gateway): return .gatewayCalibration(gateway, text(payload))
            case .gatewayCommand(let gateway):
                return .gatewayCommand(gateway, body(payload) { bytes throws(PayloadError) in try GatewayCommand(parsing: bytes) })
            case .observerStatus(let client): return .observerStatus(client, status(payload))
            case .roster(let store): return .roster(store, json(payload) { value throws(PayloadError) in try Roster(parsing: value) })
            case .customer(let store, let client): return .customer(store: store, client: client, text(payload))
            case .bridgeStatus(let store):
                return .bridgeStatus(store, body(payload) { bytes throws(PayloadError) in
                    switch bytes {
                    case [UInt8(ascii: "1")]: return true
                    case [UInt8(ascii: "0")]: return false
                    default: throw PayloadError("expected 1 or 0 (Mosquitto's bridge notification)")
                    }
                })
            case .fleetConfig:
                return .fleetConfig(body(payload) { bytes throws(PayloadError) in
                    try document(bytes, maxDepth: 64)
                })
            case .brainStatus: return .brainStatus(status(payload))
            case .brainRecord(.visit(let ref)): return .visitRecord(ref, text(payload))
            case .brainRecord(.answered(let ref, let client)): return .answeredRecord(ref, client: client, text(payload))
            case .brainRecord(.health(let ref)):
                return .beaconHealth(ref, json(payload) { value throws(PayloadError) in try BeaconHealthRecord(parsing: value) })
            case .gatewayEvents, .inbox, .brainEvents, .brainHealth, .brainSync, .shardStatus, .shardHolder, .shardSync:
                return .other(kind)
            }
        }

        func beacon(_ ref: BeaconRef, _ about: Topics.BeaconTopic, _ payload: [UInt8]) -> Message {
            switch about {
            case .gatewayPresence(let gateway):
                // Read straight from the bytes when in the form gateways write (the object nests one level).
                if maxDepth >= 1, !payload.isEmpty,
                   let report = payload.withUnsafeBytes({ GatewayPresenceReport(decoding: $0, topic: ref, gateway: gateway) }) {
                    return .gatewayPresence(ref, gateway: gateway, .value(report))
                }
                return .gatewayPresence(ref, gateway: gateway, json(payload) { value throws(PayloadError) in
                    try GatewayPresenceReport(parsing: value, topic: ref, gateway: gateway)
                })
            case .observer(let client):
                return .join(ref, client: client, body(payload) { bytes throws(PayloadError) in try JoinRequest(parsing: bytes) })
            case .fleetPresence:
                return .fleetPresence(ref, json(payload) { value throws(PayloadError) in try FleetPresenceReport(parsing: value, topic: ref) })
            case .ad: return .ad(ref)
            case .telemetry:
                return .telemetry(ref, json(payload) { value throws(PayloadError) in try BeaconTelemetry(parsing: value) })
            case .sighting, .zoneEvents: return .other(.beacon(ref, about))
            }
        }

        /// A gateway's RSSI report, read straight from the bytes when it is in the plain form
        /// gateways write (`RSSIReport(decoding:topic:)`, the brain's hot path); otherwise
        /// parsed the general way, which says why a payload is refused.
        func rssiReport(_ payload: [UInt8], gateway: String) -> Body<RSSIReport> {
            // The report nests three levels: the general parse refuses it under a lower limit.
            if maxDepth >= 3, let report = payload.withUnsafeBytes({ RSSIReport(decoding: $0, topic: gateway) }) {
                return .value(report)
            }
            // Not retained: an empty report deletes nothing, it is one that says nothing.
            return parse(payload) { bytes throws(PayloadError) in try RSSIReport(parsing: document(bytes), topic: gateway) }
        }

        func status(_ payload: [UInt8]) -> Body<Status> {
            body(payload) { bytes throws(PayloadError) in
                guard let status = Status(rawValue: String(decoding: bytes, as: UTF8.self)) else {
                    throw PayloadError("expected online or offline")
                }
                return status
            }
        }

        /// The payload as text: a sealed record, read once its seal is checked.
        func text(_ payload: [UInt8]) -> Body<String> {
            payload.isEmpty ? .empty : .value(String(decoding: payload, as: UTF8.self))
        }

        /// A JSON payload (at most `maxDepth` deep) read by its type.
        func json<Value>(_ payload: [UInt8], _ read: (JSONValue) throws(PayloadError) -> Value) -> Body<Value> {
            body(payload) { bytes throws(PayloadError) in try read(document(bytes)) }
        }

        /// The bytes as JSON, at most `maxDepth` deep.
        func document(_ bytes: [UInt8], maxDepth: Int? = nil) throws(PayloadError) -> JSONValue {
            do { return try JSONParser(maxDepth: maxDepth ?? self.maxDepth).parse(bytes) } catch { throw PayloadError(error.description) }
        }

        /// `.empty` for no payload, else `parse`.
        func body<Value>(_ payload: [UInt8], _ read: ([UInt8]) throws(PayloadError) -> Value) -> Body<Value> {
            payload.isEmpty ? .empty : parse(payload, read)
        }

        func parse<Value>(_ payload: [UInt8], _ read: ([UInt8]) throws(PayloadError) -> Value) -> Body<Value> {
            do {
                return .value(try read(payload))
            } catch {
                return .invalid(error.reason)
            }
        }
    }
}

/// What `eddystone/<namespace>/<instance>/telemetry` carries (retained, the gateway that
/// heard the beacon last): `{"gateway","batteryMv":mV|null,"temperatureC":°C|null,
/// "advertCount":n,"uptimeSeconds":s,"ts"}` (written by `json(_:gateway:at:)`).
/// Read leniently but for the battery, which the brain's beacon health takes: the other
/// figures are passed to Home Assistant as they are.
public struct BeaconTelemetry: Sendable, Equatable {
    /// Millivolts, `nil` when the beacon does not report its battery.
    public var batteryMillivolts: Int?

    public init(batteryMillivolts: Int?) { self.batteryMillivolts = batteryMillivolts }

    /// The payload of an Eddystone-TLM frame a gateway heard at `time`, as agreed with Home
    /// Assistant discovery; an unknown battery or temperature is `null`, never 0.
    public static func json(_ tlm: EddystoneTLM, gateway: String, at time: CaptureTime) -> String {
        var writer = JSONWriter(capacity: 160)
        writer.object { o in
            o("gateway", gateway)
            o("batteryMv", tlm.battery.map(Int.init))
            o("temperatureC", tlm.temperature, places: 2)
            o("advertCount", Int(tlm.advertisingCount))
            o("uptimeSeconds", Double(tlm.uptimeDeciseconds) / 10, places: 1)
            o("ts", time)
        }
        return writer.text
    }

    public init(parsing value: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        switch o["batteryMv"] {
        case .number(let mv)? where mv == mv.rounded() && (1...65535).contains(mv): batteryMillivolts = Int(mv)
        case .null?, nil: batteryMillivolts = nil
        default: throw PayloadError("batteryMv must be mV (1-65535) or null")
        }
    }
}

/// What the gateway takes on `gateways/<id>/cmd` (README "MQTT contract"): a JSON object of
/// one key, `{"scan":"pause"|"resume"}`, `{"reload":true}`, `{"advertise":false|true|{…}}`,
/// or the brain's `{"reports":"send"}` / `{"reports":{"after":"<capture time>"}}`.
public enum GatewayCommand: Sendable, Equatable {
    /// `{"reports":"send"}`: the brain, subscribed again after an outage, asks for the
    /// reports the gateway kept. `{"reports":{"after":"…"}}` (`after` set): the same, and a
    /// gateway that stayed connected sends again the reports it sent that are complete after
    /// that capture time, the brain's last of it: they went out while the brain's own
    /// connection was down (docs/brain.md, "Broker outages").
    case sendReports(after: CaptureTime? = nil)
    /// `{"scan":"pause"}` or `{"scan":"resume"}`.
    case scan(paused: Bool)
    /// `{"reload":true}`: read the config file again.
    case reload
    case advertise(Advertise)
    /// One key this gateway does not take, or a known one with a value it does not (the
    /// gateway answers "unknown command" under that key).
    case unknown(String)

    public enum Advertise: Sendable, Equatable {
        /// `false`: stop advertising.
        case stop
        /// `true`: as the gateway's config says.
        case configured
        /// `{…}`: these settings (`AdvertiseConfig.parse`, in Config, says what they mean).
        case settings(JSONValue)
    }

    /// What a payload that is not one of these is told.
    public static let expected = #"expected one of {"scan":"pause"|"resume"}, {"reload":true}, {"advertise":{…}}"#

    /// The command's key: what the gateway's reply names.
    public var name: String {
        switch self {
        case .sendReports: "reports"
        case .scan: "scan"
        case .reload: "reload"
        case .advertise: "advertise"
        case .unknown(let name): name
        }
    }

    public var json: String {
        switch self {
        case .sendReports(nil): return #"{"reports":"send"}"#
        case .sendReports(let after?):
            var writer = JSONWriter()
            writer.object { o in o("reports", JSONValue.object(["after": .string(after.iso8601)])) }
            return writer.text
        case .scan(let paused): return paused ? #"{"scan":"pause"}"# : #"{"scan":"resume"}"#
        case .reload: return #"{"reload":true}"#
        case .advertise(let advertise):
            var writer = JSONWriter()
            writer.object { o in
                switch advertise {
                case .stop: o("advertise", false)
                case .configured: o("advertise", true)
                case .settings(let settings): o("advertise", settings)
                }
            }
            return writer.text
        case .unknown(let name):
            var writer = JSONWriter()
            writer.object { o in o(name, JSONValue.null) }
            return writer.text
        }
    }

    /// A JSON object of one key (at most 8 deep); anything else is `PayloadError(expected)`.
    public init(parsing payload: [UInt8]) throws(PayloadError) {
        guard let json = try? JSONParser(maxDepth: 8).parse(payload), case .object(let object) = json,
              object.members.count == 1, let (key, value) = object.members.first
        else { throw PayloadError(Self.expected) }
        switch (key, value) {
        case ("reports", .string("send")): self = .sendReports()
        case ("reports", .object(let o)) where o.members.count == 1:
            guard case .string(let text)? = o["after"], let after = CaptureTime(iso8601: text) else { self = .unknown(key); return }
            self = .sendReports(after: after)
        case ("scan", .string("pause")): self = .scan(paused: true)
        case ("scan", .string("resume")): self = .scan(paused: false)
        case ("reload", .bool(true)): self = .reload
        case ("advertise", .bool(false)): self = .advertise(.stop)
        case ("advertise", .bool(true)): self = .advertise(.configured)
        case ("advertise", _): self = .advertise(.settings(value))
        default: self = .unknown(key)
        }
    }
}

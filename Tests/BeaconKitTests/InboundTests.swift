import BeaconKit
import Contract
import Testing

/// `Inbound.decode`: every topic of the contract (SPEC §5, docs/brain.md) with a payload its
/// writer writes decodes to its case and its value; what is not the contract's, too large, or
/// not a payload of its topic is refused with the reason.
@Suite struct InboundTests {
    static let at = CaptureTime(seconds: 1_700_000_000)
    static let counter = BeaconRef(major: 100, minor: 1)
    static let eddystone = BeaconRef(namespace: EddystoneNamespace(hex: "0102030405060708090a")!,
                                     instance: EddystoneInstance(hex: "0b0c0d0e0f10")!)
    static let topics = Topics()

    static let presence = GatewayPresenceReport(beacon: counter, gateway: "door-1", zone: "Door", proximity: .near,
                                                rssiSmoothed: -61.5, distance: 1.25, since: at)
    static let fleet = FleetPresenceReport(
        beacon: counter, uuid: nil, zone: "door-1", zoneName: "Door",
        gateways: [.init(gateway: "door-1", zone: "Door", proximity: .near, rssiSmoothed: -61.5, distance: 1.25)],
        proximity: .near, since: at)
    static let report = RSSIReport(gateway: "door-1", from: at, to: at + 1,
                                   entries: [.init(beacon: counter, count: 3, rssi: -60, at: 0.5)])
    static let roster = Roster(store: 100, name: "Main street", customers: [
        .init(client: "ann", name: "Ann", favorite: nil, photo: nil, beacon: counter, since: at),
    ])
    static let health = BeaconHealthRecord(lastSeen: at, present: true, battery: 2900)

    /// (topic, payload, retained, what it must decode to)
    static let cases: [(String, String, Bool, Inbound.Message)] = [
        ("gateways/door-1/rssi", report.json, false, .rssiReport(gateway: "door-1", .value(report))),
        ("beacons/100/1/presence/door-1", presence.json, true, .gatewayPresence(counter, gateway: "door-1", .value(presence))),
        ("beacons/100/1/presence/door-1", "", true, .gatewayPresence(counter, gateway: "door-1", .empty)),
        ("eddystone/0102030405060708090a/0b0c0d0e0f10/telemetry",
         #"{"gateway":"door-1","batteryMv":2950,"temperatureC":21.5,"advertCount":12,"uptimeSeconds":3.5,"ts":"2023-11-14T22:13:20.000Z"}"#,
         true, .telemetry(eddystone, .value(BeaconTelemetry(batteryMillivolts: 2950)))),
        ("eddystone/0102030405060708090a/0b0c0d0e0f10/telemetry", #"{"gateway":"door-1","batteryMv":null}"#, true,
         .telemetry(eddystone, .value(BeaconTelemetry(batteryMillivolts: nil)))),
        ("gateways/door-1/status", "online", true, .gatewayStatus("door-1", .value(.online))),
        ("gateways/door-1/status", "offline", true, .gatewayStatus("door-1", .value(.offline))),
        ("gateways/door-1/status", "", true, .gatewayStatus("door-1", .empty)),
        ("gateways/door-1/calibration", "sealed text", true, .gatewayCalibration("door-1", .value("sealed text"))),
        ("gateways/door-1/cmd", #"{"scan":"pause"}"#, false, .gatewayCommand("door-1", .value(.scan(paused: true)))),
        ("gateways/door-1/cmd", #"{"scan":"resume"}"#, false, .gatewayCommand("door-1", .value(.scan(paused: false)))),
        ("gateways/door-1/cmd", #"{"reload":true}"#, false, .gatewayCommand("door-1", .value(.reload))),
        ("gateways/door-1/cmd", #"{"reports":"send"}"#, false, .gatewayCommand("door-1", .value(.sendReports()))),
        ("gateways/door-1/cmd", #"{"advertise":false}"#, false, .gatewayCommand("door-1", .value(.advertise(.stop)))),
        ("gateways/door-1/cmd", #"{"advertise":true}"#, false, .gatewayCommand("door-1", .value(.advertise(.configured)))),
        ("gateways/door-1/cmd", #"{"advertise":{"major":100,"minor":9}}"#, false,
         .gatewayCommand("door-1", .value(.advertise(.settings(.object(["major": .number(100), "minor": .number(9)])))))),
        ("gateways/door-1/cmd", #"{"scan":"sideways"}"#, false, .gatewayCommand("door-1", .value(.unknown("scan")))),
        ("gateways/door-1/cmd", #"{"reboot":true}"#, false, .gatewayCommand("door-1", .value(.unknown("reboot")))),
        ("beacons/100/1/observers/ann", #"{"state":"joined","profile":{"name":"Ann"}}"#, true,
         .join(counter, client: "ann", .value(JoinRequest(profile: ObserverProfile(name: "Ann"))))),
        ("beacons/100/1/observers/ann", "", true, .join(counter, client: "ann", .empty)),
        ("observers/ann/status", "offline", true, .observerStatus("ann", .value(.offline))),
        ("stores/100/roster", roster.json(at: nil), true, .roster(100, .value(roster))),
        ("stores/100/customers/ann", "sealed", true, .customer(store: 100, client: "ann", .value("sealed"))),
        ("stores/100/bridge", "1", true, .bridgeStatus(100, .value(true))),
        ("stores/100/bridge", "0", true, .bridgeStatus(100, .value(false))),
        ("fleet/config", #"{"gateways":[]}"#, true, .fleetConfig(.value(.object(["gateways": .array([])])))),
        ("brain/status", "online", true, .brainStatus(.value(.online))),
        ("beacons/100/1/presence", fleet.json, true, .fleetPresence(counter, .value(fleet))),
        ("beacons/100/1/ad", #"{"text":"10 % off"}"#, true, .ad(counter)),
        ("brain/visits/100/1", "sealed", true, .visitRecord(counter, .value("sealed"))),
        ("brain/visits/eddystone/0102030405060708090a/0b0c0d0e0f10", "", true, .visitRecord(eddystone, .empty)),
        ("brain/answered/100/1/ann", "sealed", true, .answeredRecord(counter, client: "ann", .value("sealed"))),
        ("brain/beacons/100/1", health.json(beacon: counter, name: nil), true, .beaconHealth(counter, .value(health))),
        // The rest of the contract: named, not read.
        ("beacons/100/1", #"{"not":"read"}"#, false, .other(.beacon(counter, .sighting))),
        ("beacons/100/1/events", "{}", false, .other(.beacon(counter, .zoneEvents))),
        ("gateways/door-1/events", "{}", false, .other(.gatewayEvents("door-1"))),
        ("observers/ann/inbox", "{}", false, .other(.inbox("ann"))),
        ("brain/events", "{}", false, .other(.brainEvents)),
        ("brain/health/brain-1", "{}", true, .other(.brainHealth("brain-1"))),
        ("brain/sync/brain-1", "x", false, .other(.brainSync("brain-1"))),
        ("brain/shards/north/status", "online", true, .other(.shardStatus("north"))),
    ]

    @Test(arguments: 0..<cases.count)
    func decodesTheContract(_ index: Int) {
        let (topic, payload, retained, expected) = Self.cases[index]
        let inbound = Inbound.decode(topic: topic, payload: Array(payload.utf8), retained: retained)
        #expect(inbound.message == expected, "\(topic)")
        #expect(inbound.topic == topic && inbound.payload == Array(payload.utf8) && inbound.retained == retained)
        // The brain's service parses the topic once, to sort it, and decodes with that parse.
        let decoder = Inbound.Decoder(topics: Self.topics)
        #expect(decoder.decode(topic: topic, kind: Self.topics.parse(topic), payload: Array(payload.utf8), retained: retained)
            == inbound, "\(topic)")
    }

    /// A gateway's presence is read from its bytes only where the general parse would read
    /// it: under a depth limit below its one level, the general parse refuses it.
    @Test func readsAGatewayPresenceFromItsBytes() {
        let bytes = Array(Self.presence.json.utf8)
        let topic = "beacons/100/1/presence/door-1"
        #expect(Inbound.decode(topic: topic, payload: bytes, retained: true).message
            == .gatewayPresence(Self.counter, gateway: "door-1", .value(Self.presence)))
        let shallow = Inbound.Decoder(topics: Self.topics, maxDepth: 0).decode(topic: topic, payload: bytes, retained: true)
        #expect(Self.reason(of: shallow.message)?.isEmpty == false, "\(shallow.message)")
    }

    /// The telemetry a gateway writes is read back by the same type: the battery, or none.
    @Test func telemetryIsWrittenAndReadByOneType() throws {
        let heard = EddystoneTLM(batteryMillivolts: 2950, temperature: 21.5, advertisingCount: 1234, uptimeDeciseconds: 36_005)
        let text = BeaconTelemetry.json(heard, gateway: "door-1", at: Self.at)
        #expect(text == #"{"gateway":"door-1","batteryMv":2950,"temperatureC":21.5,"advertCount":1234,"uptimeSeconds":3600.5,"ts":"2023-11-14T22:13:20.000Z"}"#)
        #expect(try BeaconTelemetry(parsing: JSONParser().parse(text)) == BeaconTelemetry(batteryMillivolts: 2950))
        let silent = EddystoneTLM(batteryMillivolts: 0, temperature: nil, advertisingCount: 1, uptimeDeciseconds: 0)
        let none = BeaconTelemetry.json(silent, gateway: "door-1", at: Self.at)
        #expect(none.contains(#""batteryMv":null,"temperatureC":null"#), "\(none)")
        #expect(try BeaconTelemetry(parsing: JSONParser().parse(none)) == BeaconTelemetry(batteryMillivolts: nil))
    }

    @Test func gatewayHealthIsReadLeniently() {
        let inbound = Inbound.decode(topic: "gateways/door-1/health", payload: Array(#"{"gateway":"door-1","uptime":12}"#.utf8),
                                     retained: true)
        guard case .gatewayHealth("door-1", .value(let health)) = inbound.message else {
            Issue.record("\(inbound.message)")
            return
        }
        #expect(health.gateway == "door-1" && health.uptime == 12 && health.version == nil)
    }

    /// (topic, payload, the reason it must give)
    static let invalid: [(String, String, String)] = [
        ("gateways/door-1/status", "maybe", "expected online or offline"),
        ("observers/ann/status", "Online", "expected online or offline"),
        ("brain/status", "up", "expected online or offline"),
        ("stores/100/bridge", "yes", "expected 1 or 0 (Mosquitto's bridge notification)"),
        ("gateways/door-1/cmd", "[1]", GatewayCommand.expected),
        ("gateways/door-1/cmd", #"{"scan":"pause","reload":true}"#, GatewayCommand.expected),
        ("beacons/100/1/presence/door-2", presence.json, "gateway \"door-1\" does not match the topic's"),
        ("beacons/100/1/observers/ann", #"{"state":"joined","profile":{"name":7}}"#, "profile.name must be a string, found a number"),
        ("eddystone/0102030405060708090a/0b0c0d0e0f10/telemetry", #"{"batteryMv":0}"#, "batteryMv must be mV (1-65535) or null"),
        ("eddystone/0102030405060708090a/0b0c0d0e0f10/telemetry", "[]", "payload must be a JSON object, found an array"),
        ("stores/100/roster", "[]", "payload must be a JSON object, found an array"),
        ("gateways/door-1/rssi", #"{"gateway":"door-2","from":"2023-11-14T22:13:20.000Z","to":"2023-11-14T22:13:21.000Z","beacons":[]}"#,
         "gateway \"door-2\" does not match the topic's"),
    ]

    @Test(arguments: 0..<invalid.count)
    func refusesAPayloadItsTopicDoesNotAllow(_ index: Int) {
        let (topic, payload, reason) = Self.invalid[index]
        let message = Inbound.decode(topic: topic, payload: Array(payload.utf8), retained: true).message
        #expect(Self.reason(of: message) == reason, "\(topic) \(payload): \(message)")
    }

    /// Not JSON at all: the parser's reason, under the topic's case.
    @Test func refusesWhatIsNotJSON() {
        for topic in ["beacons/100/1/presence/door-1", "beacons/100/1/presence", "stores/100/roster", "brain/beacons/100/1",
                      "fleet/config", "gateways/door-1/rssi"] {
            let message = Inbound.decode(topic: topic, payload: Array("{nope".utf8), retained: true).message
            #expect(Self.reason(of: message)?.isEmpty == false, "\(topic): \(message)")
        }
        // An RSSI report is not retained: an empty one deletes nothing, it is malformed.
        let empty = Inbound.decode(topic: "gateways/door-1/rssi", payload: [], retained: false).message
        #expect(Self.reason(of: empty) != nil, "\(empty)")
    }

    @Test func refusesWhatIsNotTheContract() {
        for topic in ["beacons/0100/1", "beacons/100", "gateways/door-1/reboot", "acme/brain/status", "stores/x/roster",
                      "brain/visits/100", "beacons/100/1/telemetry", "$SYS/broker/uptime", ""] {
            let inbound = Inbound.decode(topic: topic, payload: Array("online".utf8), retained: false)
            #expect(inbound.message == .refused(.unknownTopic), "\(topic)")
        }
        #expect(Inbound.Refusal.unknownTopic.reason == "not a topic of the contract")
        // Under a prefix, only the prefix's topics are the contract's.
        let prefixed = Topics(prefix: "acme")
        #expect(Inbound.decode(topic: "acme/brain/status", payload: Array("online".utf8), retained: true, topics: prefixed).message
            == .brainStatus(.value(.online)))
        #expect(Inbound.decode(topic: "brain/status", payload: [], retained: true, topics: prefixed).message == .refused(.unknownTopic))
    }

    @Test func refusesWhatIsTooLarge() {
        let decoder = Inbound.Decoder(topics: Self.topics, maxPayload: 16, maxConfigPayload: 32)
        let join = decoder.decode(topic: "beacons/100/1/observers/ann", payload: Array(repeating: 0x20, count: 17), retained: false)
        #expect(join.message == .refused(.oversized(.beacon(Self.counter, .observer(client: "ann")), bytes: 17, limit: 16)))
        #expect(Inbound.Refusal.oversized(nil, bytes: 17, limit: 16).reason == "payload of 17 bytes exceeds 16")
        // The fleet config has a limit of its own; a topic outside the contract is too large first.
        let config = decoder.decode(topic: "fleet/config", payload: Array(#"{"gateways":[],"brain":{}}"#.utf8), retained: true)
        guard case .fleetConfig(.value) = config.message else {
            Issue.record("\(config.message)")
            return
        }
        #expect(decoder.decode(topic: "fleet/config", payload: Array(repeating: 0x20, count: 33), retained: true).message
            == .refused(.oversized(.fleetConfig, bytes: 33, limit: 32)))
        #expect(decoder.decode(topic: "elsewhere", payload: Array(repeating: 0x20, count: 17), retained: false).message
            == .refused(.oversized(nil, bytes: 17, limit: 16)))
    }

    /// The brain's hot path: the plain report is read from its bytes (no `JSONValue`), and
    /// agrees with the general parse; under a depth below the report's 3 levels, the general
    /// parse refuses it.
    @Test func readsAnRSSIReportFromItsBytes() {
        let bytes = Array(Self.report.json.utf8)
        #expect(Inbound.decode(topic: "gateways/door-1/rssi", payload: bytes, retained: false).message
            == .rssiReport(gateway: "door-1", .value(Self.report)))
        let shallow = Inbound.Decoder(topics: Self.topics, maxDepth: 2)
        let refused = shallow.decode(topic: "gateways/door-1/rssi", payload: bytes, retained: false).message
        #expect(Self.reason(of: refused) != nil, "\(refused)")
    }

    /// What the gateway is sent is what it reads back.
    @Test(arguments: [GatewayCommand.sendReports(), .sendReports(after: CaptureTime(iso8601: "2026-11-21T09:00:10.250Z")!),
                      .scan(paused: true), .scan(paused: false), .reload, .advertise(.stop),
                      .advertise(.configured), .advertise(.settings(.object(["major": .number(100)]))), .unknown("reboot")])
    func commandsRoundTrip(_ command: GatewayCommand) throws {
        let read = try GatewayCommand(parsing: Array(command.json.utf8))
        if case .unknown = command {
            #expect(read == .unknown(command.name))
        } else {
            #expect(read == command)
        }
        #expect(GatewayCommand.sendReports().json == #"{"reports":"send"}"#)
        #expect(GatewayCommand.sendReports(after: CaptureTime(iso8601: "2026-11-21T09:00:10.250Z")!).json
            == #"{"reports":{"after":"2026-11-21T09:00:10.250Z"}}"#)
        #expect(try GatewayCommand(parsing: Array(#"{"reports":{"after":"yesterday"}}"#.utf8)) == .unknown("reports"))
    }

    /// The reason a message gives, at whatever level it refused.
    static func reason(of message: Inbound.Message) -> String? {
        func invalid<T>(_ body: Inbound.Body<T>) -> String? {
            if case .invalid(let reason) = body { return reason }
            return nil
        }
        switch message {
        case .rssiReport(_, let b): return invalid(b)
        case .gatewayPresence(_, _, let b): return invalid(b)
        case .telemetry(_, let b): return invalid(b)
        case .gatewayStatus(_, let b), .observerStatus(_, let b), .brainStatus(let b): return invalid(b)
        case .gatewayHealth(_, let b): return invalid(b)
        case .gatewayCalibration(_, let b), .customer(_, _, let b), .visitRecord(_, let b), .answeredRecord(_, _, let b):
            return invalid(b)
        case .gatewayCommand(_, let b): return invalid(b)
        case .join(_, _, let b): return invalid(b)
        case .roster(_, let b): return invalid(b)
        case .bridgeStatus(_, let b): return invalid(b)
        case .fleetConfig(let b): return invalid(b)
        case .fleetPresence(_, let b): return invalid(b)
        case .beaconHealth(_, let b): return invalid(b)
        case .ad, .other: return nil
        case .refused(let refusal): return refusal.reason
        }
    }
}

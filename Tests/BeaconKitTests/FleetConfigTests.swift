import BeaconKit
import Contract
import Tracking
import Config
import Testing

@Suite("Fleet config")
struct FleetConfigTests {
    /// A store's whole fleet, every section filled in.
    static let full = #"""
    {
      "$schema": "https://example.com/fleet.schema.json",
      "broker": {
        "url": "mqtts://broker.shop.example:8883",
        "passwordFile": "/etc/beaconbridge/mqtt.password",
        "tls": { "caFile": "/etc/ssl/shop-ca.pem", "certFile": "/etc/beaconbridge/gw.pem", "keyFile": "/etc/beaconbridge/gw.key" },
        "keepalive": 20,
        "linkTimeout": 4.5,
        "mqttVersion": "5"
      },
      "topicPrefix": "acme/shop-12",
      "uuids": ["E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "f7826da64fa24e988024bc5b71e0893e"],
      "defaults": {
        "pathLossExponent": 2.5,
        "exitTimeout": 20,
        "publishInterval": 2,
        "thresholds": { "immediate": 0.4, "near": 2.5, "hysteresis": 0.1 },
        "filter": { "processNoise": 2, "measurementNoise": 25 }
      },
      "gateways": [
        { "id": "door-1", "source": "hci:0", "zone": "entrance" },
        { "id": "counter", "source": "h4:tty:/dev/ttyAMA0@921600", "zone": "counter", "pathLossExponent": 3.2,
          "rssiOffset": -4, "exitTimeout": 6, "raw": true, "distanceModel": "curveFit",
          "scan": { "active": true, "intervalMs": 100, "windowMs": 50 },
          "advertise": { "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 12, "minor": 999, "power": -56, "intervalMs": 200 },
          "healthInterval": 60, "queueLimit": 500 },
        { "id": "replay", "source": "btsnoop:/var/lib/beaconbridge/morning.log?speed=4&loop", "staleAfter": 3 }
      ],
      "beacons": [
        { "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 12, "minor": 1, "name": "Alice's keyring",
          "measuredPower": -61, "latitude": 48.8566, "longitude": 2.3522, "heading": 90, "floor": 2, "store": 12,
          "ad": { "title": "Coffee of the day", "price": 2.5 } },
        { "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 12, "minor": 2 }
      ],
      "stores": [ { "major": 12, "name": "Rue de Rivoli", "ad": { "deal": "2 for 1" } } ],
      "rules": [
        { "name": "greet", "when": "enter", "stores": [12], "then": [ { "do": "greeting", "text": "Hello {customer}, a {favorite}?" } ], "once": true },
        { "name": "counter", "when": "proximity:immediate", "beacons": [ { "major": 12, "minor": 1 } ], "rssiAbove": -60,
          "then": [ { "do": "ad" }, { "do": "locationFix" },
                    { "do": "publish", "topic": "stores/{store}/alerts", "text": "{name} at {zone}", "retain": true, "qos": 0 } ],
          "cooldown": "after 3 updates at near" },
        { "when": "join", "names": ["Alice's keyring"], "then": [ { "do": "ad" } ], "cooldown": 300 }
      ],
      "brain": { "zoneMargin": 6, "zoneUpdates": 2 }
    }
    """#

    @Test func fullConfig() throws {
        let config = try FleetConfig.parse(Self.full)
        #expect(config.broker.url == BrokerURL(tls: true, host: "broker.shop.example", port: 8883))
        #expect(config.broker.username == nil)                // every part logs in as itself
        #expect(config.broker.username(default: "door-1") == "door-1")
        #expect(config.broker.passwordFile == "/etc/beaconbridge/mqtt.password")
        #expect(config.broker.tls == TLSConfig(caFile: "/etc/ssl/shop-ca.pem", certFile: "/etc/beaconbridge/gw.pem",
                                               keyFile: "/etc/beaconbridge/gw.key"))
        #expect(config.broker.keepalive == 20)
        #expect(config.broker.linkTimeout == 4.5)
        #expect(MQTTClientOptions(config.broker, identity: "door-1", clientID: "door-1", password: nil).linkTimeout == 4.5)
        #expect(config.broker.mqttVersion == .v5)
        #expect(config.topicPrefix == "acme/shop-12")
        #expect(config.topics.fleetConfig == "acme/shop-12/fleet/config")
        #expect(config.uuids == [airLocate, BeaconUUID("F7826DA6-4FA2-4E98-8024-BC5B71E0893E")!])

        // Defaults merged into every gateway, then the gateway's own values on top.
        #expect(config.gateways.map(\.id) == ["door-1", "counter", "replay"])
        let door = try #require(config.gateway(id: "door-1"))
        #expect(door.source == .hci(adapter: 0))
        #expect(door.zone == "entrance")
        #expect(door.tracker == TrackerSettings(
            exitTimeout: 20, staleAfter: 5, publishInterval: 2, raw: false, pathLossExponent: 2.5, rssiOffset: 0,
            distanceModel: .logDistance, thresholds: ProximityThresholds(immediate: 0.4, near: 2.5, hysteresis: 0.1),
            filter: RSSIFilter.Parameters(processNoise: 2, measurementNoise: 25)))
        #expect(door.scan == ScanConfig())
        #expect(door.advertise == nil)
        #expect(door.healthInterval == 30)
        #expect(door.queueLimit == 10_000)

        let counter = try #require(config.gateway(id: "counter"))
        #expect(counter.source == .h4TTY(path: "/dev/ttyAMA0", baud: 921_600))
        #expect(counter.tracker == TrackerSettings(
            exitTimeout: 6, staleAfter: 3, publishInterval: 2, raw: true, pathLossExponent: 3.2, rssiOffset: -4,
            distanceModel: .curveFit, thresholds: ProximityThresholds(immediate: 0.4, near: 2.5, hysteresis: 0.1),
            filter: RSSIFilter.Parameters(processNoise: 2, measurementNoise: 25)))
        #expect(counter.scan == ScanConfig(active: true, intervalMs: 100, windowMs: 50))
        #expect(counter.scan.intervalUnits == 160)
        #expect(counter.scan.windowUnits == 80)
        #expect(counter.advertise == AdvertiseConfig(
            beacon: IBeacon(uuid: airLocate, major: 12, minor: 999, txPower: -56), intervalMs: 200))
        #expect(counter.healthInterval == 60)
        #expect(counter.queueLimit == 500)

        let replay = try #require(config.gateway(id: "replay"))
        #expect(replay.source == .btsnoop(path: "/var/lib/beaconbridge/morning.log", speed: 4, loop: true))
        #expect(replay.zone == nil)
        #expect(replay.tracker.staleAfter == 3)
        #expect(replay.tracker.exitTimeout == 20)

        let alice = BeaconID(uuid: airLocate, major: 12, minor: 1)
        #expect(config.beacons == [
            BeaconEntry(id: alice, name: "Alice's keyring", measuredPower: -61,
                        location: Location(latitude: 48.8566, longitude: 2.3522, heading: 90, floor: 2), store: 12,
                        ad: .object(["title": .string("Coffee of the day"), "price": .number(2.5)])),
            BeaconEntry(id: BeaconID(uuid: airLocate, major: 12, minor: 2)),
        ])
        #expect(config.beacon(alice)?.name == "Alice's keyring")
        #expect(config.beacons[1].store == 12)     // its own major
        #expect(config.stores == [StoreEntry(major: 12, name: "Rue de Rivoli", ad: .object(["deal": .string("2 for 1")]))])

        #expect(config.rules == [
            Rule(name: "greet", trigger: .enter, beacons: [], stores: [12], names: [], rssiAbove: nil,
                 actions: [.greeting(template: "Hello {customer}, a {favorite}?")], once: true, cooldown: nil),
            Rule(name: "counter", trigger: .proximity(.immediate), beacons: [Rule.BeaconKey(major: 12, minor: 1)],
                 stores: [], names: [], rssiAbove: -60,
                 actions: [.ad, .locationFix, .publish(topic: "stores/{store}/alerts", template: "{name} at {zone}",
                                                       retain: true, qos: 0)],
                 once: false, cooldown: .updates(count: 3, at: .near)),
            Rule(name: "rules[2]", trigger: .join, beacons: [], stores: [], names: ["Alice's keyring"], rssiAbove: nil,
                 actions: [.ad], once: false, cooldown: .seconds(300)),
        ])
        #expect(config.brain == BrainConfig(zoneMargin: 6, zoneUpdates: 2))

        #expect(config.accepts(alice))
        #expect(!config.accepts(BeaconID(uuid: BeaconUUID(high: 1, low: 2), major: 1, minor: 1)))
        #expect(config.accepts(.eddystone(namespace: EddystoneNamespace(high: 1, low: 2), instance: EddystoneInstance(rawValue: 3))))
        #expect(config.rules[0].matches(major: 12, minor: 7, uuid: airLocate, entry: nil))
        #expect(!config.rules[0].matches(major: 13, minor: 7, uuid: airLocate, entry: nil))
        #expect(config.rules[2].matches(major: 12, minor: 1, uuid: airLocate, entry: config.beacon(alice)))
        #expect(!config.rules[2].matches(major: 12, minor: 2, uuid: airLocate, entry: config.beacons[1]))
    }

    @Test func minimalConfigTakesDefaults() throws {
        let config = try FleetConfig.parse("{}")
        #expect(config.broker == BrokerConfig(url: BrokerURL(host: "localhost")))
        #expect(config.broker.url.port == 1883)
        #expect(config.topicPrefix == "")
        #expect(config.uuids.isEmpty && config.gateways.isEmpty && config.beacons.isEmpty && config.rules.isEmpty)
        #expect(config.brain == BrainConfig())
        #expect(config.accepts(BeaconID(uuid: airLocate, major: 1, minor: 1)))
    }

    /// staleAfter is derived per gateway from its own exitTimeout unless set: min(5, exitTimeout / 2).
    @Test(arguments: [(nil, 10.0, 5.0), (nil, 4.0, 2.0), (nil, 60.0, 5.0), (1.5, 4.0, 1.5)] as [(Double?, Double, Double)])
    func staleAfterIsDerived(staleAfter: Double?, exitTimeout: Double, expected: Double) throws {
        let stale = staleAfter.map { #", "staleAfter": \#($0)"# } ?? ""
        let config = try FleetConfig.parse(#"{"gateways": [{"id": "g", "exitTimeout": \#(exitTimeout)\#(stale)}]}"#)
        #expect(config.gateways.first?.tracker.staleAfter == expected)
        #expect(TrackerSettings(exitTimeout: exitTimeout, staleAfter: staleAfter).staleAfter == expected)
    }

    // MARK: Errors

    /// Parses `json` and returns its error lines (`path: reason`).
    static func errors(_ json: String) -> [String] {
        do {
            _ = try FleetConfig.parse(json)
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }

    @Test func notJSON() {
        #expect(Self.errors(#"{"gateways": [}"#) == ["invalid JSON at line 1, column 15: unexpected character"])
        #expect(Self.errors("{\n  \"uuids\": [],\n  \"uuids\": []\n}")
                    == ["invalid JSON at line 3, column 3: duplicate key \"uuids\""])
        #expect(Self.errors("[]") == ["expected an object, found an array"])
    }

    @Test func severalErrorsAtOnceWithTheirPaths() {
        let json = #"""
        {
          "uuids": ["E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "xyz"],
          "gateways": [
            { "id": "door", "source": "hci:0" },
            { "id": "door", "source": "usb:1" },
            { "id": "back", "advertise": { "uuid": "xyz", "major": 70000 }, "exitTimeout": 0 },
            { "source": "h4:unix:relative/path", "zone": 7 }
          ]
        }
        """#
        #expect(Self.errors(json) == [
            #"uuids[1]: "xyz" is not a UUID"#,
            #"gateways[1].id: "door" is used by another gateway"#,
            #"gateways[1].source: unknown scheme; use hci:N, h4:unix:PATH, h4:tcp:HOST:PORT, h4:tty:DEV[@BAUD] or btsnoop:FILE"#,
            #"gateways[2].advertise.uuid: "xyz" is not a UUID"#,
            #"gateways[2].advertise.major: 70000 is out of range 0…65535"#,
            #"gateways[2].advertise.minor: is required"#,
            #"gateways[2].exitTimeout: 0 is out of range 0.5…3600 s"#,
            #"gateways[3].id: is required"#,
            #"gateways[3].source: expected h4:unix:/absolute/path"#,
            #"gateways[3].zone: expected a string, found a number"#,
        ])
    }

    @Test(arguments: [
        (#"{"gatways": []}"#, #"gatways: unknown key (did you mean "gateways"?)"#),
        (#"{"brokr": {}}"#, #"brokr: unknown key (did you mean "broker"?)"#),
        (#"{"gateways": [{"id": "g", "exitTimout": 5}]}"#, #"gateways[0].exitTimout: unknown key (did you mean "exitTimeout"?)"#),
        (#"{"broker": {"URL": "mqtt://h"}}"#, #"broker.URL: unknown key (did you mean "url"?)"#),
        (#"{"defaults": {"tresholds": {}}}"#, #"defaults.tresholds: unknown key (did you mean "thresholds"?)"#),
        (#"{"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 1, "lat": 1}]}"#,
         #"beacons[0].lat: unknown key (did you mean "latitude"?)"#),
        (#"{"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 1, "colour": 1}]}"#,
         #"beacons[0].colour: unknown key (known: uuid, major, minor, namespace, instance, name, measuredPower, latitude, longitude, heading, floor, store, ad, owner, profile, position)"#),
        (#"{"brain": {"zoneMargn": 1}}"#, #"brain.zoneMargn: unknown key (did you mean "zoneMargin"?)"#),
        (#"{"brain": {"zone": 1}}"#, #"brain.zone: unknown key (known: zoneConfidence, zoneConfidenceWalking, zoneMargin, zoneUpdates, zoneStaleAfter, zoneSettle, zoneModel, zoneDwell, zoneSwitch, zoneHold, zoneNoise, rssiProcessNoise, rssiTrendNoise, rssiMeasurementNoise, entryWindow, entranceWait, exitSamples, exitMinimum, clockHold, joins, joinMaxAge, shards, calibration, lowBattery, missingAfter)"#),
        (#"{"colour": 1}"#, #"colour: unknown key (known: $schema, broker, topicPrefix, uuids, defaults, gateways, beacons, stores, rules, brain, bridge, homeAssistant, history, centre)"#),
    ])
    func unknownKeys(_ json: String, _ error: String) {
        #expect(Self.errors(json) == [error])
    }

    @Test(arguments: [
        (#"{"gateways": {}}"#, "gateways: expected an array, found an object"),
        (#"{"gateways": ["door"]}"#, "gateways[0]: expected an object, found a string"),
        (#"{"uuids": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"}"#, "uuids: expected an array, found a string"),
        (#"{"uuids": [42]}"#, "uuids[0]: expected a string, found a number"),
        (#"{"topicPrefix": null}"#, "topicPrefix: expected a string, found null"),
        (#"{"gateways": [{"id": "g", "raw": "yes"}]}"#, "gateways[0].raw: expected true or false, found a string"),
        (#"{"broker": {"keepalive": "30"}}"#, "broker.keepalive: expected an integer, found a string"),
        (#"{"broker": {"keepalive": 30.5}}"#, "broker.keepalive: 30.5 is not an integer"),
        (#"{"gateways": [{"id": "g", "pathLossExponent": true}]}"#, "gateways[0].pathLossExponent: expected a number, found a boolean"),
        (#"{"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 1, "ad": "free coffee"}]}"#,
         "beacons[0].ad: expected an object (the ad's JSON payload), found a string"),
        (#"{"gateways": [{"id": ""}]}"#, "gateways[0].id: must not be empty"),
        (#"{"gateways": [{"id": "g", "advertise": {"uuid": "xyz", "major": 1, "minor": 2}}]}"#,
         #"gateways[0].advertise.uuid: "xyz" is not a UUID"#),
        (#"{"gateways": [{"id": "g", "advertise": {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 2, "power": -128}}]}"#,
         "gateways[0].advertise.power: -128 is out of range -127…20"),
    ])
    func wrongTypes(_ json: String, _ error: String) {
        #expect(Self.errors(json) == [error])
    }

    @Test(arguments: [
        (#"{"defaults": {"pathLossExponent": 0.5}}"#, "defaults.pathLossExponent: 0.5 is out of range 1…6"),
        (#"{"defaults": {"rssiOffset": 60}}"#, "defaults.rssiOffset: 60 is out of range -50…50 dB"),
        (#"{"defaults": {"publishInterval": 0.01}}"#, "defaults.publishInterval: 0.01 is out of range 0.05…3600 s"),
        (#"{"defaults": {"staleAfter": 15}}"#, "defaults.staleAfter: must not be longer than exitTimeout (10 s)"),
        (#"{"defaults": {"thresholds": {"immediate": 2, "near": 1}}}"#, "defaults.thresholds: near (1 m) must be beyond immediate (2 m)"),
        (#"{"defaults": {"thresholds": {"hysteresis": 1}}}"#, "defaults.thresholds.hysteresis: 1 is out of range 0…0.9"),
        (#"{"defaults": {"scan": {"intervalMs": 50, "windowMs": 60}}}"#, "defaults.scan.windowMs: the scan window cannot be longer than the interval"),
        (#"{"defaults": {"queueLimit": 5}}"#, "defaults.queueLimit: 5 is out of range 10…1000000"),
        (#"{"defaults": {"distanceModel": "magic"}}"#, #"defaults.distanceModel: "magic" is not one of "logDistance", "curveFit""#),
        (#"{"broker": {"keepalive": 1}}"#, "broker.keepalive: 1 is out of range 5…65535"),
        (#"{"broker": {"linkTimeout": -1}}"#, "broker.linkTimeout: -1 is out of range 0…3600 s"),
        (#"{"broker": {"mqttVersion": "3.1"}}"#, #"broker.mqttVersion: "3.1" is not one of "3.1.1", "5""#),
        (#"{"brain": {"zoneUpdates": 0}}"#, "brain.zoneUpdates: 0 is out of range 1…100"),
        (#"{"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": -1, "minor": 65536}]}"#,
         "beacons[0].major: -1 is out of range 0…65535\nbeacons[0].minor: 65536 is out of range 0…65535"),
        (#"{"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 1, "latitude": 91, "longitude": 0}]}"#,
         "beacons[0].latitude: 91 is out of range -90…90"),
        (#"{"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 1, "latitude": 1}]}"#,
         "beacons[0]: latitude and longitude go together"),
        (#"{"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 1, "floor": 501}]}"#,
         "beacons[0].floor: 501 is out of range -200…500"),
        (#"{"gateways": [{"id": "g", "advertise": {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 1, "intervalMs": 20}}]}"#,
         "gateways[0].advertise.intervalMs: 20 is out of range 100…10240"),
    ])
    func outOfRange(_ json: String, _ error: String) {
        #expect(Self.errors(json).joined(separator: "\n") == error)
    }

    @Test(arguments: [
        (#"{"gateways": [{"id": "door/1"}]}"#, #"gateways[0].id: "door/1" contains '/'"#),
        (#"{"gateways": [{"id": "door+"}]}"#, #"gateways[0].id: "door+" contains an MQTT wildcard (+ or #)"#),
        (#"{"gateways": [{"id": "$SYS"}]}"#, #"gateways[0].id: "$SYS" starts with '$' (reserved by brokers)"#),
        (#"{"topicPrefix": "acme/"}"#, #"topicPrefix: "acme/" starts or ends with '/'"#),
        (#"{"topicPrefix": "a#"}"#, #"topicPrefix: "a#" contains an MQTT wildcard (+ or #)"#),
    ])
    func hostileNames(_ json: String, _ error: String) {
        #expect(Self.errors(json) == [error])
    }

    @Test func duplicates() {
        let beacon = #"{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 12, "minor": 1}"#
        #expect(Self.errors(#"{"beacons": [\#(beacon), \#(beacon)]}"#)
                    == ["beacons[1]: E2C56DB5-DFFB-48D2-B060-D0F5A71096E0/12/1 is listed twice"])
        #expect(Self.errors(#"{"stores": [{"major": 12}, {"major": 12}]}"#) == ["stores[1].major: store 12 is listed twice"])
        #expect(Self.errors(#"{"gateways": [{"id": "a"}, {"id": "b"}, {"id": "a"}]}"#)
                    == [#"gateways[2].id: "a" is used by another gateway"#])
    }

    @Test func broker() {
        #expect(Self.errors(#"{"broker": {"url": "mqtt://gw:secret@broker"}}"#) == [
            "broker.url: a password does not belong in the URL; use the config's passwordFile or BEACONBRIDGE_MQTT_PASSWORD"])
        #expect(Self.errors(#"{"broker": {"url": "http://broker"}}"#) == ["broker.url: expected mqtt://[user@]host[:port][,host[:port]…] or mqtts://…"])
        #expect(Self.errors(#"{"broker": {"url": "mqtt://broker:0"}}"#) == ["broker.url: port must be 1-65535"])
        #expect(Self.errors(#"{"broker": {"tls": {"certFile": "c.pem"}}}"#) == [
            "broker.tls: certFile and keyFile go together (client certificate authentication)",
            "broker.tls: needs caFile or caPath to verify the broker"])
        #expect(Self.errors(#"{"broker": []}"#) == ["broker: expected an object, found an array"])
    }

    @Test func rules() {
        func rule(_ body: String) -> [String] { Self.errors(#"{"rules": [\#(body)]}"#) }
        #expect(rule(#"{"then": [{"do": "ad"}]}"#) == ["rules[0].when: is required"])
        #expect(rule(#"{"when": "arrive", "then": [{"do": "ad"}]}"#) == [
            #"rules[0].when: "arrive" is not one of "enter", "exit", "join", "leave", "proximity:immediate", "proximity:near", "proximity:far", "update""#])
        #expect(rule(#"{"when": "enter"}"#) == ["rules[0].then: is required"])
        #expect(rule(#"{"when": "enter", "then": []}"#) == ["rules[0].then: needs at least one action"])
        #expect(rule(#"{"when": "enter", "then": [{"do": "dance"}]}"#) == [
            #"rules[0].then[0].do: "dance" is not one of "ad", "greeting", "locationFix", "publish""#])
        #expect(rule(#"{"when": "enter", "then": [{"do": "greeting"}]}"#) == ["rules[0].then[0].text: is required"])
        #expect(rule(#"{"when": "enter", "then": [{"do": "greeting", "text": "Hi {nmae}"}]}"#) == [
            "rules[0].then[0].text: template uses {nmae}; known: {client} {customer} {distance} {favorite} {floor} {gateway} {heading} {instance} {lat} {lon} {major} {minor} {name} {namespace} {proximity} {rssi} {rule} {store} {ts} {uuid} {zone}"])
        #expect(rule(#"{"when": "enter", "then": [{"do": "greeting", "text": "Hi {name"}]}"#) == [
            "rules[0].then[0].text: template has an unclosed '{'"])
        #expect(rule(#"{"when": "enter", "then": [{"do": "ad", "text": "x"}]}"#) == [
            #"rules[0].then[0].text: does not apply to "do": "ad""#])
        #expect(rule(#"{"when": "enter", "then": [{"do": "publish", "topic": "stores/+/x", "text": "x"}]}"#) == [
            "rules[0].then[0].topic: a topic to publish on cannot contain + or #"])
        #expect(rule(#"{"when": "enter", "then": [{"do": "publish", "topic": "t", "text": "x", "qos": 2}]}"#) == [
            "rules[0].then[0].qos: 2 is out of range 0…1"])
        #expect(rule(#"{"when": "join", "rssiAbove": -70, "then": [{"do": "ad"}]}"#) == [
            "rules[0].rssiAbove: applies to beacon events (enter, exit, proximity), not to rules[0]'s join/leave"])
        #expect(rule(#"{"when": "enter", "rssiAbove": 30, "then": [{"do": "ad"}]}"#) == [
            "rules[0].rssiAbove: 30 is out of range -127…20 dBm"])
        #expect(rule(#"{"when": "enter", "beacons": [{"major": 1}], "then": [{"do": "ad"}]}"#) == [
            "rules[0].beacons[0].minor: is required"])
        #expect(rule(#"{"when": "enter", "stores": ["12"], "then": [{"do": "ad"}]}"#) == [
            "rules[0].stores[0]: expected an integer, found a string"])
    }

    @Test("a rule's zones name gateways of the fleet")
    func ruleZones() throws {
        let gateways = #""gateways": [{"id": "door"}, {"id": "counter"}]"#
        let config = try FleetConfig.parse(#"{\#(gateways), "rules": [{"when": "proximity:immediate", "zones": ["counter"], "then": [{"do": "ad"}]}]}"#)
        #expect(config.rules[0].zones == ["counter"])
        #expect(config.rules[0].matches(major: 1, minor: 2, uuid: nil, entry: nil, zone: "counter"))
        #expect(!config.rules[0].matches(major: 1, minor: 2, uuid: nil, entry: nil, zone: "door"))
        #expect(!config.rules[0].matches(major: 1, minor: 2, uuid: nil, entry: nil, zone: nil))
        #expect(Self.errors(#"{\#(gateways), "rules": [{"when": "enter", "zones": ["countr"], "then": [{"do": "ad"}]}]}"#) == [
            #"rules[0].zones[0]: "countr" is not a gateway id; the gateways are door, counter"#])
        #expect(Self.errors(#"{"rules": [{"when": "enter", "zones": ["counter", 3], "then": [{"do": "ad"}]}]}"#) == [
            "rules[0].zones[1]: expected a string, found a number",
            #"rules[0].zones[0]: "counter" is not a gateway id (the config lists no gateways)"#])
    }

    @Test(arguments: [
        (#""after 3 updates at near""#, Rule.Cooldown?.some(.updates(count: 3, at: .near)), nil as String?),
        (#""after 1 update at far""#, .updates(count: 1, at: .far), nil),
        (#""after 10 updates at immediate""#, .updates(count: 10, at: .immediate), nil),
        ("0", .seconds(0), nil),
        ("90.5", .seconds(90.5), nil),
        (#""after 3 updates at unknown""#, nil, #"rules[0].cooldown: "after 3 updates at unknown" is neither seconds nor "after N updates at near|far|immediate""#),
        (#""after 0 updates at near""#, nil, #"rules[0].cooldown: "after 0 updates at near" is neither seconds nor "after N updates at near|far|immediate""#),
        (#""3 updates at near""#, nil, #"rules[0].cooldown: "3 updates at near" is neither seconds nor "after N updates at near|far|immediate""#),
        (#""300""#, nil, #"rules[0].cooldown: "300" is neither seconds nor "after N updates at near|far|immediate""#),
        ("-1", nil, "rules[0].cooldown: -1 is out of range 0…604800 s"),
        ("true", nil, #"rules[0].cooldown: expected seconds or "after N updates at near", found a boolean"#),
    ])
    func cooldowns(_ json: String, _ cooldown: Rule.Cooldown?, _ error: String?) throws {
        let text = #"{"rules": [{"when": "exit", "then": [{"do": "ad"}], "cooldown": \#(json)}]}"#
        if let error {
            #expect(Self.errors(text) == [error])
        } else {
            #expect(try FleetConfig.parse(text).rules.first?.cooldown == cooldown)
        }
    }

    @Test func templates() {
        #expect(Template.problem(in: "Hello {customer}") == nil)
        #expect(Template.problem(in: "no variables") == nil)
        #expect(Template.render("Hello {customer}, {favorite}?", ["customer": "Alice", "favorite": "flat white"])
                    == "Hello Alice, flat white?")
        #expect(Template.render("{missing}|{name}", ["name": "x"]) == "|x")
        #expect(Template.render("a { b", [:]) == "a { b")
    }
}

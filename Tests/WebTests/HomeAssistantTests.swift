import BeaconKit
import Contract
import BrainCore
import Config
import GatewayCore
import Testing
import Tracking
import WebDisplay

/// What Home Assistant's MQTT documentation requires of a single-component discovery
/// message (integrations/mqtt: "Discovery messages"; sensor.mqtt, device_tracker.mqtt):
///
/// - topic `<discovery_prefix>/<component>/[<node_id>/]<object_id>/config`, node and
///   object ids of `[a-zA-Z0-9_-]` only;
/// - payload a JSON object (full or abbreviated keys);
/// - `device` needs at least one of `identifiers` or `connections`, and only works with a
///   `unique_id`;
/// - `sensor` and `binary_sensor`: `state_topic` is required; `entity_category` is
///   `config` or `diagnostic`; `expire_after` a positive number of seconds;
/// - `device_tracker`: `state_topic` (or `json_attributes_topic`) to get a state;
///   `source_type` one of gps, router, bluetooth, bluetooth_le;
/// - availability: `availability_topic`, or `availability` entries each with a `topic`.
enum DocumentedSchema {
    static let components = ["sensor", "binary_sensor", "device_tracker"]
    static let required: [String: [String]] = ["sensor": ["state_topic"], "binary_sensor": ["state_topic"], "device_tracker": []]
    static let sourceTypes = ["gps", "router", "bluetooth", "bluetooth_le"]

    static func problems(topic: String, payload: String, prefix: String = "homeassistant") -> [String] {
        var problems: [String] = []
        let levels = topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let prefixLevels = prefix.split(separator: "/").count
        guard levels.count == prefixLevels + 3 || levels.count == prefixLevels + 4,
              levels.prefix(prefixLevels).joined(separator: "/") == prefix, levels.last == "config" else {
            return ["\(topic): not <prefix>/<component>/[<node_id>/]<object_id>/config"]
        }
        let component = levels[prefixLevels]
        if !components.contains(component) { problems.append("\(topic): unknown component \(component)") }
        for id in levels[(prefixLevels + 1)..<(levels.count - 1)] where id.isEmpty || id.unicodeScalars.contains(where: {
            !(("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "-")
        }) {
            problems.append("\(topic): id \"\(id)\" outside [a-zA-Z0-9_-]")
        }
        guard let value = try? JSONParser().parse(payload), case .object(let o) = value else {
            return problems + ["\(topic): payload is not a JSON object"]
        }
        for key in required[component] ?? [] where o[key]?.stringValue?.isEmpty != false {
            problems.append("\(topic): \(key) is required")
        }
        if component == "device_tracker" {
            if o["state_topic"] == nil && o["json_attributes_topic"] == nil {
                problems.append("\(topic): a device tracker needs state_topic or json_attributes_topic")
            }
            if let source = o["source_type"], !sourceTypes.contains(source.stringValue ?? "") {
                problems.append("\(topic): source_type \(source.jsonText)")
            }
        }
        if let device = o["device"] {
            if device["identifiers"] == nil && device["connections"] == nil {
                problems.append("\(topic): device needs identifiers or connections")
            }
            if o["unique_id"]?.stringValue == nil { problems.append("\(topic): device without unique_id") }
        }
        if let category = o["entity_category"], !["config", "diagnostic"].contains(category.stringValue ?? "") {
            problems.append("\(topic): entity_category \(category.jsonText)")
        }
        if let expiry = o["expire_after"], (expiry.numberValue ?? 0) <= 0 {
            problems.append("\(topic): expire_after \(expiry.jsonText)")
        }
        if let list = o["availability"]?.arrayValue, list.contains(where: { $0["topic"] == nil }) {
            problems.append("\(topic): availability entry without topic")
        }
        for key in o.keys where key.hasSuffix("_topic") {
            if let t = o[key]?.stringValue, t.isEmpty || t.contains("+") || t.contains("#") {
                problems.append("\(topic): \(key) \"\(t)\" is not a topic")
            }
        }
        return problems
    }
}

@Suite("Home Assistant discovery")
struct HomeAssistantTests {
    static let till = "00112233445566778899/aabbccddeeff"

    func populated() throws -> FleetState {
        var config = try fleetConfig()
        config.beacons.append(BeaconEntry(id: .eddystone(namespace: EddystoneNamespace(hex: "00112233445566778899")!,
                                                         instance: EddystoneInstance(hex: "aabbccddeeff")!),
                                          name: "till tag", store: 100))
        var state = FleetState(config: config)
        state.receive("gateways/door/status", "online")
        state.receive("gateways/stray_one/status", "online")
        state.receive("stores/100/roster", bytes: roster(100, [customer("ana", "Ana", minor: 1, since: 0),
                                                               customer("b.ob", "Bob", minor: 2, since: 5)]))
        state.receive("beacons/100/1/presence", bytes: fleetPresence(100, 1, zone: "door", zoneName: "Entrance"))
        state.receive("beacons/100/9/presence", bytes: fleetPresence(100, 9, zone: "counter", zoneName: "Counter"))
        return state
    }

    func configs(_ state: FleetState) -> [String: String] {
        HomeAssistantDiscovery.messages(for: state, version: "test").filter { $0.key.hasSuffix("/config") }
    }

    func parsed(_ messages: [String: String], _ topic: String) throws -> JSONValue {
        try JSONParser().parse(try #require(messages[topic], "no \(topic)"))
    }

    @Test("every payload has what Home Assistant's documentation requires, on a well-formed topic")
    func documentedKeys() throws {
        let configs = configs(try populated())
        // 4 gateways × 3 entities, 1 registry iBeacon's tracker, the Eddystone's tracker and 2 sensors, 2 customers.
        #expect(configs.count == 4 * 3 + 1 + 3 + 2)
        for (topic, payload) in configs {
            #expect(DocumentedSchema.problems(topic: topic, payload: payload) == [], "\(payload)")
            #expect(topic.contains("/beaconbridge/"))
            // Every entity belongs to a device: Home Assistant groups and names it by it.
            #expect(try JSONParser().parse(payload)["device"]?["identifiers"] != nil, "\(topic)")
        }
        let unique = configs.values.compactMap { try? JSONParser().parse($0)["unique_id"]?.stringValue }
        #expect(Set(unique).count == configs.count, "unique ids are unique")
    }

    @Test("gateways are devices with a connectivity binary sensor and diagnostic figures that expire")
    func gatewaySensors() throws {
        let configs = configs(try populated())
        let adverts = try parsed(configs, "homeassistant/sensor/beaconbridge/gateway_door_adverts/config")
        #expect(adverts["state_topic"] == .string("gateways/door/health"))
        #expect(adverts["value_template"] == .string("{{ value_json.advertsPerSecond }}"))
        #expect(adverts["availability_topic"] == .string("gateways/door/status"))
        #expect(adverts["entity_category"] == .string("diagnostic"))
        #expect(adverts["expire_after"] == .number(90), "three health intervals of 30 s")
        #expect(adverts["device"]?["identifiers"] == .array([.string("beaconbridge_gateway_door")]))
        #expect(adverts["device"]?["name"] == .string("Gateway door (Entrance)"))
        let status = try parsed(configs, "homeassistant/binary_sensor/beaconbridge/gateway_door_connectivity/config")
        #expect(status["state_topic"] == .string("gateways/door/status"))
        #expect(status["device_class"] == .string("connectivity"))
        #expect(status["payload_on"] == .string("online") && status["payload_off"] == .string("offline"))
        #expect(status["entity_category"] == .string("diagnostic"))
        let tracked = try parsed(configs, "homeassistant/sensor/beaconbridge/gateway_door_tracked/config")
        #expect(tracked["value_template"] == .string("{{ value_json.tracked }}"))
        // An id with characters Home Assistant does not allow keeps a distinct, valid object id.
        #expect(configs.keys.contains("homeassistant/binary_sensor/beaconbridge/gateway_stray_5fone_connectivity/config"))
    }

    @Test("trackers are named by their device and read a short state of their own: the zone's name or not_home")
    func trackers() throws {
        let messages = HomeAssistantDiscovery.messages(for: try populated(), version: "test")
        let beacon = try parsed(messages, "homeassistant/device_tracker/beaconbridge/beacon_100_9/config")
        #expect(beacon["name"] == .null, "the device names the entity")
        #expect(beacon["device"]?["name"] == .string("trolley"))
        #expect(beacon["state_topic"] == .string("homeassistant/device_tracker/beaconbridge/beacon_100_9/state"))
        #expect(beacon["json_attributes_topic"] == .string("beacons/100/9/presence"))
        #expect(beacon["value_template"] == nil, "Home Assistant would use the raw payload, not the template's result")
        #expect(messages["homeassistant/device_tracker/beaconbridge/beacon_100_9/state"] == "Counter")

        let ana = try parsed(messages, "homeassistant/device_tracker/beaconbridge/customer_100_ana/config")
        #expect(ana["name"] == .null && ana["device"]?["name"] == .string("Ana"))
        #expect(ana["json_attributes_topic"] == .string("beacons/100/1/presence"))
        #expect(messages["homeassistant/device_tracker/beaconbridge/customer_100_ana/state"] == "Entrance")
        // Bob's beacon has no fleet presence (yet): not home.
        #expect(messages["homeassistant/device_tracker/beaconbridge/customer_100_b_2eob/state"] == "not_home")
    }

    @Test("the longest zone name a presence may carry is a state Home Assistant takes whole (at most 255 characters)")
    func longZoneName() throws {
        var state = try populated()
        let longest = String(repeating: "Ü", count: 100) + String(repeating: "x", count: 28)
        state.receive("beacons/100/9/presence", bytes: fleetPresence(100, 9, zone: "counter", zoneName: longest))
        var messages = HomeAssistantDiscovery.messages(for: state, version: "test")
        #expect(messages["homeassistant/device_tracker/beaconbridge/beacon_100_9/state"] == longest)
        #expect(longest.count <= 255)
        // One character more is not a presence the display accepts: the state stays.
        state.receive("beacons/100/9/presence", bytes: fleetPresence(100, 9, zone: "counter", zoneName: longest + "x"))
        messages = HomeAssistantDiscovery.messages(for: state, version: "test")
        #expect(messages["homeassistant/device_tracker/beaconbridge/beacon_100_9/state"] == longest)
    }

    @Test("registry Eddystone beacons have a tracker on their fleet presence, and battery (mV) and temperature sensors on their telemetry")
    func eddystone() throws {
        var state = try populated()
        let object = "eddystone_00112233445566778899_aabbccddeeff"
        var messages = HomeAssistantDiscovery.messages(for: state, version: "test")
        let tracker = try parsed(messages, "homeassistant/device_tracker/beaconbridge/\(object)/config")
        #expect(tracker["json_attributes_topic"] == .string("eddystone/\(Self.till)/presence"))
        #expect(tracker["device"]?["name"] == .string("till tag") && tracker["name"] == .null)
        #expect(messages["homeassistant/device_tracker/beaconbridge/\(object)/state"] == "not_home")
        let till = BeaconRef(namespace: EddystoneNamespace(hex: "00112233445566778899")!, instance: EddystoneInstance(hex: "aabbccddeeff")!)
        let report = FleetPresenceReport(beacon: till, uuid: nil, zone: "door", zoneName: "Entrance",
                                         gateways: [.init(gateway: "door", zone: "Entrance", proximity: .near, rssiSmoothed: -60, distance: 1)],
                                         proximity: .near, since: t(0))
        #expect(state.receive("eddystone/\(Self.till)/presence", report.json) == FleetState.Change(stores: [100]),
                "the registry puts the till tag in store 100")
        messages = HomeAssistantDiscovery.messages(for: state, version: "test")
        #expect(messages["homeassistant/device_tracker/beaconbridge/\(object)/state"] == "Entrance")

        let configs = configs(state)
        let battery = try parsed(configs, "homeassistant/sensor/beaconbridge/eddystone_00112233445566778899_aabbccddeeff_battery/config")
        #expect(battery["state_topic"] == .string("eddystone/\(Self.till)/telemetry"))
        #expect(battery["device_class"] == .string("voltage") && battery["unit_of_measurement"] == .string("mV"))
        #expect(battery["device"]?["name"] == .string("till tag"))
        #expect(battery["value_template"] == .string("{{ value_json.batteryMv if value_json.batteryMv is not none else 'None' }}"))
        let temperature = try parsed(configs, "homeassistant/sensor/beaconbridge/eddystone_00112233445566778899_aabbccddeeff_temperature/config")
        #expect(temperature["device_class"] == .string("temperature") && temperature["unit_of_measurement"] == .string("°C"))
    }

    @Test("a customer who leaves, and everything when discovery is turned off, is removed with an empty retained config and state")
    func removal() throws {
        var state = try populated()
        var ledger = DiscoveryLedger()
        // What an earlier run left on the broker, read back.
        ledger.readBack(topic: "homeassistant/sensor/beaconbridge/gateway_gone_status/config", payload: "{}")
        let wanted = HomeAssistantDiscovery.messages(for: state, version: "test")
        #expect(wanted.count == 18 + 4)
        let first = ledger.reconcile(wanted)
        #expect(first.count == 22 + 1)
        #expect(first.first?.topic.contains("gateway_gone") == true && first.first?.payload.isEmpty == true, "removals first")
        #expect(ledger.reconcile(HomeAssistantDiscovery.messages(for: state, version: "test")).isEmpty, "nothing twice")

        // Ana moves: only her state changes.
        state.receive("beacons/100/1/presence", bytes: fleetPresence(100, 1, zone: "counter", zoneName: "Counter"))
        let moved = ledger.reconcile(HomeAssistantDiscovery.messages(for: state, version: "test"))
        #expect(moved.map(\.topic) == ["homeassistant/device_tracker/beaconbridge/customer_100_ana/state"])
        #expect(moved.first?.payload == "Counter")

        state.receive("stores/100/roster", bytes: roster(100, [customer("b.ob", "Bob", minor: 2, since: 5)]))
        let left = ledger.reconcile(HomeAssistantDiscovery.messages(for: state, version: "test"))
        #expect(left.map(\.topic) == ["homeassistant/device_tracker/beaconbridge/customer_100_ana/config",
                                      "homeassistant/device_tracker/beaconbridge/customer_100_ana/state"])
        #expect(left.allSatisfy { $0.payload.isEmpty })

        var off = state
        off.receive("fleet/config", """
        {"gateways": [{"id": "door", "store": 100, "position": {"x": 2, "y": 5}}], "stores": [{"major": 100}],
         "homeAssistant": {"discovery": false}}
        """)
        #expect(off.config.homeAssistant.discovery == false)
        #expect(HomeAssistantDiscovery.messages(for: off, version: "test").isEmpty)
        let removed = ledger.reconcile([:])
        #expect(removed.count == 17 + 3 && removed.allSatisfy { $0.payload.isEmpty })
        #expect(ledger.onBroker.isEmpty)
    }
}

import BeaconKit
import BrainCore
import Config
import GatewayCore
import Testing
import WebDisplay

/// What Home Assistant's MQTT documentation requires of a single-component discovery
/// message (integrations/mqtt: "Discovery messages"; sensor.mqtt, device_tracker.mqtt):
///
/// - topic `<discovery_prefix>/<component>/[<node_id>/]<object_id>/config`, node and
///   object ids of `[a-zA-Z0-9_-]` only;
/// - payload a JSON object (full or abbreviated keys);
/// - `device` needs at least one of `identifiers` or `connections`, and only works with a
///   `unique_id`;
/// - `sensor`: `state_topic` is required;
/// - `device_tracker`: `state_topic` (or `json_attributes_topic`) to get a state;
///   `source_type` one of gps, router, bluetooth, bluetooth_le;
/// - availability: `availability_topic`, or `availability` entries each with a `topic`.
enum DocumentedSchema {
    static let components = ["sensor", "device_tracker"]
    static let required: [String: [String]] = ["sensor": ["state_topic"], "device_tracker": []]
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
    func populated() throws -> FleetState {
        var state = FleetState(config: try fleetConfig())
        state.receive("gateways/door/status", "online")
        state.receive("gateways/stray_one/status", "online")
        state.receive("stores/100/roster", bytes: roster(100, [customer("ana", "Ana", minor: 1, since: 0),
                                                               customer("b.ob", "Bob", minor: 2, since: 5)]))
        return state
    }

    @Test("every payload has what Home Assistant's documentation requires, on a well-formed topic")
    func documentedKeys() throws {
        let configs = HomeAssistantDiscovery.configs(for: try populated(), version: "test")
        // 4 gateways × 3 sensors, 1 registry beacon, 2 customers.
        #expect(configs.count == 4 * 3 + 1 + 2)
        for (topic, payload) in configs {
            #expect(DocumentedSchema.problems(topic: topic, payload: payload) == [], "\(payload)")
            #expect(topic.contains("/beaconbridge/"))
        }
        let unique = configs.values.compactMap { try? JSONParser().parse($0)["unique_id"]?.stringValue }
        #expect(Set(unique).count == configs.count, "unique ids are unique")
    }

    @Test("gateways are devices with status, adverts/s and tracked-beacon sensors read from their own topics")
    func gatewaySensors() throws {
        let configs = HomeAssistantDiscovery.configs(for: try populated(), version: "test")
        let adverts = try JSONParser().parse(try #require(configs["homeassistant/sensor/beaconbridge/gateway_door_adverts/config"]))
        #expect(adverts["state_topic"] == .string("gateways/door/health"))
        #expect(adverts["value_template"] == .string("{{ value_json.advertsPerSecond }}"))
        #expect(adverts["availability_topic"] == .string("gateways/door/status"))
        #expect(adverts["device"]?["identifiers"] == .array([.string("beaconbridge_gateway_door")]))
        let status = try JSONParser().parse(try #require(configs["homeassistant/sensor/beaconbridge/gateway_door_status/config"]))
        #expect(status["state_topic"] == .string("gateways/door/status"))
        #expect(configs["homeassistant/sensor/beaconbridge/gateway_door_tracked/config"] != nil)
        // An id with characters Home Assistant does not allow keeps a distinct, valid object id.
        #expect(configs.keys.contains("homeassistant/sensor/beaconbridge/gateway_stray_5fone_status/config"))
    }

    @Test("registry beacons and present customers are device trackers whose state is their zone")
    func trackers() throws {
        let configs = HomeAssistantDiscovery.configs(for: try populated(), version: "test")
        let beacon = try JSONParser().parse(try #require(configs["homeassistant/device_tracker/beaconbridge/beacon_100_9/config"]))
        #expect(beacon["state_topic"] == .string("beacons/100/9/presence"))
        #expect(beacon["name"] == .string("trolley"))
        let ana = try JSONParser().parse(try #require(configs["homeassistant/device_tracker/beaconbridge/customer_100_ana/config"]))
        #expect(ana["name"] == .string("Ana") && ana["state_topic"] == .string("beacons/100/1/presence"))
        #expect(ana["value_template"] == .string("{{ value_json.zoneName if value else 'not_home' }}"))
        #expect(configs["homeassistant/device_tracker/beaconbridge/customer_100_b_2eob/config"] != nil)
    }

    @Test("a customer who leaves, and everything when discovery is turned off, is removed with an empty retained config")
    func removal() throws {
        var state = try populated()
        var ledger = DiscoveryLedger()
        // What an earlier run left on the broker, read back.
        ledger.readBack(topic: "homeassistant/sensor/beaconbridge/gateway_gone_status/config", payload: "{}")
        let first = ledger.reconcile(HomeAssistantDiscovery.configs(for: state, version: "test"))
        #expect(first.count == 15 + 1)
        #expect(first.contains { $0.topic.contains("gateway_gone") && $0.payload.isEmpty })
        #expect(ledger.reconcile(HomeAssistantDiscovery.configs(for: state, version: "test")).isEmpty, "nothing twice")

        state.receive("stores/100/roster", bytes: roster(100, [customer("b.ob", "Bob", minor: 2, since: 5)]))
        let left = ledger.reconcile(HomeAssistantDiscovery.configs(for: state, version: "test"))
        #expect(left.map(\.topic) == ["homeassistant/device_tracker/beaconbridge/customer_100_ana/config"])
        #expect(left.first?.payload == "")

        var off = state
        off.receive("fleet/config", """
        {"gateways": [{"id": "door", "store": 100, "position": {"x": 2, "y": 5}}], "stores": [{"major": 100}],
         "homeAssistant": {"discovery": false}}
        """)
        #expect(off.config.homeAssistant.discovery == false)
        #expect(HomeAssistantDiscovery.configs(for: off, version: "test").isEmpty)
        let removed = ledger.reconcile([:])
        #expect(removed.count == 14 && removed.allSatisfy { $0.payload.isEmpty })
        #expect(ledger.onBroker.isEmpty)
    }
}

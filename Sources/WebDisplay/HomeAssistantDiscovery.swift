import BeaconKit
import Contract
public import Config

/// Home Assistant MQTT discovery for a fleet (single-component discovery,
/// `<prefix>/<component>/beaconbridge/<object_id>/config`, retained), in the schema Home
/// Assistant 2024 reads:
///
/// - every gateway a device with a connectivity `binary_sensor` on its status and two
///   diagnostic sensors (adverts a second, tracked beacons) read from its health, which
///   expire when three health intervals pass without one;
/// - every registry beacon (iBeacon, AltBeacon or Eddystone-UID), and every customer
///   present, a device whose `device_tracker` (named by its device: `name: null`) has the
///   zone's place name as its state and the brain's fleet presence as its attributes;
/// - every registry Eddystone beacon also battery (mV) and temperature sensors on the
///   telemetry its gateways publish.
///
/// A tracker's state is not the presence payload: Home Assistant's MQTT device tracker
/// takes the raw payload as the location whenever the template's result is not
/// `home`/`not_home`, and a state may hold at most 255 characters, while a presence is
/// 250–600 bytes. So `beacon-web` also publishes, retained, each tracker's state alone —
/// the zone's name, `not_home` while absent — on `<prefix>/device_tracker/beaconbridge/
/// <object_id>/state`: a few bytes, sent only when the zone changes.
///
/// Customers are personal data: their entities exist while they are present and are
/// removed (empty retained config and state) when they leave, like their profiles.
public enum HomeAssistantDiscovery {
    /// The discovery node id: every message of ours sits under `<prefix>/<component>/beaconbridge/`.
    public static let node = "beaconbridge"

    /// The filters that find every config and tracker state published before (to remove
    /// stale ones); the display's ACL grants exactly these (`AccessPolicy`).
    public static func filters(_ config: HomeAssistantConfig) -> [String] {
        [config.discoveryPrefix + "/+/" + node + "/+/config", stateTopic(config, tracker: "+")]
    }

    /// A tracker's state topic: where `beacon-web` publishes the zone's name.
    public static func stateTopic(_ config: HomeAssistantConfig, tracker objectID: String) -> String {
        config.discoveryPrefix + "/device_tracker/" + node + "/" + objectID + "/state"
    }

    /// Every retained message (discovery configs and trackers' states) the state calls
    /// for, by topic; empty when discovery is off.
    public static func messages(for state: FleetState, version: String) -> [String: String] {
        let ha = state.config.homeAssistant
        guard ha.discovery else { return [:] }
        let topics = state.topics
        var out: [String: String] = [:]
        func add(_ component: String, _ objectID: String, _ body: (inout JSONWriter.ObjectWriter) -> Void) {
            var writer = JSONWriter(capacity: 768)
            writer.object { o in
                o("unique_id", "beaconbridge_" + objectID)
                body(&o)
                o("origin", .object(["name": .string("BeaconBridge beacon-web"), "sw_version": .string(version)]))
            }
            out[ha.discoveryPrefix + "/" + component + "/" + node + "/" + objectID + "/config"] = writer.text
        }
        func makeDevice(_ objectID: String, name: String, model: String) -> JSONValue {
            .object(["identifiers": .array([.string("beaconbridge_" + objectID)]), "name": .string(name),
                     "manufacturer": .string("BeaconBridge"), "model": .string(model)])
        }
        /// A device tracker named by its device, in the zone `zoneName` (`nil`: not present).
        func tracker(_ objectID: String, device: JSONValue, presence: String, zoneName: String?, icon: String?) {
            let state = stateTopic(ha, tracker: objectID)
            add("device_tracker", objectID) { o in
                o("name", .null)
                o("state_topic", state)
                o("json_attributes_topic", presence)
                // A deleted presence (empty payload) clears the attributes rather than being
                // reported as malformed JSON.
                o("json_attributes_template", "{{ value if value else '{}' }}")
                o("source_type", "bluetooth_le")
                if let icon { o("icon", icon) }
                o("device", device)
            }
            // A zone name is at most 128 characters (what `FleetPresenceReport` reads), well
            // under Home Assistant's 255.
            out[state] = zoneName ?? "not_home"
        }

        for id in state.gatewayIDs {
            let gateway = state.config.gateway(id: id)
            let object = "gateway_" + sanitize(id)
            let device = makeDevice(object, name: "Gateway " + (gateway?.zone.map { "\(id) (\($0))" } ?? id),
                                model: "beacon-gateway")
            let status = topics.status(ofGateway: id)
            let health = topics.health(ofGateway: id)
            // Three health reports missed: the figures are no longer current (30 s: a gateway
            // heard but not in the config sends health at the default interval).
            let expiry = Int(((gateway?.healthInterval ?? 30) * 3).rounded(.up))
            add("binary_sensor", object + "_connectivity") { o in
                o("name", "Connectivity")
                o("state_topic", status)
                o("payload_on", "online")
                o("payload_off", "offline")
                o("device_class", "connectivity")
                o("entity_category", "diagnostic")
                o("device", device)
            }
            for (key, name, unit, icon) in [("advertsPerSecond", "Adverts per second", "adverts/s", "mdi:bluetooth-audio"),
                                            ("tracked", "Tracked beacons", "beacons", "mdi:tag-multiple")] {
                add("sensor", object + (key == "tracked" ? "_tracked" : "_adverts")) { o in
                    o("name", name)
                    o("state_topic", health)
                    o("value_template", "{{ value_json." + key + " }}")
                    o("unit_of_measurement", unit)
                    o("state_class", "measurement")
                    o("icon", icon)
                    o("entity_category", "diagnostic")
                    o("expire_after", expiry)
                    o("availability_topic", status)
                    o("device", device)
                }
            }
        }

        for entry in state.config.beacons {
            switch entry.id {
            case .ibeacon(_, let major, let minor)?:
                let ref = BeaconRef(major: major, minor: minor)
                let object = "beacon_\(major)_\(minor)"
                tracker(object, device: makeDevice(object, name: entry.name ?? "Beacon \(ref)", model: "iBeacon \(ref)"),
                        presence: topics.presence(of: ref), zoneName: state.presence[ref]?.zoneName, icon: nil)
            case .eddystone(let namespace, let instance)?:
                let ref = BeaconRef(namespace: namespace, instance: instance)
                let object = "eddystone_\(namespace)_\(instance)"
                let device = makeDevice(object, name: entry.name ?? "Eddystone \(namespace) \(instance)",
                                    model: "Eddystone \(namespace)/\(instance)")
                tracker(object, device: device, presence: topics.presence(of: ref), zoneName: state.presence[ref]?.zoneName,
                        icon: nil)
                let telemetry = topics.telemetry(of: ref)
                for (key, name, deviceClass, unit) in [("batteryMv", "Battery", "voltage", "mV"),
                                                      ("temperatureC", "Temperature", "temperature", "°C")] {
                    add("sensor", object + (key == "batteryMv" ? "_battery" : "_temperature")) { o in
                        o("name", name)
                        o("state_topic", telemetry)
                        // TLM says "not known" as null: Home Assistant's "None" makes the state unknown.
                        o("value_template", "{{ value_json." + key + " if value_json." + key + " is not none else 'None' }}")
                        o("device_class", deviceClass)
                        o("unit_of_measurement", unit)
                        o("state_class", "measurement")
                        o("entity_category", "diagnostic")
                        o("device", device)
                    }
                }
            case nil: continue
            }
        }

        for store in state.knownStores {
            for customer in state.customers.customers(inStore: store) {
                let object = "customer_\(store)_" + sanitize(customer.client)
                tracker(object, device: makeDevice(object, name: customer.name ?? customer.client, model: "customer"),
                        presence: topics.presence(of: customer.beacon),
                        zoneName: state.presence[customer.beacon]?.zoneName, icon: "mdi:account")
            }
        }
        return out
    }

    /// An id as an object id: Home Assistant allows `[a-zA-Z0-9_-]`; anything else
    /// becomes `_` followed by its hexadecimal code, so distinct ids stay distinct.
    public static func sanitize(_ id: String) -> String {
        var out = ""
        for scalar in id.unicodeScalars {
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", "-": out.unicodeScalars.append(scalar)
            default: out += "_" + String(scalar.value, radix: 16)
            }
        }
        return out
    }
}

/// What discovery messages are on the broker, and what to publish to make them the wanted
/// ones: new or changed configs and states, and an empty retained payload for each one no
/// longer wanted (Home Assistant then removes the entity). Fed with the retained messages
/// read back at start, so a restarted `beacon-web` also removes what an earlier run published.
public struct DiscoveryLedger: Sendable, Equatable {
    /// Topic → payload, as last published (or read back).
    public private(set) var onBroker: [String: String] = [:]

    public init() {}

    /// A retained message read back from the broker (empty payload: none there).
    public mutating func readBack(topic: String, payload: String) {
        onBroker[topic] = payload.isEmpty ? nil : payload
    }

    /// The messages (topic, payload; all retained, QoS 1) that make the broker hold `wanted`.
    /// Removals come first, a config before its state (so Home Assistant drops the entity
    /// before its state goes).
    public mutating func reconcile(_ wanted: [String: String]) -> [(topic: String, payload: String)] {
        var out: [(topic: String, payload: String)] = []
        for topic in onBroker.keys.sorted() where wanted[topic] == nil {
            out.append((topic, ""))
        }
        for (topic, payload) in wanted.sorted(by: { $0.key < $1.key }) where onBroker[topic] != payload {
            out.append((topic, payload))
        }
        onBroker = wanted
        return out
    }
}

import BeaconKit
import BrainCore
public import Config

/// Home Assistant MQTT discovery for a fleet (single-component discovery,
/// `<prefix>/<component>/beaconbridge/<object_id>/config`, retained): every gateway a
/// device with sensors for its status, adverts a second and tracked beacons; every
/// registry beacon, and every customer present, a `device_tracker` whose state is the
/// zone's place name. Entities read the topics the fleet already publishes (state topics
/// with value templates), so discovery is configuration only: nothing new is published
/// per sighting.
///
/// Customers are personal data: their entities exist while they are present and are
/// removed (empty retained config) when they leave, like their profiles.
public enum HomeAssistantDiscovery {
    /// The discovery node id: every config of ours sits under `<prefix>/+/beaconbridge/+/config`.
    public static let node = "beaconbridge"

    /// The filter that finds every discovery config published before (to remove stale ones).
    public static func filter(_ config: HomeAssistantConfig) -> String {
        config.discoveryPrefix + "/+/" + node + "/+/config"
    }

    /// Every discovery config the state calls for, by topic; empty when discovery is off.
    public static func configs(for state: FleetState, version: String) -> [String: String] {
        let ha = state.config.homeAssistant
        guard ha.discovery else { return [:] }
        let topics = state.topics
        var out: [String: String] = [:]
        func add(_ component: String, _ objectID: String, _ body: (inout JSONWriter.ObjectWriter) -> Void) {
            var writer = JSONWriter(capacity: 512)
            writer.object { o in
                body(&o)
                o("origin", .object(["name": .string("BeaconBridge beacon-web"), "sw_version": .string(version)]))
            }
            out[ha.discoveryPrefix + "/" + component + "/" + node + "/" + objectID + "/config"] = writer.text
        }

        for id in state.gatewayIDs {
            let gateway = state.config.gateway(id: id)
            let object = "gateway_" + sanitize(id)
            let device: JSONValue = .object([
                "identifiers": .array([.string("beaconbridge_" + object)]),
                "name": .string("Gateway " + (gateway?.zone.map { "\(id) (\($0))" } ?? id)),
                "manufacturer": .string("BeaconBridge"),
                "model": .string("beacon-gateway"),
            ])
            let status = topics.status(ofGateway: id)
            let health = topics.health(ofGateway: id)
            add("sensor", object + "_status") { o in
                o("name", "Status")
                o("unique_id", "beaconbridge_" + object + "_status")
                o("state_topic", status)
                o("icon", "mdi:access-point-network")
                o("device", device)
            }
            add("sensor", object + "_adverts") { o in
                o("name", "Adverts per second")
                o("unique_id", "beaconbridge_" + object + "_adverts")
                o("state_topic", health)
                o("value_template", "{{ value_json.advertsPerSecond }}")
                o("unit_of_measurement", "adverts/s")
                o("state_class", "measurement")
                o("availability_topic", status)
                o("device", device)
            }
            add("sensor", object + "_tracked") { o in
                o("name", "Tracked beacons")
                o("unique_id", "beaconbridge_" + object + "_tracked")
                o("state_topic", health)
                o("value_template", "{{ value_json.tracked }}")
                o("unit_of_measurement", "beacons")
                o("state_class", "measurement")
                o("availability_topic", status)
                o("device", device)
            }
        }

        // The zone's place name while present, Home Assistant's not_home while not.
        let zoneTemplate = "{{ value_json.zoneName if value else 'not_home' }}"
        for entry in state.config.beacons {
            guard let major = entry.id?.major, let minor = entry.id?.minor else { continue }
            let ref = BeaconRef(major: major, minor: minor)
            let object = "beacon_\(major)_\(minor)"
            add("device_tracker", object) { o in
                o("name", entry.name ?? "Beacon \(ref)")
                o("unique_id", "beaconbridge_" + object)
                o("state_topic", topics.presence(of: ref))
                o("value_template", zoneTemplate)
                o("source_type", "bluetooth_le")
                o("device", .object([
                    "identifiers": .array([.string("beaconbridge_" + object)]),
                    "name": .string(entry.name ?? "Beacon \(ref)"),
                    "manufacturer": .string("BeaconBridge"),
                    "model": .string("iBeacon \(ref)"),
                ]))
            }
        }

        for store in state.knownStores {
            for customer in state.customers.customers(inStore: store) {
                let object = "customer_\(store)_" + sanitize(customer.client)
                add("device_tracker", object) { o in
                    o("name", customer.name ?? customer.client)
                    o("unique_id", "beaconbridge_" + object)
                    o("state_topic", topics.presence(of: customer.beacon))
                    o("value_template", zoneTemplate)
                    o("source_type", "bluetooth_le")
                    o("icon", "mdi:account")
                }
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

/// What discovery configs are on the broker, and what to publish to make them the wanted
/// ones: new or changed configs, and an empty retained payload for each one no longer
/// wanted (Home Assistant then removes the entity). Fed with the retained configs read
/// back at start, so a restarted `beacon-web` also removes what an earlier run published.
public struct DiscoveryLedger: Sendable, Equatable {
    /// Topic → payload, as last published (or read back).
    public private(set) var onBroker: [String: String] = [:]

    public init() {}

    /// A retained config read back from the broker (empty payload: none there).
    public mutating func readBack(topic: String, payload: String) {
        onBroker[topic] = payload.isEmpty ? nil : payload
    }

    /// The messages (topic, payload; all retained, QoS 1) that make the broker hold `wanted`.
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

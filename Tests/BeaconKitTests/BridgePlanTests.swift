import BeaconKit
import Contract
import Foundation
import Testing
import Config

@Suite("Bridged fleets: config and bridge plan")
struct BridgePlanTests {
    /// A chain of two stores with brokers of their own and a central broker.
    static let chain = #"""
    {
      "broker": { "url": "mqtts://central.chain.example:8883", "tls": { "caFile": "/etc/beaconbridge/ca.pem" } },
      "bridge": { "keepalive": 15, "queueLimit": 50000 },
      "gateways": [
        { "id": "door-12", "store": 12 }, { "id": "till-12", "store": 12 },
        { "id": "door-13", "store": 13 }, { "id": "lab" }
      ],
      "stores": [
        { "major": 12, "name": "Rue de Rivoli", "broker": { "url": "mqtt://localhost:1883" },
          "bridge": { "username": "store-12", "passwordFile": "/etc/beaconbridge/bridge.password" } },
        { "major": 13, "broker": { "url": "mqtt://10.13.0.2", "allowPlaintext": true },
          "bridge": { "clientId": "rivoli-13", "certFile": "/etc/b/13.pem", "keyFile": "/etc/b/13.key" } },
        { "major": 14 }
      ],
      "beacons": [ { "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 500, "minor": 1, "store": 12 } ],
      "rules": [
        { "name": "barista", "when": "enter", "stores": [12],
          "then": [ { "do": "publish", "topic": "displays/{store}/barista", "text": "{name}" } ] },
        { "name": "alerts", "when": "exit",
          "then": [ { "do": "publish", "topic": "alerts/{zone}/x{minor}", "text": "{name}" } ] },
        { "name": "elsewhere", "when": "enter", "stores": [13],
          "then": [ { "do": "publish", "topic": "displays/{store}/door", "text": "{name}" } ] }
      ]
    }
    """#

    static func errors(_ json: String) -> [String] {
        do {
            _ = try FleetConfig.parse(json)
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }

    @Test func gatewaysConnectToTheirStoresBroker() throws {
        let config = try FleetConfig.parse(Self.chain)
        #expect(config.broker(forGateway: "door-12").url == BrokerURL(host: "localhost", port: 1883))
        #expect(config.broker(forGateway: "door-13").url == BrokerURL(host: "10.13.0.2"))
        #expect(config.broker(forGateway: "lab").url == config.broker.url, "no store: the fleet's broker")
        #expect(config.bridgedStores.map(\.major) == [12, 13])
        #expect(config.gateways(ofStore: 12).map(\.id) == ["door-12", "till-12"])
        #expect(config.bridgeURL == BrokerURL(tls: true, host: "central.chain.example", port: 8883))
        #expect(config.bridgeTLS?.caFile == "/etc/beaconbridge/ca.pem", "the fleet broker's CA for the same URL")
        #expect(config.bridge.keepalive == 15)
        #expect(config.bridgeClientID(ofStore: 12) == "bridge-12")
        #expect(config.bridgeClientID(ofStore: 13) == "rivoli-13")
    }

    @Test func mistakesInTheTopologyAreReportedWithTheirPath() {
        let errors = Self.errors(#"""
        { "broker": { "url": "mqtt://central:1883", "allowPlaintext": true },
          "bridge": { "url": "mqtt://user@central", "allowPlaintext": true, "tls": { "insecure": true }, "kepalive": 3 },
          "gateways": [ { "id": "a", "store": 99 } ],
          "stores": [ { "major": 1, "broker": { "username": "x" } },
                      { "major": 2, "broker": { "url": "mqtt://central:1883", "allowPlaintext": true } },
                      { "major": 3, "broker": { "url": "mqtt://s3", "allowPlaintext": true }, "bridge": { "clientId": "bridge-4", "passwordFile": "/p" } },
                      { "major": 4, "broker": { "url": "mqtt://s4", "allowPlaintext": true }, "bridge": { "certFile": "/c" } },
                      { "major": 5, "bridge": { "username": "u" } } ] }
        """#)
        #expect(errors.contains("bridge.kepalive: unknown key (did you mean \"keepalive\"?)"))
        #expect(errors.contains { $0.hasPrefix("bridge.url: a bridge's user name goes in stores[].bridge.username") })
        #expect(errors.contains("bridge.tls: needs caFile or caPath to verify the central broker"))
        #expect(errors.contains { $0.hasPrefix("stores[0].broker.url: is required") })
        #expect(errors.contains("stores[2].bridge.passwordFile: a password needs a username"))
        #expect(errors.contains("stores[3].bridge: certFile and keyFile go together (client certificate authentication)"))
        // Checked once the rest is valid.
        #expect(Self.errors(#"""
        { "broker": { "url": "mqtt://central:1883", "allowPlaintext": true },
          "gateways": [ { "id": "a", "store": 99 } ],
          "stores": [ { "major": 2, "broker": { "url": "mqtt://central:1883", "allowPlaintext": true } },
                      { "major": 3, "broker": { "url": "mqtt://s3", "allowPlaintext": true }, "bridge": { "clientId": "bridge-4" } },
                      { "major": 4, "broker": { "url": "mqtt://s4", "allowPlaintext": true } },
                      { "major": 5, "bridge": { "username": "u" } } ] }
        """#) == [
            "gateways[0].store: store 99 is not in stores[] (list it there, with its broker if it has one)",
            "stores[0].broker.url: is the central broker (mqtt://central:1883): a store broker cannot bridge to itself",
            "stores[2].bridge.clientId: \"bridge-4\" is also store 3's bridge: the central broker would drop one for the other",
            "stores[3].bridge: a store without a broker of its own has no bridge",
        ])
    }

    func topics(_ plan: BridgePlan, _ direction: BridgePlan.Direction) -> [String] {
        plan.topics.filter { $0.direction == direction }.map { "\($0.pattern) \($0.qos)" }
    }

    @Test func theStoreSendsWhatItsGatewaysAndAppsPublishAndReceivesTheBrainsOutput() throws {
        let plan = try BridgePlan(config: FleetConfig.parse(Self.chain), store: 12)
        #expect(topics(plan, .out) == [
            "beacons/+/+ 0", "beacons/+/+/presence/door-12 1", "beacons/+/+/presence/till-12 1",
            "eddystone/+/+ 0", "eddystone/+/+/presence/door-12 1", "eddystone/+/+/presence/till-12 1",
            "eddystone/+/+/telemetry 1",
            "observers/+/status 1",
            "gateways/door-12/health 0", "gateways/till-12/health 0",
            "gateways/door-12/rssi 0", "gateways/till-12/rssi 0",
            "gateways/door-12/events 1", "gateways/till-12/events 1",
            "gateways/door-12/status 1", "gateways/till-12/status 1",
        ])
        #expect(topics(plan, .both) == ["beacons/12/+/observers/+ 1", "beacons/500/+/observers/+ 1"],
                "joins of the store's beacons, also those of a registry beacon assigned to it")
        #expect(topics(plan, .in) == [
            "beacons/12/+/presence 1", "beacons/12/+/ad 1", "beacons/500/+/presence 1", "beacons/500/+/ad 1",
            "stores/12/roster 1", "stores/12/customers/+ 1", "observers/+/inbox 1", "fleet/config 1",
            "gateways/door-12/cmd 1", "gateways/till-12/cmd 1",
            "displays/12/barista 1", "alerts/+/+ 1",
        ], "store 13's rule does not concern store 12")
        #expect(plan.topics.last?.pattern == "gateways/till-12/status", "statuses last: they mark the end of a replay")
        #expect(plan.notificationTopic == "stores/12/bridge")
    }

    @Test func theMosquittoConfigurationSaysWhatTheDesignNeeds() throws {
        let config = try FleetConfig.parse(Self.chain)
        let text = try BridgePlan(config: config, store: 12).mosquittoConfiguration(password: "s3cret")
        let lines = Set(text.split(separator: "\n").map(String.init))
        for expected in [
            "max_queued_messages 50000", "connection bridge-12", "address central.chain.example:8883",
            "remote_clientid bridge-12", "local_clientid bridge-12-local", "local_username bridge",
            "bridge_protocol_version mqttv311", "try_private true", "cleansession false", "local_cleansession false",
            "keepalive_interval 15", "restart_timeout 1 3", "notifications true", "notifications_local_only false",
            "notification_topic stores/12/bridge", "bridge_attempt_unsubscribe true", "remote_username store-12",
            "remote_password s3cret", "bridge_cafile /etc/beaconbridge/ca.pem", "bridge_insecure false",
            "bridge_tls_version tlsv1.2", "topic beacons/+/+ out 0", "topic beacons/12/+/observers/+ both 1",
            "topic stores/12/roster in 1",
        ] {
            #expect(lines.contains(expected), "\(expected)")
        }
        #expect(!text.split(separator: "\n").contains { $0.hasPrefix("topic") && $0.contains("#") },
                "Mosquitto has no end-of-line comments")
        let store13 = try BridgePlan(config: config, store: 13).mosquittoConfiguration(password: nil)
        #expect(store13.contains("bridge_certfile /etc/b/13.pem\nbridge_keyfile /etc/b/13.key\n"))
        #expect(!store13.contains("remote_password"))
        #expect(store13.contains("connection rivoli-13\n"))
    }

    @Test func aclLinesGiveTheBridgeExactlyItsTopics() throws {
        let plan = try BridgePlan(config: FleetConfig.parse(Self.chain), store: 12)
        let central = plan.centralACL.split(separator: "\n").map(String.init)
        #expect(central.contains("user store-12"))
        #expect(central.contains("topic write beacons/+/+/presence/door-12"))
        #expect(central.contains("topic read stores/12/roster"))
        #expect(central.contains("topic readwrite beacons/12/+/observers/+"))
        #expect(central.contains("topic write stores/12/bridge"))
        let store = plan.storeACL.split(separator: "\n").map(String.init)
        #expect(store.contains("user bridge"))
        #expect(store.contains("topic read beacons/+/+/presence/door-12"))
        #expect(store.contains("topic write stores/12/roster"))
    }

    @Test func aStoreWithoutItsOwnBrokerHasNothingToBridge() throws {
        let config = try FleetConfig.parse(Self.chain)
        #expect(throws: BridgePlan.PlanError.self) { try BridgePlan(config: config, store: 14) }
        #expect(throws: BridgePlan.PlanError.self) { try BridgePlan(config: config, store: 99) }
    }

    @Test func thePrefixAppliesToEveryTopic() throws {
        let text = Self.chain.replacingOccurrences(of: #""bridge": { "keepalive""#,
                                                  with: #""topicPrefix": "acme", "bridge": { "keepalive""#)
        let plan = try BridgePlan(config: FleetConfig.parse(text), store: 12)
        #expect(plan.topics.allSatisfy { $0.pattern.hasPrefix("acme/") })
        #expect(plan.notificationTopic == "acme/stores/12/bridge")
        #expect(Topics(prefix: "acme").parse("acme/stores/12/bridge") == .bridgeStatus(12))
    }
}

import BeaconKit
import Foundation
import Testing
import Config

/// A fleet whose centre is a NATS cluster (`centre`): the config, what `config check`
/// refuses, the bridges' addresses, and the ACL as NATS permissions (docs/fleet.md).
@Suite("NATS centre: config, subjects and permissions")
struct NATSCentreTests {
    static let chain = #"""
    {
      "broker": { "url": "mqtts://n1.chain:8883,n2.chain:8883,n3.chain:8883", "tls": { "caFile": "/etc/beaconbridge/ca.crt" } },
      "centre": { "kind": "nats", "storeDir": "/srv/nats",
                  "nodes": [ { "name": "n1", "host": "n1.chain" }, { "name": "n2", "host": "n2.chain" },
                             { "name": "n3", "host": "n3.chain", "mqttPort": 8884 } ] },
      "gateways": [ { "id": "door-12", "store": 12, "zone": "Entrance" } ],
      "stores": [ { "major": 12, "broker": { "url": "mqtt://localhost:1883" },
                    "bridge": { "username": "store-12", "passwordFile": "/etc/beaconbridge/bridge.password" } } ],
      "beacons": [ { "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 12, "minor": 1, "owner": "ana" } ],
      "rules": [ { "name": "barista", "when": "enter", "then": [ { "do": "publish", "topic": "displays/{store}/{zone}", "text": "{name}" } ] } ]
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

    @Test func theBridgesListEveryNodeAndDoWithoutMosquittosBridgeFlag() throws {
        let config = try FleetConfig.parse(Self.chain)
        #expect(config.centre.kind == .nats)
        #expect(config.bridgeURL.description == "mqtts://n1.chain:8883,n2.chain:8883,n3.chain:8884")
        let text = try BridgePlan(config: config, store: 12).mosquittoConfiguration(password: "secret")
        #expect(text.contains("\naddress n1.chain:8883 n2.chain:8883 n3.chain:8884\n"))
        #expect(text.contains("\nround_robin true\n"))
        #expect(text.contains("\ntry_private false\n"), "nats-server refuses the bridge flag")
        #expect(!text.contains("try_private true"))
        #expect(text.contains("\nbridge_protocol_version mqttv311\n"))
        #expect(text.contains("\nbridge_cafile /etc/beaconbridge/ca.crt\n"))
    }

    /// A NATS centre makes a replicated JetStream consumer of every QoS 1 subscription (issue 22
    /// item 4): its bridges subscribe at QoS 1 only to what must not be lost while they are
    /// away (joins, the apps' inboxes, the rules' publishes) and take the retained state and
    /// the gateways' commands at QoS 0; what goes out is as at a Mosquitto centre, and both
    /// sides keep their sessions (QoS 1 for the store is queued at the centre meanwhile).
    @Test func aBridgeToTheClusterSubscribesAtQoS1OnlyToWhatMustNotBeLost() throws {
        let nats = try FleetConfig.parse(Self.chain)
        var mosquitto = nats
        mosquitto.centre = CentreConfig()
        let toCluster = try BridgePlan(config: nats, store: 12), toMosquitto = try BridgePlan(config: mosquitto, store: 12)
        func subscribed(_ plan: BridgePlan, qos: Int) -> [String] {
            plan.topics.filter { $0.direction != .out && $0.qos == qos }.map(\.pattern)
        }
        #expect(subscribed(toCluster, qos: 1) == ["beacons/12/+/observers/+", "observers/+/inbox", "displays/12/+"])
        #expect(subscribed(toCluster, qos: 0) == ["beacons/12/+/presence", "beacons/12/+/ad", "stores/12/roster",
                                                  "stores/12/customers/+", "fleet/config", "gateways/door-12/cmd"])
        #expect(subscribed(toMosquitto, qos: 0).isEmpty, "a Mosquitto centre queues everything for the store")
        #expect(subscribed(toMosquitto, qos: 1).count == 9)
        #expect(toCluster.topics.filter { $0.direction == .out }.map { "\($0.pattern) \($0.qos)" }
                == toMosquitto.topics.filter { $0.direction == .out }.map { "\($0.pattern) \($0.qos)" })
        let text = toCluster.mosquittoConfiguration(password: nil)
        #expect(text.contains("\ncleansession false\n") && text.contains("\nlocal_cleansession false\n"))
        #expect(text.contains("\ntopic fleet/config in 0\n") && text.contains("\ntopic observers/+/inbox in 1\n"))
        #expect(text.contains("a deletion made while the bridge is away is missed"), "the generated file says what QoS 0 costs")
    }

    /// No node carries every bridge: the i-th bridged store lists node i mod 3 first, and the
    /// others after it in the cluster's order; a store without a broker of its own counts not.
    @Test func eachBridgedStoreListsTheNextNodeFirst() throws {
        var config = try FleetConfig.parse(Self.chain)
        let own = config.stores[0]
        config.stores = [own] + ([13, 14, 15, 16] as [UInt16]).map { major in
            var store = own
            store.major = major
            return store
        }
        config.stores.insert(StoreEntry(major: 99), at: 2)
        let addresses = try ([12, 13, 14, 15, 16] as [UInt16]).map { major in
            try BridgePlan(config: config, store: major).mosquittoConfiguration(password: nil)
                .split(separator: "\n").first { $0.hasPrefix("address ") }.map(String.init)
        }
        #expect(addresses == ["address n1.chain:8883 n2.chain:8883 n3.chain:8884",
                              "address n2.chain:8883 n3.chain:8884 n1.chain:8883",
                              "address n3.chain:8884 n1.chain:8883 n2.chain:8883",
                              "address n1.chain:8883 n2.chain:8883 n3.chain:8884",
                              "address n2.chain:8883 n3.chain:8884 n1.chain:8883"])
        #expect(config.bridgeURL(ofStore: 14).tls && config.bridgeURL(ofStore: 14).endpoints.count == 3)
        // An explicit bridge.url is the operator's order, the same for every store.
        config.bridge.url = try BrokerURL(parsing: "mqtts://n3.chain:8884,n1.chain:8883")
        #expect(config.bridgeURL(ofStore: 13) == config.bridge.url)
    }

    @Test func configCheckRefusesWhatTheClusterCannotCarry() {
        let errors = Self.errors(#"""
        { "broker": { "url": "mqtt://localhost", "mqttVersion": "5" },
          "topicPrefix": "acme.eu",
          "centre": { "kind": "nats", "nodes": [ { "name": "n1", "host": "a" }, { "name": "n1", "host": "b" } ] },
          "gateways": [ { "id": "door.12", "zone": "Front door" }, { "id": "till", "zone": "Till 2.0" } ],
          "beacons": [ { "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 1, "name": "Ana B.", "owner": "ana.b" } ],
          "rules": [ { "name": "r", "when": "enter", "then": [ { "do": "publish", "topic": "displays/{zone}/{distance}", "text": "x" },
                                                          { "do": "publish", "topic": "shelf/{name}", "text": "x" } ] } ] }
        """#)
        #expect(errors.contains { $0.hasPrefix("centre.nodes: a NATS centre needs at least 3 nodes") }, "\(errors)")
        #expect(errors.contains("centre.nodes[1].name: \"n1\" names another node too"))
        #expect(errors.contains { $0.hasPrefix("broker.mqttVersion: a NATS centre speaks MQTT 3.1.1 only") })
        #expect(errors.contains("topicPrefix: \"acme.eu\" contains '.', which a NATS server refuses in an MQTT topic (centre.kind is \"nats\")"))
        #expect(errors.contains("gateways[0].id: \"door.12\" contains '.', which a NATS server refuses in an MQTT topic (centre.kind is \"nats\")"))
        #expect(errors.contains("beacons[0].owner: \"ana.b\" contains '.', which a NATS server refuses in an MQTT topic (centre.kind is \"nats\")"))
        #expect(errors.contains { $0.hasPrefix("rules[0].then[0].topic: {distance} in a topic: a distance is written with a '.'") })
        #expect(errors.contains("gateways[0].zone: \"Front door\" (in rules[0].then[0].topic as {zone}) contains a space, which a NATS "
                                + "server refuses in an MQTT topic (centre.kind is \"nats\")"))
        #expect(errors.contains { $0.hasPrefix("gateways[1].zone: \"Till 2.0\" (in rules[0].then[0].topic as {zone}) contains") })
        #expect(errors.contains { $0.hasPrefix("beacons[0].name: \"Ana B.\" (in rules[0].then[1].topic as {name}) contains") })

        // The same names are fine on Mosquitto; nodes without "nats" are a mistake.
        #expect(Self.errors(#"{"topicPrefix": "acme.eu", "gateways": [{"id": "door.12"}]}"#).isEmpty)
        #expect(Self.errors(#"{"centre": {"nodes": [{"name": "n1", "host": "a"}]}}"#)
                == ["centre.nodes: nodes belong to a cluster: set centre.kind to \"nats\""])
        // Zones reach a topic only through a rule that puts {zone} in one.
        #expect(Self.errors(#"""
        { "centre": { "kind": "nats", "nodes": [ { "name": "n1", "host": "a" }, { "name": "n2", "host": "b" }, { "name": "n3", "host": "c" } ] },
          "gateways": [ { "id": "door", "zone": "Front door" } ] }
        """#).isEmpty)
    }

    @Test(arguments: [
        ("beacons/+/+/presence/door", ["beacons.*.*.presence.door"]),
        ("beacons/#", ["beacons", "beacons.>"]),
        ("#", [">"]),
        ("acme/observers/ana/inbox", ["acme.observers.ana.inbox"]),
        ("a//b", ["a./.b"]),
    ])
    func topicsBecomeSubjectsAsTheServerMapsThem(_ filter: String, _ subjects: [String]) {
        #expect(NATSSubjects.subjects(ofFilter: filter) == subjects)
    }

    @Test func theNodesEnforceTheMosquittoACLAsSubjects() throws {
        let config = try FleetConfig.parse(Self.chain)
        let policy = AccessPolicy(config: config)
        let grants = ACLGrants(aclText: policy.text + "\nuser carla\ntopic read beacons/+/+/ad\n")
        #expect(grants.users.contains("door-12") && grants.users.contains("carla"))
        let door = grants.grants(of: "door-12")
        #expect(door.write.contains("gateways/door-12/status"))
        #expect(!door.write.contains("gateways/+/status"))
        #expect(door.read.contains("gateways/door-12/cmd") && door.read.contains("observers/door-12/inbox"))
        #expect(!door.read.contains { $0.hasPrefix("gateways/+") || $0 == "beacons/#" })
        // The patterns (`%u`) apply to every user, as themselves.
        let ana = grants.grants(of: "ana")
        #expect(ana.write.contains("beacons/+/+/observers/ana") && ana.read.contains("observers/ana/inbox"))
        #expect(grants.grants(of: "carla").read.contains("beacons/+/+/ad"))

        let node = NATSNodeConfig(centre: config.centre, node: config.centre.nodes[2],
                                  users: [NATSNodeConfig.User(name: "ana", password: "pw\"1", grants: ana)],
                                  tls: (certFile: "/etc/nats/b.crt", keyFile: "/etc/nats/b.key", caFile: "/etc/nats/ca.crt"))
        let text = node.text
        #expect(text.contains("server_name: n3\n"))
        #expect(text.contains("store_dir: \"/srv/nats/n3\""))
        #expect(text.contains("\"nats-route://n1.chain:6222\"") && text.contains("\"nats-route://n3.chain:6222\""))
        #expect(text.contains("listen: \"0.0.0.0:8884\""))
        #expect(text.contains("cert_file: \"/etc/nats/b.crt\""))
        #expect(text.contains("password: \"pw\\\"1\""))
        #expect(text.contains("\"beacons.*.*.observers.ana\""))
        #expect(text.contains("subscribe: { allow: [\"beacons.*.*.ad\", \"eddystone.*.*.ad\", \"observers.ana.inbox\", \"$MQTT.sub.>\"] }"),
                "\(text)")
    }
}

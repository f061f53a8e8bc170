public import BeaconKit

/// The fleet config's `centre`: what the central broker is. One Mosquitto (the default), or
/// a NATS cluster speaking MQTT whose nodes `beaconctl provision` configures and the stores'
/// bridges fail over between (docs/fleet.md, "The centre as a NATS cluster").
public struct CentreConfig: Sendable, Equatable {
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        case mosquitto, nats
    }

    public var kind: Kind
    /// The cluster's name (NATS `cluster.name`): every node must carry the same one.
    public var cluster: String
    /// Where each node keeps JetStream's files (retained messages, sessions): a node's own
    /// directory `<storeDir>/<node name>`, so nodes sharing a host never share files.
    public var storeDir: String
    /// The nodes; at least three for `nats` (a JetStream cluster keeps going without one of
    /// three, not without one of two).
    public var nodes: [ClusterNode]

    public init(kind: Kind = .mosquitto, cluster: String = "beaconbridge", storeDir: String = "/var/lib/nats",
                nodes: [ClusterNode] = []) {
        self.kind = kind
        self.cluster = cluster
        self.storeDir = storeDir
        self.nodes = nodes
    }

    /// The nodes' MQTT listeners, as one several-host URL (`mqtts://n1:8883,n2:8883,…`).
    public func mqttURL(tls: Bool) -> BrokerURL? {
        guard !nodes.isEmpty else { return nil }
        return BrokerURL(tls: tls, endpoints: nodes.map { BrokerURL.Endpoint(host: $0.host, port: $0.mqttPort) })
    }
}

/// One node of a NATS centre (`centre.nodes[]`).
public struct ClusterNode: Sendable, Equatable {
    /// Its `server_name`: letters, digits, `-` and `_`; unique in the cluster.
    public var name: String
    /// How the other nodes, the stores' bridges and the central parts reach it.
    public var host: String
    /// The address it listens on; every interface when `nil`.
    public var bind: String?
    /// The MQTT listener (TLS when the fleet's broker URL is `mqtts://`).
    public var mqttPort: UInt16
    /// The cluster's routes between nodes.
    public var clusterPort: UInt16
    /// NATS's own client port (the `nats` tool; no BeaconBridge part uses it).
    public var clientPort: UInt16

    public init(name: String, host: String, bind: String? = nil, mqttPort: UInt16 = 8883, clusterPort: UInt16 = 6222,
                clientPort: UInt16 = 4222) {
        self.name = name
        self.host = host
        self.bind = bind
        self.mqttPort = mqttPort
        self.clusterPort = clusterPort
        self.clientPort = clientPort
    }
}

extension FleetConfig {
    static let centreKeys = ["kind", "cluster", "storeDir", "nodes"]
    static let nodeKeys = ["name", "host", "bind", "mqttPort", "clusterPort", "clientPort"]

    /// The least number of nodes of a NATS centre.
    public static let minimumClusterNodes = 3

    static func parseCentre(_ value: JSONValue?, _ r: inout ConfigReader) -> CentreConfig {
        var centre = CentreConfig()
        guard let object = r.object(value, at: "centre", keys: centreKeys) else { return centre }
        if let v = r.oneOf(object["kind"], at: "centre.kind", CentreConfig.Kind.allCases.map(\.rawValue)) {
            centre.kind = CentreConfig.Kind(rawValue: v)!
        }
        if let v = r.string(object["cluster"], at: "centre.cluster") {
            if let problem = Self.nameProblem(v) { r.fail("centre.cluster", "\"\(v)\" \(problem)") } else { centre.cluster = v }
        }
        if let v = r.string(object["storeDir"], at: "centre.storeDir") {
            if v.hasPrefix("/") { centre.storeDir = v } else { r.fail("centre.storeDir", "\"\(v)\" is not an absolute path") }
        }
        for (i, item) in (r.array(object["nodes"], at: "centre.nodes") ?? []).enumerated() {
            let path = "centre.nodes[\(i)]"
            guard let o = r.object(item, at: path, keys: nodeKeys) else { continue }
            let name = r.required(o, "name", at: path).flatMap { r.string($0, at: path + ".name") }
            let host = r.required(o, "host", at: path).flatMap { r.string($0, at: path + ".host") }
            guard let name, let host else { continue }
            if let problem = Self.nameProblem(name) { r.fail(path + ".name", "\"\(name)\" \(problem)") }
            var node = ClusterNode(name: name, host: host, bind: r.string(o["bind"], at: path + ".bind"))
            if let v = r.u16(o["mqttPort"], at: path + ".mqttPort") { node.mqttPort = v }
            if let v = r.u16(o["clusterPort"], at: path + ".clusterPort") { node.clusterPort = v }
            if let v = r.u16(o["clientPort"], at: path + ".clientPort") { node.clientPort = v }
            centre.nodes.append(node)
        }
        return centre
    }

    /// A NATS server or cluster name: what its configuration takes unquoted everywhere.
    static func nameProblem(_ name: String) -> String? {
        guard !name.isEmpty else { return "is empty" }
        let allowed = name.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("A"..."Z").contains($0)
            || ("0"..."9").contains($0) || $0 == "-" || $0 == "_" }
        return allowed ? nil : "may hold only letters, digits, '-' and '_'"
    }

    /// Checks of a NATS centre, once everything is parsed: enough distinct nodes, MQTT 3.1.1,
    /// and every topic the fleet uses one the server can carry (`NATSSubjects`).
    static func checkCentre(_ config: FleetConfig, _ r: inout ConfigReader) {
        let centre = config.centre
        guard centre.kind == .nats else {
            if !centre.nodes.isEmpty { r.fail("centre.nodes", "nodes belong to a cluster: set centre.kind to \"nats\"") }
            return
        }
        if centre.nodes.count < minimumClusterNodes {
            r.fail("centre.nodes", "a NATS centre needs at least \(minimumClusterNodes) nodes (JetStream keeps retained "
                   + "messages and sessions only while a majority of its nodes is up): \(centre.nodes.count) given")
        }
        var names: Set<String> = [], listeners: Set<String> = []
        for (i, node) in centre.nodes.enumerated() {
            if !names.insert(node.name).inserted { r.fail("centre.nodes[\(i)].name", "\"\(node.name)\" names another node too") }
            let host = node.bind ?? node.host
            for (key, port) in [("mqttPort", node.mqttPort), ("clusterPort", node.clusterPort), ("clientPort", node.clientPort)]
            where !listeners.insert("\(host):\(port)").inserted {
                r.fail("centre.nodes[\(i)].\(key)", "\(host):\(port) is another listener's address too")
            }
        }
        if config.broker.mqttVersion == .v5 {
            r.fail("broker.mqttVersion", "a NATS centre speaks MQTT 3.1.1 only (no MQTT 5): remove it or say \"3.1.1\"")
        }
        if config.bridge.mqttVersion == .v5 {
            r.fail("bridge.mqttVersion", "a NATS centre speaks MQTT 3.1.1 only (no MQTT 5): remove it or say \"3.1.1\"")
        }
        for problem in NATSSubjects.problems(of: config) { r.fail(problem.path, problem.reason) }
    }
}

import BeaconKit

/// MQTT topics as a NATS server's MQTT listener carries them: as subjects.
///
/// nats-server maps a topic's levels to a subject's tokens (`/` → `.`), a filter's `+` to `*`
/// and `#` to `>`; an empty level becomes `/`. A filter `a/#` also matches `a` itself, so it
/// is two subjects, `a` and `a.>`; the server refuses a subscription to `a/#` unless both are
/// allowed. It refuses outright a topic with `.` or a space (nats-server 2.9: "characters ' '
/// and '.' not supported for MQTT topics", and it closes the publisher's connection), and a
/// level that is `*` or `>` would be a wildcard in the permissions generated from the ACL.
public enum NATSSubjects {
    /// The subjects that stand for an MQTT topic or filter.
    public static func subjects(ofFilter filter: String) -> [String] {
        var tokens = filter.split(separator: "/", omittingEmptySubsequences: false).map { level -> String in
            switch level {
            case "": "/"
            case "+": "*"
            case "#": ">"
            default: String(level)
            }
        }
        guard tokens.last == ">" else { return [tokens.joined(separator: ".")] }
        tokens.removeLast()
        guard !tokens.isEmpty else { return [">"] }
        return [tokens.joined(separator: "."), (tokens + [">"]).joined(separator: ".")]
    }

    /// Why a topic level (a gateway id, a zone, the prefix…) cannot travel through a NATS
    /// server, or `nil`.
    public static func problem(withLevel level: String) -> String? {
        if level.contains(".") { return "contains '.', which a NATS server refuses in an MQTT topic" }
        if level.unicodeScalars.contains(where: { $0 == " " || $0 == "\t" || $0.properties.isWhitespace }) {
            return "contains a space, which a NATS server refuses in an MQTT topic"
        }
        if level == "*" || level == ">" { return "is '\(level)', a wildcard in NATS subjects" }
        return nil
    }

    public struct Problem: Sendable, Equatable {
        public var path: String
        public var reason: String
    }

    /// Every name in `config` that goes into a topic and that a NATS server cannot carry,
    /// with its JSON path: the topic prefix, gateway ids and zones, beacon names and owners,
    /// brain shards, Home Assistant's discovery prefix, and the rules' `publish` topics (their
    /// fixed levels, and the values their variables take).
    public static func problems(of config: FleetConfig) -> [Problem] {
        var problems: [Problem] = []
        func check(_ text: String?, at path: String, what: String = "", levels: Bool = false) {
            guard let text else { return }
            let parts = levels ? text.split(separator: "/").map(String.init) : [text]
            for part in parts {
                if let reason = problem(withLevel: part) {
                    problems.append(Problem(path: path, reason: "\"\(part)\"\(what) \(reason) (centre.kind is \"nats\")"))
                    return
                }
            }
        }
        check(config.topicPrefix, at: "topicPrefix", levels: true)
        check(config.homeAssistant.discoveryPrefix, at: "homeAssistant.discoveryPrefix", levels: true)
        for (i, gateway) in config.gateways.enumerated() {
            check(gateway.id, at: "gateways[\(i)].id")
        }
        for (i, beacon) in config.beacons.enumerated() {
            check(beacon.owner, at: "beacons[\(i)].owner")
        }
        for (i, shard) in config.brain.shards.enumerated() {
            check(shard.name, at: "brain.shards[\(i)].name")
        }
        for (i, rule) in config.rules.enumerated() {
            for (j, action) in rule.actions.enumerated() {
                guard case .publish(let template, _, _, _) = action else { continue }
                let path = "rules[\(i)].then[\(j)].topic"
                for level in template.split(separator: "/", omittingEmptySubsequences: false) {
                    guard level.contains("{") else {
                        check(String(level), at: path)
                        continue
                    }
                    if let variable = runtimeVariables.first(where: { level.contains("{\($0.name)}") }) {
                        problems.append(Problem(path: path, reason: "{\(variable.name)} in a topic: \(variable.why), which a NATS "
                                                + "server refuses in an MQTT topic (centre.kind is \"nats\")"))
                    }
                    if level.contains("{zone}") {
                        for (k, gateway) in config.gateways.enumerated() {
                            check(gateway.zone, at: "gateways[\(k)].zone", what: " (in \(path) as {zone})")
                        }
                    }
                    if level.contains("{name}") {
                        for (k, beacon) in config.beacons.enumerated() {
                            check(beacon.name, at: "beacons[\(k)].name", what: " (in \(path) as {name})")
                        }
                    }
                }
            }
        }
        return problems
    }

    /// Template variables whose values can hold what NATS refuses, known only at run time.
    static let runtimeVariables: [(name: String, why: String)] = [
        ("distance", "a distance is written with a '.'"),
        ("rssi", "an RSSI is written with a '.'"),
        ("customer", "a customer's name comes from the app and may hold a space or a '.'"),
        ("favorite", "a favorite comes from the app and may hold a space or a '.'"),
    ]
}

/// What each user may publish and subscribe to, read from a Mosquitto ACL file's rules: the
/// very text `AccessPolicy` writes (and `broker/local.acl` appends), so that a NATS centre
/// enforces the same policy as a central Mosquitto. `pattern` rules apply to every user with
/// `%u` as the user's name (Mosquitto makes the user name the client id: `%c` is not used).
public struct ACLGrants: Sendable, Equatable {
    /// Filters, per user, in the file's order.
    public struct Grants: Sendable, Equatable {
        public var read: [String] = []
        public var write: [String] = []
    }

    public private(set) var users: [String] = []
    private var byUser: [String: Grants] = [:]
    private var patterns = Grants()

    public init(aclText: String) {
        var current: String?
        for raw in aclText.split(separator: "\n") {
            let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
            let line = raw.drop(while: blank).reversed().drop(while: blank).reversed().map(String.init).joined()
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let words = line.split(separator: " ", maxSplits: 2).map(String.init)
            switch words.first {
            case "user" where words.count >= 2:
                let name = line.dropFirst(5).drop(while: { $0 == " " })
                current = String(name)
                if byUser[String(name)] == nil {
                    users.append(String(name))
                    byUser[String(name)] = Grants()
                }
            case "topic", "pattern":
                // `topic FILTER` (read and write) or `topic ACCESS FILTER`.
                let access: String, filter: String
                if words.count == 3, ["read", "write", "readwrite", "deny"].contains(words[1]) {
                    (access, filter) = (words[1], words[2])
                } else {
                    (access, filter) = ("readwrite", words.dropFirst().joined(separator: " "))
                }
                guard access != "deny" else { continue }
                if words[0] == "pattern" {
                    add(access, filter, to: &patterns)
                } else if let current {
                    add(access, filter, to: &byUser[current, default: Grants()])
                }
            default:
                continue
            }
        }
    }

    private func add(_ access: String, _ filter: String, to grants: inout Grants) {
        if access != "write", !grants.read.contains(filter) { grants.read.append(filter) }
        if access != "read", !grants.write.contains(filter) { grants.write.append(filter) }
    }

    /// What `user` may do: its own rules and the patterns, `%u` replaced by its name.
    public func grants(of user: String) -> Grants {
        var all = byUser[user] ?? Grants()
        for filter in patterns.read { add("read", filter.replacing("%u", with: user), to: &all) }
        for filter in patterns.write { add("write", filter.replacing("%u", with: user), to: &all) }
        return all
    }
}

/// One node's nats-server configuration for a NATS centre (`beaconctl provision`): its name
/// and JetStream store, the routes to every node, the MQTT listener (TLS with the fleet's
/// certificate when the broker URL is `mqtts://`), and every user with the permissions of
/// the fleet's ACL translated to subjects.
public struct NATSNodeConfig: Sendable {
    public struct User: Sendable, Equatable {
        public var name: String
        public var password: String
        public var grants: ACLGrants.Grants

        public init(name: String, password: String, grants: ACLGrants.Grants) {
            self.name = name
            self.password = password
            self.grants = grants
        }
    }

    public var centre: CentreConfig
    public var node: ClusterNode
    public var users: [User]
    /// The MQTT listener's certificate, key and CA (paths on the node), for `mqtts://`.
    public var tls: (certFile: String, keyFile: String, caFile: String)?

    public init(centre: CentreConfig, node: ClusterNode, users: [User],
                tls: (certFile: String, keyFile: String, caFile: String)?) {
        self.centre = centre
        self.node = node
        self.users = users
        self.tls = tls
    }

    /// Subjects every MQTT user subscribes to besides its topics: the server delivers QoS 1
    /// messages to a session through `$MQTT.sub.<id>` (nats-server refuses a QoS 1
    /// subscription of a user not allowed it: "Unable to create subscription for JetStream
    /// consumer").
    public static let mqttDelivery = "$MQTT.sub.>"

    public var text: String {
        let bind = node.bind ?? "0.0.0.0"
        var lines = [
            "# BeaconBridge: node \(node.name) of the centre's NATS cluster \"\(centre.cluster)\", written by",
            "# `beaconctl provision` from the fleet config (centre.kind \"nats\"); provision again after a change.",
            "# Holds the users' passwords: readable by the nats user only. docs/fleet.md explains each part.",
            "server_name: \(node.name)",
            "listen: \"\(bind):\(node.clientPort)\"",
            "",
            "# Retained messages and MQTT sessions live in JetStream, replicated on 3 nodes.",
            "jetstream {",
            "  store_dir: \"\(centre.storeDir)/\(node.name)\"",
            "}",
            "",
            "cluster {",
            "  name: \(centre.cluster)",
            "  listen: \"\(bind):\(node.clusterPort)\"",
            "  routes: [",
        ]
        lines += centre.nodes.map { "    \"nats-route://\(Self.hostText($0.host)):\($0.clusterPort)\"" }
        lines += [
            "  ]",
            "}",
            "",
            "# MQTT 3.1.1 (NATS has no MQTT 5). Clients of every node share sessions and retained messages.",
            "mqtt {",
            "  listen: \"\(bind):\(node.mqttPort)\"",
        ]
        if let tls {
            lines += [
                "  tls {",
                "    cert_file: \"\(tls.certFile)\"",
                "    key_file: \"\(tls.keyFile)\"",
                "    ca_file: \"\(tls.caFile)\"",
                "    timeout: 5",
                "  }",
            ]
        }
        lines += [
            "}",
            "",
            "# The fleet's ACL (beaconbridge.acl) as subjects: MQTT a/b/c is a.b.c, + is *, # is >.",
            "authorization {",
            "  users: [",
        ]
        for user in users {
            let publish = user.grants.write.flatMap(NATSSubjects.subjects(ofFilter:))
            let subscribe = user.grants.read.flatMap(NATSSubjects.subjects(ofFilter:)) + [Self.mqttDelivery]
            lines += [
                "    {",
                "      user: \(Self.quoted(user.name))",
                "      password: \(Self.quoted(user.password))",
                "      permissions: {",
                "        publish: { allow: [\(Self.list(publish))] }",
                "        subscribe: { allow: [\(Self.list(subscribe))] }",
                "      }",
                "    }",
            ]
        }
        lines += ["  ]", "}"]
        return lines.joined(separator: "\n") + "\n"
    }

    static func hostText(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

    static func quoted(_ text: String) -> String {
        "\"" + text.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\""
    }

    static func list(_ subjects: [String]) -> String {
        var seen: Set<String> = []
        return subjects.filter { seen.insert($0).inserted }.map(quoted).joined(separator: ", ")
    }
}

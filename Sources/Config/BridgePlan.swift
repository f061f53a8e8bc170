public import BeaconKit
import Contract

/// What one store broker's Mosquitto bridge to the central broker carries, derived from the
/// fleet config, and the configuration and ACL lines that make it so (`beaconctl bridge`).
///
/// Out (store → centre): what the store's gateways and apps publish. In (centre → store):
/// what the brain publishes for this store, so local displays keep a copy. Both: the joins
/// of the store's beacons (apps joining at either end; the brain deleting the joins of apps
/// that died). The gateways' statuses come last: Mosquitto replays a bridge's retained
/// messages topic line by topic line after every reconnection, so when a store's gateway
/// status arrives at the centre after the bridge's `1`, the store's retained presence
/// before it is complete (`BrainCore` reconciles the store then).
///
/// Sightings cross at QoS 0: a store broker does not queue them while the WAN is down (they
/// are stale by the time it is back). Everything retained crosses at QoS 1 with a persistent
/// session on both sides, so the transitions made during an outage are queued in the store
/// and delivered in order afterwards.
///
/// At a NATS centre every QoS 1 `in` topic is a JetStream consumer replicated on the nodes
/// (one per topic line and bridge, kept between connections; a clean session makes the same
/// consumers at every connection), which is what kept 100 bridged stores from running
/// (docs/PERFORMANCE.md section 6). There the retained state the brain keeps at the centre
/// (fleet presence, ads, rosters and customers, the fleet config) and the gateways' commands
/// come in at QoS 0: the bridge subscribes again at every connection and the centre hands it
/// the retained state then, so what is lost while it is away is a deletion (a customer who
/// left meanwhile stays on the store's copy of his presence until it is next written) and a
/// command sent meanwhile. Joins, the apps' inboxes and the rules' publishes stay QoS 1.
public struct BridgePlan: Sendable, Equatable {
    public enum Direction: String, Sendable, Equatable { case out, `in`, both }

    public struct Topic: Sendable, Equatable {
        /// The pattern, with the fleet's topic prefix.
        public var pattern: String
        public var direction: Direction
        public var qos: Int
        /// Why it crosses, for the generated file.
        public var note: String
    }

    public let store: UInt16
    public let topics: [Topic]
    /// The central broker as the store reaches it.
    public let address: BrokerURL
    /// The bridge's client id at the central broker and at its own broker.
    public let remoteClientID: String
    public let localClientID: String
    /// Where Mosquitto says `1` (connected) and, as the bridge's will at the centre, `0`.
    public let notificationTopic: String
    public let settings: BridgeSettings
    public let tls: TLSConfig?
    public let credentials: StoreBridge?
    /// The store's gateways, whose statuses mark the end of a reconnection's replay.
    public let gateways: [String]
    /// What the central broker is: a NATS centre refuses Mosquitto's bridge flag.
    public let centre: CentreConfig.Kind

    /// The user name the bridge has on its own (store) broker, for that broker's ACL.
    public static let localUser = "bridge"
    /// Seconds between reconnection attempts (Mosquitto's decorrelated jitter, base and
    /// cap): short, so that a healed WAN is used within a few seconds.
    public static let restartTimeout = (base: 1, cap: 3)

    public struct PlanError: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// The plan for `store`, which must be listed in `stores` with a broker of its own.
    public init(config: FleetConfig, store major: UInt16) throws(PlanError) {
        guard let entry = config.store(major) else {
            let known = config.stores.map { String($0.major) }.joined(separator: ", ")
            throw PlanError(description: "store \(major) is not in the config's stores (it has: \(known.isEmpty ? "none" : known))")
        }
        guard entry.broker != nil else {
            throw PlanError(description: "store \(major) has no broker of its own (stores[].broker): its gateways use the central broker directly, there is nothing to bridge")
        }
        store = major
        centre = config.centre.kind
        settings = config.bridge
        address = config.bridgeURL(ofStore: major)
        tls = config.bridgeTLS
        credentials = entry.bridge
        remoteClientID = config.bridgeClientID(ofStore: major)
        localClientID = remoteClientID + "-local"
        let t = config.topics
        notificationTopic = t.bridgeStatus(ofStore: major)
        gateways = config.gateways(ofStore: major).map(\.id)

        // The majors whose joins and brain output belong to this store: its own and those of
        // registry beacons assigned to it.
        var majors: Set<UInt16> = [major]
        var eddystones: [EddystoneKey] = []
        for beacon in config.beacons where beacon.storeMajor == major {
            switch beacon.id {
            case .ibeacon(_, let m, _)?: majors.insert(m)
            case .eddystone(let namespace, let instance)?: eddystones.append(EddystoneKey(namespace: namespace, instance: instance))
            case nil: break
            }
        }
        let levels = gateways.isEmpty ? [Topics.anyLevel] : gateways
        var list: [Topic] = []
        func add(_ pattern: String, _ direction: Direction, _ qos: Int, _ note: String) {
            list.append(Topic(pattern: pattern, direction: direction, qos: qos, note: note))
        }
        let any = Topics.anyLevel
        add(t.sightings(of: .anyIBeacon), .out, 0, "sightings; QoS 0: not queued while the WAN is down")
        for g in levels { add(t.presence(of: .anyIBeacon, seenBy: g), .out, 1, "gateway presence (retained)") }
        add(t.sightings(of: .anyEddystone), .out, 0, "Eddystone sightings")
        for g in levels { add(t.presence(of: .anyEddystone, seenBy: g), .out, 1, "Eddystone presence (retained)") }
        add(t.telemetry(of: .anyEddystone), .out, 1, "Eddystone telemetry: battery, temperature (retained)")
        add(t.observerStatusFilter, .out, 1, "apps in the store: online, and their last will")
        for m in majors.sorted() {
            add(t.observer(any, of: .ofStore(m)), .both, 1, "joins out; the brain's deletion of a dead app's join in")
        }
        // Retained state and commands in at QoS 0 at a NATS centre (see the type).
        let state = centre == .nats ? 0 : 1
        let stateNote = centre == .nats ? "; QoS 0 at a NATS centre: no JetStream consumer, a deletion made while the bridge is away is missed" : ""
        for m in majors.sorted() {
            add(t.presence(of: .ofStore(m)), .in, state, "the brain's fleet presence, for local displays" + stateNote)
            add(t.ad(of: .ofStore(m)), .in, state, "standing ads" + stateNote)
        }
        // Eddystone beacons belong to a store only by the registry: named one by one.
        for e in eddystones.sorted(by: { BeaconRef($0).recordLevels < BeaconRef($1).recordLevels }) {
            add(t.observer(any, of: .eddystone(e)), .both, 1, "joins of a registry Eddystone beacon of the store")
            add(t.presence(of: .eddystone(e)), .in, state, "the brain's fleet presence of it" + stateNote)
            add(t.ad(of: .eddystone(e)), .in, state, "its standing ad" + stateNote)
        }
        add(t.rosterFilter(ofStore: major), .in, state, "the greeter's roster and its customers" + stateNote)
        add(t.customersFilter(ofStore: major), .in, state, "the greeter's roster and its customers" + stateNote)
        add(t.inbox(of: any), .in, 1, "replies to apps connected in the store")
        add(t.fleetConfig, .in, state, "the fleet config, pushed at the centre" + stateNote)
        let commandNote = centre == .nats ? "; QoS 0 at a NATS centre: one sent while the bridge is away is lost" : ""
        for g in levels { add(t.commands(ofGateway: g), .in, state, "operator commands" + commandNote) }
        for pattern in Self.ruleTopics(config, store: major) {
            list.append(Topic(pattern: t.topic(pattern), direction: .in, qos: 1, note: "what the rules publish for this store"))
        }
        for g in levels { add(t.health(ofGateway: g), .out, 0, "gateway health") }
        for g in levels { add(t.rssiReports(ofGateway: g), .out, 0, "RSSI reports for the brain's zone fusion (QoS 0: a late one is no use)") }
        for g in levels { add(t.events(ofGateway: g), .out, 1, "gateway events") }
        // Last: after a reconnection these arrive after the retained presence (see the type).
        for g in levels { add(t.status(ofGateway: g), .out, 1, "gateway status (last: marks the end of a replay)") }
        var seen: Set<String> = []
        topics = list.filter { seen.insert($0.pattern + " " + $0.direction.rawValue).inserted }
    }

    /// The topics of the rules' `publish` actions that can concern this store, as filters:
    /// `{store}` as the store, every other variable as `+`.
    static func ruleTopics(_ config: FleetConfig, store major: UInt16) -> [String] {
        var patterns: [String] = []
        for rule in config.rules where rule.stores.isEmpty || rule.stores.contains(major) {
            for action in rule.actions {
                guard case .publish(let template, _, _, _) = action else { continue }
                let levels = template.split(separator: "/", omittingEmptySubsequences: false).map { level -> String in
                    if level == "{store}" { return String(major) }
                    return level.contains("{") ? "+" : String(level)
                }
                let pattern = levels.joined(separator: "/")
                if !patterns.contains(pattern) { patterns.append(pattern) }
            }
        }
        return patterns
    }

    /// The bridge section for the store broker's Mosquitto (`/etc/mosquitto/conf.d/`).
    /// `password`: the contents of `stores[].bridge.passwordFile` (Mosquitto 2.0 reads a
    /// bridge's password from its configuration only), so the file must stay private.
    public func mosquittoConfiguration(password: String?) -> String {
        var lines: [String] = []
        func line(_ text: String = "") { lines.append(text) }
        line("# Store \(store)'s bridge to the central broker. Generated by `beaconctl bridge` from the fleet config;")
        line("# regenerate rather than edit. Mosquitto reads bridges at start only: restart it after a change.")
        if password != nil { line("# Holds the bridge's password: readable by the mosquitto user only.") }
        line()
        line("# Messages held for the central broker while the WAN is down. Every reconnection attempt")
        line("# also queues a copy of this broker's retained state (Mosquitto 2.0): size it for the longest")
        line("# outage to ride out (docs/fleet.md). A setting of the whole broker.")
        line("max_queued_messages \(settings.queueLimit)")
        line()
        line("connection \(remoteClientID)")
        if address.endpoints.count > 1 {
            line("# The centre's nodes: the bridge moves to the next when its node goes away (its session")
            line("# and what was queued for it follow it there), taking them in turn rather than hurrying")
            line("# back to the first.")
        }
        line("address " + address.endpoints.map(\.description).joined(separator: " "))
        if address.endpoints.count > 1 { line("round_robin true") }
        line("remote_clientid \(remoteClientID)")
        line("local_clientid \(localClientID)")
        line("local_username \(Self.localUser)")
        line("bridge_protocol_version \(settings.mqttVersion == .v5 ? "mqttv50" : "mqttv311")")
        if centre == .nats {
            line("# NATS refuses Mosquitto's bridge flag (\"unacceptable protocol version\"): the centre echoes")
            line("# the joins (the one `both` topic) back once; Mosquitto does not send them out again.")
            line("try_private false")
        } else {
            line("# Tell the central broker this is a bridge, so nothing is echoed back (loop detection).")
            line("try_private true")
        }
        line("# Persistent sessions on both sides: what changes during an outage is queued and delivered.")
        line("cleansession false")
        line("local_cleansession false")
        line("keepalive_interval \(settings.keepalive)")
        line("restart_timeout \(Self.restartTimeout.base) \(Self.restartTimeout.cap)")
        line("start_type automatic")
        line("# 1 while connected; the bridge's will at the centre says 0: the brain then holds this")
        line("# store's presence as unknown rather than taking everyone as gone.")
        line("notifications true")
        line("notifications_local_only false")
        line("notification_topic \(notificationTopic)")
        line("bridge_attempt_unsubscribe true")
        line("bridge_outgoing_retain true")
        if let username = credentials?.username { line("remote_username \(username)") }
        if let password { line("remote_password \(password)") }
        if address.tls {
            if let caFile = tls?.caFile { line("bridge_cafile \(caFile)") }
            if let caPath = tls?.caPath { line("bridge_capath \(caPath)") }
            if tls?.caFile == nil && tls?.caPath == nil { line("bridge_capath /etc/ssl/certs") }
            if let certFile = credentials?.certFile, let keyFile = credentials?.keyFile {
                line("bridge_certfile \(certFile)")
                line("bridge_keyfile \(keyFile)")
            }
            line("bridge_insecure \(tls?.insecure == true ? "true" : "false")")
            line("bridge_tls_version tlsv1.2")
        }
        var note = ""
        for topic in topics {
            // Comments on lines of their own: Mosquitto has no end-of-line comments.
            if topic.note != note {
                note = topic.note
                line("# " + note)
            }
            line("topic \(topic.pattern) \(topic.direction.rawValue) \(topic.qos)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// ACL lines for the store broker: what the bridge reads there (the out topics) and
    /// writes (the in topics and its notification).
    public var storeACL: String {
        var lines = ["# Store \(store)'s bridge on its own broker (local_username \(Self.localUser)); generated by `beaconctl bridge`.",
                     "user \(Self.localUser)"]
        lines += acl(outAccess: "read", inAccess: "write")
        lines.append("topic readwrite \(notificationTopic)")
        return lines.joined(separator: "\n") + "\n"
    }

    /// ACL lines for the central broker: what store `store`'s bridge may write there (the
    /// out topics and its notification) and read (the in topics). A store's bridge speaks
    /// only for its own gateways.
    public var centralACL: String {
        let user = credentials?.username ?? remoteClientID
        var lines = ["# Store \(store)'s bridge at the central broker; generated by `beaconctl bridge`.",
                     "user \(user)"]
        lines += acl(outAccess: "write", inAccess: "read")
        lines.append("topic write \(notificationTopic)")
        return lines.joined(separator: "\n") + "\n"
    }

    private func acl(outAccess: String, inAccess: String) -> [String] {
        topics.map { topic in
            let access = switch topic.direction {
            case .out: outAccess
            case .in: inAccess
            case .both: "readwrite"
            }
            return "topic \(access) \(topic.pattern)"
        }
    }
}

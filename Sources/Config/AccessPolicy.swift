import BeaconKit
import Contract

/// Who may publish and read what on a fleet's broker, as a Mosquitto ACL file.
///
/// One rule runs through it: a credential speaks only for itself. A gateway writes only
/// topics that carry its own id as a level (its presence, status, health, events, RSSI
/// reports), so the broker can tell a forged gateway message from a real one; an observer
/// writes only its own join and status and reads only its own inbox and the public ads,
/// never another customer's presence, profile or roster; only the brain writes
/// `brain/#`, fleet presence, ads, inboxes, rosters and the gateways' calibration records,
/// and deletes other clients' joins;
/// each display (`display-<name>`, one per screen) reads what the store's screens show and
/// writes nothing but its Home Assistant discovery; Home Assistant reads the discovery
/// configs and what its entities show, and writes only its birth message; the operator
/// pushes config and commands and reads everything. Every rule names its user, or `%u`:
/// Mosquitto warns at every start about a `pattern` without `%u` or `%c`. Anything not listed is
/// refused: Mosquitto drops the publish and delivers nothing to the subscription.
///
/// `beaconctl provision` writes it; `deploy/mosquitto/beaconbridge.acl` is it for
/// `deploy/fleet.example.json` (a test keeps the two equal). Gateway sightings on
/// `beacons/<major>/<minor>` carry no gateway level (the SPEC's observer contract), so any
/// gateway may write them: the brain does not take them as evidence of who saw what.
public struct AccessPolicy: Sendable {
    public let config: FleetConfig
    /// The brains' user names (one per brain that splits the fleet; `brain` by default).
    public let brains: [String]

    /// The apps' user names: the registry beacons' owners, then any other observers.
    public let apps: [String]
    /// The screens' user names (`display-<name>`, one per `beacon-web`).
    public let displays: [String]

    /// `observers`: apps besides the beacons' owners. `displays`: the screens' logins
    /// (by default one per store, `display-<major>`, or `display-main` without stores).
    public init(config: FleetConfig, brains: [String] = [BrokerIdentity.brain], observers: [String] = [],
                displays: [String]? = nil) {
        self.config = config
        self.brains = brains
        var apps: [String] = []
        for app in config.beacons.compactMap(\.owner) + observers where !apps.contains(app) { apps.append(app) }
        self.apps = apps
        self.displays = displays ?? Self.defaultDisplays(config)
    }

    /// One screen per store (`display-<major>`), or `display-main` for a fleet without stores.
    public static func defaultDisplays(_ config: FleetConfig) -> [String] {
        let names = config.stores.isEmpty ? ["main"] : config.stores.map { String($0.major) }
        return names.map(BrokerIdentity.displayUser)
    }

    /// Every user name the policy names, in the order of the file.
    public var users: [String] {
        var users: [String] = []
        let all = config.gateways.map { BrokerIdentity.gatewayUser($0.id) } + brains
            + [BrokerIdentity.operatorUser, BrokerIdentity.homeAssistant] + displays + apps
        for user in all where !users.contains(user) { users.append(user) }
        return users
    }

    /// The ACL file's text.
    public var text: String {
        let t = config.topics
        func topic(_ tail: String) -> String { t.topic(tail) }
        let any = Topics.anyLevel, user = Topics.aclUser
        let discovery = config.homeAssistant.discoveryPrefix
        var lines = [
            "# BeaconBridge: who may publish and read what (Mosquitto acl_file). Written by",
            "# `beaconctl provision` from the fleet config: provision again after changing its gateways or",
            "# rules. Each identity speaks only for itself; anything not listed is refused.",
            "",
            "# Observers (apps): every user, as itself (%u: the user name is the client id in the topics).",
            "# They read their own inbox and the public ads (below, per app), nothing about other customers.",
            "pattern write \(t.observer(user, of: .anyIBeacon))",
            "pattern write \(t.observer(user, of: .anyEddystone))",
            "pattern write \(t.status(ofObserver: user))",
            "pattern read \(t.inbox(of: user))",
        ]
        for app in apps {
            lines += [
                "",
                "# App \(app): the public ads (its join, status and inbox: the patterns above).",
                "user \(app)",
                "topic read \(t.ad(of: .anyIBeacon))",
                "topic read \(t.ad(of: .anyEddystone))",
            ]
        }
        for gateway in config.gateways {
            let id = gateway.id
            lines += [
                "",
                "# Gateway \(id): its own presence, status, health, events and RSSI reports; sightings.",
                "user \(BrokerIdentity.gatewayUser(id))",
                "topic write \(t.sightings(of: .anyIBeacon))",
                "topic readwrite \(t.presence(of: .anyIBeacon, seenBy: id))",
                "topic write \(t.sightings(of: .anyEddystone))",
                "topic readwrite \(t.presence(of: .anyEddystone, seenBy: id))",
                "topic write \(t.telemetry(of: .anyEddystone))",
                "topic write \(t.status(ofGateway: id))",
                "topic write \(t.health(ofGateway: id))",
                "topic write \(t.events(ofGateway: id))",
                "topic write \(t.rssiReports(ofGateway: id))",
                "topic read \(t.commands(ofGateway: id))",
                "topic read \(t.fleetConfig)",
                "# whether a brain is about: after an outage the gateway waits for it to ask for its reports",
                "topic read \(t.brainStatus)",
            ]
        }
        for brain in brains {
            lines += [
                "",
                "# Brain \(brain): alone writes brain/#, fleet presence, ads, inboxes and rosters.",
                "user \(brain)",
                "topic read \(t.everything(under: .beacons))",
                "topic read \(t.everything(under: .eddystone))",
                "topic write \(t.presence(of: .anyIBeacon))",
                "topic write \(t.ad(of: .anyIBeacon))",
                "topic write \(t.zoneEvents(of: .anyIBeacon))",
                "# deletes joins: of apps whose last will said offline, rejected ones, ended visits",
                "topic write \(t.observer(any, of: .anyIBeacon))",
                "# the same for Eddystone-UID beacons",
                "topic write \(t.presence(of: .anyEddystone))",
                "topic write \(t.ad(of: .anyEddystone))",
                "topic write \(t.observer(any, of: .anyEddystone))",
                "topic readwrite \(t.everything(under: .brain))",
                "topic read \(t.gatewayStatusFilter)",
                "topic read \(t.gatewayRSSIFilter)",
                "# asks a gateway back from an outage for the reports it kept ({\"reports\":\"send\"})",
                "topic write \(t.commands(ofGateway: any))",
                "# what calibration learned of each gateway (retained; read back on a restart)",
                "topic readwrite \(t.calibrationFilter)",
                "topic read \(t.observerStatusFilter)",
                "topic write \(t.inbox(of: any))",
                "topic readwrite \(t.rosterFilter(ofStore: nil))",
                "topic readwrite \(t.customersFilter(ofStore: nil))",
                "topic read \(t.bridgeStatusFilter(ofStore: nil))",
                "topic read \(t.fleetConfig)",
            ]
            let published = ruleTopics
            if !published.isEmpty {
                lines.append("# what the rules publish (\"do\": \"publish\")")
                lines += published.map { "topic write \(topic($0))" }
            }
        }
        lines += [
            "",
            "# The operator (beaconctl config push, commands): config, commands, and watching everything.",
            "user \(BrokerIdentity.operatorUser)",
            "topic readwrite \(t.fleetConfig)",
            "topic write \(t.commands(ofGateway: any))",
            "topic read \(t.everything(under: .gateways))",
            "topic read \(t.everything(under: .beacons))",
            "topic read \(t.everything(under: .eddystone))",
            "topic read \(t.everything(under: .brain))",
            "topic read \(t.everything(under: .stores))",
            "topic read \(t.everything(under: .observers))",
            "topic read \(t.everything(under: .displays))",
            "topic read \(discovery)/#",
            "",
            "# Home Assistant (its MQTT integration): the discovery configs and what its entities read;",
            "# it writes nothing but its birth message.",
            "user \(BrokerIdentity.homeAssistant)",
            "topic read \(discovery)/#",
            "topic write \(discovery)/status",
            "topic read \(t.everything(under: .beacons))",
            "topic read \(t.everything(under: .eddystone))",
            "topic read \(t.gatewayStatusFilter)",
            "topic read \(t.health(ofGateway: any))",
            "topic read \(t.everything(under: .stores))",
            "topic read \(t.brainStatus)",
        ]
        for display in displays {
            lines += [
                "",
                "# Screen \(display) (beacon-web: greeter, floor, fleet dashboard; docs/web.md): read-only,",
                "# but for its Home Assistant discovery configs and trackers' states under its own node id.",
                "user \(display)",
                "topic read \(t.rosterFilter(ofStore: nil))",
                "topic read \(t.customersFilter(ofStore: nil))",
                "topic read \(t.observer(any, of: .anyIBeacon))",
                "topic read \(t.presence(of: .anyIBeacon))",
                "topic read \(t.observer(any, of: .anyEddystone))",
                "topic read \(t.presence(of: .anyEddystone))",
                "topic read \(t.gatewayStatusFilter)",
                "topic read \(t.health(ofGateway: any))",
                "topic read \(t.calibrationFilter)",
                "topic read \(t.brainStatus)",
                "topic read \(t.beaconHealthFilter)",
                "topic read \(t.fleetConfig)",
            ]
            lines += ruleTopics.map { "topic read \(topic($0))" }
            lines.append("topic readwrite \(discovery)/+/beaconbridge/+/config")
            lines.append("topic readwrite \(discovery)/device_tracker/beaconbridge/+/state")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The topics of the rules' `publish` actions as filters: every variable a `+`.
    var ruleTopics: [String] {
        var patterns: [String] = []
        for rule in config.rules {
            for action in rule.actions {
                guard case .publish(let template, _, _, _) = action else { continue }
                let pattern = template.split(separator: "/", omittingEmptySubsequences: false)
                    .map { $0.contains("{") ? "+" : String($0) }.joined(separator: "/")
                if !patterns.contains(pattern) { patterns.append(pattern) }
            }
        }
        return patterns
    }
}

/// The broker's side of a provisioned fleet, as a Mosquitto configuration file: TLS on the
/// MQTT port, every client authenticated by password, the ACL, and user names as client
/// ids so that no credential can take over another's connection (`beaconctl provision`).
public struct BrokerSecurityConfig: Sendable {
    /// Where the broker finds its password file, ACL, CA and certificate.
    public var directory: String
    /// The TLS listener.
    public var port: UInt16
    /// The address it listens on; every interface when `nil`.
    public var bind: String?

    public init(directory: String = "/etc/mosquitto/beaconbridge", port: UInt16 = 8883, bind: String? = nil) {
        self.directory = directory
        self.port = port
        self.bind = bind
    }

    public var text: String {
        """
        # BeaconBridge broker security (/etc/mosquitto/conf.d/), written by `beaconctl provision`.
        # Every client logs in as its own user over TLS; the ACL says what each may do.
        per_listener_settings false
        allow_anonymous false
        password_file \(directory)/passwd
        acl_file \(directory)/beaconbridge.acl

        listener \(port)\(bind.map { " " + $0 } ?? "")
        # A client's user name is its client id: no credential can take over another's
        # connection (a listener's setting: every listener needs it).
        use_username_as_clientid true
        cafile \(directory)/ca.crt
        certfile \(directory)/broker.crt
        keyfile \(directory)/broker.key
        tls_version tlsv1.2

        """
    }
}

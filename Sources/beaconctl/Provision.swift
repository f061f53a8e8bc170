import ArgumentParser
import BeaconKit
import Contract
import CommandLineSupport
import Config
import SystemCalls

#if canImport(Glibc)
import Glibc
#endif

struct Provision: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a fleet's credentials, the broker's password file, ACL and TLS setup, and a CA.",
        discussion: """
        Every part of the fleet gets an identity of its own: each gateway (user = its id), the
        brain ("brain", or each --brain), the operator, Home Assistant ("homeassistant"), each
        screen (beacon-web: "display-<name>" for each --display; by default one per store,
        display-<major>), and every app: the owners of the config's beacons and each
        --observer. Writes into DIR:

          ca/ca.crt, ca/ca.key          the fleet's certificate authority (keep ca.key off the
                                        broker; provisioning again reuses it)
          broker/beaconbridge.conf      for /etc/mosquitto/conf.d/: TLS on --port, passwords,
                                        the ACL, user names as client ids, no anonymous clients
          broker/passwd                 the password file (mosquitto_passwd's hashes)
          broker/beaconbridge.acl       who may publish and read what (docs/security.md), with
                                        broker/local.acl (yours: hand-added users) at its end
          broker/ca.crt, broker.crt, broker.key
                                        the broker's certificate, for its host name and every
                                        --broker-name (DNS names or IP addresses)
          web/web.crt, web/web.key      beacon-web's HTTPS certificate, for every --web-name
                                        (default: the broker's names)
          credentials/<user>.password   one per identity, for /etc/beaconbridge/credentials/
                                        (the units' LoadCredential=mqtt-password:…)
          credentials/brain.secret      the key that signs the brain's records
          credentials/store-<major>.proof
                                        each store's proof-of-presence secret (stores[].proof):
                                        install it at its secretFile beside the brain and on
                                        the store's advertising gateways (docs/security.md)
          clients/ca.crt                for /etc/beaconbridge/ca.crt (broker.tls.caFile), and
                                        for browsers and Home Assistant to trust
          cluster/<node>.conf           when the fleet's centre is a NATS cluster (centre.kind
                                        "nats"): each node's nats-server configuration, with
                                        the same users and the same ACL as the Mosquitto files
                                        (as NATS subjects), the stores' bridge users (their
                                        stores[].bridge.passwordFile), and TLS with
                                        broker/broker.crt, which then names every node too

        The cluster's files are written here because they need what provisioning holds: the
        passwords, the CA and the access policy (docs/fleet.md, "The centre as a NATS cluster").

        Provisioning again keeps every password, secret, certificate and the CA, adds what is
        new (a new gateway, a new owner) and writes the password file and ACL afresh: users
        someone added to broker/passwd by hand (mosquitto_passwd) stay in it, and
        broker/local.acl is kept and appended. --renew issues new broker and web
        certificates. When the broker reads broker/ in place (--broker-directory DIR/broker)
        and this runs as root, broker/ is made readable by the broker's user (mosquitto).
        Needs openssl and mosquitto_passwd (Debian: openssl, mosquitto).

        Example:
          beaconctl provision /etc/beaconbridge/fleet.json --out /root/fleet-secrets \\
            --broker-name broker.store.lan --broker-name 192.168.1.10 \\
            --display lobby --display till
        """)

    @Argument(help: ArgumentHelp("The fleet config.", valueName: "FLEET.json"))
    var path: String

    @Option(name: .long, help: ArgumentHelp("Where to write (created if missing; files are private).", valueName: "DIR"))
    var out: String

    @Option(name: .long, parsing: .singleValue,
            help: ArgumentHelp("Another name or address of the broker for its certificate (repeatable).", valueName: "NAME"))
    var brokerName: [String] = []

    @Option(name: .long, parsing: .singleValue,
            help: ArgumentHelp("A brain's user name (repeatable; default: brain).", valueName: "NAME"))
    var brain: [String] = []

    @Option(name: .long, parsing: .singleValue,
            help: ArgumentHelp("An app's user name (= its observer client id) besides the beacon owners (repeatable).",
                               valueName: "ID"))
    var observer: [String] = []

    @Option(name: .long, parsing: .singleValue,
            help: ArgumentHelp("A screen (beacon-web): its user is display-NAME (repeatable; default: one per store).",
                               valueName: "NAME"))
    var display: [String] = []

    @Option(name: .long, parsing: .singleValue,
            help: ArgumentHelp("A name or address of beacon-web's host for its certificate (repeatable; default: the broker's).",
                               valueName: "NAME"))
    var webName: [String] = []

    @Option(name: .long, help: "The broker's TLS port.")
    var port: UInt16 = 8883

    @Option(name: .long, help: ArgumentHelp("Listen on this address only (default: every interface).", valueName: "ADDRESS"))
    var bind: String?

    @Option(name: .long, help: ArgumentHelp("Where the broker finds broker/'s files.", valueName: "DIR"))
    var brokerDirectory = "/etc/mosquitto/beaconbridge"

    @Option(name: .long, help: ArgumentHelp("Where each NATS node finds broker.crt, broker.key and ca.crt (centre.kind \"nats\").",
                                            valueName: "DIR"))
    var clusterDirectory = "/etc/nats/beaconbridge"

    @Option(name: .long, help: "Days the broker's certificate is valid.")
    var days = 825

    @Flag(name: .long, help: "Issue a new broker certificate even if one exists.")
    var renew = false

    func validate() throws {
        for name in brain + observer + display + webName {
            if let problem = Topics.problem(withSegment: name) { throw ValidationError("\"\(name)\" \(problem)") }
        }
        if days < 1 { throw ValidationError("--days must be at least 1") }
    }

    func run() async throws {
        let config = try ConfigLoading.load(path)
        let brains = brain.isEmpty ? [BrokerIdentity.brain] : brain
        let files = ProvisionFiles(root: out)
        var displays = display.isEmpty ? AccessPolicy.defaultDisplays(config) : display.map(BrokerIdentity.displayUser)
        // The one shared "display" login of an earlier provisioning: kept while its password
        // exists, so screens still using it are not cut off (docs/security.md).
        if FileSystem.exists(files.credential(BrokerIdentity.display)) { displays.append(BrokerIdentity.display) }
        let policy = AccessPolicy(config: config, brains: brains, observers: observer, displays: displays)
        let users = policy.users
        let gateways = Set(config.gateways.map(\.id))
        for user in observer where gateways.contains(user) || BrokerIdentity.isReserved(user) || brains.contains(user) {
            throw CommandFailure("--observer \(user): that name is taken by a gateway or a role")
        }
        for user in displays where gateways.contains(user) || policy.apps.contains(user) || brains.contains(user) {
            throw CommandFailure("--display: \(user) is already the name of a gateway, an app or a brain")
        }
        guard let openssl = Programs.find("openssl") else {
            throw CommandFailure("openssl is not installed (apt install openssl)", status: .failure)
        }
        guard let passwd = Programs.find("mosquitto_passwd") else {
            throw CommandFailure("mosquitto_passwd is not installed (apt install mosquitto)", status: .failure)
        }

        try files.makeDirectories()
        let local = try files.localACL()  // checked before anything else is written
        let tool = Tool(directory: files.work)

        // Credentials: kept when they exist, so provisioning again changes nobody's password.
        var passwords: [(String, String)] = []
        for user in users {
            passwords.append((user, try files.secret(files.credential(user), bytes: 24)))
        }
        _ = try files.secret(files.credentials + "/brain.secret", bytes: 32)
        for store in config.stores where store.proof != nil {
            _ = try files.secret(files.credentials + "/store-\(store.major).proof", bytes: 32)
        }

        // The password file: every user's line, hashed by mosquitto_passwd, then the lines of
        // users added by hand (no credential of ours), kept as they were.
        let passwordFile = files.broker + "/passwd"
        let handAdded = files.handAddedUsers(in: passwordFile, provisioned: Set(users))
        try files.writePrivate(files.work + "/passwd", passwords.map { "\($0.0):\($0.1)\n" }.joined())
        try await tool.run(passwd, ["-U", files.work + "/passwd"], "mosquitto_passwd")
        let hashed = try FileSystem.readText(files.work + "/passwd")
        try files.writePrivate(passwordFile, hashed + handAdded.map { $0 + "\n" }.joined())
        unlink(files.work + "/passwd")
        try files.writePrivate(files.broker + "/beaconbridge.acl", policy.text + local, mode: 0o644)
        let security = BrokerSecurityConfig(directory: brokerDirectory, port: port, bind: bind)
        try files.writePrivate(files.broker + "/beaconbridge.conf", security.text, mode: 0o644)

        // The CA, kept once made; the broker's and the web page's certificates for every name
        // they are reached by.
        let ca = files.ca + "/ca.crt", caKey = files.ca + "/ca.key"
        if !FileSystem.exists(ca) || !FileSystem.exists(caKey) {
            try await tool.run(openssl, ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                         "-nodes", "-keyout", caKey, "-out", ca, "-days", "3650", "-sha256",
                                         "-subj", "/CN=BeaconBridge fleet CA",
                                         "-addext", "basicConstraints=critical,CA:TRUE",
                                         "-addext", "keyUsage=critical,keyCertSign,cRLSign"], "openssl-ca")
            chmod(caKey, 0o600)
        }
        var names: [String] = []
        let nodeHosts = config.centre.kind == .nats ? config.centre.nodes.map(\.host) : []
        for name in config.broker.url.endpoints.map(\.host) + nodeHosts + brokerName where !names.contains(name) {
            names.append(name)
        }
        var webNames: [String] = []
        for name in webName.isEmpty ? names : webName where !webNames.contains(name) { webNames.append(name) }
        let signer = CertificateSigner(tool: tool, openssl: openssl, ca: ca, caKey: caKey, serial: files.ca + "/ca.srl",
                                       work: files.work, days: days)
        try await signer.issue(certificate: files.broker + "/broker.crt", key: files.broker + "/broker.key",
                               names: names, renew: renew)
        try await signer.issue(certificate: files.web + "/web.crt", key: files.web + "/web.key",
                               names: webNames, renew: renew)
        if config.centre.kind == .nats {
            let acl = policy.text + local
            let written = try writeCluster(config, files: files, acl: acl, passwords: passwords)
            printLine("wrote \(written.count) NATS node configurations in \(files.root)/cluster: \(written.joined(separator: ", "))")
        }
        try FileSystem.write(files.broker + "/ca.crt", try FileSystem.read(ca))
        try FileSystem.write(files.clients + "/ca.crt", try FileSystem.read(ca))
        try files.writePrivate(out + "/README.txt", Self.readme(config: config, users: users, brains: brains,
                                                                displays: displays, names: names, webNames: webNames,
                                                                port: port, brokerDirectory: brokerDirectory),
                               mode: 0o644)
        files.removeWork()

        printLine("provisioned \(users.count) identities in \(out): \(users.joined(separator: ", "))")
        if !handAdded.isEmpty {
            let kept = handAdded.map { String($0.prefix { $0 != ":" }) }
            printLine("kept \(kept.count) user(s) added to broker/passwd by hand: \(kept.joined(separator: ", ")) "
                      + "(their ACL lines belong in \(files.broker)/local.acl)")
        }
        printLine("broker certificate for \(names.joined(separator: ", ")), web certificate for "
                  + "\(webNames.joined(separator: ", ")); where each file goes: \(out)/README.txt")
        if let note = files.shareWithBroker(brokerDirectory: brokerDirectory) { printLine(note) }
        if !config.broker.usesTLS || config.broker.tls?.caFile == nil {
            printLine("note: \(path) should say \"url\": \"mqtts://\(names[0]):\(port)\" and \"tls\": "
                      + "{\"caFile\": \"/etc/beaconbridge/ca.crt\"} for the parts to use TLS")
        }
    }

    /// The NATS centre's node files: the fleet's users (and each bridged store's bridge user
    /// with its central ACL lines) under the permissions of the same ACL. Returns the names.
    func writeCluster(_ config: FleetConfig, files: ProvisionFiles, acl: String,
                      passwords: [(String, String)]) throws -> [String] {
        var text = acl
        var users = passwords
        for store in config.bridgedStores {
            let plan: BridgePlan
            do { plan = try BridgePlan(config: config, store: store.major) } catch {
                throw CommandFailure("\(path): \(error)")
            }
            guard let username = store.bridge?.username, let file = store.bridge?.passwordFile else {
                throw CommandFailure("store \(store.major)'s bridge needs stores[].bridge.username and passwordFile: "
                                     + "the NATS centre admits no anonymous client", status: .failure)
            }
            let password: String
            do {
                password = String(try FileSystem.readText(file).split(separator: "\n").first ?? "")
            } catch {
                throw CommandFailure("store \(store.major)'s bridge password: cannot read \(file): \(error)", status: .failure)
            }
            guard !password.isEmpty else { throw CommandFailure("store \(store.major)'s bridge password: \(file) is empty", status: .failure) }
            text += "\n" + plan.centralACL
            if !users.contains(where: { $0.0 == username }) { users.append((username, password)) }
        }
        let grants = ACLGrants(aclText: text)
        let natsUsers = users.map { NATSNodeConfig.User(name: $0.0, password: $0.1, grants: grants.grants(of: $0.0)) }
        let tls = config.broker.url.tls
            ? (certFile: clusterDirectory + "/broker.crt", keyFile: clusterDirectory + "/broker.key", caFile: clusterDirectory + "/ca.crt")
            : nil
        let directory = files.root + "/cluster"
        do { try FileSystem.makeDirectories(directory, mode: 0o700) } catch {
            throw CommandFailure("cannot create \(directory): \(error)", status: .failure)
        }
        for node in config.centre.nodes {
            let node = NATSNodeConfig(centre: config.centre, node: node, users: natsUsers, tls: tls)
            try files.writePrivate(directory + "/\(node.node.name).conf", node.text)
        }
        return config.centre.nodes.map(\.name)
    }

    static func isAddress(_ name: String) -> Bool {
        name.contains(":") || (name.split(separator: ".").count == 4 && name.split(separator: ".").allSatisfy { UInt8($0) != nil })
    }

    /// README.txt's part on a NATS centre's nodes; empty for a Mosquitto centre.
    static func clusterReadme(_ config: FleetConfig) -> String {
        guard config.centre.kind == .nats else { return "" }
        let nodes = config.centre.nodes.map(\.name)
        return """
        The centre is a NATS cluster (\(nodes.joined(separator: ", "))). On each node N (apt install nats-server):
          install -d -m 750 -o root -g nats /etc/nats/beaconbridge
          install -m 640 -g nats cluster/N.conf broker/broker.key /etc/nats/beaconbridge/
          install -m 644 broker/broker.crt broker/ca.crt /etc/nats/beaconbridge/
          nats-server -c /etc/nats/beaconbridge/N.conf   (or the nats-server unit, pointed at it)
        Start all nodes within a minute of each other; later, restart them one at a time, each
        once the last one is back (docs/fleet.md, "A rolling restart"). The stores' bridges
        (beaconctl bridge) list every node and move between them.


        """
    }

    static func readme(config: FleetConfig, users: [String], brains: [String], displays: [String], names: [String],
                       webNames: [String], port: UInt16, brokerDirectory: String) -> String {
        let gateways = config.gateways.map(\.id)
        return """
        BeaconBridge credentials, written by beaconctl provision. Keep this directory private.

        On the broker (\(names.joined(separator: ", "))):
          install -d -m 750 -o root -g mosquitto \(brokerDirectory)
          install -m 640 -g mosquitto broker/passwd broker/broker.key \(brokerDirectory)/
          install -m 644 broker/beaconbridge.acl broker/ca.crt broker/broker.crt \(brokerDirectory)/
          install -m 644 broker/beaconbridge.conf /etc/mosquitto/conf.d/
          systemctl restart mosquitto         # TLS on port \(port); no anonymous clients
        (Mosquitto reads the password file and the ACL as its user, mosquitto: hence -g mosquitto.)
        Users you add by hand (mosquitto_passwd broker/passwd NAME) stay in broker/passwd when
        provisioning again; give them their rules in broker/local.acl, which is appended to the ACL.

        On each gateway's machine (for gateway G of \(gateways.joined(separator: ", "))):
          install -D -m 600 credentials/G.password /etc/beaconbridge/credentials/G.password
          install -m 644 clients/ca.crt /etc/beaconbridge/ca.crt
          (beacon-gateway@G.service loads it: LoadCredential=mqtt-password:…)

        Beside the brain (\(brains.joined(separator: ", "))):
          install -D -m 600 credentials/brain.password credentials/brain.secret /etc/beaconbridge/credentials/
          install -m 644 clients/ca.crt /etc/beaconbridge/ca.crt

        Each screen (beacon-web), one login each (\(displays.joined(separator: ", "))), for screen D:
          install -m 640 -g beaconbridge credentials/D.password /etc/beaconbridge/display.password
          install -m 644 web/web.crt /etc/beaconbridge/web.crt     # for \(webNames.joined(separator: ", "))
          install -m 640 -g beaconbridge web/web.key /etc/beaconbridge/web.key
          beacon-web … --mqtt-user D --mqtt-password-file /etc/beaconbridge/display.password
          (browsers trust the page once they trust clients/ca.crt, the fleet's CA)
        Home Assistant's MQTT integration: user homeassistant, credentials/homeassistant.password,
          broker certificate checked against clients/ca.crt.
        The operator (beaconctl config push): credentials/operator.password in BEACONBRIDGE_MQTT_PASSWORD.
        Apps: each one's credentials/<user>.password; its user name is its observer client id.

        \(clusterReadme(config))Identities: \(users.joined(separator: ", "))
        Keep ca/ca.key offline: it signs the broker's and the web certificates (provision again with --renew).

        """
    }
}

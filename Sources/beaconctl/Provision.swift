import ArgumentParser
import BeaconKit
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
        brain ("brain", or each --brain), the operator, the read-only display (beacon-web), and
        every app: the owners of the config's beacons and each --observer. Writes into DIR:

          ca/ca.crt, ca/ca.key          the fleet's certificate authority (keep ca.key off the
                                        broker; provisioning again reuses it)
          broker/beaconbridge.conf      for /etc/mosquitto/conf.d/: TLS on --port, passwords,
                                        the ACL, user names as client ids, no anonymous clients
          broker/passwd                 the password file (mosquitto_passwd's hashes)
          broker/beaconbridge.acl       who may publish and read what (docs/security.md)
          broker/ca.crt, broker.crt, broker.key
                                        the broker's certificate, for its host name and every
                                        --broker-name (DNS names or IP addresses)
          credentials/<user>.password   one per identity, for /etc/beaconbridge/credentials/
                                        (the units' LoadCredential=mqtt-password:…)
          credentials/brain.secret      the key that signs the brain's records
          credentials/store-<major>.proof
                                        each store's proof-of-presence secret (stores[].proof):
                                        install it at its secretFile beside the brain and on
                                        the store's advertising gateways (docs/security.md)
          clients/ca.crt                for /etc/beaconbridge/ca.crt (broker.tls.caFile)

        Provisioning again keeps every password, secret and the CA, adds what is new (a new
        gateway, a new owner) and writes the password file and ACL afresh; --renew issues a new
        broker certificate. Needs openssl and mosquitto_passwd (Debian: openssl, mosquitto).

        Example:
          beaconctl provision /etc/beaconbridge/fleet.json --out /root/fleet-secrets \\
            --broker-name broker.store.lan --broker-name 192.168.1.10
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

    @Option(name: .long, help: "The broker's TLS port.")
    var port: UInt16 = 8883

    @Option(name: .long, help: ArgumentHelp("Listen on this address only (default: every interface).", valueName: "ADDRESS"))
    var bind: String?

    @Option(name: .long, help: ArgumentHelp("Where the broker finds broker/'s files.", valueName: "DIR"))
    var brokerDirectory = "/etc/mosquitto/beaconbridge"

    @Option(name: .long, help: "Days the broker's certificate is valid.")
    var days = 825

    @Flag(name: .long, help: "Issue a new broker certificate even if one exists.")
    var renew = false

    func validate() throws {
        for name in brain + observer {
            if let problem = Topics.problem(withSegment: name) { throw ValidationError("\"\(name)\" \(problem)") }
        }
        if days < 1 { throw ValidationError("--days must be at least 1") }
    }

    func run() async throws {
        let config = try ConfigLoading.load(path)
        let brains = brain.isEmpty ? [BrokerIdentity.brain] : brain
        let policy = AccessPolicy(config: config, brains: brains)
        let owners = config.beacons.compactMap(\.owner)
        var users: [String] = []
        for user in policy.users + owners + observer where !users.contains(user) { users.append(user) }
        let gateways = Set(config.gateways.map(\.id))
        for user in observer where gateways.contains(user) || BrokerIdentity.reserved.contains(user) || brains.contains(user) {
            throw CommandFailure("--observer \(user): that name is taken by a gateway or a role")
        }
        guard let openssl = Programs.find("openssl") else {
            throw CommandFailure("openssl is not installed (apt install openssl)", status: .failure)
        }
        guard let passwd = Programs.find("mosquitto_passwd") else {
            throw CommandFailure("mosquitto_passwd is not installed (apt install mosquitto)", status: .failure)
        }

        let files = ProvisionFiles(root: out)
        try files.makeDirectories()
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

        // The password file: every user's line, then hashed in place by mosquitto_passwd.
        try files.writePrivate(files.broker + "/passwd", passwords.map { "\($0.0):\($0.1)\n" }.joined())
        try await tool.run(passwd, ["-U", files.broker + "/passwd"], "mosquitto_passwd")
        try files.writePrivate(files.broker + "/beaconbridge.acl", policy.text, mode: 0o644)
        let security = BrokerSecurityConfig(directory: brokerDirectory, port: port, bind: bind)
        try files.writePrivate(files.broker + "/beaconbridge.conf", security.text, mode: 0o644)

        // The CA, kept once made; the broker's certificate for every name it is reached by.
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
        for name in [config.broker.url.host] + brokerName where !names.contains(name) { names.append(name) }
        let certificate = files.broker + "/broker.crt", key = files.broker + "/broker.key"
        if renew || !FileSystem.exists(certificate) || !FileSystem.exists(key) {
            let request = files.work + "/broker.csr"
            try await tool.run(openssl, ["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                         "-keyout", key, "-out", request, "-subj", "/CN=\(names[0])"], "openssl-key")
            chmod(key, 0o600)
            let alternatives = names.map { Self.isAddress($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
            let extensions = files.work + "/broker.ext"
            try FileSystem.write(extensions, Array("""
                subjectAltName=\(alternatives)
                extendedKeyUsage=serverAuth
                keyUsage=critical,digitalSignature,keyEncipherment
                basicConstraints=critical,CA:FALSE

                """.utf8))
            try await tool.run(openssl, ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", caKey,
                                         "-CAcreateserial", "-CAserial", files.ca + "/ca.srl", "-out", certificate,
                                         "-days", String(days), "-sha256", "-extfile", extensions], "openssl-sign")
        }
        try FileSystem.write(files.broker + "/ca.crt", try FileSystem.read(ca))
        try FileSystem.write(files.clients + "/ca.crt", try FileSystem.read(ca))
        try files.writePrivate(out + "/README.txt", Self.readme(config: config, users: users, brains: brains,
                                                                names: names, port: port, brokerDirectory: brokerDirectory),
                               mode: 0o644)
        files.removeWork()

        printLine("provisioned \(users.count) identities in \(out): \(users.joined(separator: ", "))")
        printLine("broker certificate for \(names.joined(separator: ", ")); where each file goes: \(out)/README.txt")
        if !config.broker.usesTLS || config.broker.tls?.caFile == nil {
            printLine("note: \(path) should say \"url\": \"mqtts://\(names[0]):\(port)\" and \"tls\": "
                      + "{\"caFile\": \"/etc/beaconbridge/ca.crt\"} for the parts to use TLS")
        }
    }

    static func isAddress(_ name: String) -> Bool {
        name.contains(":") || (name.split(separator: ".").count == 4 && name.split(separator: ".").allSatisfy { UInt8($0) != nil })
    }

    static func readme(config: FleetConfig, users: [String], brains: [String], names: [String], port: UInt16,
                       brokerDirectory: String) -> String {
        let gateways = config.gateways.map(\.id)
        return """
        BeaconBridge credentials, written by beaconctl provision. Keep this directory private.

        On the broker (\(names.joined(separator: ", "))):
          install -d -m 750 -o root -g mosquitto \(brokerDirectory)
          install -m 640 -g mosquitto broker/passwd broker/broker.key \(brokerDirectory)/
          install -m 644 broker/beaconbridge.acl broker/ca.crt broker/broker.crt \(brokerDirectory)/
          install -m 644 broker/beaconbridge.conf /etc/mosquitto/conf.d/
          systemctl restart mosquitto         # TLS on port \(port); no anonymous clients

        On each gateway's machine (for gateway G of \(gateways.joined(separator: ", "))):
          install -D -m 600 credentials/G.password /etc/beaconbridge/credentials/G.password
          install -m 644 clients/ca.crt /etc/beaconbridge/ca.crt
          (beacon-gateway@G.service loads it: LoadCredential=mqtt-password:…)

        Beside the brain (\(brains.joined(separator: ", "))):
          install -D -m 600 credentials/brain.password credentials/brain.secret /etc/beaconbridge/credentials/
          install -m 644 clients/ca.crt /etc/beaconbridge/ca.crt

        beacon-web: credentials/display.password (read-only user "display").
        The operator (beaconctl config push): credentials/operator.password in BEACONBRIDGE_MQTT_PASSWORD.
        Apps: each one's credentials/<user>.password; its user name is its observer client id.

        Identities: \(users.joined(separator: ", "))
        Keep ca/ca.key offline: it signs the broker's certificate (provision again with --renew).

        """
    }
}

/// The layout of `beaconctl provision`'s output directory.
struct ProvisionFiles {
    let root: String
    var ca: String { root + "/ca" }
    var broker: String { root + "/broker" }
    var credentials: String { root + "/credentials" }
    var clients: String { root + "/clients" }
    var work: String { root + "/.work" }

    func credential(_ user: String) -> String { credentials + "/\(user).password" }

    func makeDirectories() throws {
        do {
            for directory in [root, ca, broker, credentials, clients, work] {
                try FileSystem.makeDirectories(directory, mode: 0o700)
            }
        } catch {
            throw CommandFailure("cannot create \(root): \(error)", status: .failure)
        }
    }

    /// The secret in `path` (its first line), made of `bytes` random bytes when missing.
    func secret(_ path: String, bytes: Int) throws -> String {
        if FileSystem.exists(path) {
            let text = try FileSystem.readText(path)
            let line = String(text.split(separator: "\n").first ?? "")
            if !line.isEmpty { return line }
        }
        // Hex: no character a shell, a URL or Mosquitto's password file treats specially.
        var generator = SystemRandomNumberGenerator()
        let value = (0..<bytes).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return (byte < 16 ? "0" : "") + String(byte, radix: 16)
        }.joined()
        try writePrivate(path, value + "\n")
        return value
    }

    func writePrivate(_ path: String, _ text: String, mode: UInt32 = 0o600) throws {
        do {
            try FileSystem.write(path, Array(text.utf8), mode: mode)
            chmod(path, mode_t(mode))
        } catch {
            throw CommandFailure("cannot write \(path): \(error)", status: .failure)
        }
    }

    /// The scratch directory: the certificate request and the tools' output.
    func removeWork() {
        for name in ["broker.csr", "broker.ext"] + Tool.names.flatMap({ [$0 + ".out", $0 + ".err"] }) {
            unlink(work + "/" + name)
        }
        rmdir(work)
    }
}

/// Runs the tools provisioning needs, their output kept for the error message.
struct Tool {
    let directory: String
    static let names = ["mosquitto_passwd", "openssl-ca", "openssl-key", "openssl-sign"]

    func run(_ program: String, _ arguments: [String], _ name: String) async throws {
        let process = try BenchProcess(program, arguments, name: name, in: directory)
        let status = await process.wait(timeout: 120)
        guard status == 0 else {
            throw CommandFailure("\(program) \(arguments.first ?? "") failed (status \(status.map(String.init) ?? "none")): "
                                 + process.errors.trimmingBlanks, status: .failure)
        }
    }
}

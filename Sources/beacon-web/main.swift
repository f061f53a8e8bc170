import ArgumentParser
import BeaconKit
import Config
import CommandLineSupport
import HummingbirdBcrypt
import Logging
import SystemCalls
import WebServer

#if canImport(Glibc)
import Glibc
#endif

struct BeaconWeb: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "beacon-web",
        abstract: "Show a fleet in the browser: greeter displays, store floors, the fleet dashboard.",
        subcommands: [Serve.self, HashPassword.self],
        defaultSubcommand: Serve.self)
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the pages (the default subcommand).",
        discussion: """
        Pages (staff only: every page needs a login; /login, /assets/* and /healthz
        are the only answers without one):
          /                          the stores and their pages
          /stores/<major>/greeter    who is in: name, photo, usual drink, in store
                                     since, at which zone since; a card held through
                                     drop-outs shorter than the exit timeout; app
                                     users not in range listed apart; newest first;
                                     live; made for a tablet
          /stores/<major>/floor      gateways where the config places them
                                     (gateways[].store and .position, stores[].floorPlan),
                                     beacons as dots around their zone gateway; live
          /fleet                     every gateway: condition, source, adverts/s,
                                     malformed, dropped, last health, calibration
          /api/...  /events/...      the same data as JSON, and as Server-Sent Events

        Reads (read-only, under the config's topicPrefix): gateways/+/status,
        gateways/+/health, beacons/+/+/presence, beacons/+/+/observers/+ (photos),
        stores/+/roster, stores/+/customers/+, fleet/config, brain/status.
        Writes: only Home Assistant discovery configs, when the config's
        homeAssistant.discovery is true (docs/web.md); with it false, it removes
        those it published before.

        --users FILE lists who may log in, one "name:bcrypt-hash" a line (as made by
        `beacon-web hash-password`, or `htpasswd -B`). Failed logins are counted per
        name and per client address: past --login-attempts of either, that name and
        address wait --login-delay (1 s), then twice as long after each further failure
        (at most 5 min) before the next try; a known and an unknown name take the same
        time to refuse. After logging in, only a path on this site is followed
        (?next=/stores/100/greeter); anything else goes to /. Give the broker user with
        --mqtt-user and its password with --mqtt-password-file or
        BEACONBRIDGE_MQTT_PASSWORD: each screen its own login, display-<name>, from
        `beaconctl provision --display NAME`; the login is also its client id, so two
        screens never share one (the broker would drop one for the other). With
        --tls-cert and --tls-key it serves HTTPS only, and session cookies are Secure.

        Prints "listening on URL" on stdout once the port is open (--port 0 picks
        a free one). Exit status: 0 after SIGTERM/SIGINT, 1 on a runtime failure,
        2 for bad usage, a bad config or a bad users file.

        Example:
          beacon-web --config fleet.json --users /etc/beaconbridge/web-users \\
            --mqtt-user display-lobby \\
            --mqtt-password-file /etc/beaconbridge/display.password
        """)

    @Option(name: .long, help: ArgumentHelp("The fleet config (JSON).", valueName: "FLEET.json"))
    var config: String

    @Option(name: .long, help: ArgumentHelp("Who may log in: name:bcrypt-hash lines.", valueName: "FILE"))
    var users: String

    @Option(name: .long, help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(name: .long, help: "The port to listen on (0: any free port).")
    var port = 8080

    @Option(name: .long, help: ArgumentHelp("Override the config's broker: mqtt://[user@]host[:port] or mqtts://…; several hosts, comma-separated, for a cluster's nodes",
                                            valueName: "URL"))
    var broker: String?

    @Option(name: .long, help: ArgumentHelp("The broker user name of this display (read-only; one per screen: display-<name>).",
                                            valueName: "NAME"))
    var mqttUser: String?

    @Option(name: .long, help: ArgumentHelp("A file whose first line is that user's password.", valueName: "FILE"))
    var mqttPasswordFile: String?

    @Option(name: .long, help: ArgumentHelp("The MQTT client id (default: the --mqtt-user, else beacon-web-<host>-<pid>).",
                                            valueName: "ID"))
    var clientId: String?

    @Option(name: .long, help: ArgumentHelp("Serve HTTPS with this certificate chain (PEM).", valueName: "PEM"))
    var tlsCert: String?

    @Option(name: .long, help: ArgumentHelp("The certificate's private key (PEM).", valueName: "PEM"))
    var tlsKey: String?

    @Option(name: .long, help: ArgumentHelp("""
        Failed logins allowed per user name and per client address before each further \
        one makes that name and address wait: --login-delay, then twice as long after \
        every failure, at most 5 min (429 with Retry-After meanwhile).
        """, valueName: "N"))
    var loginAttempts = LoginThrottle.Settings().freeFailures

    @Option(name: .long, help: ArgumentHelp("""
        The first wait past --login-attempts failures, in seconds (1 to 300); each \
        further failure doubles it.
        """, valueName: "SECONDS"))
    var loginDelay = LoginThrottle.Settings().firstDelay

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: LogLevelOption = .info

    func validate() throws {
        if (tlsCert == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if !(0...65535).contains(port) { throw ValidationError("--port: \(port) is not a port (0-65535)") }
        if loginAttempts < 1 { throw ValidationError("--login-attempts: \(loginAttempts) must be 1 or more") }
        let longest = LoginThrottle.Settings().maxDelay
        if !(1...longest).contains(loginDelay) {
            throw ValidationError("--login-delay: \(loginDelay) must be from 1 to \(Int(longest)) seconds")
        }
    }

    func run() async throws {
        bootstrapLogging(logLevel)
        var fleet = try ConfigLoading.load(config)
        try ConfigLoading.override(&fleet, broker: broker)
        let accounts: StaffAccounts
        do {
            accounts = try StaffAccounts(parsing: try FileSystem.readText(users))
        } catch let error as StaffAccounts.FileError {
            throw CommandFailure("\(users): \(error)")
        } catch {
            throw CommandFailure("cannot read the users file \(users): \(error)")
        }
        let username = mqttUser ?? fleet.broker.url.username
        // Its login is its client id (the provisioned broker uses user names as client ids
        // anyway): two screens on one login would knock each other off.
        var options = WebServer.Options(clientID: clientId ?? username ?? "beacon-web-\(ProcessInfo.hostName)-\(ProcessInfo.id)")
        options.host = host
        options.port = port
        options.mqttUsername = username
        if let mqttPasswordFile {
            do {
                let text = try FileSystem.readText(mqttPasswordFile)
                options.mqttPassword = String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
            } catch {
                throw CommandFailure("cannot read the broker password file \(mqttPasswordFile): \(error)")
            }
        } else if let value = Environment.value("BEACONBRIDGE_MQTT_PASSWORD") {
            options.mqttPassword = value
        }
        options.tlsCertificate = tlsCert
        options.tlsKey = tlsKey
        options.loginThrottle.freeFailures = loginAttempts
        options.loginThrottle.firstDelay = loginDelay
        let logger = Logger(label: "beacon-web")
        for risk in fleet.broker.risks(hasPassword: options.mqttPassword != nil) { logger.warning("\(risk)") }
        do {
            let app = try WebServer.application(config: fleet, accounts: accounts, options: options, logger: logger) { url in
                printLine("listening on \(url)")
            }
            try await runService(app, logger: logger)
        } catch let error as WebServer.SetupError {
            throw CommandFailure(error.description, status: .usage)
        }
    }
}

struct HashPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hash-password",
        abstract: "Read a password on stdin; print its bcrypt hash for the --users file.",
        discussion: """
        Example:
          printf '%s' "$PASSWORD" | beacon-web hash-password >> hash
          echo "ana:$(cat hash)" >> /etc/beaconbridge/web-users
        """)

    @Option(name: .long, help: "bcrypt cost (4-31): each step doubles the work.")
    var cost = 12

    func validate() throws {
        guard (4...31).contains(cost) else { throw ValidationError("--cost: \(cost) is out of range 4-31") }
    }

    func run() throws {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            bytes += buffer[..<n]
        }
        var password = String(decoding: bytes, as: UTF8.self)
        while password.hasSuffix("\n") || password.hasSuffix("\r") { password.removeLast() }
        guard !password.isEmpty else { throw CommandFailure("no password on stdin") }
        printLine(Bcrypt.hash(password, cost: UInt8(cost)))
    }
}

await runMain(BeaconWeb.self)

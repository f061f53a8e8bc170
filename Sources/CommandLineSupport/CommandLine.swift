public import ArgumentParser
public import Config
public import Logging
public import ServiceLifecycle
import UnixSignals
import SystemCalls
import BeaconKit

#if canImport(Glibc)
import Glibc
#endif

/// Exit statuses of every BeaconBridge program (README, "Parts").
public enum ExitStatus: Int32, Sendable {
    case success = 0
    /// A runtime failure: the broker refused us for good, a source failed in a way no retry fixes.
    case failure = 1
    /// Bad usage or bad config, with the reason on stderr.
    case usage = 2
}

/// A problem to report on stderr before exiting with a status.
public struct CommandFailure: Error, CustomStringConvertible, Sendable {
    public var message: String
    public var status: ExitStatus

    public init(_ message: String, status: ExitStatus = .usage) {
        self.message = message
        self.status = status
    }

    public var description: String { message }
}

/// Runs a command the way every BeaconBridge executable should: parse, run, and turn
/// every error into a clear line on stderr and the right exit status (ArgumentParser's
/// own usage errors become status 2, not 64).
public func runMain<Command: AsyncParsableCommand>(_ type: Command.Type, arguments: [String]? = nil) async -> Never {
    var command: any ParsableCommand
    do {
        command = try type.parseAsRoot(arguments)
    } catch {
        exitForArgumentError(type, error, status: .usage)
    }
    do {
        if var asyncCommand = command as? any AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
        exit(0)
    } catch let failure as CommandFailure {
        // One line per problem, each naming the program, so they read well in a journal.
        writeStandardError(failure.message.split(separator: "\n").map { "\(programName): \($0)\n" }.joined())
        exit(failure.status.rawValue)
    } catch let errors as ConfigErrors {
        writeStandardError(errors.errors.map { "\(programName): config: \($0)" }.joined(separator: "\n") + "\n")
        exit(ExitStatus.usage.rawValue)
    } catch let exitCode as ExitCode {
        exit(exitCode.rawValue)
    } catch {
        // `--help` parses to a help command whose run() throws the help text.
        exitForArgumentError(type, error, status: type.exitCode(for: error) == .validationFailure ? .usage : .failure)
    }
}

/// Prints help (exit 0; fitted to the terminal by `HelpText`, not wrapped line by line by
/// ArgumentParser) or an error from ArgumentParser (exit `status`).
func exitForArgumentError<Command: ParsableCommand>(_ type: Command.Type, _ error: any Error, status: ExitStatus) -> Never {
    if type.exitCode(for: error) == .success {
        let help = type.fullMessage(for: error, columns: HelpText.unwrapped)
        // --experimental-dump-help is JSON (scripts/lib/manpage.py reads it): printed as it is.
        let isDump = CommandLine.arguments.contains("--experimental-dump-help")
        printLine(isDump ? help : HelpText.fitted(help, width: HelpText.terminalWidth))
        exit(0)
    }
    let message = type.fullMessage(for: error)
    writeStandardError("\(programName): \(message.isEmpty ? "\(error)" : message)\n")
    exit(status.rawValue)
}

var programName: String {
    String(CommandLine.arguments.first?.split(separator: "/").last ?? "beaconbridge")
}

public func writeStandardError(_ text: String) {
    var copy = text
    copy.withUTF8 { buffer in _ = write(2, buffer.baseAddress, buffer.count) }
}

/// Writes a line to stdout and flushes, so pipes see each line as it happens.
public func printLine(_ text: String) {
    var line = text + "\n"
    line.withUTF8 { buffer in
        var offset = 0
        while offset < buffer.count {
            let n = write(1, buffer.baseAddress! + offset, buffer.count - offset)
            if n <= 0 { break }
            offset += n
        }
    }
}

/// `--log-level` values.
public enum LogLevelOption: String, ExpressibleByArgument, CaseIterable, Sendable {
    case trace, debug, info, notice, warning, error, critical

    public var level: Logger.Level { Logger.Level(rawValue: rawValue)! }
}

/// Logs to stderr at `level`, once per process.
public func bootstrapLogging(_ level: LogLevelOption) {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level.level
        return handler
    }
}

/// Reading and overriding the fleet config, shared by every program.
public enum ConfigLoading {
    /// Reads and validates a config file; errors carry exit status 2.
    public static func load(_ path: String) throws -> FleetConfig {
        let text: String
        do {
            text = try FileSystem.readText(path)
        } catch {
            throw CommandFailure("cannot read config \(path): \(error)")
        }
        do {
            return try FleetConfig.parse(text)
        } catch {
            throw CommandFailure(error.errors.map { "\(path): \($0)" }.joined(separator: "\n"))
        }
    }

    /// Applies `--broker URL` to the fleet's broker, or with `gateway` to that gateway's
    /// broker (its store's when the store has one). A plaintext URL to another host is
    /// refused unless that broker's config allows plaintext (`BrokerConfig.refusal`).
    public static func override(_ config: inout FleetConfig, broker: String?, gateway: String? = nil) throws {
        guard let broker else { return }
        let url: BrokerURL
        do {
            url = try BrokerURL(parsing: broker)
        } catch {
            throw CommandFailure("--broker: \(error.reason)")
        }
        func apply(_ target: inout BrokerConfig) throws {
            target.url = url
            if let user = url.username { target.username = user }
            if let refusal = target.refusal { throw CommandFailure("--broker: \(refusal)") }
        }
        if let gateway, let major = config.gateway(id: gateway)?.store,
           let index = config.stores.firstIndex(where: { $0.major == major && $0.broker != nil }) {
            try apply(&config.stores[index].broker!)
        } else {
            try apply(&config.broker)
        }
    }

    /// The broker password: `BEACONBRIDGE_MQTT_PASSWORD`, else the credential systemd
    /// passes (`LoadCredential=mqtt-password:…` gives `$CREDENTIALS_DIRECTORY/mqtt-password`),
    /// else the config's password file; `nil` when none is set (anonymous).
    public static func password(for broker: BrokerConfig) throws -> String? {
        if let value = Environment.value("BEACONBRIDGE_MQTT_PASSWORD") { return value }
        if let value = try credential("mqtt-password") { return value }
        guard let file = broker.passwordFile else { return nil }
        do {
            return firstLine(try FileSystem.readText(file))
        } catch {
            throw CommandFailure("cannot read the broker password file \(file): \(error)")
        }
    }

    /// The first line of the secret file `path` (an option's value, named in errors).
    public static func secret(file path: String, option: String) throws -> String {
        let text: String
        do { text = try FileSystem.readText(path) } catch { throw CommandFailure("\(option) \(path): \(error)") }
        let line = firstLine(text)
        guard !line.isEmpty else { throw CommandFailure("\(option) \(path): the first line is empty") }
        return line
    }

    /// A store's proof-of-presence secret: the first line of `stores[].proof.secretFile`, at
    /// least 16 characters (`beaconctl provision` writes 64 hex digits).
    public static func proofSecret(_ proof: ProofConfig, store: UInt16) throws -> [UInt8] {
        let line = try secret(file: proof.secretFile, option: "store \(store)'s proof.secretFile")
        guard line.utf8.count >= 16 else {
            throw CommandFailure("store \(store)'s proof.secretFile \(proof.secretFile): the secret is shorter than 16 "
                                 + "characters (e.g. openssl rand -hex 32 > \(proof.secretFile))")
        }
        return Array(line.utf8)
    }

    /// Every store's proof-of-presence secret by its file (`BrainCore.proofSecrets`).
    public static func proofSecrets(_ config: FleetConfig) throws -> [String: [UInt8]] {
        var secrets: [String: [UInt8]] = [:]
        for store in config.stores {
            guard let proof = store.proof, secrets[proof.secretFile] == nil else { continue }
            secrets[proof.secretFile] = try proofSecret(proof, store: store.major)
        }
        return secrets
    }

    /// The first line of credential `name` from `$CREDENTIALS_DIRECTORY` (systemd's
    /// `LoadCredential=`); `nil` outside systemd or when the unit passes no such credential.
    public static func credential(_ name: String) throws -> String? {
        guard let directory = Environment.value("CREDENTIALS_DIRECTORY"), !directory.isEmpty else { return nil }
        let path = directory + "/" + name
        guard FileSystem.exists(path) else { return nil }
        do {
            return firstLine(try FileSystem.readText(path))
        } catch {
            throw CommandFailure("cannot read the credential \(path): \(error)")
        }
    }

    /// Says loudly (stderr, before logging starts) what is risky about this connection.
    public static func warnAboutRisks(of broker: BrokerConfig, hasPassword: Bool) {
        for risk in broker.risks(hasPassword: hasPassword) { writeStandardError("\(programName): warning: \(risk)\n") }
    }

    private static func firstLine(_ text: String) -> String {
        String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces, tabs and carriage returns.
    public var trimmingBlanks: SubSequence {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let first = firstIndex(where: { !blank($0) }), let last = lastIndex(where: { !blank($0) }) else {
            return self[endIndex...]
        }
        return self[first...last]
    }
}

/// Runs a daemon's service (and `others` beside it, e.g. a metrics endpoint) until SIGTERM
/// or SIGINT shuts them down gracefully, the others first; a service that fails makes the
/// program exit with status 1.
///
/// SIGABRT ends the program (`ProcessSignals.abortTerminates`): systemd's watchdog sends it
/// to a hung daemon and expects it to end.
public func runService(_ service: some Service, also others: [any Service] = [], logger: Logger) async throws {
    do {
        try ProcessSignals.abortTerminates()
    } catch {
        logger.warning("SIGABRT keeps the runtime's handler: a watchdog abort may not end this process",
                       metadata: ["error": "\(error)"])
    }
    let group = ServiceGroup(configuration: .init(
        services: [.init(service: service)] + others.map { .init(service: $0) },
        gracefulShutdownSignals: [.sigterm, .sigint],
        logger: logger))
    do {
        try await group.run()
    } catch {
        throw CommandFailure("\(error)", status: .failure)
    }
}

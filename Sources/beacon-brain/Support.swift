// Command-line helpers of beacon-brain. They mirror what CommandLineSupport provides to
// the other programs (exit statuses, config loading, the password, logging); beacon-brain
// moves to those once that module is in place.

import ArgumentParser
import BeaconKit
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A problem to report on stderr before exiting: status 2 for bad usage or config, 1 at run time.
struct Failure: Error, CustomStringConvertible {
    var message: String
    var status: Int32

    init(_ message: String, status: Int32 = 2) {
        self.message = message
        self.status = status
    }

    var description: String { message }
}

/// Parses and runs a command with SPEC §9's exit statuses: 0 success (and `--help`),
/// 1 runtime failure, 2 bad usage or config (ArgumentParser would use 64).
func runMain<Command: AsyncParsableCommand>(_ type: Command.Type) async -> Never {
    var command: any ParsableCommand
    do {
        command = try type.parseAsRoot()
    } catch {
        let message = type.fullMessage(for: error)
        if type.exitCode(for: error) == .success {
            print(message)
            exit(0)
        }
        writeStandardError("beacon-brain: " + message + "\n")
        exit(2)
    }
    do {
        if var asyncCommand = command as? any AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try command.run()
        }
        exit(0)
    } catch let failure as Failure {
        writeStandardError("beacon-brain: \(failure.message)\n")
        exit(failure.status)
    } catch let code as ExitCode {
        exit(code.rawValue)
    } catch {
        // ArgumentParser's own errors (help asked for, validation) keep their meaning.
        let code = type.exitCode(for: error)
        let message = type.fullMessage(for: error)
        if code == .success {
            print(message)
            exit(0)
        }
        writeStandardError("beacon-brain: \(message.isEmpty ? "\(error)" : message)\n")
        exit(code == .validationFailure ? 2 : 1)
    }
}

func writeStandardError(_ text: String) {
    var copy = text
    copy.withUTF8 { buffer in
        var offset = 0
        while offset < buffer.count {
            let n = write(2, buffer.baseAddress! + offset, buffer.count - offset)
            if n <= 0 { break }
            offset += n
        }
    }
}

/// `--log-level` values.
enum LogLevel: String, ExpressibleByArgument, CaseIterable {
    case trace, debug, info, notice, warning, error, critical

    var level: Logger.Level { Logger.Level(rawValue: rawValue)! }
}

/// Logs to stderr at `level`.
func bootstrapLogging(_ level: LogLevel) {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level.level
        return handler
    }
}

/// Reads and validates the fleet config; every problem is reported with its JSON path.
func loadConfig(_ path: String) throws -> FleetConfig {
    let text: String
    do {
        text = try readTextFile(path)
    } catch {
        throw Failure("cannot read config \(path): \(error)")
    }
    do {
        return try FleetConfig.parse(text)
    } catch {
        throw Failure(error.errors.map { "\(path): \($0)" }.joined(separator: "\n"))
    }
}

/// The broker password: `BEACONBRIDGE_MQTT_PASSWORD`, else the first line of the
/// config's password file; never from the command line.
func brokerPassword(_ broker: BrokerConfig) throws -> String? {
    if let value = getenv("BEACONBRIDGE_MQTT_PASSWORD") { return String(cString: value) }
    guard let file = broker.passwordFile else { return nil }
    do {
        let text = try readTextFile(file)
        return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
    } catch {
        throw Failure("cannot read the broker password file \(file): \(error)")
    }
}

struct FileError: Error, CustomStringConvertible {
    var description: String
}

/// A whole file as UTF-8 text (at most 16 MiB: a fleet config, a password).
func readTextFile(_ path: String) throws -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw FileError(description: String(cString: strerror(errno))) }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw FileError(description: String(cString: strerror(errno)))
        }
        if n == 0 { break }
        bytes += chunk[0..<n]
        guard bytes.count <= 16 * 1024 * 1024 else { throw FileError(description: "larger than 16 MiB") }
    }
    guard let text = String(validating: bytes, as: UTF8.self) else { throw FileError(description: "not UTF-8 text") }
    return text
}

extension Substring {
    var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}

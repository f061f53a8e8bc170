import Foundation
import SystemCalls

/// A PostgreSQL server of a test's own: `initdb` into a fresh directory, then `postgres`
/// on a free port of 127.0.0.1 (its Unix socket in that directory too), stopped by its PID.
///
/// PostgreSQL refuses to run as root: when the tests are root, `initdb` and the server run
/// as `nobody` (`setpriv`), in a directory of their own that `nobody` owns. The binaries are
/// Debian's (`/usr/lib/postgresql/<version>/bin`, package `postgresql-15`, which
/// `scripts/install-deps --test` installs), or `initdb` and `postgres` on the PATH.
public final class PostgresServer: @unchecked Sendable {
    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    public private(set) var port: UInt16 = 0
    /// The cluster's directory: `data/` and the socket.
    public let directory: String
    /// The superuser, trusted on loopback (no password).
    public let user = "beaconbridge"
    private let binaries: String
    private let settings: [String]
    private let lock = NSLock()
    private var current: ChildProcess?
    private let scratch: TemporaryDirectory

    /// `postgres://beaconbridge@127.0.0.1:PORT/DATABASE`
    public func url(database: String = "postgres") -> String { "postgres://\(user)@127.0.0.1:\(port)/\(database)" }

    /// Makes a cluster and starts it; returns once it accepts connections. `settings` are
    /// extra `-c name=value` (e.g. `fsync=off` for speed where durability is not the test).
    public static func start(in directory: TemporaryDirectory, settings: [String] = []) async throws -> PostgresServer {
        let server = try await PostgresServer(in: directory, settings: settings)
        var failure: (any Error)?
        // Another process may take the free port before postgres binds it: try another.
        for _ in 0..<3 {
            do {
                server.port = try FreePort.allocate()
                try await server.launch()
                return server
            } catch {
                failure = error
                await server.stop()
            }
        }
        throw failure!
    }

    private init(in scratch: TemporaryDirectory, settings: [String]) async throws {
        guard let binaries = Self.binaries() else {
            throw StartError(description: "PostgreSQL's initdb and postgres are not installed (scripts/install-deps --test installs postgresql-15)")
        }
        self.binaries = binaries
        self.scratch = scratch
        self.settings = settings
        // The test's own directory is root's and private: the server gets one beside it that
        // its user owns.
        let template = NSTemporaryDirectory() + "/beaconbridge-postgres-XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw StartError(description: "mkdtemp \(template) failed") }
        directory = String(cString: made)
        if Self.asNobody { chown(directory, 65534, 65534) }
        let initdb = try ChildProcess(Self.wrap(binaries + "/initdb").program,
                                      Self.wrap(binaries + "/initdb").arguments
                                          + ["-D", directory + "/data", "-U", user, "-A", "trust", "-E", "UTF8", "--no-sync",
                                             "--no-instructions", "--locale=C"],
                                      in: scratch, name: "initdb")
        guard await initdb.waitForExit(timeout: 120) == 0 else {
            throw StartError(description: "initdb failed\n\(initdb.diagnostics)")
        }
    }

    /// Where Debian puts a version's binaries (the newest), else the PATH's `initdb`.
    static func binaries() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        for version in versions.reversed() where FileManager.default.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return "\(root)/\(version)/bin"
        }
        guard let initdb = Programs.system("initdb") else { return nil }
        let resolved = URL(fileURLWithPath: initdb).resolvingSymlinksInPath().deletingLastPathComponent().path
        return FileManager.default.isExecutableFile(atPath: resolved + "/postgres") ? resolved : nil
    }

    static var asNobody: Bool { geteuid() == 0 }

    /// The command that runs `program` as the server's user.
    static func wrap(_ program: String) -> (program: String, arguments: [String]) {
        guard asNobody, let setpriv = Programs.system("setpriv") else { return (program, []) }
        return (setpriv, ["--reuid=65534", "--regid=65534", "--clear-groups", "--", program])
    }

    /// The running server process, if any.
    public var process: ChildProcess? { lock.withLock { current } }

    public var isRunning: Bool { process?.isRunning ?? false }

    /// The running server's log so far (its stderr).
    public var log: String { process?.stderr ?? "" }

    public var diagnostics: String { process?.diagnostics ?? "(postgres is not running)" }

    private func launch() async throws {
        let command = Self.wrap(binaries + "/postgres")
        var arguments = command.arguments + ["-D", directory + "/data", "-p", String(port), "-k", directory,
                                             "-c", "listen_addresses=127.0.0.1", "-c", "logging_collector=off"]
        for setting in settings { arguments += ["-c", setting] }
        let process = try ChildProcess(command.program, arguments, in: scratch, name: "postgres")
        lock.withLock { current = process }
        let port = port
        // Only this process's "ready" says the port is this server's (another process may
        // have taken the free port first).
        let up = await eventually(timeout: 60, interval: 0.02) {
            !process.isRunning
                || (process.stderr.contains("database system is ready to accept connections") && Loopback.acceptsConnections(port: port))
        }
        guard up, process.isRunning else {
            throw StartError(description: "postgres did not come up on port \(port)\n\(process.diagnostics)")
        }
    }

    /// Stops the server by its PID: SIGINT, PostgreSQL's fast shutdown (it ends every session
    /// and exits; SIGTERM, the smart one, would wait for every client to leave), SIGQUIT if
    /// it is still there after `grace` seconds.
    public func stop(grace: Double = 10) async {
        let process = lock.withLock { () -> ChildProcess? in
            defer { current = nil }
            return current
        }
        guard let process else { return }
        process.signal(SIGINT)
        if await process.waitForExit(timeout: grace) == nil {
            process.signal(SIGQUIT)
            _ = await process.waitForExit(timeout: 10)
        }
    }

    /// Starts the server again on the same port with the same data.
    public func restart() async throws {
        await stop()
        try await launch()
    }

    /// Runs `psql` against `database` as the superuser; its output, or an error with it.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") async throws -> String {
        let psql = FileManager.default.isExecutableFile(atPath: binaries + "/psql") ? binaries + "/psql" : (Programs.system("psql") ?? "psql")
        let tool = try ChildProcess(psql, ["-h", "127.0.0.1", "-p", String(port), "-U", user, "-d", database, "-v", "ON_ERROR_STOP=1",
                                           "-At", "-c", sql], in: scratch, name: "psql")
        guard await tool.waitForExit(timeout: 60) == 0 else { throw StartError(description: "psql \(sql)\n\(tool.diagnostics)") }
        return tool.stdout
    }

    /// A new, empty database.
    public func createDatabase(_ name: String) async throws -> String {
        try await psql("CREATE DATABASE \(name)")
        return url(database: name)
    }

    deinit {
        if let process = current, process.isRunning {
            process.signal(SIGQUIT)
        }
        if Foundation.ProcessInfo.processInfo.environment["BEACONBRIDGE_KEEP_TEST_FILES"] == nil {
            try? FileManager.default.removeItem(atPath: directory)
        }
    }
}

import Foundation
import SystemCalls

/// BlueZ's controller emulator, `btvirt -s`, serving emulated LE controllers on a Unix
/// socket in a test's own directory: every connection to `lePath` is one controller,
/// and a controller that advertises is heard by the ones that scan.
///
/// On kernels without the AF_ALG crypto sockets btvirt drops every connection at once;
/// the preloaded `tools/btvirt-shim` (compiled here, into the test's directory) fixes
/// that and, through `BTVIRT_SOCKET_DIR`, moves btvirt's `/tmp/bt-server-*` sockets into
/// that directory so parallel tests each have their own emulator.
public final class BtvirtServer: @unchecked Sendable {
    public let directory: TemporaryDirectory
    public let process: ChildProcess

    /// The LE controllers' socket.
    public var lePath: String { directory.file("bt-server-le") }
    /// The source URI for one emulated controller: `h4:unix:<lePath>`.
    public var sourceURI: String { "h4:unix:" + lePath }
    public var pid: Int32 { process.pid }

    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    private init(directory: TemporaryDirectory, process: ChildProcess) {
        self.directory = directory
        self.process = process
    }

    /// Starts btvirt with its sockets in `directory`; returns once `bt-server-le` exists.
    public static func start(in directory: TemporaryDirectory) async throws -> BtvirtServer {
        guard let btvirt = Programs.system("btvirt") else {
            throw StartError(description: "btvirt is not installed (looked in PATH, /usr/sbin, /sbin, /usr/bin): "
                + "install the Debian package bluez-test-tools (apt-get install bluez-test-tools)")
        }
        // Sockets left by an earlier btvirt in this directory would look ready too early.
        for kind in ["bredrle", "bredr", "le", "amp", "mon"] {
            try? FileManager.default.removeItem(atPath: directory.file("bt-server-" + kind))
        }
        let environment = ["BTVIRT_SOCKET_DIR": directory.path, "LD_PRELOAD": try await compileShim(into: directory)]
        let process = try ChildProcess(btvirt, ["-s"], environment: environment, in: directory, name: "btvirt")
        let server = BtvirtServer(directory: directory, process: process)
        var deadline = WaitDeadline(after: 10)
        // The socket file appears at bind(), a moment before listen(): wait for the listener.
        while !Self.isListening(server.lePath) {
            guard process.isRunning else {
                throw StartError(description: "btvirt exited before serving \(server.lePath)\n\(process.diagnostics)")
            }
            guard !deadline.hasPassed else {
                await process.stop()
                throw StartError(description: "btvirt did not listen on \(server.lePath) within \(Int(10 * patience)) s\n\(process.diagnostics)")
            }
            await deadline.pause(0.02)
        }
        return server
    }

    /// Whether a Unix stream socket listens at `path`, from /proc/net/unix (flag
    /// __SO_ACCEPTCON); asked without connecting, since every connection to btvirt is a
    /// new emulated controller.
    static func isListening(_ path: String) -> Bool {
        guard let table = readWhole("/proc/net/unix") else { return FileManager.default.fileExists(atPath: path) }
        return table.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 8, fields[7] == path, let flags = UInt32(fields[3], radix: 16) else { return false }
            return flags & 0x0001_0000 != 0
        }
    }

    /// A /proc file read to its end (Foundation stops after the first page of one).
    static func readWhole(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The compiled `tools/btvirt-shim/btvirt_shim.c` (`directory` is unused: the library
    /// is built once per machine and source text, see `ShimBuilder`); the library's path.
    public static func compileShim(into directory: TemporaryDirectory) async throws -> String {
        try await ShimBuilder.shared.library()
    }

    /// Stops this btvirt (SIGTERM, then SIGKILL), by its PID only.
    public func stop() async {
        await process.stop(grace: 3)
    }
}

/// Builds an LD_PRELOAD library from tools/ once: tests that start btvirt in parallel share one library,
/// named after a hash of its source so an edited shim is rebuilt. The compiler runs as a
/// child process that is polled with `Task.sleep`, never waited for on a thread of the
/// test's cooperative pool (a machine with two cores has two such threads, and a test
/// suite that blocks them stalls every other test's timers).
public actor ShimBuilder {
    /// `tools/btvirt-shim`: btvirt without the AF_ALG crypto sockets this kernel lacks.
    public static let shared = ShimBuilder(source: "tools/btvirt-shim/btvirt_shim.c", name: "btvirt-shim")
    /// `tools/no-unix-sockets`: `socket(AF_UNIX, …)` refused, as the gateway's unit refuses it.
    public static let noUnixSockets = ShimBuilder(source: "tools/no-unix-sockets/no_unix_sockets.c", name: "no-unix-sockets")
    private let source: String
    private let name: String
    private var build: Task<String, any Error>?

    init(source: String, name: String) {
        self.source = source
        self.name = name
    }

    /// The library's path, compiled on first use.
    public func library() async throws -> String {
        if let build { return try await build.value }
        let task = Task { [source, name] in try await Self.compile(source: source, name: name) }
        build = task
        return try await task.value
    }

    private static func compile(source relative: String, name: String) async throws -> String {
        let source = Programs.repositoryRoot + "/" + relative
        let text = try Data(contentsOf: URL(fileURLWithPath: source))
        // FNV-1a of the source: a new shim gets a new file.
        var hash: UInt64 = 0xcbf29ce484222325
        for byte in text { hash = (hash ^ UInt64(byte)) &* 0x100000001b3 }
        let output = NSTemporaryDirectory() + "/beaconbridge-\(name)-\(getuid())-\(String(hash, radix: 16)).so"
        if FileManager.default.fileExists(atPath: output) { return output }
        guard let compiler = ["cc", "gcc", "clang"].lazy.compactMap(Programs.system).first else {
            throw BtvirtServer.StartError(description: "no C compiler (cc, gcc or clang) to build \(relative): install gcc")
        }
        let partial = output + ".\(getpid()).tmp"
        let errors = NSTemporaryDirectory() + "/beaconbridge-\(name)-\(getpid()).err"
        defer { try? FileManager.default.removeItem(atPath: errors) }
        let build = try SpawnedProcess(compiler, ["-shared", "-fPIC", "-O2", "-o", partial, source, "-ldl"],
                                       stdoutPath: "/dev/null", stderrPath: errors)
        var ended = build.poll()
        while ended == nil {
            try await Task.sleep(nanoseconds: 20_000_000)
            ended = build.poll()
        }
        guard ended == .exited(0) else {
            let message = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
            throw BtvirtServer.StartError(description: "\(compiler) could not build \(source):\n\(message)")
        }
        // Atomic: a parallel test process sees the whole library or none.
        guard rename(partial, output) == 0 else {
            throw BtvirtServer.StartError(description: "cannot move \(partial) to \(output): errno \(errno)")
        }
        return output
    }
}

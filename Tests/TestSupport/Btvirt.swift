import Foundation

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
        let environment = ["BTVIRT_SOCKET_DIR": directory.path, "LD_PRELOAD": try compileShim(into: directory)]
        let process = try ChildProcess(btvirt, ["-s"], environment: environment, in: directory, name: "btvirt")
        let server = BtvirtServer(directory: directory, process: process)
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: server.lePath) {
            guard process.isRunning else {
                throw StartError(description: "btvirt exited before serving \(server.lePath)\n\(process.diagnostics)")
            }
            guard Date() < deadline else {
                await process.stop()
                throw StartError(description: "btvirt did not create \(server.lePath) within 10 s\n\(process.diagnostics)")
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        return server
    }

    /// Compiles `tools/btvirt-shim/btvirt_shim.c` into `directory`; the library's path.
    public static func compileShim(into directory: TemporaryDirectory) throws -> String {
        let output = directory.file("btvirt_shim.so")
        if FileManager.default.fileExists(atPath: output) { return output }
        guard let compiler = ["cc", "gcc", "clang"].lazy.compactMap(Programs.system).first else {
            throw StartError(description: "no C compiler (cc, gcc or clang) to build the btvirt shim: install gcc")
        }
        let source = Programs.repositoryRoot + "/tools/btvirt-shim/btvirt_shim.c"
        let build = Process()
        build.executableURL = URL(fileURLWithPath: compiler)
        build.arguments = ["-shared", "-fPIC", "-O2", "-o", output, source, "-ldl"]
        let errors = Pipe()
        build.standardError = errors
        build.standardOutput = FileHandle.nullDevice
        try build.run()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        build.waitUntilExit()
        guard build.terminationStatus == 0 else {
            throw StartError(description: "\(compiler) could not build \(source):\n"
                + String(decoding: message, as: UTF8.self))
        }
        return output
    }

    /// Stops this btvirt (SIGTERM, then SIGKILL), by its PID only.
    public func stop() async {
        await process.stop(grace: 3)
    }
}

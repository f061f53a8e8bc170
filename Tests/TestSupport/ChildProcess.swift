import Foundation
import SystemCalls

/// A process a test started, stopped again by its PID and nothing else.
///
/// Started by SystemCalls' `SpawnedProcess`, as `beaconctl` starts its programs (the signal
/// mask, the descriptors it inherits: see there). Output goes to files in the test's
/// temporary directory so a failing test can show it.
public final class ChildProcess: Sendable {
    public let name: String
    public let stdoutPath: String
    public let stderrPath: String
    private let process: SpawnedProcess

    /// Starts `executable` with `arguments`; `environment` adds to the inherited one.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                in directory: TemporaryDirectory, name: String? = nil, stdin: FileHandle? = nil) throws {
        self.name = name ?? URL(fileURLWithPath: executable).lastPathComponent
        let unique = UUID().uuidString.prefix(8)
        stdoutPath = directory.path + "/\(self.name)-\(unique).out"
        stderrPath = directory.path + "/\(self.name)-\(unique).err"
        process = try SpawnedProcess(executable, arguments, environment: environment,
                                     stdin: stdin.map { .descriptor($0.fileDescriptor) } ?? .file("/dev/null"),
                                     stdoutPath: stdoutPath, stderrPath: stderrPath)
    }

    public var pid: Int32 { process.pid }
    public var isRunning: Bool { process.isRunning }

    public var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    public var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }
    public var stdoutLines: [String] { stdout.split(separator: "\n").map(String.init) }

    /// The signal that ended the process, when one did.
    public var terminationSignal: Int32? {
        if case .signalled(let signal)? = process.poll() { return signal }
        return nil
    }

    /// Sends `signal` to this process only (not once it has ended).
    public func signal(_ signal: Int32) { process.signal(signal) }

    /// Waits for the process to end; its exit status (the signal's number when a signal
    /// ended it), or `nil` when the deadline for `timeout` seconds passes (see `patience`).
    @discardableResult
    public func waitForExit(timeout: Double = 10) async -> Int32? {
        await process.wait(timeout: timeout * patience).map(Self.number)
    }

    private static func number(_ ended: SpawnedProcess.Termination) -> Int32 {
        switch ended {
        case .exited(let code): code
        case .signalled(let signal): signal
        }
    }

    /// SIGTERM, then SIGKILL if it does not end within `grace` seconds.
    @discardableResult
    public func stop(grace: Double = 5) async -> Int32? {
        signal(SIGTERM)
        if let status = await waitForExit(timeout: grace) { return status }
        signal(SIGKILL)
        return await waitForExit(timeout: 5)
    }

    /// A summary for failure messages.
    public var diagnostics: String {
        "--- \(name) (pid \(pid)) stdout ---\n\(stdout.suffix(4000))\n--- \(name) stderr ---\n\(stderr.suffix(4000))"
    }
}

/// A directory removed when the test is done with it.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init(_ label: String = "beaconbridge") throws {
        let template = NSTemporaryDirectory() + "/\(label)-XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let result = mkdtemp(&bytes) else { throw CocoaError(.fileWriteUnknown) }
        path = String(cString: result)
    }

    public func file(_ name: String) -> String { path + "/" + name }

    public func write(_ name: String, _ text: String) throws -> String {
        let target = file(name)
        try text.write(toFile: target, atomically: true, encoding: .utf8)
        return target
    }

    public func write(_ name: String, bytes: [UInt8]) throws -> String {
        let target = file(name)
        try Data(bytes).write(to: URL(fileURLWithPath: target))
        return target
    }

    deinit {
        if Foundation.ProcessInfo.processInfo.environment["BEACONBRIDGE_KEEP_TEST_FILES"] == nil {
            try? FileManager.default.removeItem(atPath: path)
        }
    }
}

/// Finding programs: ours (built next to the test bundle) and the system's.
public enum Programs {
    /// The directory holding the built executables (`.build/debug`).
    public static var buildDirectory: String {
        let bundle = Bundle.main.bundleURL
        // swift test runs `<build>/<Package>PackageTests.xctest`; products sit beside it.
        var directory = bundle.deletingLastPathComponent()
        if !FileManager.default.fileExists(atPath: directory.appendingPathComponent("beacon-gateway").path) {
            directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        }
        return directory.path
    }

    /// A product of this package: `beacon-gateway`, `beacon-brain`, `beaconctl`.
    public static func built(_ name: String) -> String { buildDirectory + "/" + name }

    /// A system program from PATH, `/usr/sbin` or `/sbin`; `nil` when absent.
    public static func system(_ name: String) -> String? {
        let path = Foundation.ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/bin"] {
            let candidate = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// The repository root (for fixtures and scripts).
    public static var repositoryRoot: String {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }

    /// The shared test captures (`../shared/testdata/captures` or the copy in the repo).
    public static var capturesDirectory: String { repositoryRoot + "/Tests/Fixtures/captures" }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
public enum FreePort {
    public static func allocate() throws -> UInt16 { try Loopback.freePort() }
}

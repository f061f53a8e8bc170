import BeaconKit
import CommandLineSupport
import SystemCalls

#if canImport(Glibc)
import Glibc
#endif

/// A program `beaconctl` started (a benchmark's broker and clients, a score's gateways and
/// brain, provisioning's `openssl`), its output in files; stopped by its PID only.
final class RunningProgram: Sendable {
    let name: String
    let stdoutPath: String
    let stderrPath: String
    private let process: SpawnedProcess

    /// Starts `path` with `arguments` (see `SpawnedProcess` for the signals and descriptors
    /// it starts with); output in `directory`/`name`.out and .err.
    init(_ path: String, _ arguments: [String], name: String, in directory: String) throws {
        self.name = name
        stdoutPath = directory + "/\(name).out"
        stderrPath = directory + "/\(name).err"
        do {
            process = try SpawnedProcess(path, arguments, stdoutPath: stdoutPath, stderrPath: stderrPath)
        } catch {
            throw CommandFailure("cannot start \(path): \(error)", status: .failure)
        }
    }

    var pid: Int32 { process.pid }
    var output: String { (try? FileSystem.readText(stdoutPath)) ?? "" }
    var errors: String { (try? FileSystem.readText(stderrPath)) ?? "" }

    /// The exit status once ended (128 + the signal for a signalled end), `nil` while running.
    func poll() -> Int32? { process.poll()?.status }

    /// Sends `signal`, unless it has ended.
    func signal(_ signal: Int32) { process.signal(signal) }

    /// Waits up to `timeout` seconds for the end; the exit status, or `nil` on timeout.
    func wait(timeout: Double) async -> Int32? { await process.wait(timeout: timeout)?.status }

    /// Waits until `predicate` holds for the standard output (or the process ends).
    func waitForOutput(timeout: Double, _ predicate: (String) -> Bool) async -> Bool {
        let deadline = WallClock.monotonic() + timeout
        while WallClock.monotonic() < deadline {
            if predicate(output) { return true }
            if poll() != nil { return predicate(output) }
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        return false
    }

    /// SIGTERM, then SIGKILL after `grace` seconds.
    func stop(grace: Double = 5) async { await process.stop(grace: grace) }

    /// The last JSON object line of the standard output.
    var lastJSON: JSONObject? {
        for line in output.split(separator: "\n").reversed() where line.hasPrefix("{") {
            if case .object(let object)? = try? JSONParser().parse(String(line)) { return object }
        }
        return nil
    }

    /// Resident memory (VmRSS) and its peak (VmHWM), bytes, from /proc.
    var memory: (resident: Int, peak: Int)? {
        guard let text = try? FileSystem.readText("/proc/\(pid)/status") else { return nil }
        func kilobytes(_ key: String) -> Int? {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }) else { return nil }
            return line.split(separator: " ").compactMap { Int($0) }.first
        }
        guard let rss = kilobytes("VmRSS"), let hwm = kilobytes("VmHWM") else { return nil }
        return (rss * 1024, hwm * 1024)
    }

    /// User plus system CPU time so far, seconds, from /proc/PID/stat.
    var cpuSeconds: Double? {
        guard let text = try? FileSystem.readText("/proc/\(pid)/stat"),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime 14 and stime 15 (1-based, man 5 proc).
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}


/// Where the programs `beaconctl` runs are.
enum Programs {
    /// Beside this executable (the same build), for BeaconBridge's own programs.
    static func sibling(_ name: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        let path = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = path.lastIndex(of: "/") else { return nil }
        let candidate = String(path[..<slash]) + "/" + name
        return access(candidate, X_OK) == 0 ? candidate : nil
    }

    /// On PATH or in the sbin directories (Debian installs mosquitto in /usr/sbin).
    static func find(_ name: String) -> String? {
        let path = (Environment.value("PATH") ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin:/usr/local/sbin"
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }
}

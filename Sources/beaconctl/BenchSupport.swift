import BeaconKit
import CommandLineSupport
import SystemCalls

#if canImport(Glibc)
import Glibc
#endif

/// A program `beaconctl bench` started, with its output in files; stopped by its PID only.
final class BenchProcess: @unchecked Sendable {
    let name: String
    let pid: pid_t
    let stdoutPath: String
    let stderrPath: String
    private var status: Int32?

    /// Starts `path` with `arguments` and the default signal mask and dispositions.
    init(_ path: String, _ arguments: [String], name: String, in directory: String) throws {
        self.name = name
        stdoutPath = directory + "/\(name).out"
        stderrPath = directory + "/\(name).err"
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGTERM)
        sigaddset(&defaults, SIGINT)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([path] + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let code = (argv + [nil]).withUnsafeBufferPointer { pointers in
            posix_spawn(&pid, path, &actions, &attributes,
                        UnsafeMutablePointer(mutating: pointers.baseAddress!), environ)
        }
        guard code == 0 else {
            throw CommandFailure("cannot start \(path): \(String(cString: strerror(code)))", status: .failure)
        }
        self.pid = pid
    }

    var output: String { (try? FileSystem.readText(stdoutPath)) ?? "" }
    var errors: String { (try? FileSystem.readText(stderrPath)) ?? "" }

    /// The exit status once ended (reaping it), `nil` while running.
    func poll() -> Int32? {
        if let status { return status }
        var raw: Int32 = 0
        guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
        // WIFEXITED / WEXITSTATUS, spelled out: the macros are not imported.
        status = raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
        return status
    }

    /// Waits up to `timeout` seconds for the end; the exit status, or `nil` on timeout.
    func wait(timeout: Double) async -> Int32? {
        let deadline = WallClock.monotonic() + timeout
        while WallClock.monotonic() < deadline {
            if let status = poll() { return status }
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        return poll()
    }

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
    func stop(grace: Double = 5) async {
        guard poll() == nil else { return }
        kill(pid, SIGTERM)
        if await wait(timeout: grace) == nil {
            kill(pid, SIGKILL)
            _ = await wait(timeout: 5)
        }
    }

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

/// A Mosquitto of the benchmark's own on a free loopback port.
final class BenchBroker: Sendable {
    let port: UInt16
    let process: BenchProcess
    /// The `--broker-conf` settings it runs with; nil: the bench's own.
    let settings: [String]?

    /// `max_queued_messages 0` (a precaution): a subscriber that falls behind gets every
    /// message late rather than losing some, so a benchmark counts delivered messages.
    /// `set_tcp_nodelay true`: otherwise Nagle's algorithm in the broker holds a reply back
    /// until the client acknowledges the broker's previous segment (its PUBACK), which the
    /// client's delayed ACK puts off by 40 ms or more (docs/PERFORMANCE.md).
    /// `extra` goes at the end of its configuration (a store broker's bridge). `settings`
    /// (`settings(of:)`, from `--broker-conf`) replace the two above.
    static func start(in directory: String, extra: String = "", settings: [String]? = nil) async throws -> BenchBroker {
        guard let program = Programs.find("mosquitto") else {
            throw CommandFailure("mosquitto is not installed (apt install mosquitto)", status: .failure)
        }
        var lastError = ""
        for _ in 0..<3 {
            let port = try Loopback.freePort()
            var lines = ["listener \(port) 127.0.0.1", "allow_anonymous true", "persistence false"]
                + (settings ?? ["max_queued_messages 0", "set_tcp_nodelay true"])
                + ["log_dest stderr", "log_type error", "log_type warning"]
            if geteuid() == 0 { lines.append("user root") }
            let config = directory + "/mosquitto-\(port).conf"
            try FileSystem.write(config, Array((lines.joined(separator: "\n") + "\n" + extra).utf8))
            let process = try BenchProcess(program, ["-c", config], name: "mosquitto-\(port)", in: directory)
            let deadline = WallClock.monotonic() + 10
            while WallClock.monotonic() < deadline, process.poll() == nil {
                if Loopback.acceptsConnections(port: port) { return BenchBroker(port: port, process: process, settings: settings) }
                try await Task.sleep(nanoseconds: 20_000_000)
            }
            lastError = process.errors
            await process.stop()
        }
        throw CommandFailure("mosquitto did not start: \(lastError)", status: .failure)
    }

    /// The lines of a Mosquitto configuration that shape how it queues and delivers
    /// (`max_queued_messages`, `message_size_limit`, `set_tcp_nodelay`…): all but comments
    /// and what the bench sets itself (listeners, persistence, logging, users and TLS; a
    /// client id taken from the user name too: the bench's clients are anonymous, and
    /// Mosquitto refuses a client without a user name under `use_username_as_clientid`).
    static func settings(of configuration: String) -> [String] {
        let own: Set<Substring> = ["listener", "port", "bind_address", "persistence", "persistence_location", "persistence_file",
                                   "autosave_interval", "log_dest", "log_type", "password_file", "acl_file",
                                   "use_username_as_clientid",
                                   "allow_anonymous", "per_listener_settings", "include_dir", "user", "pid_file", "cafile",
                                   "capath", "certfile", "keyfile", "require_certificate", "tls_version"]
        return configuration.split(separator: "\n").compactMap { line in
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let key = words.first, !key.hasPrefix("#"), !own.contains(key) else { return nil }
            return words.joined(separator: " ")
        }
    }

    private init(port: UInt16, process: BenchProcess, settings: [String]?) {
        self.port = port
        self.process = process
        self.settings = settings
    }

    var url: String { "mqtt://127.0.0.1:\(port)" }

    func stop() async { await process.stop() }
}

/// Where the programs `bench` runs are.
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

/// Nearest-rank percentiles of latencies in seconds.
struct LatencySummary {
    var count: Int
    var median: Double
    var p99: Double
    var max: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        count = sorted.count
        func rank(_ q: Double) -> Double {
            sorted.isEmpty ? .nan : sorted[Swift.min(sorted.count - 1, Int((Double(sorted.count - 1) * q).rounded(.down)))]
        }
        median = rank(0.5)
        p99 = rank(0.99)
        max = sorted.last ?? .nan
    }

    /// From `mqtt-baseline`'s `{"count","medianMs","p99Ms","maxMs"}`.
    init?(_ json: JSONValue?) {
        guard let count = json?["count"]?.numberValue, let median = json?["medianMs"]?.numberValue,
              let p99 = json?["p99Ms"]?.numberValue, let max = json?["maxMs"]?.numberValue else { return nil }
        self.count = Int(count)
        self.median = median / 1000
        self.p99 = p99 / 1000
        self.max = max / 1000
    }

    var text: String { "median \(milliseconds(median)) ms, p99 \(milliseconds(p99)) ms, max \(milliseconds(max)) ms (n = \(count))" }
    var json: JSONValue {
        .object(["count": .number(Double(count)), "medianMs": .number(rounded(median * 1000, 3)),
                 "p99Ms": .number(rounded(p99 * 1000, 3)), "maxMs": .number(rounded(max * 1000, 3))])
    }
}

func milliseconds(_ seconds: Double) -> String { decimal(seconds * 1000, places: 3) }

/// Fixed-point text: `decimal(1.23456, places: 2)` is `1.23`.
func decimal(_ value: Double, places: Int) -> String {
    guard value.isFinite else { return "-" }
    var writer = JSONWriter()
    writer.write(.number(rounded(value, places)))
    return writer.text
}

/// `123,456`.
func grouped(_ value: Double) -> String {
    guard value.isFinite else { return "-" }
    let digits = String(Int(value.rounded()))
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0, c != "-", (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return out
}

func megabytes(_ bytes: Int) -> String { decimal(Double(bytes) / 1_048_576, places: 1) + " MiB" }

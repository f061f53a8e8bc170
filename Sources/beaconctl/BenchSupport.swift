import BeaconKit
import CommandLineSupport
import SystemCalls

#if canImport(Glibc)
import Glibc
#endif

/// A Mosquitto of the benchmark's own on a free loopback port.
final class BenchBroker: Sendable {
    let port: UInt16
    let process: RunningProgram
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
            let process = try RunningProgram(program, ["-c", config], name: "mosquitto-\(port)", in: directory)
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

    private init(port: UInt16, process: RunningProgram, settings: [String]?) {
        self.port = port
        self.process = process
        self.settings = settings
    }

    var url: String { "mqtt://127.0.0.1:\(port)" }

    func stop() async { await process.stop() }
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

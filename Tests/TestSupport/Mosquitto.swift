import Foundation
import SystemCalls
import BeaconKit
import Contract

/// A Mosquitto broker of a test's own, on a free port of 127.0.0.1, stopped by its PID.
///
/// The configuration (`mosquitto.conf`) and the broker's log (`mosquitto.log`, everything
/// including debug) live in the test's temporary directory; `diagnostics` shows them.
public final class MosquittoBroker: @unchecked Sendable {
    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    public let port: UInt16
    public let directory: TemporaryDirectory
    /// The network namespace it runs in (listening on every address there); `nil`: the
    /// machine's own, on 127.0.0.1 only.
    public let namespace: NetworkNamespace?
    public let configPath: String
    public let logPath: String
    private let lock = NSLock()
    private var current: ChildProcess?

    /// `mqtt://127.0.0.1:PORT`
    public var url: String { "mqtt://127.0.0.1:\(port)" }
    public var brokerURL: BrokerURL { BrokerURL(host: "127.0.0.1", port: port) }

    /// Writes a configuration and starts `mosquitto -c` with it; returns once the port accepts
    /// connections. `extraConfig` is appended (a password file, `allow_anonymous false`, …).
    /// `port` picks the port (a client was told it before the broker existed); by default a free one.
    public static func start(in directory: TemporaryDirectory, extraConfig: String = "",
                             port: UInt16? = nil, namespace: NetworkNamespace? = nil) async throws -> MosquittoBroker {
        var failure: (any Error)?
        // Another process may take the free port before mosquitto binds it: try another.
        for _ in 0..<(port == nil ? 3 : 1) {
            let broker = try MosquittoBroker(port: try port ?? FreePort.allocate(), directory: directory,
                                             extraConfig: extraConfig, namespace: namespace)
            do {
                try await broker.launch()
                return broker
            } catch {
                failure = error
                await broker.stop()
            }
        }
        throw failure!
    }

    private init(port: UInt16, directory: TemporaryDirectory, extraConfig: String,
                 namespace: NetworkNamespace?) throws {
        self.port = port
        self.directory = directory
        self.namespace = namespace
        let label = namespace.map { "\($0.name)-\(port)" } ?? "\(port)"
        logPath = directory.file("mosquitto-\(label).log")
        var lines = [
            "# A broker for one test, written by TestSupport.MosquittoBroker.",
            namespace == nil ? "listener \(port) 127.0.0.1" : "listener \(port) 0.0.0.0",
            "persistence false",
            "log_dest file \(logPath)",
            "log_type all",
            "log_timestamp_format %H:%M:%S",
            "connection_messages true",
        ]
        // As root mosquitto would switch to the `mosquitto` user, who cannot write the
        // test's private directory.
        if geteuid() == 0 { lines.append("user root") }
        if !extraConfig.contains("allow_anonymous") { lines.append("allow_anonymous true") }
        lines.append(extraConfig)
        configPath = try directory.write("mosquitto-\(label).conf", lines.joined(separator: "\n") + "\n")
    }

    /// The running broker process, if any.
    public var process: ChildProcess? { lock.withLock { current } }

    public var isRunning: Bool { process?.isRunning ?? false }

    /// The broker's log so far.
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// How many times the log says the broker is running (its listeners bound).
    private var runs: Int {
        log.split(separator: "\n").filter { $0.contains(": mosquitto version ") && $0.hasSuffix(" running") }.count
    }

    public var diagnostics: String {
        "--- mosquitto.conf ---\n" + ((try? String(contentsOfFile: configPath, encoding: .utf8)) ?? "")
            + "--- mosquitto.log (end) ---\n" + String(log.suffix(6000))
            + "\n" + (process?.diagnostics ?? "(not running)")
    }

    /// SIGTERM (mosquitto shuts down cleanly), SIGKILL after a grace period.
    public func stop() async {
        let process = lock.withLock { () -> ChildProcess? in
            defer { current = nil }
            return current
        }
        await process?.stop(grace: 3)
    }

    /// SIGKILL: the broker vanishes without closing anything (outage tests).
    public func kill() async {
        let process = lock.withLock { () -> ChildProcess? in
            defer { current = nil }
            return current
        }
        process?.signal(SIGKILL)
        await process?.waitForExit(timeout: 5)
    }

    /// Starts the broker again on the same port with the same configuration.
    public func restart() async throws {
        await stop()
        try await launch()
    }

    private func launch() async throws {
        guard let program = Programs.system("mosquitto") else {
            throw StartError(description: "mosquitto is not installed (apt install mosquitto)")
        }
        let (configPath, directory) = (configPath, directory)
        let command = namespace?.wrap(program, ["-c", configPath]) ?? (program: program, arguments: ["-c", configPath])
        // The log is appended to across restarts: this run's "running" line is the next one.
        let runsBefore = runs
        let process = try ChildProcess(command.program, command.arguments, in: directory, name: "mosquitto")
        lock.withLock { current = process }
        let (port, inNamespace) = (port, namespace != nil)
        // On loopback a port that accepts may be another process's (it took the free port
        // first, and this mosquitto is about to exit with "Address already in use"): only
        // the log's "running", written once the listener is bound, says it is this one.
        let up = await eventually(timeout: 10, interval: 0.02) {
            !process.isRunning || (inNamespace ? NetworkNamespace.isListening(pid: process.pid, port: port)
                                               : runs > runsBefore && Loopback.acceptsConnections(port: port))
        }
        guard up, process.isRunning else {
            throw StartError(description: "mosquitto did not come up on port \(port)\n\(diagnostics)")
        }
    }

    /// Publishes one message with `mosquitto_pub` (in the broker's namespace) and waits until
    /// it is sent; whether it was.
    @discardableResult
    public func publish(_ topic: String, _ payload: String, retain: Bool = false, qos: Int = 1) async -> Bool {
        guard let program = Programs.system("mosquitto_pub") else { return false }
        var arguments = ["-h", "127.0.0.1", "-p", String(port), "-q", String(qos), "-t", topic]
        arguments += payload.isEmpty ? ["-n"] : ["-m", payload]
        if retain { arguments.append("-r") }
        let command = namespace?.wrap(program, arguments) ?? (program: program, arguments: arguments)
        // A loaded machine can make one attempt fail (a connection timed out); try again.
        for _ in 0..<3 {
            guard let process = try? ChildProcess(command.program, command.arguments, in: directory, name: "mosquitto_pub") else {
                return false
            }
            if await process.waitForExit(timeout: 60) == 0 { return true }
            await process.stop()
        }
        return false
    }

    /// Writes a Mosquitto password file with `mosquitto_passwd -b -c` and returns its path.
    public static func passwordFile(in directory: TemporaryDirectory, user: String, password: String) async throws -> String {
        guard let program = Programs.system("mosquitto_passwd") else {
            throw StartError(description: "mosquitto_passwd is not installed")
        }
        let path = directory.file("passwords-\(UUID().uuidString.prefix(8))")
        let tool = try ChildProcess(program, ["-b", "-c", path, user, password], in: directory, name: "mosquitto_passwd")
        guard await tool.waitForExit(timeout: 10) == 0 else {
            throw StartError(description: "mosquitto_passwd failed\n\(tool.diagnostics)")
        }
        return path
    }
}

/// `mosquitto_sub` as an independent observer: what a broker really delivers, parsed.
///
/// Runs `mosquitto_sub -F 'MSG|%t|%r|%x'` (topic, retained flag, payload in hex so any bytes
/// and empty payloads survive) with `-d` under `stdbuf -oL`, so its SUBACK line shows when
/// the subscription is in place.
public final class MosquittoSubscriber: @unchecked Sendable {
    public struct Record: Sendable, Equatable, CustomStringConvertible {
        public var topic: String
        /// Whether the broker delivered it as a stored retained message.
        public var retained: Bool
        public var payload: [UInt8]

        public var text: String { String(decoding: payload, as: UTF8.self) }
        public var description: String { "\(topic) \(retained ? "[retained] " : "")\"\(text)\"" }
    }

    public let process: ChildProcess

    /// Starts a subscriber on `filters` and returns once the broker has acknowledged them.
    /// `clientID`: a persistent session under that id (`-c`), so what is published while the
    /// broker restarts is delivered once it reconnects. `credentials`: a user name and password.
    public static func start(broker: MosquittoBroker, filters: [String], qos: Int = 1, clientID: String? = nil,
                             credentials: (user: String, password: String)? = nil,
                             in directory: TemporaryDirectory) async throws -> MosquittoSubscriber {
        var extra: [String] = []
        if let credentials { extra += ["-u", credentials.user, "-P", credentials.password] }
        return try await start(port: broker.port, filters: filters, qos: qos, clientID: clientID, arguments: extra,
                               namespace: broker.namespace, in: directory, diagnostics: broker.diagnostics)
    }

    /// The same on any broker at `port` of `host` (a NATS node); `arguments` go to
    /// mosquitto_sub too (credentials, `--cafile`). `diagnostics` is added to a failure.
    public static func start(host: String = "127.0.0.1", port: UInt16, filters: [String], qos: Int = 1, clientID: String? = nil,
                             arguments extra: [String] = [], namespace: NetworkNamespace? = nil, in directory: TemporaryDirectory,
                             diagnostics: @autoclosure () -> String = "") async throws -> MosquittoSubscriber {
        guard let program = Programs.system("mosquitto_sub") else {
            throw MosquittoBroker.StartError(description: "mosquitto_sub is not installed (apt install mosquitto-clients)")
        }
        var arguments = ["-h", host, "-p", String(port), "-q", String(qos), "-d",
                         "-i", clientID ?? "observer-\(UUID().uuidString.prefix(8))", "-F", "MSG|%t|%r|%x"]
        if clientID != nil { arguments.append("-c") }
        for filter in filters { arguments += ["-t", filter] }
        arguments += extra
        var command = if let stdbuf = Programs.system("stdbuf") { (stdbuf, ["-oL", program] + arguments) }
                      else { (program, arguments) }
        if let namespace { command = namespace.wrap(command.0, command.1) }
        let process = try ChildProcess(command.0, command.1, in: directory, name: "mosquitto_sub")
        let subscriber = MosquittoSubscriber(process: process)
        let subscribed = await eventually(timeout: 10, interval: 0.02) {
            !process.isRunning || process.stdout.contains("received SUBACK")
        }
        guard subscribed, process.isRunning else {
            await process.stop()
            throw MosquittoBroker.StartError(description: "mosquitto_sub did not subscribe\n\(process.diagnostics)\n\(diagnostics())")
        }
        return subscriber
    }

    private init(process: ChildProcess) {
        self.process = process
    }

    /// Every message received so far, in order.
    public var records: [Record] {
        // Whole lines only: a long message (a join with a photo is 50 KB of hex) reaches the
        // pipe in pieces, and its first piece alone parsed as a record with half a payload
        // (a CI rehearsal's JourneyTests found the photo missing from such a join).
        let out = process.stdout
        guard let end = out.lastIndex(of: "\n") else { return [] }
        return out[..<end].split(separator: "\n").compactMap { Self.parse(String($0)) }
    }

    /// The first record matching `predicate`, waiting up to `timeout` seconds for it.
    public func waitFor(timeout: Double = 5, _ predicate: (Record) -> Bool) async -> Record? {
        var found: Record?
        _ = await eventually(timeout: timeout, interval: 0.02) {
            found = records.first(where: predicate)
            return found != nil
        }
        return found
    }

    /// Waits for a message on `topic` (optionally with `text` as its payload).
    public func waitFor(topic: String, text: String? = nil, timeout: Double = 5) async -> Record? {
        await waitFor(timeout: timeout) { $0.topic == topic && (text == nil || $0.text == text) }
    }

    /// Waits until the subscriber has everything the broker queued for it before now: what
    /// a "nothing arrived" check waits on instead of a sleep. Publishes a unique message on
    /// `marker` (which one of the subscriber's filters must match; not retained) with
    /// `mosquitto_pub` and waits for it. The broker queues a subscription's retained messages
    /// while it handles the SUBSCRIBE, before `start` returned, and sends one client's messages
    /// in order, so anything retained or published before the marker has arrived by then. The
    /// marker goes at QoS 1: a QoS 0 message may overtake QoS 1 messages waiting for an
    /// in-flight slot (more than 20 retained ones, say).
    public func caughtUp(on broker: MosquittoBroker, marker: String = "beaconbridge-test/caught-up",
                         timeout: Double = 10) async -> Bool {
        let token = UUID().uuidString
        guard await broker.publish(marker, token, qos: 1) else { return false }
        return await waitFor(timeout: timeout) { $0.topic == marker && $0.text == token } != nil
    }

    public func stop() async {
        await process.stop()
    }

    /// `MSG|topic|retained|hex`; the topic may itself contain `|`.
    static func parse(_ line: String) -> Record? {
        guard line.hasPrefix("MSG|") else { return nil }
        let fields = line.dropFirst(4)
        guard let hexBar = fields.lastIndex(of: "|") else { return nil }
        let hex = fields[fields.index(after: hexBar)...]
        let front = fields[..<hexBar]
        guard let retainBar = front.lastIndex(of: "|") else { return nil }
        let retained = front[front.index(after: retainBar)...] == "1"
        let topic = String(front[..<retainBar])
        var payload: [UInt8] = []
        payload.reserveCapacity(hex.count / 2)
        var index = hex.startIndex
        while index < hex.endIndex {
            let end = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex) ?? hex.endIndex
            guard let byte = UInt8(hex[index..<end], radix: 16) else { return nil }
            payload.append(byte)
            index = end
        }
        return Record(topic: topic, retained: retained, payload: payload)
    }
}

extension MosquittoSubscriber.Record {
    /// The payload as the brain's event (`brain/events`, Contract's `BrainEvent`); nil for one
    /// that is none.
    public var brainEvent: BrainEvent? { try? BrainEvent(parsing: payload) }

    /// The payload as a gateway's event (`gateways/<id>/events`, Contract's `GatewayEvent`);
    /// nil for one that is none.
    public var gatewayEvent: GatewayEvent? { try? GatewayEvent(parsing: payload) }
}

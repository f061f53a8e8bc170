import Foundation
import SystemCalls

/// A NATS cluster of a test's own: one `nats-server` per node on 127.0.0.1 (or each in a
/// network namespace of the test's own, on its address there), each with its JetStream store
/// in the test's directory and the MQTT listener on; stopped by PID.
///
/// Either from configurations the test wrote (`beaconctl provision`'s node files, whose
/// ports the test chose with `ports(count:)`), or from `start(in:count:)`'s own: anonymous
/// clients, no TLS. Ready once every node accepts an MQTT client with a QoS 1 publish, which
/// needs the JetStream cluster formed (a node refuses MQTT clients until then).
public final class NATSCluster: @unchecked Sendable {
    public struct StartError: Error, CustomStringConvertible {
        public var description: String
    }

    /// The ports of one node.
    public struct Ports: Sendable {
        public var mqtt: UInt16
        public var cluster: UInt16
        public var client: UInt16
    }

    /// Where each node runs and how clients reach it: a namespace per node, and the one its
    /// clients (and the readiness probe) run in.
    public struct Placement: Sendable {
        public var hosts: [String]
        public var namespaces: [NetworkNamespace]
        public var clients: NetworkNamespace

        public init(hosts: [String], namespaces: [NetworkNamespace], clients: NetworkNamespace) {
            self.hosts = hosts
            self.namespaces = namespaces
            self.clients = clients
        }
    }

    public final class Node: @unchecked Sendable {
        public let name: String
        public let ports: Ports
        public let configPath: String
        /// The address its listeners are on (127.0.0.1 unless in a namespace).
        public let host: String
        /// Its own namespace, if any.
        public let namespace: NetworkNamespace?
        let directory: TemporaryDirectory
        private let lock = NSLock()
        private var current: ChildProcess?

        init(name: String, ports: Ports, configPath: String, host: String = "127.0.0.1", namespace: NetworkNamespace? = nil,
             directory: TemporaryDirectory) {
            self.name = name
            self.ports = ports
            self.configPath = configPath
            self.host = host
            self.namespace = namespace
            self.directory = directory
        }

        public var process: ChildProcess? { lock.withLock { current } }
        public var isRunning: Bool { process?.isRunning ?? false }
        /// This node's log so far (nats-server writes it to stderr), across restarts.
        public var log: String { lock.withLock { logs } + (process.map { (try? String(contentsOfFile: $0.stderrPath, encoding: .utf8)) ?? "" } ?? "") }
        private var logs = ""

        /// Starts `nats-server -c`; returns once its MQTT port accepts connections.
        public func start() async throws {
            guard let program = Programs.system("nats-server") else {
                throw StartError(description: "nats-server is not installed (apt install nats-server)")
            }
            let command = namespace?.wrap(program, ["-c", configPath]) ?? (program: program, arguments: ["-c", configPath])
            let process = try ChildProcess(command.program, command.arguments, in: directory, name: "nats-\(name)")
            lock.withLock { current = process }
            let (port, inNamespace) = (ports.mqtt, namespace != nil)
            let up = await eventually(timeout: 15, interval: 0.05) {
                !process.isRunning || (inNamespace ? NetworkNamespace.isListening(pid: process.pid, port: port)
                                                   : Loopback.acceptsConnections(port: port))
            }
            guard up, process.isRunning else {
                throw StartError(description: "nats-server \(name) did not listen on \(port)\n\(process.diagnostics)")
            }
        }

        /// SIGKILL: the node vanishes without closing anything.
        public func kill() async {
            let process = take()
            process?.signal(SIGKILL)
            await process?.waitForExit(timeout: 10)
        }

        /// SIGTERM (a clean shutdown: nats-server closes its clients and routes), SIGKILL after a grace.
        public func stop() async {
            await take()?.stop(grace: 10)
        }

        private func take() -> ChildProcess? {
            lock.withLock {
                defer { current = nil }
                if let current { logs += (try? String(contentsOfFile: current.stderrPath, encoding: .utf8)) ?? "" }
                return current
            }
        }
    }

    public let nodes: [Node]
    public let directory: TemporaryDirectory
    /// Where the readiness probe runs: the clients' namespace, if the nodes have their own.
    public let clients: NetworkNamespace?

    /// `mqtt://127.0.0.1:P1,127.0.0.1:P2,…`: every node, as a several-host broker URL.
    public var url: String { "mqtt://" + nodes.map { "\($0.host):\($0.ports.mqtt)" }.joined(separator: ",") }

    /// Free ports for `count` nodes.
    public static func ports(count: Int) throws -> [Ports] {
        var taken: Set<UInt16> = []
        func free() throws -> UInt16 {
            while true {
                let port = try FreePort.allocate()
                if taken.insert(port).inserted { return port }
            }
        }
        return try (0..<count).map { _ in Ports(mqtt: try free(), cluster: try free(), client: try free()) }
    }

    /// A cluster of `count` nodes with configurations of its own: anonymous MQTT, no TLS.
    /// `placement`: each node in its namespace on its host address (`count` is then theirs).
    public static func start(in directory: TemporaryDirectory, count: Int = 3, placement: Placement? = nil) async throws -> NATSCluster {
        let count = placement?.hosts.count ?? count
        let ports = try ports(count: count)
        let hosts = placement?.hosts ?? Array(repeating: "127.0.0.1", count: count)
        let routes = zip(hosts, ports).map { "\"nats-route://\($0):\($1.cluster)\"" }.joined(separator: ", ")
        var configs: [(name: String, path: String, ports: Ports)] = []
        for (i, (host, p)) in zip(hosts, ports).enumerated() {
            let name = "n\(i + 1)"
            let text = """
                # A node of one test's cluster, written by TestSupport.NATSCluster.
                server_name: \(name)
                listen: "\(host):\(p.client)"
                jetstream { store_dir: "\(directory.file("jetstream-\(name)"))" }
                cluster { name: test, listen: "\(host):\(p.cluster)", routes: [\(routes)] }
                mqtt { listen: "\(host):\(p.mqtt)" }

                """
            configs.append((name, try directory.write("nats-\(name).conf", text), p))
        }
        return try await start(in: directory, configs: configs, placement: placement)
    }

    /// A cluster from written node configurations (their listeners on 127.0.0.1 at `ports`).
    /// `probe`: `mosquitto_pub` arguments for the readiness check (credentials, a CA file).
    /// `placement`: where each node runs (its own namespace) and its clients' namespace.
    public static func start(in directory: TemporaryDirectory, configs: [(name: String, path: String, ports: Ports)],
                             probe: [String] = [], placement: Placement? = nil) async throws -> NATSCluster {
        let nodes = configs.enumerated().map { i, config in
            Node(name: config.name, ports: config.ports, configPath: config.path, host: placement?.hosts[i] ?? "127.0.0.1",
                 namespace: placement?.namespaces[i], directory: directory)
        }
        let cluster = NATSCluster(nodes: nodes, directory: directory, clients: placement?.clients)
        do {
            for node in cluster.nodes { try await node.start() }
            try await cluster.waitUntilReady(probe: probe)
        } catch {
            await cluster.stop()
            throw error
        }
        return cluster
    }

    private init(nodes: [Node], directory: TemporaryDirectory, clients: NetworkNamespace?) {
        self.nodes = nodes
        self.directory = directory
        self.clients = clients
    }

    /// Waits until every running node takes an MQTT client's QoS 1 publish.
    public func waitUntilReady(probe: [String] = [], timeout: Double = 20) async throws {
        for node in nodes where node.isRunning {
            let ready = await eventually(timeout: timeout, interval: 0.2) {
                await Self.publish(host: node.host, port: node.ports.mqtt, topic: "probe/\(node.name)", payload: "", extra: probe,
                                   namespace: clients, in: directory) == 0
            }
            guard ready else { throw StartError(description: "node \(node.name) takes no MQTT client\n\(diagnostics)") }
        }
    }

    /// Runs `mosquitto_pub` against the node at `host`:`port` once (in `namespace`, if any);
    /// its exit status (nil: it hung).
    public static func publish(host: String = "127.0.0.1", port: UInt16, topic: String, payload: String, qos: Int = 1,
                               retain: Bool = false, extra: [String] = [], namespace: NetworkNamespace? = nil,
                               in directory: TemporaryDirectory) async -> Int32? {
        guard let program = Programs.system("mosquitto_pub") else { return nil }
        var arguments = ["-h", host, "-p", String(port), "-q", String(qos), "-t", topic] + extra
        arguments += payload.isEmpty ? ["-n"] : ["-m", payload]
        if retain { arguments.append("-r") }
        let command = namespace?.wrap(program, arguments) ?? (program: program, arguments: arguments)
        guard let process = try? ChildProcess(command.program, command.arguments, in: directory, name: "mosquitto_pub") else {
            return nil
        }
        let status = await process.waitForExit(timeout: 20)
        if status == nil { await process.stop() }
        return status
    }

    public var diagnostics: String {
        nodes.map { node in
            // Errors and warnings first: the log's end is often only routing and leader chatter.
            let notable = node.log.split(separator: "\n").filter {
                ($0.contains("[ERR]") || $0.contains("[WRN]")) && !$0.contains("Waiting for routing")
            }
            return "--- nats-server \(node.name): its errors and warnings (last 40) ---\n" + notable.suffix(40).joined(separator: "\n")
                + "\n--- nats-server \(node.name) (end of its log) ---\n" + String(node.log.suffix(3000))
        }.joined(separator: "\n")
    }

    public func stop() async {
        for node in nodes { await node.stop() }
    }
}

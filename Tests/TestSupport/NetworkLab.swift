import Foundation
import SystemCalls

/// Network namespaces of a test's own, joined by veth pairs with addresses in a private
/// range that exist inside those namespaces only: a chain's stores and its centre on one
/// machine, with WAN links a test can cut.
///
/// Needs root (`ip netns add`); `NetworkLab.available` says whether this machine allows it.
/// Every name carries the lab's id (unique per run), so parallel tests never meet. `destroy()`
/// (also on deinit) deletes the namespaces, which deletes their veths; stop the processes
/// running inside first (by PID, as `ChildProcess` does).
public final class NetworkLab: @unchecked Sendable {
    public struct LabError: Error, CustomStringConvertible {
        public var description: String
    }

    /// A point-to-point link between two namespaces.
    public struct Link: Sendable {
        public let name: String
        /// The interface in `a` and in `b`.
        public let a: (namespace: NetworkNamespace, interface: String, address: String)
        public let b: (namespace: NetworkNamespace, interface: String, address: String)
    }

    /// A short id unique to this run (pid and counter): in namespace and interface names.
    public let id: String
    private let lock = NSLock()
    private var namespaces: [NetworkNamespace] = []
    private var links = 0
    /// Routes added with `route`, restored when their link comes back up (the kernel drops
    /// a route whose interface goes down).
    private var routes: [(namespace: NetworkNamespace, destination: String, gateway: String)] = []
    nonisolated(unsafe) private static var counter = 0
    private static let counterLock = NSLock()

    /// Whether namespaces can be made here (root, `ip` present, the kernel allows it); the
    /// reason when not.
    public static let unavailableReason: String? = {
        guard geteuid() == 0 else { return "network namespaces need root" }
        guard let ip = Programs.system("ip") else { return "the ip command (iproute2) is missing" }
        let name = "bbprobe\(getpid())"
        guard run(ip, ["netns", "add", name]) == 0 else { return "ip netns add is refused here" }
        _ = run(ip, ["netns", "del", name])
        return nil
    }()

    public static var available: Bool { unavailableReason == nil }

    public init() throws {
        if let reason = Self.unavailableReason { throw LabError(description: reason) }
        let n = Self.counterLock.withLock {
            Self.counter += 1
            return Self.counter
        }
        // Interface names have at most 15 bytes: "bb" + 5 + 2 + side + link number.
        id = "bb" + String(format: "%05x", Int(getpid()) & 0xFFFFF) + String(format: "%02x", n & 0xFF)
    }

    /// A new namespace with its loopback up. `label` makes it readable in `ip netns list`.
    public func namespace(_ label: String) throws -> NetworkNamespace {
        let ns = NetworkNamespace(name: "\(id)-\(label)")
        try ip(["netns", "add", ns.name])
        lock.withLock { namespaces.append(ns) }
        try ip(["-n", ns.name, "link", "set", "lo", "up"])
        return ns
    }

    /// A veth pair between `a` and `b`, up, with `10.<subnet>.<n>.1/30` on `a`'s side and
    /// `.2` on `b`'s (n counts this lab's links).
    public func link(_ a: NetworkNamespace, _ b: NetworkNamespace, subnet: Int = 213) throws -> Link {
        let n = lock.withLock {
            links += 1
            return links
        }
        let (ia, ib) = ("\(id)a\(n)", "\(id)b\(n)")
        try ip(["link", "add", ia, "netns", a.name, "type", "veth", "peer", "name", ib, "netns", b.name])
        let (addressA, addressB) = ("10.\(subnet).\(n).1", "10.\(subnet).\(n).2")
        try ip(["-n", a.name, "addr", "add", addressA + "/30", "dev", ia])
        try ip(["-n", b.name, "addr", "add", addressB + "/30", "dev", ib])
        try ip(["-n", a.name, "link", "set", ia, "up"])
        try ip(["-n", b.name, "link", "set", ib, "up"])
        return Link(name: "link\(n)", a: (a, ia, addressA), b: (b, ib, addressB))
    }

    /// An extra address on a namespace's loopback (a service address reachable over routes).
    public func addAddress(_ address: String, to ns: NetworkNamespace) throws {
        try ip(["-n", ns.name, "addr", "add", address + "/32", "dev", "lo"])
    }

    /// A route in `ns` to `destination` through `gateway`.
    public func route(in ns: NetworkNamespace, to destination: String, via gateway: String) throws {
        try ip(["-n", ns.name, "route", "add", destination + "/32", "via", gateway])
        lock.withLock { routes.append((ns, destination, gateway)) }
    }

    /// Lets `ns` forward packets between its links (a router, or a switch between nodes).
    public func forward(in ns: NetworkNamespace) throws {
        try ip(["netns", "exec", ns.name, Programs.system("sysctl") ?? "/usr/sbin/sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
    }

    /// Brings one side of a link down or up (down on `b`'s side: that namespace loses its
    /// uplink, as a store whose router loses the WAN).
    public func set(_ link: Link, up: Bool, side: KeyPath<Link, (namespace: NetworkNamespace, interface: String, address: String)> = \.b) throws {
        let end = link[keyPath: side]
        try ip(["-n", end.namespace.name, "link", "set", end.interface, up ? "up" : "down"])
        guard up else { return }
        for route in lock.withLock({ routes }) where route.namespace == end.namespace {
            // `replace`: the route may have survived (the other side was down).
            try ip(["-n", route.namespace.name, "route", "replace", route.destination + "/32", "via", route.gateway])
        }
    }

    /// Deletes every namespace of this lab (their veths go with them). Idempotent.
    public func destroy() {
        let list = lock.withLock { () -> [NetworkNamespace] in
            defer { namespaces = [] }
            return namespaces
        }
        guard let ip = Programs.system("ip") else { return }
        for ns in list.reversed() { _ = Self.run(ip, ["netns", "del", ns.name]) }
    }

    deinit { destroy() }

    private func ip(_ arguments: [String]) throws {
        guard let ip = Programs.system("ip") else { throw LabError(description: "ip is missing") }
        let status = Self.run(ip, arguments)
        guard status == 0 else { throw LabError(description: "ip \(arguments.joined(separator: " ")) exited \(status)") }
    }

    /// Runs a short command to its end, quietly; its exit status.
    @discardableResult
    static func run(_ program: String, _ arguments: [String]) -> Int32 {
        guard let process = try? SpawnedProcess(program, arguments, stdoutPath: "/dev/null", stderrPath: "/dev/null") else {
            return -1
        }
        return process.waitUntilEnded().status
    }
}

/// One network namespace: runs programs inside it and checks its sockets.
public struct NetworkNamespace: Sendable, Equatable {
    public let name: String

    /// `program arguments` as run inside this namespace (`ip netns exec`, which execs the
    /// program: the PID is the program's).
    public func wrap(_ program: String, _ arguments: [String]) -> (program: String, arguments: [String]) {
        (Programs.system("ip") ?? "/usr/sbin/ip", ["netns", "exec", name, program] + arguments)
    }

    /// Whether the process `pid` (in whatever namespace it runs) has a TCP socket listening on
    /// `port`: read from its own /proc/PID/net/tcp, which shows its namespace's sockets.
    public static func isListening(pid: Int32, port: UInt16) -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/\(pid)/net/tcp", encoding: .utf8) else { return false }
        let wanted = String(format: ":%04X", port)
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            // local_address rem_address st: "0100007F:075B 00000000:0000 0A" (0A = LISTEN)
            if fields.count > 3, fields[1].hasSuffix(wanted), fields[3] == "0A" { return true }
        }
        return false
    }
}

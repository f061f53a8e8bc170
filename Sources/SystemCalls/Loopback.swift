#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// TCP on 127.0.0.1 only: free ports for the brokers that tests and `beaconctl bench`
/// start, and a check that one is listening.
public enum Loopback {
    /// A port on 127.0.0.1 that was free a moment ago, never the same twice in one process.
    ///
    /// It is picked below the kernel's ephemeral range (`ip_local_port_range`, 32768–60999 on
    /// Debian): a port the kernel hands out for `bind(0)` is one it also hands to any client's
    /// outgoing connection, so between this check and the broker binding it, one of the
    /// many connections a test run makes could take it ("Address already in use"). Falls back
    /// to an ephemeral port when no port below the range is free.
    public static func freePort() throws(SystemError) -> UInt16 {
        let low = ephemeralRangeStart
        for _ in 0..<64 {
            let port = UInt16.random(in: 10_000..<max(low, 10_001))
            guard handedOut.withLock({ $0.insert(port).inserted }) else { continue }
            if (try? bound(port: port)) != nil { return port }
        }
        let port = try bound(port: 0)
        handedOut.withLock { _ = $0.insert(port) }
        return port
    }

    private static let handedOut = Mutex<Set<UInt16>>([])

    /// The first port of the kernel's ephemeral range (32768 if it cannot be read).
    private static let ephemeralRangeStart: UInt16 = {
        guard let file = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r") else { return 32768 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 64)
        guard fgets(&line, Int32(line.count), file) != nil else { return 32768 }
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let first = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).first,
              let low = UInt16(first), low > 10_001 else { return 32768 }
        return low
    }()

    /// Binds a socket to 127.0.0.1:`port` (0: any) and closes it; the port it got.
    private static func bound(port: UInt16) throws(SystemError) -> UInt16 {
        let fd = try syscall("socket") { socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0) }
        defer { close(fd) }
        var address = loopback(port: port)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = try syscall("bind", subject: "127.0.0.1:\(port)") {
            withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
            }
        }
        _ = try syscall("getsockname") {
            withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
        }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    public static func acceptsConnections(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        address.sin_port = port.bigEndian
        return address
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// TCP on 127.0.0.1 only: free ports for the brokers that tests and `beaconctl bench`
/// start, and a check that one is listening.
public enum Loopback {
    /// A port on 127.0.0.1 that was free a moment ago.
    public static func freePort() throws(SystemError) -> UInt16 {
        let fd = try syscall("socket") { socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0) }
        defer { close(fd) }
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = try syscall("bind", subject: "127.0.0.1:0") {
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

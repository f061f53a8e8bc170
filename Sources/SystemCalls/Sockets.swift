#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Stream connections: a Unix socket, TCP, or a serial line, each a plain descriptor.
public enum Connect {
    /// Connects to a Unix stream socket at `path`.
    public static func unix(path: String) throws(SystemError) -> FileDescriptor {
        let fd = try syscall("socket") { socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else {
            Glibc.close(fd)
            throw SystemError(call: "connect", errno: ENAMETOOLONG, subject: path)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
            raw[path.utf8.count] = 0
        }
        do {
            _ = try syscall("connect", subject: path) {
                withUnsafePointer(to: &address) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                        Glibc.connect(fd, sa, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
        return FileDescriptor(rawValue: fd)
    }

    /// Connects over TCP, trying each address `host` resolves to.
    public static func tcp(host: String, port: UInt16) throws(SystemError) -> FileDescriptor {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw SystemError(call: "getaddrinfo", errno: EHOSTUNREACH, subject: "\(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var lastError = SystemError(call: "connect", errno: ECONNREFUSED, subject: "\(host):\(port)")
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry {
            entry = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue),
                            info.pointee.ai_protocol)
            guard fd >= 0 else { continue }
            do {
                _ = try syscall("connect", subject: "\(host):\(port)") { Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) }
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return FileDescriptor(rawValue: fd)
            } catch {
                Glibc.close(fd)
                lastError = error
            }
        }
        throw lastError
    }

    /// Opens a serial line in raw 8N1 mode with RTS/CTS flow control, as H4 UARTs expect.
    public static func tty(path: String, baud: Int) throws(SystemError) -> FileDescriptor {
        let fd = try syscall("open", subject: path) { open(path, O_RDWR | O_NOCTTY | O_CLOEXEC) }
        var options = termios()
        do {
            _ = try syscall("tcgetattr", subject: path) { tcgetattr(fd, &options) }
            cfmakeraw(&options)
            options.c_cflag |= tcflag_t(CLOCAL) | tcflag_t(CREAD) | tcflag_t(CRTSCTS)
            let speed = speedConstant(baud)
            _ = try syscall("cfsetspeed", subject: path) { cfsetspeed(&options, speed) }
            _ = try syscall("tcsetattr", subject: path) { tcsetattr(fd, TCSANOW, &options) }
            _ = tcflush(fd, TCIOFLUSH)
        } catch {
            Glibc.close(fd)
            throw error
        }
        return FileDescriptor(rawValue: fd)
    }

    static func speedConstant(_ baud: Int) -> speed_t {
        switch baud {
        case 9600: speed_t(B9600)
        case 19200: speed_t(B19200)
        case 38400: speed_t(B38400)
        case 57600: speed_t(B57600)
        case 230400: speed_t(B230400)
        case 460800: speed_t(B460800)
        case 500000: speed_t(B500000)
        case 921600: speed_t(B921600)
        case 1000000: speed_t(B1000000)
        case 1500000: speed_t(B1500000)
        case 2000000: speed_t(B2000000)
        case 3000000: speed_t(B3000000)
        default: speed_t(B115200)
        }
    }
}

/// How soon the kernel gives up a TCP connection whose path went silent.
///
/// A host that vanishes from the network (its link down, a partition) sends no reset: by
/// default Linux retransmits unacknowledged data for about 15 minutes (`tcp_retries2`) and
/// sends no keepalive probe for 2 hours, so only the application's own pings (MQTT's
/// keepalive: one to two keepalives) notice. `bound` sets two limits on one socket:
/// - `TCP_USER_TIMEOUT`: data sent and not acknowledged for `seconds` closes the connection
///   (`ETIMEDOUT`), as does a receive window that stays closed that long (kernel 5.11 on). A
///   client that publishes steadily notices a cut this way, `seconds` after it.
/// - keepalive probes (`SO_KEEPALIVE`), the first after `seconds / 2` of silence, then one a
///   second, for an idle connection, which has nothing unacknowledged to time out; with
///   `TCP_USER_TIMEOUT` set, the kernel closes it once nothing was received for `seconds`
///   and a probe went unanswered (tcp(7)). The host answers the probes, not the program.
public enum TCPLiveness {
    public static func bound(_ socket: Int32, seconds: Double) throws(SystemError) {
        func set(_ level: Int32, _ option: Int32, _ value: Int32, _ name: String) throws(SystemError) {
            var value = value
            _ = try syscall("setsockopt", subject: name) {
                setsockopt(socket, level, option, &value, socklen_t(MemoryLayout<Int32>.size))
            }
        }
        let milliseconds = Int32(min(max(seconds, 0.001), 3_600) * 1_000)
        try set(Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, milliseconds, "TCP_USER_TIMEOUT")
        try set(SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE")
        try set(Int32(IPPROTO_TCP), TCP_KEEPIDLE, max(1, milliseconds / 2_000), "TCP_KEEPIDLE")
        try set(Int32(IPPROTO_TCP), TCP_KEEPINTVL, 1, "TCP_KEEPINTVL")
        // Counted only without a user timeout; kept so the probes never outlast it.
        try set(Int32(IPPROTO_TCP), TCP_KEEPCNT, max(1, milliseconds / 1_000), "TCP_KEEPCNT")
    }
}

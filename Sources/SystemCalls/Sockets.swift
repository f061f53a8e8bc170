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

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The service manager's notification protocol (systemd's `sd_notify(3)`), spoken once,
/// here: datagrams of `NAME=value` lines to the Unix socket named by `$NOTIFY_SOCKET`.
///
/// A unit with `Type=notify` waits for `READY=1` before it counts as started; with
/// `WatchdogSec=` systemd sets `$WATCHDOG_USEC` and restarts the service when no
/// `WATCHDOG=1` arrives within that time. Outside systemd (`$NOTIFY_SOCKET` unset) there
/// is no notifier and nothing is sent.
public struct ServiceNotifier: Sendable, Equatable {
    /// The socket: a path, or `@name` for an abstract socket.
    public let socket: String
    /// Seconds within which the service manager expects a keep-alive; `nil` when it
    /// watches nothing (`$WATCHDOG_USEC` unset, or `$WATCHDOG_PID` names another process).
    public let watchdogInterval: Double?

    public init(socket: String, watchdogInterval: Double? = nil) {
        self.socket = socket
        self.watchdogInterval = watchdogInterval
    }

    /// The notifier the environment describes, as `sd_notify` and `sd_watchdog_enabled`
    /// read it; `nil` when `NOTIFY_SOCKET` is unset or not a usable address.
    public static func fromEnvironment() -> ServiceNotifier? {
        from(environment: { Environment.value($0) }, pid: Int(getpid()))
    }

    /// `fromEnvironment()` over any variable lookup (tests).
    public static func from(environment value: (String) -> String?, pid: Int) -> ServiceNotifier? {
        guard let socket = value("NOTIFY_SOCKET"), socket.hasPrefix("/") || socket.hasPrefix("@"),
              socket.utf8.count < 108 else { return nil }
        var interval: Double?
        if let text = value("WATCHDOG_USEC"), let usec = UInt64(text), usec > 0 {
            // WATCHDOG_PID, when set, names the one process meant to send keep-alives.
            if let owner = value("WATCHDOG_PID").flatMap({ Int($0) }), owner != pid {
                interval = nil
            } else {
                interval = Double(usec) / 1_000_000
            }
        }
        return ServiceNotifier(socket: socket, watchdogInterval: interval)
    }

    /// Sends one notification: `READY=1`, `WATCHDOG=1`, `STOPPING=1`, `STATUS=…`, or several
    /// of them in one datagram, in order. A status loses its line breaks (one field a line).
    public func send(_ fields: [Field]) throws(SystemError) {
        let text = fields.map(\.line).joined(separator: "\n")
        // One end of a socketpair, not socket(AF_UNIX): a unit may forbid the process Unix
        // sockets (RestrictAddressFamilies= without AF_UNIX, as the gateway's does), which
        // stops socket() but not socketpair(), and a datagram sent with an address goes to
        // that address whatever the socket's peer.
        var pair: [Int32] = [-1, -1]
        _ = try syscall("socketpair", subject: socket) {
            Glibc.socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair)
        }
        let fd = pair[0]
        defer { Glibc.close(pair[0]); Glibc.close(pair[1]) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(socket.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in bytes.enumerated() { raw[i] = byte }
            // An abstract address starts with a NUL byte instead of '@' and is not terminated.
            if bytes.first == UInt8(ascii: "@") { raw[0] = 0 } else { raw[bytes.count] = 0 }
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        let length = socklen_t(pathOffset + bytes.count + (bytes.first == UInt8(ascii: "@") ? 0 : 1))
        let payload = Array(text.utf8)
        _ = try syscall("sendto", subject: socket) {
            payload.withUnsafeBytes { buffer in
                withUnsafePointer(to: &address) { pointer in
                    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                        Glibc.sendto(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL), sa, length)
                    }
                }
            }
        }
    }

    /// One `NAME=value` assignment of the protocol.
    public enum Field: Sendable, Equatable {
        /// Start-up is complete.
        case ready
        /// A keep-alive: the service is healthy.
        case watchdog
        /// Tells the service manager the watchdog timed out now, so it acts without waiting.
        case watchdogTrigger
        /// A graceful shutdown has begun.
        case stopping
        /// A one-line state for `systemctl status`.
        case status(String)

        var line: String {
            switch self {
            case .ready: "READY=1"
            case .watchdog: "WATCHDOG=1"
            case .watchdogTrigger: "WATCHDOG=trigger"
            case .stopping: "STOPPING=1"
            case .status(let text):
                "STATUS=" + String(text.map { $0 == "\n" || $0 == "\r" ? " " : $0 })
            }
        }
    }
}

import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A service manager's notification socket owned by a test: a Unix datagram socket in the
/// test's directory that records what a program sends to `$NOTIFY_SOCKET`, as systemd
/// would receive it (one datagram per `sd_notify` call, `NAME=value` lines).
public final class NotifySocket: @unchecked Sendable {
    public struct Datagram: Sendable, CustomStringConvertible {
        /// When it arrived.
        public var received: Date
        public var lines: [String]

        public var description: String { lines.joined(separator: " | ") }
    }

    public let path: String
    private let fd: Int32
    private let lock = NSLock()
    private var received: [Datagram] = []
    private var closed = false
    private var thread: Thread?

    /// Binds `notify.sock` in `directory` and starts reading.
    public init(in directory: TemporaryDirectory) throws {
        path = directory.file("notify.sock")
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw POSIXError(.ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in bytes.enumerated() { raw[i] = byte }
            raw[bytes.count] = 0
        }
        let status = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard status == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        let thread = Thread { [self] in readLoop() }
        thread.name = "notify-socket"
        self.thread = thread
        thread.start()
    }

    /// The environment a program needs to talk to this socket; `watchdog` sets
    /// `WATCHDOG_USEC` as `WatchdogSec=` would.
    public func environment(watchdog seconds: Double? = nil) -> [String: String] {
        var environment = ["NOTIFY_SOCKET": path]
        if let seconds { environment["WATCHDOG_USEC"] = String(Int(seconds * 1_000_000)) }
        return environment
    }

    /// Every datagram so far, in order.
    public var datagrams: [Datagram] { lock.withLock { received } }

    /// Every line so far, in order.
    public var lines: [String] { datagrams.flatMap(\.lines) }

    /// How many lines equal `line`.
    public func count(_ line: String) -> Int { lines.filter { $0 == line }.count }

    /// Sends `X-TEST-MARK=<label>` to this socket from the test and waits until it has been
    /// read: a datagram socket keeps order, so every datagram queued before it has been read
    /// too. False if it did not come back within `timeout` seconds.
    public func mark(_ label: String, timeout: Double = 10) async -> Bool {
        let line = "X-TEST-MARK=" + label
        let sender = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard sender >= 0 else { return false }
        defer { close(sender) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
            raw[path.utf8.count] = 0
        }
        let bytes = Array(line.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(sender, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard sent == bytes.count else { return false }
        return await eventually(timeout: timeout) { self.count(line) >= 1 }
    }

    public func stop() {
        lock.withLock { closed = true }
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func readLoop() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !lock.withLock({ closed }) {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { continue }
            let text = String(decoding: buffer[0..<n], as: UTF8.self)
            let datagram = Datagram(received: Date(), lines: text.split(separator: "\n").map(String.init))
            lock.withLock { received.append(datagram) }
        }
        close(fd)
    }
}

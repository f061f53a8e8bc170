#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An owned file descriptor. Not copyable in spirit: exactly one owner closes it.
public struct FileDescriptor: Sendable, Hashable {
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Reads up to `buffer.count` bytes; 0 means end of stream.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try syscall("read") { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Writes every byte, looping over short writes.
    public func writeAll(_ bytes: [UInt8]) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            offset += try syscall("write") {
                bytes.withUnsafeBytes { Glibc.write(rawValue, $0.baseAddress! + offset, $0.count - offset) }
            }
        }
    }

    /// Writes every byte, looping over short writes.
    public func writeAll(_ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            offset += try syscall("write") { Glibc.write(rawValue, bytes.baseAddress! + offset, bytes.count - offset) }
        }
    }

    /// Waits until readable or `timeout` seconds pass; true when readable (or hung up).
    public func waitReadable(timeout: Double) throws(SystemError) -> Bool {
        var pfd = pollfd(fd: rawValue, events: Int16(POLLIN), revents: 0)
        let millis = Int32(max(0, min(timeout, 86400)) * 1000)
        let ready = try syscall("poll") { Glibc.poll(&pfd, 1, millis) }
        return ready > 0
    }

    public func setNonBlocking(_ on: Bool) throws(SystemError) {
        let flags = try syscall("fcntl") { fcntl(rawValue, F_GETFL) }
        _ = try syscall("fcntl") { fcntl(rawValue, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) }
    }

    /// Closes; errors are ignored, as there is nothing a caller could do about them.
    public func close() {
        _ = Glibc.close(rawValue)
    }
}

/// Files read whole: configs, captures, password files.
public enum FileSystem {
    /// The whole file's bytes.
    public static func read(_ path: String, limit: Int = 256 << 20) throws(SystemError) -> [UInt8] {
        let fd = try syscall("open", subject: path) { open(path, O_RDONLY | O_CLOEXEC) }
        defer { Glibc.close(fd) }
        var info = stat()
        _ = try syscall("fstat", subject: path) { fstat(fd, &info) }
        guard info.st_mode & S_IFMT != S_IFDIR else { throw SystemError(call: "read", errno: EISDIR, subject: path) }
        var out: [UInt8] = []
        out.reserveCapacity(Int(info.st_size))
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = try syscall("read", subject: path) {
                chunk.withUnsafeMutableBytes { buffer in Glibc.read(fd, buffer.baseAddress, buffer.count) }
            }
            if n == 0 { break }
            out += chunk[0..<n]
            if out.count > limit { throw SystemError(call: "read", errno: EFBIG, subject: path) }
        }
        return out
    }

    public static func readText(_ path: String) throws(SystemError) -> String {
        String(decoding: try read(path), as: UTF8.self)
    }

    /// Writes a file atomically (temporary file, then rename).
    public static func write(_ path: String, _ bytes: [UInt8], mode: UInt32 = 0o644) throws(SystemError) {
        let temporary = path + ".tmp-\(getpid())"
        let fd = try syscall("open", subject: temporary) { open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_t(mode)) }
        do {
            try FileDescriptor(rawValue: fd).writeAll(bytes)
        } catch {
            Glibc.close(fd)
            unlink(temporary)
            throw error
        }
        Glibc.close(fd)
        _ = try syscall("rename", subject: path) { rename(temporary, path) }
    }

    public static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

    /// `mkdir -p`.
    public static func makeDirectories(_ path: String, mode: UInt32 = 0o755) throws(SystemError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            prefix += "/" + part
            if !exists(prefix) {
                _ = try syscall("mkdir", subject: prefix) { mkdir(prefix, mode_t(mode)) }
            }
        }
    }
}

/// The process environment.
public enum Environment {
    public static func value(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}

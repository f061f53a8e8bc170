#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A failed system call: which call, on what, and errno.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public var call: String
    public var errno: Int32
    /// What the call was working on (a path, an address).
    public var subject: String?

    public init(call: String, errno: Int32, subject: String? = nil) {
        self.call = call
        self.errno = errno
        self.subject = subject
    }

    public var description: String {
        let what = subject.map { "\(call)(\($0))" } ?? call
        return "\(what): \(String(cString: strerror(errno))) (errno \(errno))"
    }
}

/// Runs a system call, retrying on EINTR, and turns -1 into a `SystemError`.
@inline(__always)
public func syscall<T: FixedWidthInteger>(_ name: String, subject: @autoclosure () -> String? = nil,
                                         _ body: () -> T) throws(SystemError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = errno
        if code == EINTR { continue }
        throw SystemError(call: name, errno: code, subject: subject())
    }
}

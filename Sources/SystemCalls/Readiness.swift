#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// What `poll(2)` found a descriptor ready for.
public struct Readiness: OptionSet, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let readable = Readiness(rawValue: 1)
    public static let writable = Readiness(rawValue: 2)
    /// Hung up or in error: reading says which.
    public static let hungUp = Readiness(rawValue: 4)

    /// Waits until `first` or `second` is ready for what is asked of it (`readable`,
    /// `writable`), or `timeout` seconds pass. `poll(2)`, not `select(2)`: descriptors
    /// numbered 1024 and above work too. Interrupted waits are resumed.
    public static func wait(_ first: (FileDescriptor, Readiness), _ second: (FileDescriptor, Readiness),
                            timeout: Double) throws(SystemError) -> (Readiness, Readiness) {
        var fds = (pollfd(fd: first.0.rawValue, events: events(first.1), revents: 0),
                   pollfd(fd: second.0.rawValue, events: events(second.1), revents: 0))
        let millis = Int32(max(0, min(timeout, 86400)) * 1000)
        _ = try withUnsafeMutableBytes(of: &fds) { raw throws(SystemError) in
            try syscall("poll") { Glibc.poll(raw.baseAddress!.assumingMemoryBound(to: pollfd.self), 2, millis) }
        }
        return (Readiness(fds.0.revents), Readiness(fds.1.revents))
    }

    private static func events(_ wanted: Readiness) -> Int16 {
        (wanted.contains(.readable) ? Int16(POLLIN) : 0) | (wanted.contains(.writable) ? Int16(POLLOUT) : 0)
    }

    private init(_ revents: Int16) {
        var ready: Readiness = []
        if revents & Int16(POLLIN) != 0 { ready.insert(.readable) }
        if revents & Int16(POLLOUT) != 0 { ready.insert(.writable) }
        if revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { ready.insert(.hungUp) }
        self = ready
    }
}

/// A descriptor one thread waits on (`Readiness.wait`) and any thread can make readable:
/// how work handed to a thread that sleeps in `poll(2)` wakes it (a non-blocking pipe).
///
/// Signals coalesce: only the first signal after a `drain()` writes to the pipe; the
/// others find it readable already and cost one atomic exchange, not a `write(2)` and a
/// wake each. A raw-mode gateway publishes tens of thousands of messages a second, and a
/// write per message woke the network thread once per message (coalesced: end to end
/// 93.7 k → 105.3 k msg/s, median of four alternated runs, docs/PERFORMANCE.md section 9).
/// The waiter drains before it does the work it was woken for, so whatever was handed over
/// before a skipped signal is seen.
public final class Wakeup: Sendable {
    /// The end to wait on.
    public let descriptor: FileDescriptor
    private let writeEnd: FileDescriptor
    /// True from a signal's write until the next drain.
    private let pending = Atomic<Bool>(false)

    public init() throws(SystemError) {
        var ends: [Int32] = [-1, -1]
        _ = try syscall("pipe") { Glibc.pipe(&ends) }
        descriptor = FileDescriptor(rawValue: ends[0])
        writeEnd = FileDescriptor(rawValue: ends[1])
        do {
            for end in [descriptor, writeEnd] {
                try end.setNonBlocking(true)
                _ = try syscall("fcntl") { fcntl(end.rawValue, F_SETFD, FD_CLOEXEC) }
            }
        } catch {
            descriptor.close()
            writeEnd.close()
            throw error
        }
    }

    deinit {
        descriptor.close()
        writeEnd.close()
    }

    /// Makes the descriptor readable until `drain()`; never blocks (a full pipe is
    /// readable already).
    public func signal() {
        guard !pending.exchange(true, ordering: .sequentiallyConsistent) else { return }
        var byte: UInt8 = 1
        _ = Glibc.write(writeEnd.rawValue, &byte, 1)
    }

    /// Takes every signal so far; the descriptor is not readable afterwards.
    ///
    /// The pipe is emptied before the flag is cleared: cleared first, a signal between the
    /// two would leave its byte read and the flag set, and every later signal would be
    /// skipped with nothing left to wake the waiter. This way a signal that comes meanwhile
    /// is skipped only while the caller has yet to do the work it drained for, and one after
    /// writes again (at worst a spare wake).
    public func drain() {
        var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        while withUnsafeMutableBytes(of: &buffer, { Glibc.read(descriptor.rawValue, $0.baseAddress, $0.count) }) > 0 {}
        pending.store(false, ordering: .sequentiallyConsistent)
    }
}

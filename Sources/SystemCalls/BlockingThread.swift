#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs blocking work (a `read` on a socket or an HCI device) on a dedicated thread so
/// it never occupies one of Swift concurrency's few cooperative threads.
public enum BlockingThread {
    /// Runs `body` on a new thread and returns its result when it finishes.
    public static func run<T: Sendable>(name: String = "beaconbridge-io",
                                        _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            do {
                try detach(name: name) {
                    do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
                }
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Starts `body` on a new detached thread (a network loop that lives as long as its owner).
    public static func detach(name: String = "beaconbridge-io", _ body: @escaping @Sendable () -> Void) throws(SystemError) {
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            box.work()
            return nil
        }, context)
        guard status == 0 else {
            Unmanaged<Box>.fromOpaque(context).release()
            throw SystemError(call: "pthread_create", errno: status, subject: name)
        }
        pthread_detach(thread)
    }

    private final class Box: @unchecked Sendable {
        let work: @Sendable () -> Void
        init(_ work: @escaping @Sendable () -> Void) { self.work = work }
    }
}

/// A flag set from one thread and read from another (cancellation of blocking loops).
public final class AtomicFlag: @unchecked Sendable {
    private var value = false
    private var mutex = pthread_mutex_t()

    public init() { pthread_mutex_init(&mutex, nil) }
    deinit { pthread_mutex_destroy(&mutex) }

    public var isSet: Bool {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return value
    }

    public func set(_ newValue: Bool = true) {
        pthread_mutex_lock(&mutex)
        value = newValue
        pthread_mutex_unlock(&mutex)
    }
}

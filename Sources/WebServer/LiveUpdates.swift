public import WebDisplay
import Synchronization

/// Tells each open live stream (one per page a browser shows) that its page changed.
///
/// Each stream holds at most one pending notice: however many messages arrive while a
/// page is being sent, it is rendered once more afterwards, from the latest state.
public final class LiveUpdates: Sendable {
    public enum Notice: Sendable { case changed, heartbeat }

    struct Subscriber {
        var page: FleetState.Page
        var continuation: AsyncStream<Notice>.Continuation
    }

    private let subscribers = Mutex<(next: Int, all: [Int: Subscriber])>((0, [:]))

    public init() {}

    public func subscribe(_ page: FleetState.Page) -> (id: Int, notices: AsyncStream<Notice>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Notice.self, bufferingPolicy: .bufferingNewest(1))
        let id = subscribers.withLock { s in
            s.next += 1
            s.all[s.next] = Subscriber(page: page, continuation: continuation)
            return s.next
        }
        return (id, stream)
    }

    public func unsubscribe(_ id: Int) {
        subscribers.withLock { $0.all.removeValue(forKey: id) }?.continuation.finish()
    }

    public func publish(_ change: FleetState.Change) {
        guard !change.isEmpty else { return }
        subscribers.withLock { s in
            for subscriber in s.all.values where change.affects(subscriber.page) {
                subscriber.continuation.yield(.changed)
            }
        }
    }

    /// Every stream of `pages` (all when `nil`) gets a notice: time-dependent figures, and
    /// a write that notices a browser gone.
    public func heartbeat(_ matching: (FleetState.Page) -> Bool) {
        subscribers.withLock { s in
            for subscriber in s.all.values where matching(subscriber.page) {
                subscriber.continuation.yield(.heartbeat)
            }
        }
    }

    public var count: Int { subscribers.withLock { $0.all.count } }

    /// Ends every stream (shutdown).
    public func finishAll() {
        let all = subscribers.withLock { s in
            defer { s.all = [:] }
            return Array(s.all.values)
        }
        for subscriber in all { subscriber.continuation.finish() }
    }
}

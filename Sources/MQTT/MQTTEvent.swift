public import BeaconKit

/// What the client reports on `MQTTClient.events`.
public enum MQTTEvent: Sendable, Equatable {
    /// The broker accepted the connection; `sessionPresent` when it kept a session from before.
    case connected(sessionPresent: Bool)
    /// The connection ended or could not be made, e.g. "connection lost",
    /// "connection refused: not authorised". The client keeps retrying unless stopped.
    case disconnected(reason: String)
    case message(MQTTMessage)
}

/// Where an `MQTTClient` delivers its events when its owner handles them on the network
/// thread (`MQTTClient.start(deliveringTo:)`) rather than through `events`.
///
/// `events` hands each message from the network thread to a task: a thread wake-up and an
/// executor hop per message, a real share of the CPU of a consumer that keeps up (the brain
/// of a chain, each message some microseconds of work; docs/PERFORMANCE.md section 11). A
/// sink takes each event where it is read, and `roundEnded` lets its owner handle what came
/// before the thread writes and waits again, so a message and the replies it causes take one
/// wake-up.
public struct EventSink: Sendable {
    /// Each event, in order, on the network thread. Must not block or wait: keep it and return.
    public var receive: @Sendable (MQTTEvent) -> Void
    /// At the end of each round of the network loop (after a read, a wait that timed out, a
    /// lost connection or a failed attempt), on the network thread, with whether the socket
    /// already holds more unread bytes (more messages are on their way: a backlog). It may
    /// publish; what it publishes is written before the thread waits again. It should take
    /// a bounded time, since the thread reads nothing meanwhile (keepalives included).
    /// Returns whether the next messages may gather for `MQTTClientOptions.roundSpacing`
    /// before the thread reads again (a steady stream nobody waits on); false: read them as
    /// soon as they come (a request whose sender waits for the answer, or nothing read).
    public var roundEnded: @Sendable (_ moreWaiting: Bool) -> Bool

    public init(receive: @escaping @Sendable (MQTTEvent) -> Void,
                roundEnded: @escaping @Sendable (_ moreWaiting: Bool) -> Bool) {
        self.receive = receive
        self.roundEnded = roundEnded
    }
}

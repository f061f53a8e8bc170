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

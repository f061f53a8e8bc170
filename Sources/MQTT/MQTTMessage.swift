/// One MQTT application message, as published or as received.
public struct MQTTMessage: Sendable, Equatable {
    public var topic: String
    /// The payload bytes; empty with `retain` deletes the topic's retained message.
    public var payload: [UInt8]
    /// 0 (at most once), 1 (at least once) or 2 (exactly once).
    public var qos: Int
    /// On publish: the broker keeps the message for future subscribers. On receipt: the
    /// message was stored before this subscription was made (it is state, not news).
    public var retain: Bool

    public init(topic: String, payload: [UInt8], qos: Int = 0, retain: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }

    public init(topic: String, text: String, qos: Int = 0, retain: Bool = false) {
        self.init(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain)
    }

    /// The payload decoded as UTF-8; invalid sequences become U+FFFD.
    public var text: String { String(decoding: payload, as: UTF8.self) }
}

/// What the client reports on `MQTTClient.events`.
public enum MQTTEvent: Sendable, Equatable {
    /// The broker accepted the connection; `sessionPresent` when it kept a session from before.
    case connected(sessionPresent: Bool)
    /// The connection ended or could not be made, e.g. "connection lost",
    /// "connection refused: not authorised". The client keeps retrying unless stopped.
    case disconnected(reason: String)
    case message(MQTTMessage)
}

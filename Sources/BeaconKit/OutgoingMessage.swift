/// A message for the broker, as the gateway's and the brain's cores decide it; the MQTT
/// layer turns it into bytes on the wire.
public struct OutgoingMessage: Sendable, Equatable, CustomStringConvertible {
    public var topic: String
    /// Empty with `retain` deletes the topic's retained message.
    public var payload: String
    public var qos: Int
    public var retain: Bool

    public init(topic: String, payload: String, qos: Int = 1, retain: Bool = false) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }

    public var description: String { "\(topic)\(retain ? " (retained)" : "") \(payload.prefix(200))" }
}

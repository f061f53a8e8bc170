/// One MQTT application message, as published or as received: what the gateway's and the
/// brain's cores decide to publish, what the MQTT client sends and delivers. The one
/// message type of BeaconBridge.
public struct MQTTMessage: Sendable, Equatable, CustomStringConvertible {
    public var topic: String
    /// The payload bytes; empty with `retain` deletes the topic's retained message.
    public var payload: [UInt8]
    /// 0 (at most once), 1 (at least once) or 2 (exactly once).
    public var qos: Int
    /// On publish: the broker keeps the message for future subscribers. On receipt: the
    /// message was stored before this subscription was made (it is state, not news).
    public var retain: Bool
    /// On publish over MQTT 5: seconds after which the broker drops the message (a retained
    /// one too, even across its restarts), the Message Expiry Interval. `nil`: never;
    /// ignored over MQTT 3.1.1.
    public var expiry: UInt32?

    public init(topic: String, payload: [UInt8], qos: Int = 0, retain: Bool = false, expiry: UInt32? = nil) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.expiry = expiry
    }

    public init(topic: String, text: String, qos: Int = 0, retain: Bool = false, expiry: UInt32? = nil) {
        self.init(topic: topic, payload: Array(text.utf8), qos: qos, retain: retain, expiry: expiry)
    }

    /// The payload decoded as UTF-8; invalid sequences become U+FFFD.
    public var text: String { String(decoding: payload, as: UTF8.self) }

    public var description: String { "\(topic)\(retain ? " (retained)" : "") \(text.prefix(200))" }
}

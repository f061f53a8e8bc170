internal import CMosquitto

/// A libmosquitto call that failed: which operation, and libmosquitto's code and text.
public struct MQTTError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The operation that failed: "publish", "subscribe", "tls_set", "connect", …
    public var operation: String
    /// The `mosq_err_t` value libmosquitto returned.
    public var code: Int32
    /// `mosquitto_strerror` text (or a more specific reason), captured when the error was made.
    public var message: String

    public init(operation: String, code: Int32, message: String? = nil) {
        self.operation = operation
        self.code = code
        self.message = message ?? Mosquitto.errorText(code)
    }

    public var description: String { "MQTT \(operation): \(message)" }

    /// The client is not connected to the broker; the caller keeps the message and retries later.
    public static func noConnection(_ operation: String) -> MQTTError {
        MQTTError(operation: operation, code: Int32(MOSQ_ERR_NO_CONN.rawValue))
    }

    /// Whether this is the "not connected" error (see `noConnection(_:)`).
    public var isNoConnection: Bool { code == Int32(MOSQ_ERR_NO_CONN.rawValue) }
}

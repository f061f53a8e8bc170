import BeaconKit
internal import CMosquitto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// libmosquitto's process-wide state and its codes turned into text.
enum Mosquitto {
    /// `mosquitto_lib_init` runs once, the first time a client is made; never cleaned up,
    /// because clients may live until the process exits.
    static let initialised: Bool = mosquitto_lib_init() == Int32(MOSQ_ERR_SUCCESS.rawValue)

    static let success = Int32(MOSQ_ERR_SUCCESS.rawValue)
    static let noConnection = Int32(MOSQ_ERR_NO_CONN.rawValue)

    /// Filters a SUBSCRIBE or UNSUBSCRIBE packet carries at most (`filterPackets`).
    static let filtersPerPacket = 1000

    /// `filters` in packets of at most `filtersPerPacket`: `send` gets each packet's filters as
    /// C strings (what `mosquitto_subscribe_multiple` and `mosquitto_unsubscribe_multiple`
    /// take) and returns libmosquitto's code; the first failure ends the calls and is returned.
    ///
    /// One packet for many filters, not one each: nats-server 2.9 writes the MQTT session to
    /// JetStream (replicated) after every SUBSCRIBE and UNSUBSCRIBE, all its filters each
    /// time, before it reads the connection's next packet. A brain of 250 stores subscribes
    /// to 2,500 filters: one packet each took 9.4 s on an idle 3-node cluster, and 10,000
    /// more than 300 s; in packets of 100, 0.15 and 1.4 s, and 10,000 in packets of 1,000
    /// 0.3 s (docs/fleet.md).
    static func filterPackets(_ filters: [String], _ send: (UnsafePointer<UnsafeMutablePointer<CChar>?>, Int32) -> Int32) -> Int32 {
        for start in stride(from: 0, to: filters.count, by: filtersPerPacket) {
            let strings = filters[start..<min(start + filtersPerPacket, filters.count)].map { strdup($0) }
            defer { strings.forEach { free($0) } }
            let code = strings.withUnsafeBufferPointer { send($0.baseAddress!, Int32($0.count)) }
            guard code == success else { return code }
        }
        return success
    }

    /// `mosquitto_strerror`, with `errno` read now for `MOSQ_ERR_ERRNO`.
    static func errorText(_ code: Int32) -> String {
        if code == Int32(MOSQ_ERR_ERRNO.rawValue) { return String(cString: strerror(errno)) }
        return trimmed(String(cString: mosquitto_strerror(code)))
    }

    /// Why the broker refused a CONNECT: a CONNACK return code (3.1.1) or reason code (5).
    static func refusalText(_ code: Int32, version: MQTTVersion) -> String {
        let text = switch version {
        case .v311: String(cString: mosquitto_connack_string(code))
        case .v5: String(cString: mosquitto_reason_string(code))
        }
        // "Connection Refused: not authorised." → "not authorised"
        var reason = trimmed(text)
        if reason.hasPrefix("Connection Refused: ") { reason = String(reason.dropFirst(20)) }
        return "connection refused: " + lowercasedFirst(reason)
    }

    /// Why a connection ended, from `on_disconnect`'s code: a `mosq_err_t`, or with MQTT 5 the
    /// reason code of the broker's DISCONNECT packet (0x80 and above).
    static func disconnectText(_ code: Int32, version: MQTTVersion) -> String {
        switch code {
        case success: return "disconnected"
        case Int32(MOSQ_ERR_CONN_LOST.rawValue): return "connection lost"
        case Int32(MOSQ_ERR_KEEPALIVE.rawValue): return "keepalive timeout"
        case Int32(MOSQ_ERR_CONN_REFUSED.rawValue): return "connection refused"
        case Int32(MOSQ_ERR_PROTOCOL.rawValue): return "protocol error"
        default:
            if version == .v5 && code >= 0x80 {
                return "disconnected by broker: " + lowercasedFirst(trimmed(String(cString: mosquitto_reason_string(code))))
            }
            return "connection failed: " + lowercasedFirst(errorText(code))
        }
    }

    private static func trimmed(_ text: String) -> String {
        text.hasSuffix(".") ? String(text.dropLast()) : text
    }

    private static func lowercasedFirst(_ text: String) -> String {
        guard let first = text.first else { return text }
        // Keep acronyms ("TLS error") as they are.
        if text.count > 1, text.dropFirst().first?.isUppercase == true { return text }
        return first.lowercased() + text.dropFirst()
    }
}

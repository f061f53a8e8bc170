package import BeaconKit

/// Reading untrusted payloads (docs/brain.md, "What it reads"): every parser of a payload type
/// checks the type of every key it uses and throws `PayloadError` with a short reason rather
/// than guessing.

extension BeaconRef {
    package init(json value: JSONValue?, at path: String) throws(PayloadError) {
        let r = PayloadReader(path: path)
        self = try r.beacon(r.object(value))
    }
}

/// Why an untrusted payload was rejected: short, safe to log and to send back to its author.
public struct PayloadError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { reason }
}

/// Type-checked access to the keys of one untrusted JSON object, with the key's path in
/// every error.
package struct PayloadReader {
    package var path: String

    package init(path: String) { self.path = path }

    package func name(_ key: String) -> String { path.isEmpty ? key : path + "." + key }

    package func object(_ value: JSONValue?) throws(PayloadError) -> JSONObject {
        guard case .object(let object)? = value else {
            throw PayloadError("\(path.isEmpty ? "payload" : path) must be a JSON object, found \(value?.typeName ?? "nothing")")
        }
        return object
    }

    /// Rejects keys outside `allowed` (a typo is an error, not a silently ignored field).
    package func only(_ object: JSONObject, _ allowed: [String]) throws(PayloadError) {
        if let key = object.keys.first(where: { !allowed.contains($0) }) {
            throw PayloadError("unknown key \"\(name(key).prefix(60))\" (known: \(allowed.joined(separator: ", ")))")
        }
    }

    package func string(_ value: JSONValue?, _ key: String, maxLength: Int = 256) throws(PayloadError) -> String {
        guard let value else { throw PayloadError("\(name(key)) is required") }
        guard case .string(let text) = value else { throw PayloadError("\(name(key)) must be a string, found \(value.typeName)") }
        guard text.count <= maxLength else { throw PayloadError("\(name(key)) is longer than \(maxLength) characters") }
        return text
    }

    package func optionalString(_ value: JSONValue?, _ key: String, maxLength: Int = 256) throws(PayloadError) -> String? {
        guard let value, value != .null else { return nil }
        return try string(value, key, maxLength: maxLength)
    }

    package func number(_ value: JSONValue?, _ key: String) throws(PayloadError) -> Double {
        guard let value else { throw PayloadError("\(name(key)) is required") }
        guard case .number(let n) = value else { throw PayloadError("\(name(key)) must be a number, found \(value.typeName)") }
        return n
    }

    /// A number or `null`.
    package func optionalNumber(_ value: JSONValue?, _ key: String) throws(PayloadError) -> Double? {
        guard let value, value != .null else { return nil }
        return try number(value, key)
    }

    /// The beacon an object names: `major` and `minor`, or `namespace` and `instance` (20 and
    /// 12 hex digits).
    package func beacon(_ object: JSONObject) throws(PayloadError) -> BeaconRef {
        guard object["namespace"] != nil || object["instance"] != nil else {
            return BeaconRef(major: try u16(object["major"], "major"), minor: try u16(object["minor"], "minor"))
        }
        let namespace = try string(object["namespace"], "namespace", maxLength: 20)
        let instance = try string(object["instance"], "instance", maxLength: 12)
        guard let ns = EddystoneNamespace(hex: namespace) else { throw PayloadError("\(name("namespace")) is not 20 hex digits") }
        guard let id = EddystoneInstance(hex: instance) else { throw PayloadError("\(name("instance")) is not 12 hex digits") }
        return BeaconRef(namespace: ns, instance: id)
    }

    /// A whole number within `range`, or `nil` when absent or `null`.
    package func optionalInteger(_ value: JSONValue?, _ key: String, in range: ClosedRange<Int>) throws(PayloadError) -> Int? {
        guard let n = try optionalNumber(value, key) else { return nil }
        guard n == n.rounded(), n >= Double(range.lowerBound), n <= Double(range.upperBound) else {
            throw PayloadError("\(name(key)) must be an integer \(range.lowerBound)...\(range.upperBound)")
        }
        return Int(n)
    }

    /// `immediate`, `near`, `far` or `unknown`.
    package func proximity(_ value: JSONValue?, _ key: String) throws(PayloadError) -> Proximity {
        let text = try string(value, key, maxLength: 16)
        guard let proximity = Proximity(rawValue: text) else {
            throw PayloadError("\(name(key)) must be immediate, near, far or unknown")
        }
        return proximity
    }

    package func u16(_ value: JSONValue?, _ key: String) throws(PayloadError) -> UInt16 {
        let n = try number(value, key)
        guard n == n.rounded(), n >= 0, n <= 65535 else { throw PayloadError("\(name(key)) must be an integer 0-65535") }
        return UInt16(n)
    }

    package func instant(_ value: JSONValue?, _ key: String) throws(PayloadError) -> CaptureTime {
        let text = try string(value, key, maxLength: 32)
        guard let time = CaptureTime(iso8601: text) else { throw PayloadError("\(name(key)) is not an ISO-8601 UTC time") }
        return time
    }

    package func optionalInstant(_ value: JSONValue?, _ key: String) throws(PayloadError) -> CaptureTime? {
        guard let value, value != .null else { return nil }
        return try instant(value, key)
    }

    package func uuid(_ value: JSONValue?, _ key: String) throws(PayloadError) -> BeaconUUID? {
        guard let value, value != .null else { return nil }
        let text = try string(value, key, maxLength: 40)
        guard let uuid = BeaconUUID(text) else { throw PayloadError("\(name(key)) is not a UUID") }
        return uuid
    }

    /// A name that is used inside topics (a gateway id, a client id).
    package func segment(_ value: JSONValue?, _ key: String) throws(PayloadError) -> String {
        let text = try string(value, key, maxLength: 128)
        if let problem = Topics.problem(withSegment: text) { throw PayloadError("\(name(key)) \(problem)") }
        return text
    }
}

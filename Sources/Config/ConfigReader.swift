import BeaconKit
import Contract

/// One problem in a config, at a JSON path: `gateways[2].uuids[0]: "xyz" is not a UUID`.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { path.isEmpty ? reason : "\(path): \(reason)" }
}

/// Every problem found in a config, in document order.
public struct ConfigErrors: Error, Sendable, Equatable, CustomStringConvertible {
    public var errors: [ConfigError]

    public init(_ errors: [ConfigError]) { self.errors = errors }

    public var description: String { errors.map(\.description).joined(separator: "\n") }
}

/// Walks a JSON document, collecting every problem with its path instead of stopping at
/// the first, so `beaconctl config check` can list them all at once.
struct ConfigReader {
    var errors: [ConfigError] = []

    static func join(_ base: String, _ key: String) -> String { base.isEmpty ? key : base + "." + key }

    mutating func fail(_ path: String, _ reason: String) {
        errors.append(ConfigError(path: path, reason: reason))
    }

    /// A short rendering of a bad value for messages.
    static func show(_ value: JSONValue) -> String {
        let text = value.jsonText
        return text.count > 40 ? String(text.prefix(37)) + "…" : text
    }

    /// The object at `path`, with unknown keys reported (and a suggestion when one is close).
    mutating func object(_ value: JSONValue?, at path: String, keys allowed: [String]) -> JSONObject? {
        guard let value else { return nil }
        guard case .object(let object) = value else {
            fail(path, "expected an object, found \(value.typeName)")
            return nil
        }
        for key in object.keys where !allowed.contains(key) {
            var reason = "unknown key"
            // An abbreviation ("lat") names the key it starts; only then the nearest spelling.
            let extended = allowed.filter { key.count >= 2 && $0.lowercased().hasPrefix(key.lowercased()) }
            if extended.count == 1 {
                reason += " (did you mean \"\(extended[0])\"?)"
            } else if let close = allowed.min(by: { editDistance($0, key) < editDistance($1, key) }),
               editDistance(close, key) <= max(2, key.count / 3) {
                reason += " (did you mean \"\(close)\"?)"
            } else {
                reason += " (known: \(allowed.joined(separator: ", ")))"
            }
            fail(Self.join(path, key), reason)
        }
        return object
    }

    mutating func required(_ object: JSONObject, _ key: String, at path: String) -> JSONValue? {
        guard let value = object[key] else {
            fail(Self.join(path, key), "is required")
            return nil
        }
        return value
    }

    mutating func string(_ value: JSONValue?, at path: String, nonEmpty: Bool = true, maxLength: Int? = nil) -> String? {
        guard let value else { return nil }
        guard case .string(let s) = value else {
            fail(path, "expected a string, found \(value.typeName)")
            return nil
        }
        if nonEmpty && s.isEmpty {
            fail(path, "must not be empty")
            return nil
        }
        if let maxLength, s.count > maxLength {
            fail(path, "is \(s.count) characters long; at most \(maxLength)")
            return nil
        }
        return s
    }

    mutating func number(_ value: JSONValue?, at path: String, in range: ClosedRange<Double>,
                         unit: String = "") -> Double? {
        guard let value else { return nil }
        guard case .number(let n) = value else {
            fail(path, "expected a number, found \(value.typeName)")
            return nil
        }
        guard range.contains(n) else {
            fail(path, "\(Self.show(value)) is out of range \(format(range.lowerBound))…\(format(range.upperBound))\(unit)")
            return nil
        }
        return n
    }

    mutating func integer(_ value: JSONValue?, at path: String, in range: ClosedRange<Int>) -> Int? {
        guard let value else { return nil }
        guard case .number(let n) = value else {
            fail(path, "expected an integer, found \(value.typeName)")
            return nil
        }
        guard n == n.rounded(), abs(n) < 1e15 else {
            fail(path, "\(Self.show(value)) is not an integer")
            return nil
        }
        guard range.contains(Int(n)) else {
            fail(path, "\(Self.show(value)) is out of range \(range.lowerBound)…\(range.upperBound)")
            return nil
        }
        return Int(n)
    }

    mutating func bool(_ value: JSONValue?, at path: String) -> Bool? {
        guard let value else { return nil }
        guard case .bool(let b) = value else {
            fail(path, "expected true or false, found \(value.typeName)")
            return nil
        }
        return b
    }

    mutating func array(_ value: JSONValue?, at path: String) -> [JSONValue]? {
        guard let value else { return nil }
        guard case .array(let a) = value else {
            fail(path, "expected an array, found \(value.typeName)")
            return nil
        }
        return a
    }

    /// An Eddystone-UID namespace (20 hex digits) and instance (12), as gateways write them.
    mutating func eddystone(_ o: JSONObject, at path: String) -> BeaconID? {
        let namespace = required(o, "namespace", at: path).flatMap { string($0, at: path + ".namespace") }
        let instance = required(o, "instance", at: path).flatMap { string($0, at: path + ".instance") }
        let ns = namespace.flatMap { EddystoneNamespace(hex: $0.lowercased()) }
        let id = instance.flatMap { EddystoneInstance(hex: $0.lowercased()) }
        if let namespace, ns == nil { fail(path + ".namespace", "\"\(namespace)\" is not an Eddystone namespace (20 hex digits)") }
        if let instance, id == nil { fail(path + ".instance", "\"\(instance)\" is not an Eddystone instance (12 hex digits)") }
        guard let ns, let id else { return nil }
        return .eddystone(namespace: ns, instance: id)
    }

    mutating func uuid(_ value: JSONValue?, at path: String) -> BeaconUUID? {
        guard let text = string(value, at: path) else { return nil }
        guard let uuid = BeaconUUID(text) else {
            fail(path, "\"\(text)\" is not a UUID")
            return nil
        }
        return uuid
    }

    mutating func u16(_ value: JSONValue?, at path: String) -> UInt16? {
        integer(value, at: path, in: 0...65535).map { UInt16($0) }
    }

    /// A name used inside topics: no wildcards, no slashes.
    mutating func topicSegment(_ value: JSONValue?, at path: String) -> String? {
        guard let text = string(value, at: path) else { return nil }
        if let problem = Topics.problem(withSegment: text) {
            fail(path, "\"\(text)\" \(problem)")
            return nil
        }
        return text
    }

    mutating func oneOf(_ value: JSONValue?, at path: String, _ choices: [String]) -> String? {
        guard let text = string(value, at: path) else { return nil }
        guard choices.contains(text) else {
            fail(path, "\"\(text)\" is not one of \(choices.map { "\"\($0)\"" }.joined(separator: ", "))")
            return nil
        }
        return text
    }

    mutating func template(_ value: JSONValue?, at path: String) -> String? {
        guard let text = string(value, at: path) else { return nil }
        if let problem = Template.problem(in: text) {
            fail(path, "template \(problem)")
            return nil
        }
        return text
    }
}

func format(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
}

/// Levenshtein distance, for "did you mean" suggestions.
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a.lowercased()), b = Array(b.lowercased())
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = previous
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        swap(&previous, &current)
    }
    return previous[b.count]
}

/// A few values keyed by gateway id: what one beacon holds per gateway (its views, its
/// links), where a beacon is heard by a handful of gateways, rarely more than eight.
///
/// Two arrays searched from the front, in the order the gateways were added, instead of a
/// `Dictionary`: a look-up compares a few ids (short ids are compared as their 16 bytes),
/// where a dictionary hashes the id with SipHash on every access. The brain looks a beacon's
/// gateways up several times per sample and per step; hashing their ids was a fifth of its
/// core's CPU (docs/PERFORMANCE.md, section 11).
///
/// Iteration follows insertion order, which is no order anyone may rely on: code whose output
/// depends on the order sorts, as it did over a dictionary. Equality ignores the order.
public struct GatewayMap<Value> {
    public private(set) var keys: [String] = []
    public private(set) var values: [Value] = []

    public init() {}

    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }

    @inline(__always)
    func index(of key: String) -> Int? {
        for i in keys.indices where keys[i] == key { return i }
        return nil
    }

    public subscript(key: String) -> Value? {
        get { index(of: key).map { values[$0] } }
        set {
            if let newValue { updateValue(newValue, forKey: key) } else { removeValue(forKey: key) }
        }
    }

    /// The value of `key`, added as `defaultValue` first if there is none; changed in place.
    public subscript(key: String, default defaultValue: @autoclosure () -> Value) -> Value {
        get { index(of: key).map { values[$0] } ?? defaultValue() }
        _modify {
            let i: Int
            if let found = index(of: key) {
                i = found
            } else {
                keys.append(key)
                values.append(defaultValue())
                i = values.count - 1
            }
            yield &values[i]
        }
    }

    /// Sets the value of `key`; returns the one it replaced.
    @discardableResult
    public mutating func updateValue(_ value: Value, forKey key: String) -> Value? {
        if let i = index(of: key) {
            defer { values[i] = value }
            return values[i]
        }
        keys.append(key)
        values.append(value)
        return nil
    }

    @discardableResult
    public mutating func removeValue(forKey key: String) -> Value? {
        guard let i = index(of: key) else { return nil }
        keys.remove(at: i)
        return values.remove(at: i)
    }

    /// Changes every value in place.
    public mutating func modifyEach(_ body: (inout Value) throws -> Void) rethrows {
        for i in values.indices { try body(&values[i]) }
    }

    /// The entries `isIncluded` keeps, in their order.
    public func filter(_ isIncluded: ((key: String, value: Value)) throws -> Bool) rethrows -> GatewayMap {
        var kept = GatewayMap()
        for i in keys.indices where try isIncluded((keys[i], values[i])) {
            kept.keys.append(keys[i])
            kept.values.append(values[i])
        }
        return kept
    }
}

extension GatewayMap: Sequence {
    public typealias Element = (key: String, value: Value)

    public struct Iterator: IteratorProtocol {
        let map: GatewayMap
        var i = 0

        public mutating func next() -> Element? {
            guard i < map.keys.count else { return nil }
            defer { i += 1 }
            return (map.keys[i], map.values[i])
        }
    }

    public func makeIterator() -> Iterator { Iterator(map: self) }
    public var underestimatedCount: Int { keys.count }
}

extension GatewayMap: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, Value)...) {
        for (key, value) in elements { updateValue(value, forKey: key) }
    }
}

extension GatewayMap: Equatable where Value: Equatable {
    /// The same keys with the same values, in any order.
    public static func == (lhs: GatewayMap, rhs: GatewayMap) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for i in lhs.keys.indices {
            guard let j = rhs.index(of: lhs.keys[i]), rhs.values[j] == lhs.values[i] else { return false }
        }
        return true
    }
}

extension GatewayMap: Sendable where Value: Sendable {}

extension GatewayMap: CustomStringConvertible {
    public var description: String { Dictionary(uniqueKeysWithValues: zip(keys, values)).description }
}

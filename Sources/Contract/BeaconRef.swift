public import BeaconKit

/// A beacon as MQTT topics name it: an iBeacon or AltBeacon by major and minor (topics carry
/// no UUID, `beacons/<major>/<minor>`), an Eddystone-UID beacon by namespace and instance
/// (`eddystone/<namespace>/<instance>`).
public struct BeaconRef: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The Eddystone-UID beacon named; `nil` for an iBeacon or AltBeacon. When set, `major`
    /// and `minor` are 0 and mean nothing: look here first.
    public let eddystone: EddystoneKey?
    public let major: UInt16
    public let minor: UInt16

    public init(major: UInt16, minor: UInt16) {
        eddystone = nil
        self.major = major
        self.minor = minor
    }

    /// An Eddystone-UID beacon.
    public init(_ eddystone: EddystoneKey) {
        self.eddystone = eddystone
        major = 0
        minor = 0
    }

    public init(namespace: EddystoneNamespace, instance: EddystoneInstance) {
        self.init(EddystoneKey(namespace: namespace, instance: instance))
    }

    /// One word for an iBeacon (major and minor side by side): the brain looks beacons up by
    /// `BeaconRef` several times per sample, and hashing the three fields one by one was a
    /// tenth of its core's instructions. Equal refs hash alike, as `==` compares every field.
    public func hash(into hasher: inout Hasher) {
        if let eddystone {
            hasher.combine(eddystone)
        } else {
            hasher.combine(UInt32(major) << 16 | UInt32(minor))
        }
    }

    /// What a `Dictionary` or `Set` of `BeaconRef` hashes an iBeacon by: its one word mixed
    /// with the table's seed and a key drawn once per process by SplitMix64's finaliser (a
    /// bijection of 64 bits, each output bit depending on every input bit), instead of SipHash
    /// through a `Hasher` (a seed, the word, a finalisation: about 160 of the 320 instructions
    /// a look-up cost, and the brain looks beacons up several times per sample and per step).
    /// The key comes from `Hasher`, so it is random per process as SipHash's is (fixed under
    /// `SWIFT_DETERMINISTIC_HASHING`): a sender who picks majors and minors cannot aim them at
    /// one bucket without knowing it. Eddystone beacons keep SipHash.
    public func _rawHashValue(seed: Int) -> Int {
        if let eddystone { return eddystone._rawHashValue(seed: seed) }
        var x = (UInt64(major) << 16 | UInt64(minor)) ^ (Self.hashKey &+ UInt64(truncatingIfNeeded: seed))
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int(truncatingIfNeeded: x ^ (x >> 31))
    }

    /// This process's key for `_rawHashValue(seed:)`: SipHash's of a constant.
    private static let hashKey: UInt64 = {
        var hasher = Hasher()
        hasher.combine(0xB1EA_C0DE as UInt64)
        return UInt64(truncatingIfNeeded: hasher.finalize())
    }()

    /// iBeacons first, by major and minor; then Eddystone beacons.
    public static func < (lhs: BeaconRef, rhs: BeaconRef) -> Bool {
        switch (lhs.eddystone, rhs.eddystone) {
        case (nil, nil): (lhs.major, lhs.minor) < (rhs.major, rhs.minor)
        case (nil, _?): true
        case (_?, nil): false
        case let (a?, b?): a < b
        }
    }

    /// The part of the brain's record topics naming the beacon (`brain/visits/<levels>`):
    /// `<major>/<minor>` or `eddystone/<namespace>/<instance>`.
    public var recordLevels: String {
        eddystone.map { "eddystone/\($0.namespace)/\($0.instance)" } ?? "\(major)/\(minor)"
    }

    /// The beacon `recordLevels` names (`100/7`, `eddystone/<namespace>/<instance>`), with the
    /// numbers and hex digits topics accept; `nil` for anything else.
    public init?(recordLevels text: String) {
        let s = text.split(separator: "/", omittingEmptySubsequences: false)
        if s.count == 3, s[0] == "eddystone", let key = Topics.eddystone(s[1], s[2]) {
            self.init(key)
        } else if s.count == 2, let ref = Topics.ibeacon(s[0], s[1]) {
            self = ref
        } else {
            return nil
        }
    }

    /// `major/minor`, or `namespace/instance`, as in the topics.
    public var description: String { eddystone.map { "\($0.namespace)/\($0.instance)" } ?? "\(major)/\(minor)" }

    /// `{"major":…,"minor":…}`, or `{"namespace":…,"instance":…}` for an Eddystone beacon: the
    /// form every brain payload uses to name a beacon.
    public var json: JSONValue {
        if let eddystone {
            return .object(["namespace": .string(eddystone.namespace.description), "instance": .string(eddystone.instance.description)])
        }
        return .object(["major": .number(Double(major)), "minor": .number(Double(minor))])
    }

    /// Writes the beacon's identity keys into a payload: `major`, `minor`; or `namespace`, `instance`.
    package func write(into o: inout JSONWriter.ObjectWriter) {
        if let eddystone {
            o("namespace", eddystone.namespace.description)
            o("instance", eddystone.instance.description)
        } else {
            o("major", Int(major))
            o("minor", Int(minor))
        }
    }
}

/// The identity of an Eddystone-UID beacon.
public struct EddystoneKey: Hashable, Comparable, Sendable {
    public var namespace: EddystoneNamespace
    public var instance: EddystoneInstance

    public init(namespace: EddystoneNamespace, instance: EddystoneInstance) {
        self.namespace = namespace
        self.instance = instance
    }

    public static func < (lhs: EddystoneKey, rhs: EddystoneKey) -> Bool {
        (lhs.namespace.high, lhs.namespace.low, lhs.instance.rawValue) < (rhs.namespace.high, rhs.namespace.low, rhs.instance.rawValue)
    }
}

/// What a beacon's topics name: one beacon (`BeaconRef`), or a set of them for a filter or an
/// ACL pattern (`Beacons`). Topics' builders take either, so a filter is built by the same
/// code as the topics it matches.
public protocol BeaconSelection: Sendable {
    /// The beacon's topic under the prefix of `topics`: `beacons/<major>/<minor>`,
    /// `eddystone/<namespace>/<instance>`, or the same with `+` levels.
    func topic(in topics: Topics) -> String
    /// The levels naming them in the brain's record topics (`brain/visits/<levels>`):
    /// `<major>/<minor>`, `eddystone/<namespace>/<instance>`, or the same with `+` levels.
    var recordLevels: String { get }
}

extension BeaconRef: BeaconSelection {
    public func topic(in topics: Topics) -> String {
        if let eddystone { return topics.topic("eddystone/\(eddystone.namespace)/\(eddystone.instance)") }
        // Every sighting names its topic: written directly rather than interpolated.
        var writer = JSONWriter(capacity: topics.prefix.utf8.count + 20)
        if !topics.prefix.isEmpty {
            var copy = topics.prefix
            copy.withUTF8 { writer.append(UnsafeRawBufferPointer($0)) }
            writer.append("/")
        }
        writer.append("beacons/")
        writer.appendDecimal(UInt64(major))
        writer.append("/")
        writer.appendDecimal(UInt64(minor))
        return writer.text
    }
}

/// The beacons a filter or an ACL pattern covers: every iBeacon, every iBeacon of one store
/// (major), every Eddystone-UID beacon, or one beacon. Topics builds the same topics for it as
/// for a `BeaconRef`, with `+` where a level is open: `topics.presence(of: .anyIBeacon,
/// seenBy: "+")` is `beacons/+/+/presence/+`.
public struct Beacons: BeaconSelection, Hashable {
    /// The levels naming them in a beacon's topic: `beacons/+/+`, `eddystone/<ns>/<inst>`…
    let levels: String
    /// The levels naming them in the brain's record topics: `+/+`, `eddystone/+/+`…
    public let recordLevels: String

    public func topic(in topics: Topics) -> String { topics.topic(levels) }
}

// Declared on the protocol so that `topics.presence(of: .anyIBeacon)` reads at the call site.
extension BeaconSelection where Self == Beacons {
    /// `beacons/+/+`.
    public static var anyIBeacon: Beacons { ofStore(nil) }
    /// `eddystone/+/+`.
    public static var anyEddystone: Beacons { eddystone(nil) }

    /// `beacons/<major>/+`; every store's (`beacons/+/+`) for `nil`.
    public static func ofStore(_ major: UInt16?) -> Beacons {
        let m = major.map(String.init) ?? "+"
        return Beacons(levels: "beacons/\(m)/+", recordLevels: "\(m)/+")
    }

    /// One Eddystone-UID beacon, or every one (`eddystone/+/+`) for `nil`.
    public static func eddystone(_ key: EddystoneKey?) -> Beacons {
        let b = key.map { "\($0.namespace)/\($0.instance)" } ?? "+/+"
        return Beacons(levels: "eddystone/" + b, recordLevels: "eddystone/" + b)
    }

    /// One beacon of either family.
    public static func one(_ ref: BeaconRef) -> Beacons {
        if let key = ref.eddystone { return eddystone(key) }
        return Beacons(levels: "beacons/\(ref.major)/\(ref.minor)", recordLevels: ref.recordLevels)
    }
}

extension BeaconID {
    /// How topics name this beacon.
    public var ref: BeaconRef {
        switch self {
        case .ibeacon(_, let major, let minor): BeaconRef(major: major, minor: minor)
        case .eddystone(let namespace, let instance): BeaconRef(namespace: namespace, instance: instance)
        }
    }
}

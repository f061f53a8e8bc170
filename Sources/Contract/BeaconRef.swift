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

    /// iBeacons first, by major and minor; then Eddystone beacons.
    public static func < (lhs: BeaconRef, rhs: BeaconRef) -> Bool {
        switch (lhs.eddystone, rhs.eddystone) {
        case (nil, nil): (lhs.major, lhs.minor) < (rhs.major, rhs.minor)
        case (nil, _?): true
        case (_?, nil): false
        case let (a?, b?): a < b
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

extension BeaconID {
    /// How topics name this beacon.
    public var ref: BeaconRef {
        switch self {
        case .ibeacon(_, let major, let minor): BeaconRef(major: major, minor: minor)
        case .eddystone(let namespace, let instance): BeaconRef(namespace: namespace, instance: instance)
        }
    }
}

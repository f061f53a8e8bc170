/// A Bluetooth device address as a 48-bit number (the HCI little-endian bytes reversed).
public struct BluetoothAddress: Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue & 0xFFFF_FFFF_FFFF }

    /// Reads the 6 little-endian bytes HCI uses; the caller checked the bounds.
    package init(littleEndian bytes: UnsafeRawBufferPointer, at offset: Int) {
        precondition(offset >= 0 && offset + 6 <= bytes.count, "an address needs 6 bytes")
        let low = UInt64(bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self).littleEndian)
        let high = UInt64(bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self).littleEndian)
        rawValue = high << 32 | low
    }

    /// Parses `AA:BB:CC:DD:EE:FF`.
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6 else { return nil }
        var value: UInt64 = 0
        for part in parts {
            guard part.count == 2, part.allSatisfy(\.isHexDigit), let byte = UInt8(part, radix: 16) else { return nil }
            value = value << 8 | UInt64(byte)
        }
        rawValue = value
    }

    /// The 6 bytes in HCI (little-endian) order.
    public var littleEndianBytes: [UInt8] {
        (0..<6).map { UInt8(truncatingIfNeeded: rawValue >> (8 * UInt64($0))) }
    }

    public var description: String {
        var writer = JSONWriter(capacity: 17)
        appendCanonical(to: &writer)
        return writer.text
    }

    /// Writes `AA:BB:CC:DD:EE:FF`.
    func appendCanonical(to out: inout JSONWriter) {
        let value = rawValue
        out.reserve(17) { p in
            for i in 0..<6 {
                let byte = UInt8(truncatingIfNeeded: value >> (8 * UInt64(5 - i)))
                p[3 * i] = hexDigit(byte >> 4)
                p[3 * i + 1] = hexDigit(byte & 0x0F)
                if i < 5 { p[3 * i + 2] = UInt8(ascii: ":") }
            }
        }
    }
}

/// Apple's iBeacon: manufacturer data of company 0x004C, type 0x02, length 0x15.
public struct IBeacon: Hashable, Sendable {
    public var uuid: BeaconUUID
    public var major: UInt16
    public var minor: UInt16
    /// Measured power: the RSSI expected at 1 m, in dBm.
    public var txPower: Int8

    public init(uuid: BeaconUUID, major: UInt16, minor: UInt16, txPower: Int8) {
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.txPower = txPower
    }
}

/// Radius Networks' AltBeacon: manufacturer data with beacon code 0xBEAC.
public struct AltBeacon: Hashable, Sendable {
    public var company: UInt16
    /// The first 16 bytes of the 20-byte beacon id.
    public var uuid: BeaconUUID
    /// Bytes 16–17 of the beacon id.
    public var major: UInt16
    /// Bytes 18–19 of the beacon id.
    public var minor: UInt16
    /// Reference RSSI at 1 m, in dBm.
    public var referenceRSSI: Int8
    public var reserved: UInt8

    public init(company: UInt16, uuid: BeaconUUID, major: UInt16, minor: UInt16, referenceRSSI: Int8, reserved: UInt8) {
        self.company = company
        self.uuid = uuid
        self.major = major
        self.minor = minor
        self.referenceRSSI = referenceRSSI
        self.reserved = reserved
    }
}

/// The 10-byte Eddystone-UID namespace.
public struct EddystoneNamespace: Hashable, Sendable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt16

    public init(high: UInt64, low: UInt16) {
        self.high = high
        self.low = low
    }

    /// Parses 20 hex digits.
    public init?(hex: String) {
        guard hex.utf8.count == 20, let bytes = Hex.decode(hex), bytes.count == 10 else { return nil }
        high = bytes[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
        low = bytes[8..<10].reduce(0) { $0 << 8 | UInt16($1) }
    }

    /// Lower-case hex, as Eddystone tools print it.
    public var description: String {
        (String(high, radix: 16).leftPadded(to: 16) + String(low, radix: 16).leftPadded(to: 4))
    }
}

/// The 6-byte Eddystone-UID instance.
public struct EddystoneInstance: Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue & 0xFFFF_FFFF_FFFF }

    public init?(hex: String) {
        guard hex.utf8.count == 12, hex.allSatisfy(\.isHexDigit), let value = UInt64(hex, radix: 16) else { return nil }
        rawValue = value
    }

    public var description: String { String(rawValue, radix: 16).leftPadded(to: 12) }
}

public struct EddystoneUID: Hashable, Sendable {
    /// Calibrated transmit power at 0 m, in dBm.
    public var txPower: Int8
    public var namespace: EddystoneNamespace
    public var instance: EddystoneInstance

    public init(txPower: Int8, namespace: EddystoneNamespace, instance: EddystoneInstance) {
        self.txPower = txPower
        self.namespace = namespace
        self.instance = instance
    }
}

/// Eddystone-URL, kept compressed (scheme byte plus up to 17 encoded bytes) so that
/// decoding does not allocate; `url` expands it.
public struct EddystoneURL: Hashable, Sendable {
    /// Calibrated transmit power at 0 m, in dBm.
    public var txPower: Int8
    public var scheme: UInt8
    var encodedLength: UInt8
    var encoded: (UInt64, UInt64, UInt8)

    static let maxEncodedLength = 17

    package init?(txPower: Int8, scheme: UInt8, encoded bytes: UnsafeRawBufferPointer) {
        guard scheme < Self.schemes.count, bytes.count <= Self.maxEncodedLength else { return nil }
        self.txPower = txPower
        self.scheme = scheme
        encodedLength = UInt8(bytes.count)
        var words: (UInt64, UInt64, UInt8) = (0, 0, 0)
        for (i, byte) in bytes.enumerated() {
            switch i {
            case 0..<8: words.0 |= UInt64(byte) << (8 * UInt64(i))
            case 8..<16: words.1 |= UInt64(byte) << (8 * UInt64(i - 8))
            default: words.2 = byte
            }
        }
        encoded = (words.0, words.1, words.2)
    }

    /// The encoded bytes after the scheme byte.
    public var encodedBytes: [UInt8] {
        (0..<Int(encodedLength)).map { i in
            switch i {
            case 0..<8: UInt8(truncatingIfNeeded: encoded.0 >> (8 * UInt64(i)))
            case 8..<16: UInt8(truncatingIfNeeded: encoded.1 >> (8 * UInt64(i - 8)))
            default: encoded.2
            }
        }
    }

    static let schemes = ["http://www.", "https://www.", "http://", "https://"]
    static let expansions = [".com/", ".org/", ".edu/", ".net/", ".info/", ".biz/", ".gov/",
                             ".com", ".org", ".edu", ".net", ".info", ".biz", ".gov"]

    /// The expanded URL; bytes that are neither printable ASCII nor an expansion code
    /// are shown as `%XX`.
    public var url: String {
        var out = Self.schemes[Int(scheme)]
        for byte in encodedBytes {
            if Int(byte) < Self.expansions.count {
                out += Self.expansions[Int(byte)]
            } else if byte > 0x20 && byte < 0x7F {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%"
                appendHex(byte, to: &out)
            }
        }
        return out
    }

    public static func == (lhs: EddystoneURL, rhs: EddystoneURL) -> Bool {
        lhs.txPower == rhs.txPower && lhs.scheme == rhs.scheme && lhs.encodedBytes == rhs.encodedBytes
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(txPower)
        hasher.combine(scheme)
        hasher.combine(encodedBytes)
    }
}

/// Unencrypted Eddystone-TLM (version 0).
public struct EddystoneTLM: Hashable, Sendable {
    /// Battery voltage in mV as sent: 0 when the beacon has no battery reading (see `battery`).
    public var batteryMillivolts: UInt16
    /// Battery voltage in mV; `nil` when the beacon does not say (0 on the air), never 0.
    public var battery: UInt16? { batteryMillivolts == 0 ? nil : batteryMillivolts }
    /// Beacon temperature in °C (8.8 fixed point on air); `nil` when not supported (0x8000).
    public var temperature: Double?
    /// Advertising PDUs sent since power-up or reboot.
    public var advertisingCount: UInt32
    /// Time since power-up or reboot, in 0.1 s units.
    public var uptimeDeciseconds: UInt32

    public init(batteryMillivolts: UInt16, temperature: Double?, advertisingCount: UInt32, uptimeDeciseconds: UInt32) {
        self.batteryMillivolts = batteryMillivolts
        self.temperature = temperature
        self.advertisingCount = advertisingCount
        self.uptimeDeciseconds = uptimeDeciseconds
    }
}

/// A beacon decoded from one advertisement.
public enum Beacon: Hashable, Sendable {
    case iBeacon(IBeacon)
    case altBeacon(AltBeacon)
    case eddystoneUID(EddystoneUID)
    case eddystoneURL(EddystoneURL)
    case eddystoneTLM(EddystoneTLM)

    /// The name used in JSON (`"format"`).
    public var format: String {
        switch self {
        case .iBeacon: "ibeacon"
        case .altBeacon: "altbeacon"
        case .eddystoneUID: "eddystone-uid"
        case .eddystoneURL: "eddystone-url"
        case .eddystoneTLM: "eddystone-tlm"
        }
    }

    /// The identity a gateway tracks; Eddystone URL and TLM frames carry none.
    public var id: BeaconID? {
        switch self {
        case .iBeacon(let b): .init(uuid: b.uuid, major: b.major, minor: b.minor)
        case .altBeacon(let b): .init(uuid: b.uuid, major: b.major, minor: b.minor)
        case .eddystoneUID(let b): .eddystone(namespace: b.namespace, instance: b.instance)
        case .eddystoneURL, .eddystoneTLM: nil
        }
    }

    /// The advertised power reference in dBm: at 1 m for iBeacon and AltBeacon, at 0 m
    /// for Eddystone (callers add the 41 dB free-space loss to get 1 m).
    public var txPower: Int8? {
        switch self {
        case .iBeacon(let b): b.txPower
        case .altBeacon(let b): b.referenceRSSI
        case .eddystoneUID(let b): b.txPower
        case .eddystoneURL(let b): b.txPower
        case .eddystoneTLM: nil
        }
    }

    /// The measured power at 1 m in dBm, converting Eddystone's 0 m reference.
    public var measuredPower: Int8? {
        switch self {
        case .iBeacon, .altBeacon: txPower
        case .eddystoneUID, .eddystoneURL: txPower.map { Int8(clamping: Int($0) - 41) }
        case .eddystoneTLM: nil
        }
    }
}

/// What a gateway tracks a beacon by.
public enum BeaconID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// iBeacon and AltBeacon: published on `beacons/<major>/<minor>`.
    case ibeacon(uuid: BeaconUUID, major: UInt16, minor: UInt16)
    /// Eddystone-UID: published on `eddystone/<namespace>/<instance>`.
    case eddystone(namespace: EddystoneNamespace, instance: EddystoneInstance)

    public init(uuid: BeaconUUID, major: UInt16, minor: UInt16) {
        self = .ibeacon(uuid: uuid, major: major, minor: minor)
    }

    public var uuid: BeaconUUID? {
        if case .ibeacon(let uuid, _, _) = self { return uuid }
        return nil
    }

    public var major: UInt16? {
        if case .ibeacon(_, let major, _) = self { return major }
        return nil
    }

    public var minor: UInt16? {
        if case .ibeacon(_, _, let minor) = self { return minor }
        return nil
    }

    public var description: String {
        switch self {
        case .ibeacon(let uuid, let major, let minor): "\(uuid)/\(major)/\(minor)"
        case .eddystone(let namespace, let instance): "eddystone \(namespace)/\(instance)"
        }
    }

    public static func < (lhs: BeaconID, rhs: BeaconID) -> Bool {
        switch (lhs, rhs) {
        case let (.ibeacon(u1, a1, b1), .ibeacon(u2, a2, b2)): (a1, b1, u1) < (a2, b2, u2)
        case let (.eddystone(n1, i1), .eddystone(n2, i2)):
            (n1.high, n1.low, i1.rawValue) < (n2.high, n2.low, i2.rawValue)
        case (.ibeacon, .eddystone): true
        case (.eddystone, .ibeacon): false
        }
    }
}

extension String {
    package func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

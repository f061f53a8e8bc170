public import BeaconKit

/// The outcome of looking for a beacon in advertising data.
public enum AdvertisingDataResult: Hashable, Sendable {
    case beacon(Beacon)
    /// Well-formed advertising data that carries no beacon we know.
    case noBeacon
    /// An AD structure whose length runs past the end, or bytes after an early
    /// termination (a zero length) that are not padding.
    case malformed
}

/// Advertising data: a sequence of AD structures `length, type, data[length - 1]`
/// (Core spec Vol 3 Part C §11).
public enum AdvertisingData {
    public static let manufacturerSpecific: UInt8 = 0xFF
    public static let serviceData16: UInt8 = 0x16
    public static let appleCompanyID: UInt16 = 0x004C
    public static let eddystoneServiceUUID: UInt16 = 0xFEAA

    /// Checks the AD structure lengths, then decodes the first beacon found.
    ///
    /// Validation comes first so that a beacon is never reported from data whose
    /// framing is broken further on: such a report is skipped and counted by the caller.
    public static func decodeBeacon(_ data: UnsafeRawBufferPointer) -> AdvertisingDataResult {
        // One walk: lengths are checked as it goes, and a beacon found is returned only
        // once the structures after it have proved sound too.
        var offset = 0
        while offset < data.count {
            let length = Int(data[offset])
            if length == 0 { return isWellFormed(UnsafeRawBufferPointer(rebasing: data[offset...])) ? .noBeacon : .malformed }
            let end = offset + 1 + length
            if end > data.count { return .malformed }
            if let beacon = decodeStructure(type: data[offset + 1],
                                            body: UnsafeRawBufferPointer(rebasing: data[(offset + 2)..<end])) {
                return isWellFormed(UnsafeRawBufferPointer(rebasing: data[end...])) ? .beacon(beacon) : .malformed
            }
            offset = end
        }
        return .noBeacon
    }

    /// True when every AD structure fits and anything after a zero length is zero padding.
    public static func isWellFormed(_ data: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < data.count {
            let length = Int(data[offset])
            if length == 0 {
                for i in offset..<data.count where data[i] != 0 { return false }
                return true
            }
            offset += 1 + length
            if offset > data.count { return false }
        }
        return true
    }

    static func decodeStructure(type: UInt8, body: UnsafeRawBufferPointer) -> Beacon? {
        switch type {
        case manufacturerSpecific: decodeManufacturerData(body)
        case serviceData16: decodeServiceData(body)
        default: nil
        }
    }

    static func decodeManufacturerData(_ b: UnsafeRawBufferPointer) -> Beacon? {
        guard b.count >= 4 else { return nil }
        let company = UInt16(b[0]) | UInt16(b[1]) << 8
        if company == appleCompanyID && b[2] == 0x02 && b[3] == 0x15 && b.count >= 25 {
            return .iBeacon(IBeacon(
                uuid: BeaconUUID(bytes: b, at: 4),
                major: b.loadUnaligned(fromByteOffset: 20, as: UInt16.self).bigEndian,
                minor: b.loadUnaligned(fromByteOffset: 22, as: UInt16.self).bigEndian,
                txPower: Int8(bitPattern: b[24])))
        }
        if b[2] == 0xBE && b[3] == 0xAC && b.count >= 26 {
            return .altBeacon(AltBeacon(
                company: company,
                uuid: BeaconUUID(bytes: b, at: 4),
                major: UInt16(b[20]) << 8 | UInt16(b[21]),
                minor: UInt16(b[22]) << 8 | UInt16(b[23]),
                referenceRSSI: Int8(bitPattern: b[24]),
                reserved: b[25]))
        }
        return nil
    }

    static func decodeServiceData(_ b: UnsafeRawBufferPointer) -> Beacon? {
        guard b.count >= 3, UInt16(b[0]) | UInt16(b[1]) << 8 == eddystoneServiceUUID else { return nil }
        switch b[2] {
        case 0x00 where b.count >= 20:
            return .eddystoneUID(EddystoneUID(
                txPower: Int8(bitPattern: b[3]),
                namespace: EddystoneNamespace(
                    high: b.bigEndianValue(at: 4, count: 8),
                    low: UInt16(b.bigEndianValue(at: 12, count: 2))),
                instance: EddystoneInstance(rawValue: b.bigEndianValue(at: 14, count: 6))))
        case 0x10 where b.count >= 5:
            return EddystoneURL(
                txPower: Int8(bitPattern: b[3]), scheme: b[4],
                encoded: UnsafeRawBufferPointer(rebasing: b[5...]))
                .map(Beacon.eddystoneURL)
        case 0x20 where b.count >= 16 && b[3] == 0x00:
            let rawTemperature = UInt16(b.bigEndianValue(at: 6, count: 2))
            return .eddystoneTLM(EddystoneTLM(
                batteryMillivolts: UInt16(b.bigEndianValue(at: 4, count: 2)),
                temperature: rawTemperature == 0x8000
                    ? nil : Double(Int16(bitPattern: rawTemperature)) / 256,
                advertisingCount: UInt32(b.bigEndianValue(at: 8, count: 4)),
                uptimeDeciseconds: UInt32(b.bigEndianValue(at: 12, count: 4))))
        default:
            return nil
        }
    }

    /// Builds the 30-byte advertising data of an iBeacon: flags (LE General
    /// Discoverable, BR/EDR not supported) and Apple's manufacturer data.
    public static func iBeacon(_ beacon: IBeacon) -> [UInt8] {
        [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15]
            + beacon.uuid.bytes
            + [UInt8(beacon.major >> 8), UInt8(beacon.major & 0xFF),
               UInt8(beacon.minor >> 8), UInt8(beacon.minor & 0xFF),
               UInt8(bitPattern: beacon.txPower)]
    }

    /// Builds Eddystone-UID advertising data (flags, service list, service data).
    public static func eddystoneUID(_ beacon: EddystoneUID) -> [UInt8] {
        var frame: [UInt8] = [0xAA, 0xFE, 0x00, UInt8(bitPattern: beacon.txPower)]
        frame += (0..<8).map { UInt8(truncatingIfNeeded: beacon.namespace.high >> (56 - 8 * UInt64($0))) }
        frame += [UInt8(beacon.namespace.low >> 8), UInt8(beacon.namespace.low & 0xFF)]
        frame += (0..<6).map { UInt8(truncatingIfNeeded: beacon.instance.rawValue >> (40 - 8 * UInt64($0))) }
        frame += [0x00, 0x00]
        return [0x02, 0x01, 0x06, 0x03, 0x03, 0xAA, 0xFE, UInt8(frame.count + 1), serviceData16] + frame
    }
}

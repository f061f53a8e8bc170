import BeaconKit
import Wire
import Simulation
import Testing

/// Apple's AirLocate sample UUID, the one every iBeacon tutorial uses.
let airLocate = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!

@Suite("Advertising data")
struct AdvertisingDataTests {
    // MARK: iBeacon

    /// Advertising data of an iBeacon heard by a real scanner: the HCI event
    /// `043E2A02010001433EA2C96B6A1E…C5B3` from custom-components/ble_monitor,
    /// `custom_components/ble_monitor/test/test_ibeacon_parser.py` (AirLocate UUID, major 100,
    /// minor 0, measured power -59).
    static let bleMonitorIBeacon = bytes("02011A 1AFF4C000215 E2C56DB5DFFB48D2B060D0F5A71096E0 0064 0000 C5")

    @Test func iBeaconFromARealScanner() throws {
        let result = decodeBeacon(Self.bleMonitorIBeacon)
        #expect(result == .beacon(.iBeacon(IBeacon(uuid: airLocate, major: 100, minor: 0, txPower: -59))))
        let beacon = try #require({ if case .beacon(let b) = result { b } else { nil } }())
        #expect(beacon.format == "ibeacon")
        #expect(beacon.id == .ibeacon(uuid: airLocate, major: 100, minor: 0))
        #expect(beacon.txPower == -59)
        #expect(beacon.measuredPower == -59)
    }

    /// Major and minor are big-endian, the power byte is signed: the layout of Apple's
    /// Proximity Beacon Specification (company 0x004C little-endian, type 0x02, length 0x15).
    @Test(arguments: [
        (UInt8(0x12), UInt8(0x34), UInt8(0xAB), UInt8(0xCD), UInt8(0xC5), UInt16(0x1234), UInt16(0xABCD), Int8(-59)),
        (0xFF, 0xFF, 0x00, 0x01, 0x80, 0xFFFF, 0x0001, -128),
        (0x00, 0x00, 0xFF, 0xFE, 0x7F, 0x0000, 0xFFFE, 127),
        (0x01, 0x00, 0x00, 0x02, 0x00, 0x0100, 0x0002, 0),
    ])
    func iBeaconFieldOrder(_ m0: UInt8, _ m1: UInt8, _ n0: UInt8, _ n1: UInt8, _ power: UInt8,
                           major: UInt16, minor: UInt16, txPower: Int8) {
        let data = bytes("0201061AFF4C000215") + airLocate.bytes + [m0, m1, n0, n1, power]
        #expect(decodeBeacon(data) == .beacon(.iBeacon(IBeacon(uuid: airLocate, major: major, minor: minor, txPower: txPower))))
    }

    @Test func builtIBeaconIsAppleLayoutAndRoundTrips() {
        let beacon = IBeacon(uuid: airLocate, major: 0x0102, minor: 0xFFFE, txPower: -59)
        let data = AdvertisingData.iBeacon(beacon)
        #expect(data == bytes("0201061AFF4C000215 E2C56DB5DFFB48D2B060D0F5A71096E0 0102 FFFE C5"))
        #expect(data.count == 30)
        #expect(decodeBeacon(data) == .beacon(.iBeacon(beacon)))
    }

    @Test(arguments: [UInt64(1), 7, 42, 0xDEADBEEF])
    func iBeaconRoundTripForRandomValues(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<200 {
            let beacon = IBeacon(uuid: BeaconUUID(high: random.next(), low: random.next()),
                                 major: .random(in: .min ... .max, using: &random),
                                 minor: .random(in: .min ... .max, using: &random),
                                 txPower: .random(in: .min ... .max, using: &random))
            #expect(decodeBeacon(AdvertisingData.iBeacon(beacon)) == .beacon(.iBeacon(beacon)))
        }
    }

    /// Apple manufacturer data that is not an iBeacon: the iPhone "nearby" advert
    /// `…0AFF4C001005441CBD08C5` from the same ble_monitor test file, and the handoff advert
    /// (type 0x0C) heard in `btsnoop-decoder_hci.log`.
    @Test(arguments: [
        "02011A020A0C0AFF4C001005441CBD08C5",
        "02011A13FF4C000C0E00F60FA7EC74A0C3225578F5B49A",
    ])
    func appleDataThatIsNoIBeacon(_ hex: String) {
        #expect(decodeBeacon(bytes(hex)) == .noBeacon)
    }

    @Test func iBeaconTooShortIsNoBeacon() {
        // The 0x15 length promises 21 bytes; one is missing (the AD length says so too).
        let data = bytes("1AFF4C000215") + airLocate.bytes + [0, 1, 0, 2]
        var fixed = data
        fixed[0] = UInt8(data.count - 1)
        #expect(decodeBeacon(fixed) == .noBeacon)
    }

    // MARK: AltBeacon

    /// An AltBeacon heard by a real scanner: event `043E280201020105988527406D1C1BFFFFFFBEAC…C400D4`
    /// from custom-components/ble_monitor, `test/test_altbeacon_parser.py` (company 0xFFFF,
    /// id D3162F5A-…, major 90, minor 5, reference RSSI -60).
    @Test func altBeaconFromARealScanner() {
        let data = bytes("1BFFFFFFBEAC D3162F5AF3EE494799DB09756062D0FC 005A 0005 C4 00")
        let expected = AltBeacon(company: 0xFFFF, uuid: BeaconUUID("D3162F5A-F3EE-4947-99DB-09756062D0FC")!,
                                 major: 90, minor: 5, referenceRSSI: -60, reserved: 0)
        #expect(decodeBeacon(data) == .beacon(.altBeacon(expected)))
        #expect(Beacon.altBeacon(expected).id == .ibeacon(uuid: expected.uuid, major: 90, minor: 5))
        #expect(Beacon.altBeacon(expected).measuredPower == -60)
        #expect(Beacon.altBeacon(expected).format == "altbeacon")
    }

    /// Any company may send the 0xBEAC code (AltBeacon spec, "MFG ID"): Radius Networks
    /// (0x0118), Apple (0x004C, which is not an iBeacon then), and an unassigned one.
    @Test(arguments: [UInt16(0x0118), 0x004C, 0x1234])
    func altBeaconFromAnyCompany(company: UInt16) {
        let data = [0x1B, 0xFF, UInt8(company & 0xFF), UInt8(company >> 8), 0xBE, 0xAC] + airLocate.bytes
            + [0x00, 0x07, 0x00, 0x09, 0xBB, 0x5A]
        #expect(decodeBeacon(data) == .beacon(.altBeacon(AltBeacon(
            company: company, uuid: airLocate, major: 7, minor: 9, referenceRSSI: -69, reserved: 0x5A))))
    }

    // MARK: Eddystone

    /// Eddystone-UID per google/eddystone `eddystone-uid/README.md` (frame 0x00, TX power at
    /// 0 m, 10-byte namespace, 6-byte instance, two RFU bytes, all big-endian).
    @Test func eddystoneUID() {
        let data = bytes("0201060303AAFE 1716AAFE 00 EE 00112233445566778899 AABBCCDDEEFF 0000")
        let expected = EddystoneUID(txPower: -18,
                                    namespace: EddystoneNamespace(hex: "00112233445566778899")!,
                                    instance: EddystoneInstance(hex: "aabbccddeeff")!)
        #expect(decodeBeacon(data) == .beacon(.eddystoneUID(expected)))
        #expect(expected.namespace.description == "00112233445566778899")
        #expect(expected.instance.description == "aabbccddeeff")
        #expect(expected.namespace == EddystoneNamespace(high: 0x0011_2233_4455_6677, low: 0x8899))
        #expect(Beacon.eddystoneUID(expected).measuredPower == -59)  // -18 dBm at 0 m minus 41 dB
        #expect(Beacon.eddystoneUID(expected).id == .eddystone(namespace: expected.namespace, instance: expected.instance))
    }

    @Test func eddystoneUIDRoundTrip() {
        var random = SplitMix64(seed: 3)
        for _ in 0..<200 {
            let beacon = EddystoneUID(
                txPower: .random(in: .min ... .max, using: &random),
                namespace: EddystoneNamespace(high: random.next(), low: .random(in: .min ... .max, using: &random)),
                instance: EddystoneInstance(rawValue: random.next()))
            let data = AdvertisingData.eddystoneUID(beacon)
            #expect(data.count <= 31)
            #expect(decodeBeacon(data) == .beacon(.eddystoneUID(beacon)))
        }
    }

    /// URL examples from google/eddystone `eddystone-url/README.md`: `https://goo.gl/S6zT6P`
    /// (scheme 0x03), and the scheme and expansion tables of the same page.
    @Test(arguments: [
        ("03 676F6F2E676C2F 53367A543650", "https://goo.gl/S6zT6P"),          // goo.gl/S6zT6P
        ("03 676F6F2E676C2F 417131387A46", "https://goo.gl/Aq18zF"),
        ("01 676F6F676C65 07", "https://www.google.com"),                     // 0x07 = .com
        ("00 676F6F676C65 00 6D617073", "http://www.google.com/maps"),        // 0x00 = .com/
        ("02 6578616D706C65 08", "http://example.org"),
        ("02 61 01 62 02 63 03 64 04 65 05 66 06", "http://a.org/b.edu/c.net/d.info/e.biz/f.gov/"),
        ("03 61 09 62 0A 63 0B 64 0C 65 0D", "https://a.edub.netc.infod.bize.gov"),
        ("03", "https://"),                                                      // an empty URL is allowed (length 0-17)
        ("03 61 20 7F FF", "https://a%20%7F%FF"),                                // reserved codes shown, not dropped
    ])
    func eddystoneURL(_ frameHex: String, _ url: String) throws {
        let frame = bytes("AAFE 10 EB") + bytes(frameHex)
        let data = bytes("0201060303AAFE") + [UInt8(frame.count + 1), 0x16] + frame
        let result = decodeBeacon(data)
        guard case .beacon(.eddystoneURL(let decoded)) = result else {
            Issue.record("not an Eddystone-URL: \(result)")
            return
        }
        #expect(decoded.url == url)
        #expect(decoded.txPower == -21)
        #expect(Beacon.eddystoneURL(decoded).id == nil)
        #expect(Beacon.eddystoneURL(decoded).format == "eddystone-url")
    }

    @Test func eddystoneURLLimits() {
        func url(_ scheme: UInt8, _ encoded: [UInt8]) -> AdvertisingDataResult {
            let frame: [UInt8] = [0xAA, 0xFE, 0x10, 0x00, scheme] + encoded
            return decodeBeacon([UInt8(frame.count + 1), 0x16] + frame)
        }
        let seventeen = Array(repeating: UInt8(ascii: "a"), count: 17)
        guard case .beacon(.eddystoneURL(let longest)) = url(3, seventeen) else {
            Issue.record("17 encoded bytes are allowed")
            return
        }
        #expect(longest.url == "https://" + String(repeating: "a", count: 17))
        #expect(url(3, seventeen + [0x61]) == .noBeacon)   // 18 bytes: longer than the spec allows
        #expect(url(4, [0x61]) == .noBeacon)               // scheme 0x04 does not exist
    }

    /// Eddystone-TLM as heard by a real scanner: event `043E2502010301494BEFBEADDE19…B6D7` from
    /// custom-components/ble_monitor, `test/test_eddystone_tlm_parser.py` (3183 mV, 30.0 °C,
    /// 131181 PDUs), and its "unsupported readings" variant (battery 0, temperature 0x8000).
    @Test func eddystoneTLMFromARealScanner() {
        let data = bytes("0201060303AAFE1116AAFE20000C6F1E000002006D41DB9AB6")
        #expect(decodeBeacon(data) == .beacon(.eddystoneTLM(EddystoneTLM(
            batteryMillivolts: 3183, temperature: 30.0, advertisingCount: 131_181, uptimeDeciseconds: 0x41DB_9AB6))))
        let unsupported = bytes("0201060303AAFE1116AAFE2000000080000002006D41DB9AB6")
        #expect(decodeBeacon(unsupported) == .beacon(.eddystoneTLM(EddystoneTLM(
            batteryMillivolts: 0, temperature: nil, advertisingCount: 131_181, uptimeDeciseconds: 0x41DB_9AB6))))
    }

    /// Temperature is signed 8.8 fixed point (google/eddystone `eddystone-tlm/tlm-plain.md`).
    @Test(arguments: [
        (UInt16(0x1E00), 30.0), (0x1980, 25.5), (0x0001, 1.0 / 256), (0xFF00, -1.0), (0xFF80, -0.5),
        (0xF600, -10.0), (0x8001, -127.99609375), (0x7FFF, 127.99609375), (0x0000, 0.0),
    ] as [(UInt16, Double)])
    func eddystoneTLMTemperature(raw: UInt16, celsius: Double) {
        let data = bytes("1116AAFE2000 0BB8") + [UInt8(raw >> 8), UInt8(raw & 0xFF)] + bytes("00000001 00000064")
        #expect(decodeBeacon(data) == .beacon(.eddystoneTLM(EddystoneTLM(
            batteryMillivolts: 3000, temperature: celsius, advertisingCount: 1, uptimeDeciseconds: 100))))
    }

    @Test func eddystoneTLMOtherVersionsAreNotRead() {
        // Version 0x01 is the encrypted TLM (eddystone-tlm/tlm-encrypted.md).
        #expect(decodeBeacon(bytes("1116AAFE2001 0BB8 1E00 00000001 00000064")) == .noBeacon)
        // One byte short of the fixed 0x11 service-data length.
        #expect(decodeBeacon(bytes("1016AAFE2000 0BB8 1E00 00000001 000000")) == .noBeacon)
    }

    @Test func otherServiceDataIsNoBeacon() {
        // Google's Fast Pair-style service data 0xFEF3, as in btsnoop-rs_hci_android.log.
        #expect(decodeBeacon(bytes("1E16F3FE4A1723345241341132DB67C1B50E9F6157DEB8A054A85A8BEEBCDF")) == .noBeacon)
        // Eddystone EID (0x30) and an unknown frame type are not beacons we track.
        #expect(decodeBeacon(bytes("0D16AAFE30EE0102030405060708")) == .noBeacon)
        #expect(decodeBeacon(bytes("0516AAFE7700")) == .noBeacon)
    }

    // MARK: Framing

    @Test(arguments: [
        "",                                    // nothing at all
        "020106",                              // flags only
        "0201060000000000",                    // zero padding after the last structure
        "00",                                  // padding only
        "000000000000000000000000000000000000000000000000000000000000",
        "0201060303AAFE0C094265655769204242443130",   // name, service list
        "01FF",                                // an AD structure with a type and no data
        "0201060100",                          // a one-byte structure followed by padding
    ])
    func wellFormedWithoutBeacon(_ hex: String) {
        #expect(decodeBeacon(bytes(hex)) == .noBeacon)
        #expect(bytes(hex).withUnsafeBytes { AdvertisingData.isWellFormed($0) })
    }

    @Test(arguments: [
        "02",                                  // length with nothing after it
        "0201",                                // length 2, one byte
        "020106 05FF4C00",                     // second structure runs past the end
        "1AFF4C000215E2C56DB5DFFB48D2B060D0F5A71096E000640000",  // iBeacon missing its last byte
        "020106 00 01",                        // zero length, then a non-zero byte
        "00 FF",
        "020106 0000 0201",                    // padding, then another structure
        "FF",
    ])
    func malformed(_ hex: String) {
        #expect(decodeBeacon(bytes(hex)) == .malformed)
        #expect(!bytes(hex).withUnsafeBytes { AdvertisingData.isWellFormed($0) })
    }

    @Test func aBeaconBeforeBrokenFramingIsNotReported() {
        // A valid iBeacon followed by a structure whose length runs past the end.
        let data = Self.bleMonitorIBeacon + [0x05, 0x09, 0x41]
        #expect(decodeBeacon(data) == .malformed)
    }

    @Test func theFirstBeaconWins() {
        let uid = AdvertisingData.eddystoneUID(EddystoneUID(
            txPower: -20, namespace: EddystoneNamespace(high: 1, low: 2), instance: EddystoneInstance(rawValue: 3)))
        let ibeacon = Array(AdvertisingData.iBeacon(IBeacon(uuid: airLocate, major: 1, minor: 2, txPower: -59)).dropFirst(3))
        guard case .beacon(.iBeacon) = decodeBeacon(ibeacon + Array(uid.dropFirst(3))) else {
            Issue.record("expected the iBeacon that comes first")
            return
        }
    }

    // MARK: Values

    @Test func uuidTextForms() {
        #expect(airLocate.description == "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")
        #expect(BeaconUUID("e2c56db5-dffb-48d2-b060-d0f5a71096e0") == airLocate)
        #expect(BeaconUUID("E2C56DB5DFFB48D2B060D0F5A71096E0") == airLocate)
        #expect(BeaconUUID(airLocate.description) == airLocate)
        for bad in ["xyz", "", "E2C56DB5-DFFB-48D2-B060-D0F5A71096E", "E2C56DB5-DFFB-48D2-B060-D0F5A71096E00",
                    "E2C56DB5DFFB-48D2-B060-D0F5A71096E0-", "E2C56DB5-DFFB48D2-B060-D0F5A71096E0",
                    "{E2C56DB5-DFFB-48D2-B060-D0F5A71096E0}", "G2C56DB5-DFFB-48D2-B060-D0F5A71096E0",
                    "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 "] {
            #expect(BeaconUUID(bad) == nil, "\(bad)")
        }
    }

    @Test func bluetoothAddressText() {
        let address = BluetoothAddress("6A:6B:C9:A2:3E:43")
        #expect(address?.rawValue == 0x6A6B_C9A2_3E43)
        #expect(address?.description == "6A:6B:C9:A2:3E:43")
        #expect(address?.littleEndianBytes == [0x43, 0x3E, 0xA2, 0xC9, 0x6B, 0x6A])
        #expect(BluetoothAddress("6A:6B:C9:A2:3E") == nil)
        #expect(BluetoothAddress("6A:6B:C9:A2:3E:4") == nil)
        #expect(BluetoothAddress("6A-6B-C9-A2-3E-43") == nil)
        #expect(BluetoothAddress(rawValue: .max).description == "FF:FF:FF:FF:FF:FF")
    }

    @Test func hexHelpers() {
        #expect(Hex.encode([0x00, 0xAB, 0x7F]) == "00AB7F")
        #expect(Hex.decode("00 ab:7F") == [0x00, 0xAB, 0x7F])
        #expect(Hex.decode("0") == nil)
        #expect(Hex.decode("0 0") == nil)
        #expect(Hex.decode("zz") == nil)
        #expect(Hex.decode("") == [])
    }
}

import BeaconKit
import Contract
import BrainCore
import Config
import Foundation
import Testing
import Tracking

/// The brain trusts only records it sealed itself (`RecordSeal`): forged `brain/visits/…`
/// and `brain/answered/…` records, which anyone may write on an anonymous broker, run no
/// rules on restart.
@Suite struct RecordSealTests {
    static let rules = """
        [{"name": "in", "when": "enter", "then": [{"do": "publish", "topic": "log/enter/{minor}", "text": "{minor}"}]},
         {"name": "out", "when": "exit", "then": [{"do": "publish", "topic": "log/exit/{minor}", "text": "{minor}"}]},
         {"name": "bye", "when": "leave", "then": [{"do": "publish", "topic": "log/leave/{client}", "text": "{client}"}]}]
        """
    static let key = RecordSeal(key: Array("0123456789abcdef0123456789abcdef".utf8))

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    @Test func sha256AndHMACMatchTheStandardVectors() {
        #expect(Self.hex(HMACSHA256.sha256(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Self.hex(HMACSHA256.sha256([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Self.hex(HMACSHA256.sha256(Array(repeating: UInt8(ascii: "a"), count: 1000)))
                == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
        // RFC 4231, test cases 2 and 6 (a key longer than a block).
        #expect(Self.hex(HMACSHA256.mac(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(Self.hex(HMACSHA256.mac(key: Array(repeating: 0xAA, count: 131),
                                        message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    /// Records the brain sealed before HMAC-SHA256 moved to swift-crypto (sealed on 2026-11-27
    /// by the hand-written implementation it replaced; Python's `hmac` agrees): a brain
    /// upgraded across the change still trusts its retained visits and calibration.
    @Test func recordsSealedBeforeSwiftCryptoStillOpen() {
        let key = RecordSeal(key: Array("brain-secret-of-2026-11-26".utf8))
        let visit = #"{"beacon":"7/1","enter":1795700000.25,"zone":"counter","answered":["deal at the counter"]}"#
        let calibration = #"{"gateway":"counter","rssiOffset":-3.5}"#
        let sealedVisit = String(visit.dropLast())
            + #","seal":"a10f9f1ebeaed0b1f93d5b77b794ba6d4439398a0d2b585a5a792ff33bf1cad2"}"#
        let sealedCalibration = String(calibration.dropLast())
            + #","seal":"c0f604d5ed24e018a6c556d7c594e1cbc3f8881b8c6c4a4542009abf5cd62c5a"}"#
        #expect(key.open(sealedVisit, topic: "brain/visits/7/1") == visit)
        #expect(key.open(sealedCalibration, topic: "gateways/counter/calibration") == calibration)
        #expect(key.seal(visit, topic: "brain/visits/7/1") == sealedVisit)
        #expect(key.open(sealedVisit, topic: "brain/visits/7/2") == nil)
    }

    @Test func aSealOpensOnlyForItsTopicAndKey() throws {
        let record = #"{"since":"2026-11-21T09:00:00.000Z","fired":{}}"#
        let sealed = Self.key.seal(record, topic: "brain/visits/100/9")
        #expect(sealed.hasPrefix(#"{"since":"2026-11-21T09:00:00.000Z","fired":{},"seal":""#))
        #expect(Self.key.open(sealed, topic: "brain/visits/100/9") == record)
        #expect(Self.key.open(Self.key.seal("{}", topic: "t"), topic: "t") == "{}")
        #expect(Self.key.open(sealed, topic: "brain/visits/100/8") == nil, "moved to another beacon")
        #expect(Self.key.open(record, topic: "brain/visits/100/9") == nil, "unsealed")
        #expect(RecordSeal(key: Array("another key".utf8)).open(sealed, topic: "brain/visits/100/9") == nil)
        #expect(Self.key.open(sealed.replacingOccurrences(of: "09:00", with: "08:00"), topic: "brain/visits/100/9") == nil)
        #expect(RecordSeal().open(record, topic: "x") == record, "no key: as before")
    }

    func brain(_ seal: RecordSeal, retained: [String: String] = [:], at now: CaptureTime) -> Harness {
        var core = BrainCore(config: testConfig(rules: Self.rules))
        core.recordSeal = seal
        return Harness(core: core, retained: retained, at: now)
    }

    func published(_ h: Harness, _ prefix: String) -> [String] {
        h.sent.filter { $0.topic.hasPrefix(prefix) }.map(\.topic)
    }

    @Test func forgedRecordsRunNoRulesOnRestart() {
        // Written while no brain ran: a visit of 100/9 and Ana's answered join of the counter,
        // so that the next brain ends them (exit and leave rules) or takes them for answered.
        let forged = [
            "brain/visits/100/9": #"{"since":"2026-11-21T08:00:00.000Z"}"#,
            "brain/answered/100/1/ana": #"{"join":"x","since":"2026-11-21T08:00:00.000Z"}"#,
        ]
        // Without a key (as before): the forgery works.
        let open = brain(RecordSeal(), retained: forged, at: t(1))
        #expect(published(open, "log/exit/") == ["log/exit/9"])
        #expect(published(open, "log/leave/") == ["log/leave/ana"])
        // With the key: ignored, reported, and deleted from the broker.
        let sealed = brain(Self.key, retained: forged, at: t(1))
        #expect(published(sealed, "log/").isEmpty)
        #expect(sealed.sent.filter { $0.topic == "brain/events" }.count == 2)
        #expect(sealed.log.contains { $0.message.contains("without this brain's seal") })
        #expect(sealed.retained["brain/visits/100/9"] == nil && sealed.retained["brain/answered/100/1/ana"] == nil)
    }

    @Test func itsOwnSealedRecordsCarryAVisitAcrossARestart() {
        var h = brain(Self.key, at: t(0))
        h.announce(window, by: "door", rssi: -60, at: t(1))
        #expect(published(h, "log/enter/") == ["log/enter/2"])
        let record = h.retained["brain/visits/100/2"] ?? ""
        #expect(record.contains(#","seal":""#))
        // Restarted with the same key: the visit carries on, no second enter.
        let again = brain(Self.key, retained: h.retained, at: t(5))
        #expect(published(again, "log/").isEmpty)
        #expect(again.retained["brain/visits/100/2"] == record)
        // A brain with another key does not trust it (it goes by the fleet presence alone)
        // and writes the record again under its own key.
        let otherKey = RecordSeal(key: Array("another key".utf8))
        let other = brain(otherKey, retained: h.retained, at: t(5))
        #expect(other.log.contains { $0.message.contains("without this brain's seal") })
        let rewritten = other.retained["brain/visits/100/2"] ?? ""
        #expect(rewritten != record && otherKey.open(rewritten, topic: "brain/visits/100/2") != nil)
    }

    // MARK: - Every record the brain trusts after a restart

    static func calibration(_ gateway: String, offset: Double) -> String {
        CalibrationRecord(gateway: gateway, values: .init(rssiOffset: offset, pathLossExponent: 2.5, since: t(0)), samples: 900,
                          links: 3, residual: 1, pinned: false, configuredOffset: 0, before: nil).json
    }

    /// Issue 20 item 2: a customer standing at the door (−45 dBm there, −75 at the counter)
    /// and forged calibration records that move the counter up 50 dB and the door down 50.
    @Test func forgedCalibrationRecordsMoveNobody() throws {
        let forged = ["gateways/counter/calibration": Self.calibration("counter", offset: 50),
                      "gateways/door/calibration": Self.calibration("door", offset: -50)]
        let customer = BeaconRef(major: 100, minor: 5)
        func zone(_ seal: RecordSeal, retained: [String: String]) throws -> (Harness, String?) {
            var core = BrainCore(config: try ReferenceStore.config())
            core.recordSeal = seal
            var h = Harness(core: core, retained: retained, at: t(1))
            for second in 2...8 {
                h.see(customer, by: "door", rssi: -45, at: t(Double(second)))
                h.see(customer, by: "counter", rssi: -75, at: t(Double(second)))
            }
            return (h, h.core.presence[customer]?.zone)
        }
        // Without a key the forgery works: the door customer stands at the counter.
        #expect(try zone(RecordSeal(), retained: forged).1 == "counter")
        // With the key: ignored, reported on brain/events, deleted; the customer stays at the door.
        let (sealed, placed) = try zone(Self.key, retained: forged)
        #expect(placed == "door")
        #expect(sealed.core.calibrator.applied.isEmpty)
        let reports = sealed.events.compactMap { if case .rejected(let r) = $0 { r } else { nil } }
        #expect(reports.filter { $0.topic.hasSuffix("/calibration") && $0.kind == "record" && $0.reason.contains("brain-secret") }.count == 2,
                "\(reports)")
        #expect(sealed.retained["gateways/counter/calibration"] == nil && sealed.retained["gateways/door/calibration"] == nil)
        // Its own sealed record is applied again by the next brain with the key.
        let own = ["gateways/counter/calibration": Self.key.seal(Self.calibration("counter", offset: 3),
                                                                 topic: "gateways/counter/calibration")]
        let (again, _) = try zone(Self.key, retained: own)
        #expect(again.core.calibrator.correction(of: "counter") == 3)
        #expect(again.events.filter { $0.name != "gap" }.isEmpty)
        #expect(again.retained["gateways/counter/calibration"] == own["gateways/counter/calibration"])
    }

    @Test func forgedCustomerEntriesAreIgnoredReportedAndDeleted() {
        let forged = ["stores/100/customers/mallory": Roster.Customer(
            client: "mallory", name: "Mallory", favorite: nil, photo: nil, beacon: window, since: t(0)).json.jsonText]
        let sealed = brain(Self.key, retained: forged, at: t(1))
        #expect(sealed.log.contains { $0.message.contains("without this brain's seal") })
        #expect(sealed.events.contains { if case .rejected(let r) = $0 { r.topic == "stores/100/customers/mallory" } else { false } })
        #expect(sealed.retained["stores/100/customers/mallory"] == nil)
    }

    /// The zone a restarted brain continues with comes from its sealed visit record, not
    /// from the fleet presence anyone may write.
    @Test func theZoneComesBackFromTheSealedRecord() throws {
        let record = Self.key.seal(VisitRecord(since: t(0), zone: "door", rules: RuleMemory()).json,
                                   topic: "brain/visits/100/2")
        let presence = FleetPresenceReport(beacon: window, uuid: storeUUID, zone: "till", zoneName: "Counter", gateways: [],
                                           proximity: .near, since: t(0)).json
        let retained = [
            "brain/visits/100/2": record,
            "beacons/100/2/presence": presence,
            "beacons/100/2/presence/door": presenceJSON(window, "door", rssi: -62),
            "beacons/100/2/presence/till": presenceJSON(window, "till", rssi: -58),
        ]
        let h = brain(Self.key, retained: retained, at: t(5))
        #expect(h.core.presence[window]?.zone == "door")
        #expect(h.core.presence[window]?.since == t(0))
        #expect(published(h, "log/").isEmpty, "the visit carries on: no enter rule")
        // Without a key (as before) the fleet presence is all there is to go by.
        #expect(brain(RecordSeal(), retained: retained, at: t(5)).core.presence[window]?.zone == "till")
    }
}

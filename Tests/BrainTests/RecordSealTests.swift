import BeaconKit
import BrainCore
import Config
import Foundation
import Testing

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

    func brain(_ seal: RecordSeal, retained: [String: String] = [:], at now: Instant) -> Harness {
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
}

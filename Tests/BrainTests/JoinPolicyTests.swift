import BeaconKit
import Contract
import BrainCore
import Config
import Foundation
import Testing

/// Who may join which beacon (`brain.joins: owned-or-near`, the default), and how long a
/// profile stays: the brain's side of "a credential speaks only for itself" and "personal
/// data that expires" (docs/security.md).
@Suite struct JoinPolicyTests {
    /// Ana's key fob 100/50 and Ben's 100/51, the store's counter 100/1; gateways `door`
    /// (store 100) and `far` (store 200).
    static func config(joins: String = "owned-or-near", maxAge: Double = 3600) -> FleetConfig {
        let text = testConfigText(joins: joins)
            .replacingOccurrences(of: #""beacons": ["#, with: """
                "beacons": [ { "uuid": "\(storeUUID)", "major": 100, "minor": 50, "owner": "ana" },
                             { "uuid": "\(storeUUID)", "major": 100, "minor": 51, "owner": "ben" },
                """)
            .replacingOccurrences(of: #""gateways": [ { "id": "door", "zone": "Entrance" }, { "id": "till", "zone": "Counter" } ]"#,
                                  with: #""gateways": [ { "id": "door", "store": 100 }, { "id": "far", "store": 200 } ]"#)
            .replacingOccurrences(of: #""ad": { "title": "Deal of the day" } } ],"#,
                                  with: #""ad": { "title": "Deal of the day" } }, { "major": 200 } ],"#)
            .replacingOccurrences(of: #""joins": "\#(joins)" }"#, with: #""joins": "\#(joins)", "joinMaxAge": \#(maxAge) }"#)
        return try! FleetConfig.parse(text)
    }

    static let anasFob = BeaconRef(major: 100, minor: 50)
    static let bensFob = BeaconRef(major: 100, minor: 51)

    func errors(_ h: Harness, _ client: String) -> [String] {
        h.inbox(client).filter { $0["type"] == .string("error") }.compactMap { $0["error"]?.stringValue }
    }

    func ads(_ h: Harness, _ client: String) -> Int {
        h.inbox(client).filter { $0["type"] == .string("ad") }.count
    }

    @Test func anOwnerJoinsItsOwnBeaconOnly() {
        var h = Harness(config: Self.config())
        h.join("ana", Self.anasFob, at: t(1))
        #expect(ads(h, "ana") == 1)
        // Ben joins Ana's fob: to learn when she comes and goes. Refused, and his join leaves the broker.
        h.join("ben", Self.anasFob, at: t(2))
        #expect(errors(h, "ben") == ["beacon 100/50 belongs to another customer: only its owner may join it"])
        #expect(h.retained[h.topics.observer("ben", of: Self.anasFob)] == nil, "the refused join was deleted")
        #expect(h.core.observers.joins(of: Self.anasFob).map(\.client) == ["ana"])
        // Ana's fob arrives: Ben hears nothing of it.
        h.announce(Self.anasFob, by: "door", rssi: -60, at: t(3))
        #expect(h.inbox("ben").count == 1)
    }

    @Test func aStoreBeaconIsJoinedNearItOnly() {
        var h = Harness(config: Self.config())
        // Ben has a fob but it is not in the store; Carla has none.
        h.join("ben", counter, at: t(1))
        #expect(errors(h, "ben") == ["beacon 100/1 is the store's: an app joins it near it, and none of ben's beacons is in store 100 now"])
        h.join("carla", counter, at: t(1))
        #expect(errors(h, "carla").first?.contains("no beacon in the registry belongs to carla") == true)
        // Ben's fob seen by a gateway of another store does not make him near store 100.
        h.announce(Self.bensFob, by: "far", rssi: -60, at: t(2))
        h.join("ben", counter, joinJSON(name: "Ben"), at: t(3))
        #expect(ads(h, "ben") == 0)
        #expect(h.core.observers.count == 0)
        #expect(h.roster == nil || h.roster?["customers"]?.arrayValue?.isEmpty == true, "nobody reached the roster from outside")
        // At the door of store 100: he may.
        h.announce(Self.bensFob, by: "door", rssi: -60, at: t(4))
        h.join("ben", counter, joinJSON(name: "Ben"), at: t(5))
        #expect(ads(h, "ben") == 1)
        #expect(h.retained[h.topics.customer("ben", ofStore: 100)] != nil)
    }

    /// Smart iBeacons (seed 000): the brain "publishes a deal whenever it detects a new
    /// device on the iBeacon's designated channel"; its phone owns no beacon. Under the
    /// default `brain.joins` (`proof`) a phone that quotes store 100's current value (it
    /// joins `100/<value>`, the minor it ranged) gets the deal; a stale, forged or remote
    /// one does not.
    @Test func aPhoneThatOwnsNothingJoinsByProofOfPresence() throws {
        let text = testConfigText(joins: "proof").replacingOccurrences(
            of: #"{ "major": 100, "name": "Main Street", "ad": { "title": "Deal of the day" } }"#,
            with: #"{ "major": 100, "name": "Main Street", "ad": { "title": "Free Latte!" }, "proof": { "secretFile": "/s/100" } }"#)
        var core = BrainCore(config: try FleetConfig.parse(text))
        let secret = Array("the store secret of Main Street 100".utf8)
        core.proofSecrets = ["/s/100": secret]
        var h = Harness(core: core)
        let proof = PresenceProof(secret: secret, slotSeconds: 30)
        // t(0) is 09:00:00, the start of a slot: 20732 is its value, 17920 the slot before's.
        let now = BeaconRef(major: 100, minor: proof.value(store: 100, at: t(5)))
        #expect(now.minor == 20732)
        h.join("phone1", now, at: t(5))
        #expect(h.inbox("phone1").first?["ad"]?["title"] == .string("Free Latte!"))
        #expect(errors(h, "phone1").isEmpty)
        // Just after the slot changed, the value it ranged a moment ago still counts.
        h.join("phone2", now, at: t(31))
        #expect(ads(h, "phone2") == 1)
        // A value from a minute ago (a screenshot, a recording): refused, and the join deleted.
        h.join("phone3", now, at: t(61))
        #expect(errors(h, "phone3") == ["beacon 100/20732 is the store's: an app joins it near it, nor is its minor "
                                        + "store 100's current proof of presence (stale or forged), and no beacon in the "
                                        + "registry belongs to phone3 (beacons[].owner) to tell where it is"])
        #expect(h.retained[h.topics.observer("phone3", of: now)] == nil)
        // Guessing from home: the fixed beacon 100/1, or any other minor.
        h.join("phone4", counter, at: t(62))
        h.join("phone4", BeaconRef(major: 100, minor: 20733), at: t(63))
        #expect(ads(h, "phone4") == 0)
        #expect(errors(h, "phone4").count == 2)
        // owned-or-near still works beside it: Ben's fob at the door lets him join the counter.
        var fobs = Harness(config: Self.config(joins: "proof"))
        fobs.announce(Self.bensFob, by: "door", rssi: -60, at: t(1))
        fobs.join("ben", counter, at: t(2))
        #expect(ads(fobs, "ben") == 1)
        fobs.join("carla", counter, at: t(3))
        #expect(errors(fobs, "carla").first?.contains("no beacon in the registry belongs to carla") == true)
        // Without the store's secret the brain proves nothing: as owned-or-near.
        var blind = Harness(config: try FleetConfig.parse(text))
        blind.join("phone1", now, at: t(5))
        #expect(errors(blind, "phone1").count == 1)
        // And under owned-or-near the value is no proof at all.
        var strict = BrainCore(config: try FleetConfig.parse(text.replacingOccurrences(of: #""joins": "proof""#,
                                                                                      with: #""joins": "owned-or-near""#)))
        strict.proofSecrets = ["/s/100": secret]
        var s = Harness(core: strict)
        s.join("phone1", now, at: t(5))
        #expect(errors(s, "phone1") == ["beacon 100/20732 is the store's: an app joins it near it, and no beacon in the "
                                        + "registry belongs to phone1 (beacons[].owner) to tell where it is"])
    }

    @Test func profilesLeaveWithTheVisit() {
        var h = Harness(config: Self.config())
        h.announce(Self.anasFob, by: "door", rssi: -60, at: t(1))
        h.join("ana", Self.anasFob, joinJSON(name: "Ana", photo: photo(800)), at: t(2))
        h.join("ana", counter, joinJSON(name: "Ana"), at: t(2))
        #expect(ads(h, "ana") == 2)
        #expect(h.retained[h.topics.customer("ana", ofStore: 100)] != nil)
        // Ana walks out: her fob's visit ends, and with it both joins: the profile and photo
        // leave the broker, the roster forgets her.
        h.withdraw(Self.anasFob, by: "door", at: t(10))
        h.advance(to: t(60))
        #expect(h.core.observers.count == 0)
        #expect(h.retained[h.topics.observer("ana", of: Self.anasFob)] == nil)
        #expect(h.retained[h.topics.observer("ana", of: counter)] == nil)
        #expect(h.retained[h.topics.customer("ana", ofStore: 100)] == nil)
        // Issue 18: "An app is not told when the brain deletes its join at the end of a
        // visit": now it is, once per join, with the reason.
        let left = h.inbox("ana").filter { $0["type"] == .string("left") }
        #expect(left.map { $0["beacon"]?["minor"] } == [.number(50), .number(1)], "\(left)")
        #expect(left.first?["reason"] == .string("the visit of beacon 100/50 ended: it left the store"))
        #expect(left.last?["reason"] == .string("none of ana's beacons is in store 100 any more"))
    }

    @Test func aJoinEndsAfterTheMaximumAgeWhateverTheApp() {
        var h = Harness(config: Self.config(joins: "open", maxAge: 600))
        h.join("ada", counter, joinJSON(photo: photo(500)), at: t(1))
        h.advance(to: t(300))
        #expect(h.core.observers.count == 1)
        h.advance(to: t(602))
        #expect(h.core.observers.count == 0)
        #expect(h.retained[h.topics.observer("ada", of: counter)] == nil, "the profile left the broker")
        #expect(h.log.contains { $0.message == "join ended: older than brain.joinMaxAge" })
        #expect(h.inbox("ada").last?["type"] == .string("left"), "the app is told")
        #expect(h.inbox("ada").last?["reason"] == .string("the join is older than brain.joinMaxAge (600 s); join again to stay"))
    }

    @Test func aRejectedJoinLeavesTheBroker() {
        var h = Harness(config: Self.config(joins: "open"))
        // Malformed (a photo that is no JPEG): an error, and the retained payload is deleted.
        h.join("ada", counter, #"{"state":"joined","profile":{"photo":"aGVsbG8="}}"#, at: t(1))
        #expect(errors(h, "ada").count == 1)
        #expect(h.retained[h.topics.observer("ada", of: counter)] == nil)
        // A good join, then a bad update: the join it had stays (the app replaces its own).
        h.join("ada", counter, at: t(2))
        h.join("ada", counter, #"{"state":"left"}"#, at: t(3))
        #expect(h.core.observers.count == 1)
    }

    @Test func openJoinsAreTheOldBehaviour() {
        var h = Harness(config: Self.config(joins: "open"))
        h.join("ben", Self.anasFob, at: t(1))
        h.join("carla", counter, at: t(1))
        #expect(ads(h, "ben") == 1 && ads(h, "carla") == 1)
        #expect(configErrors(#"{"brain": {"joins": "anyone"}}"#)
                    == [#"brain.joins: "anyone" is not one of "proof", "owned-or-near", "open""#])
    }
}

/// The config errors of `json` (FleetConfigTests lives in another test target).
func configErrors(_ json: String) -> [String] {
    do {
        _ = try FleetConfig.parse(json)
        return []
    } catch {
        return error.errors.map(\.description)
    }
}

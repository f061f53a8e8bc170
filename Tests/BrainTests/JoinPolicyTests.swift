import BeaconKit
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
                    == [#"brain.joins: "anyone" is not one of "owned-or-near", "open""#])
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

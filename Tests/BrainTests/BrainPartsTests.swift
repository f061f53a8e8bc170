import BeaconKit
import BrainCore
import Config
import Testing

/// The values BrainCore is composed of, on their own.
@Suite("The brain's parts")
struct BrainPartsTests {
    static let otherUUID = BeaconUUID("11111111-2222-3333-4444-555555555555")!

    static func directory(stores: Set<UInt16>) throws -> BeaconDirectory {
        let config = try FleetConfig.parse("""
        {
          "broker": { "url": "mqtt://127.0.0.1:1883" },
          "gateways": [ { "id": "door", "store": 100 }, { "id": "annex", "store": 300 } ],
          "stores": [ { "major": 100, "name": "Main Street", "ad": { "title": "Deal of the day" } },
                      { "major": 300, "name": "Harbour" } ],
          "beacons": [
            { "uuid": "\(storeUUID)", "major": 100, "minor": 1, "name": "counter", "ad": { "title": "Espresso" } },
            { "uuid": "\(storeUUID)", "major": 200, "minor": 7, "name": "lent", "store": 300 },
            { "uuid": "\(otherUUID)", "name": "any of these" }
          ]
        }
        """)
        return BeaconDirectory(config: config, stores: stores)
    }

    @Test("the directory finds a beacon's entry, store and ad the way the registry says")
    func directoryAnswers() throws {
        let all = try Self.directory(stores: [])
        #expect(all.entry(counter)?.name == "counter")
        #expect(all.entry(counter, uuid: storeUUID)?.name == "counter")
        #expect(all.entry(counter, uuid: Self.otherUUID)?.name == "any of these",
                "the same numbers under another UUID are another beacon")
        #expect(all.entry(window) == nil)
        #expect(all.entry(window, uuid: Self.otherUUID)?.name == "any of these", "a UUID-only entry applies once the UUID is told")
        #expect(all.store(of: otherStore) == 300, "a registry `store` beats the major")
        #expect(all.store(of: window) == 100)
        #expect(all.ad(of: counter) == JSONValue(text: #"{"title":"Espresso"}"#))
        #expect(all.ad(of: window) == JSONValue(text: #"{"title":"Deal of the day"}"#), "else the store's ad")
        #expect(all.store(ofGateway: "annex") == 300)
        #expect(all.majors == nil && all.eddystoneBeacons == nil, "a brain of every store subscribes to every major")
        #expect(all.viewStore(window, "annex") == 300, "a view's store is its gateway's")
        #expect(all.viewStore(window, "unlisted") == 100, "else its beacon's")

        let harbour = try Self.directory(stores: [300])
        #expect(harbour.owns(otherStore) && !harbour.owns(counter))
        #expect(harbour.ownBeacons == [otherStore])
        #expect(harbour.majors == [200, 300], "the majors of the store's registry beacons too")
        #expect(harbour.handles(store: 300) && !harbour.handles(store: 100))
    }

    @Test("the mirror publishes only what the broker does not hold, and deletes what it wrote before a reconnect")
    func mirrorPublishesChanges() throws {
        var mirror = RetainedMirror()
        let first = mirror.set("brain/a", signature: "1") { "one" }
        #expect(first == MQTTMessage(topic: "brain/a", text: "one", qos: 1, retain: true))
        #expect(mirror.set("brain/a", signature: "1") { "one" } == nil, "the broker holds it already")
        #expect(mirror.set("brain/b", signature: nil) { "" } == nil, "nothing to delete")
        #expect(mirror.set("brain/a", signature: "2", expiry: 60) { "two" }?.expiry == 60)

        mirror["brain/c"] = ""   // read back: held, but not trusted
        #expect(mirror.set("brain/c", signature: "3") { "three" }?.text == "three", "an untrusted one is replaced")
        #expect(mirror.topics == ["brain/a", "brain/c"])

        mirror.reconnected()
        #expect(mirror.topics.isEmpty)
        let delete = mirror.set("brain/a", signature: nil) { "" }
        #expect(delete == MQTTMessage(topic: "brain/a", text: "", qos: 1, retain: true),
                "not read back yet: its subscribers saw it, so the delete is written")
        #expect(mirror.set("brain/c", signature: "3") { "three" }?.text == "three", "written again: not known to be held")
        mirror.readBackComplete()
        #expect(mirror.set("brain/x", signature: nil) { "" } == nil)
    }
}

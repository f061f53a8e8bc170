import BeaconKit
import Contract
import Config
import BrainCore
import Testing
import Tracking
import Foundation

@Suite struct JoinValidationTests {
    @Test func aJoinWithAFullProfile() throws {
        let request = try JoinRequest(parsing: Array(joinJSON(photo: photo(20 * 1024)).utf8))
        #expect(request.profile?.name == "Ada")
        #expect(request.profile?.favorite == "flat white")
        #expect(request.profile?.photo?.count == 20 * 1024)
    }

    @Test func aJoinWithoutProfile() throws {
        #expect(try JoinRequest(parsing: Array(#"{"state":"joined"}"#.utf8)).profile == nil)
        #expect(try JoinRequest(parsing: Array(#"{"state":"joined","profile":null}"#.utf8)).profile == nil)
        #expect(try JoinRequest(parsing: Array(#"{"state":"joined","profile":{}}"#.utf8)).profile == ObserverProfile())
    }

    static let hostile: [(String, String)] = [
        ("not JSON", "hello"),
        ("binary", "\u{0}\u{1}\u{FF}"),
        ("truncated", #"{"state":"joined""#),
        ("an array", #"["joined"]"#),
        ("a string", #""joined""#),
        ("no state", #"{"profile":{}}"#),
        ("state not a string", #"{"state":1}"#),
        ("unknown state", #"{"state":"left"}"#),
        ("unknown key", #"{"state":"joined","admin":true}"#),
        ("profile not an object", #"{"state":"joined","profile":"Ada"}"#),
        ("name not a string", #"{"state":"joined","profile":{"name":42}}"#),
        ("favorite an object", #"{"state":"joined","profile":{"favorite":{"a":1}}}"#),
        ("unknown profile key", #"{"state":"joined","profile":{"email":"a@b"}}"#),
        ("name too long", #"{"state":"joined","profile":{"name":""# + String(repeating: "x", count: 101) + #""}}"#),
        ("photo not base64", #"{"state":"joined","profile":{"photo":"not base64!"}}"#),
        ("photo not a JPEG", #"{"state":"joined","profile":{"photo":"iVBORw0KGgo="}}"#),
        ("photo too big", #"{"state":"joined","profile":{"photo":""# + StrictBase64.encode(photo(20 * 1024 + 1)) + #""}}"#),
        ("deep nesting", String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)),
        ("deep object", #"{"state":"joined","profile":{"name":{"a":{"b":{"c":{}}}}}}"#),
        ("duplicate keys", #"{"state":"joined","state":"joined"}"#),
        ("huge", #"{"state":"joined","pad":""# + String(repeating: "x", count: 70_000) + #""}"#),
    ]

    @Test(arguments: hostile)
    func hostileJoinsAreRejectedWithAReason(label: String, payload: String) {
        #expect(throws: PayloadError.self, "\(label)") { try JoinRequest(parsing: Array(payload.utf8)) }
    }

    @Test func joinPayloadRoundTrips() throws {
        let profile = ObserverProfile(name: "Zoë \"Z\"", favorite: "chai", photo: photo(100))
        let text = JoinRequest(profile: profile).json
        #expect(try JoinRequest(parsing: Array(text.utf8)).profile == profile)
    }

    @Test func fingerprintsDifferForDifferentPayloads() {
        #expect(JoinRequest.fingerprint(Array("a".utf8)) == JoinRequest.fingerprint(Array("a".utf8)))
        #expect(JoinRequest.fingerprint(Array("a".utf8)) != JoinRequest.fingerprint(Array("b".utf8)))
        #expect(JoinRequest.fingerprint([]).count == 16)
    }
}

@Suite struct StrictBase64Tests {
    @Test(arguments: [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="),
                      ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")])
    func rfc4648Vectors(plain: String, encoded: String) {
        #expect(StrictBase64.encode(Array(plain.utf8)) == encoded)
        #expect(StrictBase64.decode(encoded) == Array(plain.utf8))
    }

    @Test(arguments: ["Zg", "Zg=", "Z===", "Zm9v\n", "Zm9v YmFy", "Zh==", "Zm9=", "=Zm9", "Zm=v", "Zm9v!A=="])
    func invalidBase64(text: String) {
        #expect(StrictBase64.decode(text) == nil)
    }

    @Test func everyByteValue() {
        let bytes = (0...255).map { UInt8($0) }
        #expect(StrictBase64.decode(StrictBase64.encode(bytes)) == bytes)
    }
}

@Suite struct PayloadFormatTests {
    @Test func gatewayPayloadsAsTheGatewayWritesThem() throws {
        let s = try Sighting(parsing: JSONValue(text: sightingJSON(counter, "door", rssi: -61.2, .near)), topic: counter)
        #expect(s == Sighting(beacon: counter, uuid: storeUUID, gateway: "door", address: BluetoothAddress("AA:BB:CC:DD:EE:FF")!,
                              rssi: -61, rssiSmoothed: -61.2, txPower: -59, distance: 1.2, proximity: .near, at: t(0), sequence: 1))
        let p = try GatewayPresenceReport(parsing: JSONValue(text: presenceJSON(counter, "door", rssi: nil, .unknown)),
                                          topic: counter, gateway: "door")
        #expect(p.rssiSmoothed == nil)
        #expect(p.zone == "Door")
        #expect(p.since == t(0))
    }

    /// Each case is a good sighting with one thing wrong (the good one is read: see above).
    @Test(arguments: [
        ("other beacon", sightingJSON(window, "door", rssi: -60)),
        ("rssi a string", sightingJSON(counter, "door", rssi: -60).replacingOccurrences(of: #""rssiSmoothed":-60"#, with: #""rssiSmoothed":"-60""#)),
        ("proximity unknown word", sightingJSON(counter, "door", rssi: -60).replacingOccurrences(of: #""near""#, with: #""close""#)),
        ("gateway with a wildcard", sightingJSON(counter, "#", rssi: -60)),
        ("major fractional", sightingJSON(counter, "door", rssi: -60).replacingOccurrences(of: #""major":100"#, with: #""major":100.5"#)),
        ("rssi absurd", sightingJSON(counter, "door", rssi: -60).replacingOccurrences(of: #""rssiSmoothed":-60"#, with: #""rssiSmoothed":1e300"#)),
        ("address not an address", sightingJSON(counter, "door", rssi: -60).replacingOccurrences(of: "AA:BB:CC:DD:EE:FF", with: "AA:BB")),
        ("rssi fractional", sightingJSON(counter, "door", rssi: -60).replacingOccurrences(of: #""rssi":-60"#, with: #""rssi":-60.5"#)),
        ("no time", sightingJSON(counter, "door", rssi: -60).replacingOccurrences(of: #""ts""#, with: #""time""#)),
        ("no seq", sightingJSON(counter, "door", rssi: -60).replacingOccurrences(of: #""seq""#, with: #""sequence""#)),
        ("location a string", sightingJSON(counter, "door", rssi: -60).replacingOccurrences(of: #""seq":1"#, with: #""seq":1,"location":"here""#)),
        ("not an object", "[1,2,3]"),
    ])
    func badSightings(label: String, text: String) {
        #expect(text != sightingJSON(counter, "door", rssi: -60), "\(label): the case changes nothing")
        #expect(throws: PayloadError.self, "\(label)") { try Sighting(parsing: JSONValue(text: text), topic: counter) }
    }

    @Test func presenceFromAnotherGatewayIsRejected() {
        #expect(throws: PayloadError.self) {
            try GatewayPresenceReport(parsing: JSONValue(text: presenceJSON(counter, "door", rssi: -60)), topic: counter,
                                      gateway: "till")
        }
    }

    @Test func inboxMessagesRoundTrip() throws {
        let messages: [InboxMessage] = [
            .ad(beacon: counter, ad: .object(["title": .string("Espresso")]), rule: nil),
            .ad(beacon: window, ad: nil, rule: "deal"),
            .greeting(beacon: counter, text: "Hello Ada", rule: "hello"),
            .locationFix(beacon: counter, location: Location(latitude: 52.5, longitude: 13.4, heading: 90, floor: 2), rule: "nav"),
            .locationFix(beacon: counter, location: Location(latitude: -1, longitude: 2), rule: "nav"),
            .error(beacon: counter, reason: "profile.photo is not a JPEG"),
            .error(beacon: nil, reason: "x"),
        ]
        for message in messages {
            let json = JSONValue(text: message.json(at: t(0)))
            #expect(json["type"] == .string(message.type))
            #expect(json["ts"] == .string(t(0).iso8601))
            #expect(try InboxMessage(parsing: json) == message)
        }
        let fix = JSONValue(text: messages[3].json(at: t(0)))
        #expect(fix.objectValue?.keys == ["type", "beacon", "lat", "lon", "heading", "floor", "rule", "ts"])
    }

    @Test func recordsRoundTrip() throws {
        let visit = VisitRecord(since: t(5), rules: RuleMemory(fired: ["b": t(6), "a": t(7)], disarmed: ["nav": 0]))
        #expect(visit.json == #"{"since":"2026-11-21T09:00:05.000Z","fired":{"a":"2026-11-21T09:00:07.000Z","b":"2026-11-21T09:00:06.000Z"},"disarmed":["nav"]}"#)
        #expect(try VisitRecord(parsing: JSONValue(text: visit.json)) == visit)
        let answered = AnsweredRecord(join: "00FF", since: nil, rules: RuleMemory())
        #expect(answered.json == #"{"join":"00FF","since":null,"fired":{},"disarmed":[]}"#)
        #expect(try AnsweredRecord(parsing: JSONValue(text: answered.json)) == answered)
    }

    @Test func brainRecordTopics() {
        let topics = Topics(prefix: "acme")
        #expect(topics.parse(topics.visitRecord(of: counter)) == .brainRecord(.visit(counter)))
        #expect(topics.parse(topics.answeredRecord(of: counter, client: "ada")) == .brainRecord(.answered(counter, client: "ada")))
        #expect(topics.parse(topics.beaconHealth(of: counter)) == .brainRecord(.health(counter)))
        #expect(topics.parse("acme/brain/visits/100") == nil)
        #expect(topics.parse("acme/brain/visits/100/01") == nil)
        #expect(topics.parse("brain/visits/100/1") == nil)
    }
}

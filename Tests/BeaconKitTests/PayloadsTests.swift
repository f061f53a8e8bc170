import BeaconKit
import Contract
import Tracking
import Config
import GatewayCore
import Simulation
import Foundation
import Testing
import Wire

@Suite("Payloads and simulator")
struct PayloadsTests {
    static let entry = BeaconEntry(id: beaconA, name: "Alice's \"lucky\" keyring",
                                   location: Location(latitude: 48.8566, longitude: 2.3522, heading: 90, floor: 2))

    /// A known track: -65 dBm at 09:00:00, then -70 dBm one second later (P1m -59, n 2, defaults).
    static func knownTrack() -> (first: Track, second: Track) {
        var tracker = Tracker()
        let first = tracker.observe(beaconA, address: addressA, rssi: -65, measuredPower: -59, txPower: -59, at: t0).track
        let second = tracker.observe(beaconA, address: addressA, rssi: -70, measuredPower: -59, txPower: -59, at: t0 + 1).track
        return (first, second)
    }

    /// README "MQTT contract": keys in the documented order, `ts` ISO-8601 with milliseconds, numbers rounded.
    @Test func sightingText() {
        let (first, second) = Self.knownTrack()
        #expect(Payloads.sighting(first, gateway: "door", entry: nil, at: t0) == #"""
            {"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":1,"gateway":"door","address":"C0:00:00:64:00:01","rssi":-65,"rssiSmoothed":-65,"txPower":-59,"distance":2,"proximity":"near","ts":"2026-11-21T09:00:00.000Z","seq":1}
            """#)
        // Kalman: predicted variance 16 + 4·1 = 20, gain 20/36, estimate -65 + (-5)·5/9 = -67.78;
        // distance 10^((−59 + 67.78)/20) = 2.75 m. One second later: published again, seq 2.
        #expect(Payloads.sighting(second, gateway: "door", entry: Self.entry, at: t0 + 1.2345) == #"""
            {"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":1,"gateway":"door","address":"C0:00:00:64:00:01","rssi":-70,"rssiSmoothed":-67.8,"txPower":-59,"distance":2.75,"proximity":"near","ts":"2026-11-21T09:00:01.234Z","seq":2,"name":"Alice's \"lucky\" keyring","location":{"lat":48.8566,"lon":2.3522,"heading":90,"floor":2}}
            """#)
    }

    @Test func sightingWithoutSignalStrength() {
        var tracker = Tracker()
        let track = tracker.observe(beaconA, address: addressA, rssi: nil, measuredPower: -59, txPower: nil, at: t0).track
        #expect(Payloads.sighting(track, gateway: "g", entry: BeaconEntry(id: beaconA, location: Location(latitude: -1, longitude: 1)),
                                  at: t0) == #"""
            {"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":1,"gateway":"g","address":"C0:00:00:64:00:01","rssi":null,"rssiSmoothed":null,"txPower":null,"distance":null,"proximity":"unknown","ts":"2026-11-21T09:00:00.000Z","seq":1,"location":{"lat":-1,"lon":1,"heading":null,"floor":null}}
            """#)
    }

    @Test func eddystoneSighting() {
        var tracker = Tracker()
        let id = BeaconID.eddystone(namespace: EddystoneNamespace(hex: "00112233445566778899")!,
                                    instance: EddystoneInstance(hex: "0000000000ff")!)
        let track = tracker.observe(id, address: addressA, rssi: -80, measuredPower: -59, txPower: -18, at: t0).track
        let text = Payloads.sighting(track, gateway: "g", entry: nil, at: t0)
        #expect(text.hasPrefix(#"{"namespace":"00112233445566778899","instance":"0000000000ff","gateway":"g","#))
        #expect(text.contains(#""distance":11.22,"proximity":"far""#))
    }

    /// Every payload is valid JSON whatever the configuration does to the numbers: with
    /// the most extreme calibrated power, offset and exponent a config allows, the distance
    /// is about 10^19.8 m.
    @Test func extremeNumbersStayValidJSON() throws {
        var tracker = Tracker(settings: TrackerSettings(pathLossExponent: 1, rssiOffset: -50), calibration: [beaconA: 20])
        let track = tracker.observe(beaconA, address: addressA, rssi: -128, measuredPower: -59, txPower: -59, at: t0).track
        #expect(track.distance! > 1e19)
        let text = Payloads.sighting(track, gateway: "g", entry: nil, at: t0)
        let parsed = try JSONParser().parse(text)
        #expect(parsed["distance"]?.numberValue.map { abs($0 - track.distance!) / track.distance! < 1e-6 } == true)
        #expect(parsed["rssiSmoothed"] == .number(-178))
        let presence = Payloads.gatewayPresence(track, gateway: "g", zone: "z")
        #expect(throws: Never.self) { try JSONParser().parse(presence) }
    }

    @Test func gatewayPresenceText() {
        let (_, second) = Self.knownTrack()
        #expect(Payloads.gatewayPresence(second, gateway: "door", zone: "entrance") == #"""
            {"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":1,"gateway":"door","zone":"entrance","proximity":"near","rssiSmoothed":-67.8,"distance":2.75,"since":"2026-11-21T09:00:00.000Z"}
            """#)
    }

    /// A sighting, one type both ways: the gateway's bytes (as written on 2026-11-28, the same
    /// as `sightingText` and `sightingWithoutSignalStrength` check, quoted so that a byte
    /// change fails) read back to the value that wrote them, for both families; a sighting
    /// must name the beacon of its topic.
    @Test func sightingRoundTrip() throws {
        let (_, second) = Self.knownTrack()
        let counter = BeaconRef(major: 100, minor: 1)
        let tag = BeaconRef(namespace: EddystoneNamespace(hex: "00112233445566778899")!, instance: EddystoneInstance(hex: "0000000000ff")!)
        var tracker = Tracker()
        let tagTrack = tracker.observe(.eddystone(namespace: tag.eddystone!.namespace, instance: tag.eddystone!.instance),
                                       address: addressA, rssi: -80, measuredPower: -59, txPower: -18, at: t0).track
        let quiet = tracker.observe(beaconA, address: addressA, rssi: nil, measuredPower: -59, txPower: nil, at: t0).track
        let location: JSONValue = .object(["lat": .number(48.8566), "lon": .number(2.3522), "heading": .number(90), "floor": .number(2)])
        let cases: [(written: String, value: Sighting, bytes: String)] = [
            (Payloads.sighting(second, gateway: "door", entry: Self.entry, at: t0 + 1.2345),
             Sighting(beacon: counter, uuid: airLocate, gateway: "door", address: addressA, rssi: -70, rssiSmoothed: -67.8,
                      txPower: -59, distance: 2.75, proximity: .near, at: t0 + 1.234, sequence: 2,
                      name: "Alice's \"lucky\" keyring", location: location),
             #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":1,"gateway":"door","address":"C0:00:00:64:00:01","rssi":-70,"rssiSmoothed":-67.8,"txPower":-59,"distance":2.75,"proximity":"near","ts":"2026-11-21T09:00:01.234Z","seq":2,"name":"Alice's \"lucky\" keyring","location":{"lat":48.8566,"lon":2.3522,"heading":90,"floor":2}}"#),
            (Payloads.sighting(quiet, gateway: "g", entry: nil, at: t0),
             Sighting(beacon: counter, uuid: airLocate, gateway: "g", address: addressA, rssi: nil, rssiSmoothed: nil, txPower: nil,
                      distance: nil, proximity: .unknown, at: t0, sequence: 1),
             #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":1,"gateway":"g","address":"C0:00:00:64:00:01","rssi":null,"rssiSmoothed":null,"txPower":null,"distance":null,"proximity":"unknown","ts":"2026-11-21T09:00:00.000Z","seq":1}"#),
            (Payloads.sighting(tagTrack, gateway: "g", entry: nil, at: t0),
             Sighting(beacon: tag, uuid: nil, gateway: "g", address: addressA, rssi: -80, rssiSmoothed: -80, txPower: -18,
                      distance: 11.22, proximity: .far, at: t0, sequence: 1),
             #"{"namespace":"00112233445566778899","instance":"0000000000ff","gateway":"g","address":"C0:00:00:64:00:01","rssi":-80,"rssiSmoothed":-80,"txPower":-18,"distance":11.22,"proximity":"far","ts":"2026-11-21T09:00:00.000Z","seq":1}"#),
        ]
        for (written, value, bytes) in cases {
            #expect(written == bytes)
            let read = try Sighting(parsing: JSONParser().parse(Array(bytes.utf8)), topic: value.beacon)
            #expect(read == value)
            #expect(value.json == bytes)
            #expect(value.bytes == Array(bytes.utf8))
        }
        #expect(throws: PayloadError.self) {
            try Sighting(parsing: JSONParser().parse(Array(cases[0].bytes.utf8)), topic: BeaconRef(major: 100, minor: 2))
        }
    }

    /// A gateway's presence, one type both ways: the gateway's bytes (as written on 2026-11-28,
    /// quoted) read back to the value that wrote them; the topic's gateway must be the payload's.
    @Test func gatewayPresenceRoundTrip() throws {
        let (_, second) = Self.knownTrack()
        let bytes = #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":1,"gateway":"door","zone":"entrance","proximity":"near","rssiSmoothed":-67.8,"distance":2.75,"since":"2026-11-21T09:00:00.000Z"}"#
        let value = GatewayPresenceReport(beacon: BeaconRef(major: 100, minor: 1), uuid: airLocate, gateway: "door", zone: "entrance",
                                          proximity: .near, rssiSmoothed: -67.8, distance: 2.75, since: t0)
        #expect(Payloads.gatewayPresence(second, gateway: "door", zone: "entrance") == bytes)
        let json = try JSONParser().parse(Array(bytes.utf8))
        #expect(try GatewayPresenceReport(parsing: json, topic: value.beacon, gateway: "door") == value)
        #expect(value.json == bytes)
        #expect(throws: PayloadError.self) { try GatewayPresenceReport(parsing: json, topic: value.beacon, gateway: "till") }
    }

    /// An RSSI report (`gateways/<id>/rssi`), one type both ways: its bytes (as the gateway
    /// writes them on 2026-11-28, quoted) read back to the value that wrote them, for both
    /// families; a report resent after a disconnect is the gateway's bytes with its mark.
    @Test func rssiReportRoundTrip() throws {
        let tag = BeaconRef(namespace: EddystoneNamespace(hex: "00112233445566778899")!, instance: EddystoneInstance(hex: "aabbccddeeff")!)
        var report = RSSIReport(gateway: "door", from: t0, to: t0 + 0.5, entries: [
            .init(beacon: BeaconRef(major: 100, minor: 1), uuid: airLocate, count: 3, rssi: -60.5, at: 0.125, rssiSmoothed: -61.2,
                  distance: 1.5, proximity: .near),
            .init(beacon: tag, count: 1, rssi: nil, at: 0, proximity: .unknown),
        ])
        let bytes = #"{"gateway":"door","from":"2026-11-21T09:00:00.000Z","to":"2026-11-21T09:00:00.500Z","beacons":[{"major":100,"minor":1,"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","n":3,"rssi":-60.5,"at":0.125,"rssiSmoothed":-61.2,"distance":1.5,"proximity":"near"},{"namespace":"00112233445566778899","instance":"aabbccddeeff","n":1,"rssi":null,"at":0,"rssiSmoothed":null,"distance":null,"proximity":"unknown"}]}"#
        #expect(report.json == bytes)
        #expect(try RSSIReport(parsing: JSONParser().parse(Array(bytes.utf8)), topic: "door") == report)
        #expect(throws: PayloadError.self) { try RSSIReport(parsing: JSONParser().parse(Array(bytes.utf8)), topic: "till") }
        report.resent = true
        let resent = String(bytes.dropLast()) + #","resent":true}"#
        #expect(report.json == resent)
        #expect(try RSSIReport(parsing: JSONParser().parse(Array(resent.utf8)), topic: "door") == report)
    }

    @Test func healthText() {
        let health = GatewayHealth(gateway: "door", version: "1.0.0", uptime: 3600.04, source: "hci:0", sourceState: "scanning",
                                     advertsPerSecond: 12.345, decodedPerSecond: 3.96, dropped: 0, malformed: 2,
                                     queueDepth: 0, tracked: 3, published: 120, ts: WallTime(iso8601: "2026-11-21T09:00:00.000Z")!)
        #expect(health.json == #"""
            {"gateway":"door","version":"1.0.0","uptime":3600,"source":"hci:0","sourceState":"scanning","advertsPerSecond":12.3,"decodedPerSecond":4,"dropped":0,"malformed":2,"queueDepth":0,"tracked":3,"published":120,"ts":"2026-11-21T09:00:00.000Z"}
            """#)
    }

    /// One type both ways: the gateway's bytes (as written on 2026-11-28, quoted so that a byte
    /// change fails) read back to the value that wrote them, and a value survives a round trip.
    @Test func healthRoundTrip() throws {
        let bytes = #"{"gateway":"door","version":"1.0.0","uptime":3600,"source":"hci:0","sourceState":"scanning","advertsPerSecond":12.3,"decodedPerSecond":4,"dropped":0,"malformed":2,"queueDepth":0,"tracked":3,"published":120,"ts":"2026-11-21T09:00:00.000Z"}"#
        let expected = GatewayHealth(gateway: "door", version: "1.0.0", uptime: 3600, source: "hci:0", sourceState: "scanning",
                                     advertsPerSecond: 12.3, decodedPerSecond: 4, dropped: 0, malformed: 2,
                                     queueDepth: 0, tracked: 3, published: 120, ts: WallTime(iso8601: "2026-11-21T09:00:00.000Z")!)
        let read = try #require(GatewayHealth(parsing: Array(bytes.utf8)))
        #expect(read == expected)
        #expect(read.json == bytes)
        #expect(GatewayHealth(parsing: Array(expected.json.utf8)) == expected)
        // Lenient: what an older or newer gateway leaves out or sends as another type is absent.
        var partial = GatewayHealth()
        partial.version = "0.9"
        partial.tracked = 7
        #expect(GatewayHealth(parsing: Array(#"{"version":"0.9","tracked":7,"dropped":"many","extra":1}"#.utf8)) == partial)
        #expect(partial.json == #"{"gateway":null,"version":"0.9","uptime":null,"source":null,"sourceState":null,"advertsPerSecond":null,"decodedPerSecond":null,"dropped":null,"malformed":null,"queueDepth":null,"tracked":7,"published":null,"ts":null}"#)
        #expect(GatewayHealth(parsing: Array("online".utf8)) == nil)
    }

    /// The brain's health, one type both ways: bytes in the form `BrainCore.health` wrote them
    /// before `BrainHealth` existed (2026-11-28), quoted so that a byte change fails; read
    /// leniently (what `beaconctl score` asks is whether the brain settled).
    @Test func brainHealthRoundTrip() throws {
        let bytes = #"{"version":"1.0.0","uptime":12.3,"stores":[100,101],"settled":true,"unknownStores":[101],"beacons":4,"joins":1,"received":900,"oversized":0,"malformed":{"join":1,"rssiReport":2},"unknownTopics":0,"foreign":3,"staleReports":0,"behindReports":1,"joinsAccepted":1,"joinsRejected":1,"joinsThrottled":0,"leaves":0,"rulesFired":2,"actionsSkipped":0,"inboxMessages":0,"configsApplied":1,"configsRejected":0,"published":40,"publishFailures":0,"ts":"2026-11-21T09:00:00.000Z"}"#
        let read = try #require(BrainHealth(parsing: Array(bytes.utf8)))
        #expect(read.settled == true)
        #expect(read.stores == [100, 101])
        #expect(read.malformed == ["join": 1, "rssiReport": 2])
        #expect(read.ts == WallTime(iso8601: "2026-11-21T09:00:00.000Z"))
        #expect(read.json == bytes)
        var everyStore = read
        everyStore.stores = nil
        everyStore.malformed = [:]
        #expect(everyStore.json.contains(#""stores":null,"#) && everyStore.json.contains(#""malformed":{},"#))
        #expect(BrainHealth(parsing: Array(#"{"settled":false,"beacons":"many"}"#.utf8))?.settled == false)
        #expect(BrainHealth(parsing: Array(#"{"settled":false,"beacons":"many"}"#.utf8))?.beacons == nil)
        #expect(BrainHealth(parsing: Array("online".utf8)) == nil)
    }

    /// A zone decision (`beacons/<M>/<m>/events`), one type both ways: the brain's bytes (as
    /// written on 2026-11-28, quoted so that a byte change fails) read back to the value that
    /// wrote them, for both families; a decision must name the beacon of its topic.
    @Test func zoneDecisionRoundTrip() throws {
        let counter = BeaconRef(major: 100, minor: 7)
        let tag = BeaconRef(namespace: EddystoneNamespace(hex: "00112233445566778899")!, instance: EddystoneInstance(hex: "aabbccddeeff")!)
        let cases: [(ZoneDecision, String)] = [
            (ZoneDecision(kind: .enter, beacon: counter, zone: "door", zoneName: "Entrance", since: t0, at: t0 + 1.25),
             #"{"event":"enter","major":100,"minor":7,"zone":"door","zoneName":"Entrance","since":"2026-11-21T09:00:00.000Z","ts":"2026-11-21T09:00:01.250Z"}"#),
            (ZoneDecision(kind: .zone, beacon: tag, zone: "counter", zoneName: "Counter", from: "door", since: t0, at: t0 + 30),
             #"{"event":"zone","namespace":"00112233445566778899","instance":"aabbccddeeff","zone":"counter","zoneName":"Counter","from":"door","since":"2026-11-21T09:00:00.000Z","ts":"2026-11-21T09:00:30.000Z"}"#),
        ]
        for (decision, bytes) in cases {
            #expect(decision.json == bytes)
            #expect(try ZoneDecision(parsing: JSONParser().parse(Array(bytes.utf8)), topic: decision.beacon) == decision)
        }
        #expect(throws: PayloadError.self) {
            try ZoneDecision(parsing: JSONParser().parse(Array(cases[0].1.utf8)), topic: BeaconRef(major: 100, minor: 8))
        }
    }

    // MARK: What the brain writes and beacon-web, the history and apps read

    static let tag = BeaconRef(namespace: EddystoneNamespace(hex: "00112233445566778899")!, instance: EddystoneInstance(hex: "aabbccddeeff")!)

    /// The brain's fleet presence (`beacons/<M>/<m>/presence`), one type both ways: its bytes
    /// (as written on 2026-11-28, quoted so that a byte change fails; the iBeacon one is
    /// docs/brain.md's example) read back to the value that wrote them, for both families.
    @Test func fleetPresenceRoundTrip() throws {
        typealias View = FleetPresenceReport.View
        let views = [View(gateway: "door", zone: "Entrance", proximity: .far, rssiSmoothed: -81.5, distance: 7.2),
                     View(gateway: "till", zone: "Counter", proximity: .immediate, rssiSmoothed: -52.1, distance: 0.3)]
        let cases: [(FleetPresenceReport, String)] = [
            (FleetPresenceReport(beacon: BeaconRef(major: 100, minor: 1), uuid: airLocate, zone: "till", zoneName: "Counter",
                                 gateways: views, proximity: .immediate, since: t0),
             #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":1,"zone":"till","zoneName":"Counter","gateways":[{"gateway":"door","zone":"Entrance","proximity":"far","rssiSmoothed":-81.5,"distance":7.2},{"gateway":"till","zone":"Counter","proximity":"immediate","rssiSmoothed":-52.1,"distance":0.3}],"proximity":"immediate","since":"2026-11-21T09:00:00.000Z"}"#),
            (FleetPresenceReport(beacon: Self.tag, uuid: nil, zone: "door", zoneName: "Entrance",
                                 gateways: [View(gateway: "door", zone: "Entrance", proximity: .near, rssiSmoothed: nil, distance: nil)],
                                 proximity: .near, since: t0 + 1.5),
             #"{"namespace":"00112233445566778899","instance":"aabbccddeeff","zone":"door","zoneName":"Entrance","gateways":[{"gateway":"door","zone":"Entrance","proximity":"near","rssiSmoothed":null,"distance":null}],"proximity":"near","since":"2026-11-21T09:00:01.500Z"}"#),
        ]
        for (report, bytes) in cases {
            #expect(report.json == bytes)
            #expect(try FleetPresenceReport(parsing: JSONParser().parse(Array(bytes.utf8)), topic: report.beacon) == report)
        }
        #expect(cases[1].0.signature == #"{"namespace":"00112233445566778899","instance":"aabbccddeeff","zone":"door","zoneName":"Entrance","gateways":[{"gateway":"door","zone":"Entrance","proximity":"near"}],"proximity":"near","since":"2026-11-21T09:00:01.500Z"}"#)
        #expect(cases[0].0.signature == #"{"uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":1,"zone":"till","zoneName":"Counter","gateways":[{"gateway":"door","zone":"Entrance","proximity":"far"},{"gateway":"till","zone":"Counter","proximity":"immediate"}],"proximity":"immediate","since":"2026-11-21T09:00:00.000Z"}"#)
        // The brain's one encoding of both (`payloadAndSignature`) gives the same two texts,
        // with no view, and with views whose names need escaping.
        var odd = cases[0].0
        odd.zoneName = "Caf\u{E9} \"Nord\"\n"
        odd.gateways += [View(gateway: "aisle", zone: "Aisle \\ 2", proximity: .unknown, rssiSmoothed: -100, distance: 12.345)]
        var none = cases[1].0
        none.gateways = []
        for report in cases.map(\.0) + [odd, none] {
            let both = report.payloadAndSignature
            #expect(both.json == report.json)
            #expect(both.signature == report.signature)
        }
        #expect(throws: PayloadError.self) {
            try FleetPresenceReport(parsing: JSONParser().parse(Array(cases[0].1.utf8)), topic: BeaconRef(major: 100, minor: 2))
        }
    }

    /// A join (`…/observers/<client>`), one type both ways: what `beaconctl observe` writes
    /// (quoted) is what the brain reads, the photo as canonical base64.
    @Test func joinRoundTrip() throws {
        let cases: [(JoinRequest, String)] = [
            (JoinRequest(profile: ObserverProfile(name: "Ada", favorite: "flat white", photo: [0xFF, 0xD8, 0xFF, 0xE0])),
             #"{"state":"joined","profile":{"name":"Ada","favorite":"flat white","photo":"/9j/4A=="}}"#),
            (JoinRequest(profile: ObserverProfile()), #"{"state":"joined","profile":{}}"#),
            (JoinRequest(), #"{"state":"joined"}"#),
        ]
        for (join, bytes) in cases {
            #expect(join.json == bytes)
            #expect(try JoinRequest(parsing: Array(bytes.utf8)) == join)
        }
    }

    /// The greeter roster (`stores/<s>/roster`) and one customer (`stores/<s>/customers/<c>`),
    /// one type both ways: the brain's bytes (quoted) read back to the value that wrote them.
    @Test func rosterRoundTrip() throws {
        let ada = Roster.Customer(client: "ada", name: "Ada", favorite: nil, photo: "beacons/100/1/observers/ada",
                                  beacon: BeaconRef(major: 100, minor: 1), since: t0)
        let grace = Roster.Customer(client: "grace", name: nil, favorite: "tea", photo: nil, beacon: Self.tag, since: t0 + 2)
        let roster = Roster(store: 100, name: "Corner", count: 3, customers: [ada, grace])
        let bytes = #"{"store":100,"name":"Corner","count":3,"customers":[{"client":"ada","name":"Ada","favorite":null,"photo":"beacons/100/1/observers/ada","beacon":{"major":100,"minor":1},"since":"2026-11-21T09:00:00.000Z"},{"client":"grace","name":null,"favorite":"tea","photo":null,"beacon":{"namespace":"00112233445566778899","instance":"aabbccddeeff"},"since":"2026-11-21T09:00:02.000Z"}],"ts":"2026-11-21T09:00:05.000Z"}"#
        #expect(roster.json(at: t0 + 5) == bytes)
        #expect(try Roster(parsing: JSONParser().parse(Array(bytes.utf8))) == roster)
        let customer = #"{"client":"ada","name":"Ada","favorite":null,"photo":"beacons/100/1/observers/ada","beacon":{"major":100,"minor":1},"since":"2026-11-21T09:00:00.000Z"}"#
        var writer = JSONWriter()
        writer.write(ada.json)
        #expect(writer.text == customer)
        #expect(try Roster.Customer(parsing: JSONParser().parse(Array(customer.utf8))) == ada)
    }

    /// A gateway's calibration (`gateways/<g>/calibration`), one type both ways: the brain's
    /// bytes (quoted) read back to the value that wrote them; the topic's gateway must be the payload's.
    @Test func calibrationRoundTrip() throws {
        let record = CalibrationRecord(gateway: "door", values: .init(rssiOffset: -3.25, pathLossExponent: 2.345, since: t0),
                                       samples: 420, links: 3, residual: 1.5, pinned: false, configuredOffset: 0,
                                       before: .init(rssiOffset: -1.5, pathLossExponent: 2, since: t0 - 600))
        let bytes = #"{"gateway":"door","rssiOffset":-3.25,"pathLossExponent":2.345,"samples":420,"links":3,"residual":1.5,"since":"2026-11-21T09:00:00.000Z","pinned":false,"configuredOffset":0,"before":{"rssiOffset":-1.5,"pathLossExponent":2,"since":"2026-11-21T08:50:00.000Z"}}"#
        #expect(record.json == bytes)
        let json = try JSONParser().parse(Array(bytes.utf8))
        #expect(try CalibrationRecord(parsing: json, topic: "door") == record)
        #expect(throws: PayloadError.self) { try CalibrationRecord(parsing: json, topic: "till") }
    }

    /// A registry beacon's health (`brain/beacons/<beacon>`), one type both ways: the brain's
    /// bytes (quoted) read back to the record that wrote them (the beacon and name are the
    /// topic's and the registry's).
    @Test func beaconHealthRoundTrip() throws {
        let cases: [(BeaconHealthRecord, BeaconRef, String?, String)] = [
            (BeaconHealthRecord(lastSeen: t0, present: true, battery: 2950), Self.tag, "keyring",
             #"{"beacon":{"namespace":"00112233445566778899","instance":"aabbccddeeff"},"name":"keyring","lastSeen":"2026-11-21T09:00:00.000Z","present":true,"battery":2950,"batteryLow":false,"missing":false}"#),
            (BeaconHealthRecord(missing: true), BeaconRef(major: 100, minor: 1), nil,
             #"{"beacon":{"major":100,"minor":1},"name":null,"lastSeen":null,"present":false,"battery":null,"batteryLow":false,"missing":true}"#),
        ]
        for (record, beacon, name, bytes) in cases {
            #expect(record.json(beacon: beacon, name: name) == bytes)
            #expect(try BeaconHealthRecord(parsing: JSONParser().parse(Array(bytes.utf8))) == record)
        }
    }

    /// `beaconctl decode` output lines (README, "Decoding").
    @Test func decodedLines() {
        func line(_ data: [UInt8], report: (address: BluetoothAddress, rssi: Int8?, ts: CaptureTime?)? = nil) -> String? {
            guard case .beacon(let beacon) = decodeBeacon(data) else { return nil }
            return DecodedLine.text(beacon, report: report)
        }
        #expect(line(AdvertisingDataTests.bleMonitorIBeacon) ==
                #"{"format":"ibeacon","uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":0,"txPower":-59}"#)
        #expect(line(AdvertisingDataTests.bleMonitorIBeacon, report: (BluetoothAddress("6A:6B:C9:A2:3E:43")!, -77, t0)) ==
                #"{"format":"ibeacon","uuid":"E2C56DB5-DFFB-48D2-B060-D0F5A71096E0","major":100,"minor":0,"txPower":-59,"address":"6A:6B:C9:A2:3E:43","rssi":-77,"ts":"2026-11-21T09:00:00.000Z"}"#)
        #expect(line(bytes("1BFFFFFFBEACD3162F5AF3EE494799DB09756062D0FC005A0005C400")) ==
                #"{"format":"altbeacon","uuid":"D3162F5A-F3EE-4947-99DB-09756062D0FC","major":90,"minor":5,"txPower":-60,"company":65535}"#)
        #expect(line(bytes("0201060303AAFE1116AAFE20000C6F1E000002006D41DB9AB6"), report: (BluetoothAddress(rawValue: 1), nil, nil)) ==
                #"{"format":"eddystone-tlm","battery":3183,"temperature":30,"advertisingCount":131181,"uptime":110491103,"address":"00:00:00:00:00:01","rssi":null}"#)
        #expect(line(bytes("1116AAFE2000 0BB8 8000 00000001 00000064")) ==
                #"{"format":"eddystone-tlm","battery":3000,"temperature":null,"advertisingCount":1,"uptime":10}"#)
        // Issue 18: a beacon without a battery reading sends 0: the battery is unknown (null), not 0 mV.
        #expect(line(bytes("0201060303AAFE1116AAFE2000000080000002006D41DB9AB6")) ==
                #"{"format":"eddystone-tlm","battery":null,"temperature":null,"advertisingCount":131181,"uptime":110491103}"#)
        #expect(line(bytes("1316AAFE10EB03676F6F2E676C2F53367A543650")) ==
                #"{"format":"eddystone-url","url":"https://goo.gl/S6zT6P","txPower":-21}"#)
        #expect(line(bytes("1716AAFE00EE00112233445566778899AABBCCDDEEFF0000")) ==
                #"{"format":"eddystone-uid","namespace":"00112233445566778899","instance":"aabbccddeeff","txPower":-18}"#)
    }

    // MARK: Simulator

    @Test func sameSeedSameBytes() {
        let a = StoreSimulation(customers: 4, duration: 60, seed: 7).captures()
        let b = StoreSimulation(customers: 4, duration: 60, seed: 7).captures()
        #expect(a.keys.sorted() == ["counter", "door"])
        for key in a.keys { #expect(a[key]?.bytes == b[key]?.bytes, "\(key)") }
        let c = StoreSimulation(customers: 4, duration: 60, seed: 8).captures()
        #expect(a["door"]?.bytes != c["door"]?.bytes)
        #expect(StoreSimulation(seed: 7).visits == StoreSimulation(seed: 7).visits)
    }

    /// A pinned digest of one capture: the simulator (and SplitMix64 under it) produce the
    /// same bytes on every machine and every run, which other tests and benchmarks rely on.
    @Test func pinnedOutput() {
        var random = SplitMix64(seed: 1)
        #expect([random.next(), random.next()] == [0x910A_2DEC_8902_5CC1, 0xBEEB_8DA1_658E_EC67])
        let door = StoreSimulation(customers: 2, duration: 10, seed: 1).captures()["door"]!.bytes
        #expect(door.count > 16)
        #expect(Array(door.prefix(16)) == Array("btsnoop\0".utf8) + [0, 0, 0, 1, 0, 0, 0x03, 0xEA])
    }

    @Test func visitsWalkInAndOut() {
        let simulation = StoreSimulation(customers: 5, duration: 120, seed: 3)
        for visit in simulation.visits {
            #expect(visit.position(at: visit.arrival) == 0)
            #expect(visit.position(at: visit.arrival - 0.1) == nil)
            #expect(visit.position(at: visit.departure + 0.1) == nil)
            #expect(abs(visit.position(at: visit.departure)!) < 1e-9)
            #expect(visit.position(at: visit.arrival + visit.spot + visit.dwell / 2) == visit.spot)
            #expect(visit.address.description.hasPrefix("C0:00:00:64:00:"))
        }
        #expect(simulation.visits.map(\.minor) == [1, 2, 3, 4, 5])
        #expect(simulation.visits[0].spot == 11.7)   // the first customer always goes to the counter
    }
}

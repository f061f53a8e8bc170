import BeaconKit
import Config
import Contract
import Foundation
import Testing
@testable import Tracking

/// What the four original apps allowed, in the fleet config and the range words (issue 13).
@Suite("The original apps: rule names, fallback texts, hot/cold words")
struct OriginalAppsConfigTests {
    static func errors(_ json: String) -> [String] {
        do {
            _ = try FleetConfig.parse(json)
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }

    @Test("duplicate rule names are rejected with their JSON path (also a name equal to an unnamed rule's path)")
    func duplicateRuleNames() {
        let ad = #""then": [{"do": "ad"}]"#
        #expect(Self.errors(#"{"rules": [{"name": "deal", "when": "enter", \#(ad)}, {"name": "x", "when": "exit", \#(ad)},"#
                            + #" {"name": "deal", "when": "join", \#(ad)}]}"#)
                == [#"rules[2].name: "deal" is also the name of rules[0]; rule names must be unique"#])
        #expect(Self.errors(#"{"rules": [{"when": "enter", \#(ad)}, {"name": "rules[0]", "when": "exit", \#(ad)}]}"#)
                == [#"rules[1].name: "rules[0]" is also the name of rules[0]; rule names must be unique"#])
        #expect(Self.errors(#"{"rules": [{"when": "enter", \#(ad)}, {"when": "exit", \#(ad)}]}"#).isEmpty)
    }

    @Test("fallback: a template of known variables, only on rules with a greeting or publish")
    func fallback() throws {
        let config = try FleetConfig.parse(#"""
            {"rules": [{"name": "welcome", "when": "join", "fallback": "Hello! Your coffee is on its way.",
                        "then": [{"do": "greeting", "text": "Hello {customer}! A {favorite} is on its way."}]}]}
            """#)
        #expect(config.rules.first?.fallback == "Hello! Your coffee is on its way.")
        #expect(Self.errors(#"{"rules": [{"when": "join", "fallback": "Hi {nobody}", "then": [{"do": "greeting", "text": "x"}]}]}"#)
                .first?.hasPrefix("rules[0].fallback: template uses {nobody}") == true)
        #expect(Self.errors(#"{"rules": [{"when": "join", "fallback": "Hi", "then": [{"do": "ad"}]}]}"#)
                == ["rules[0].fallback: applies to the texts of greeting and publish actions; this rule has none"])
    }

    @Test("config check warns where a rule's text or topic may lack a value; none where every value is sure")
    func templateWarnings() throws {
        let config = try FleetConfig.parse(#"""
            {"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 9, "minor": 6, "name": "counter"},
                         {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 9, "minor": 7, "owner": "ana",
                          "profile": {"name": "Ana", "favorite": "tea"}}],
             "rules": [{"name": "barista", "when": "join",
                        "then": [{"do": "publish", "topic": "displays/{store}/barista", "text": "Hello {customer}! A {favorite} is on its way."}]},
                       {"name": "welcome", "when": "join", "fallback": "Hello! Your coffee is on its way.",
                        "then": [{"do": "greeting", "text": "Hello {customer}! A {favorite} is on its way."}]},
                       {"name": "at", "when": "enter", "names": ["counter"],
                        "then": [{"do": "publish", "topic": "log/{major}/{minor}", "text": "{name} at {zone} ({proximity})"}]},
                       {"name": "own", "when": "enter", "beacons": [{"major": 9, "minor": 7}],
                        "then": [{"do": "publish", "topic": "displays/{store}/{client}", "text": "{customer}: {favorite}"}]},
                       {"name": "who", "when": "enter", "fallback": "someone at {lat}",
                        "then": [{"do": "publish", "topic": "who/{customer}", "text": "{customer}"}]}]}
            """#)
        #expect(config.templateWarnings == [
            #"rules[0] ("barista").then[0].text: {customer}, {favorite} may have no value; then the message is skipped (counted in actionsSkipped): give the rule a "fallback" text"#,
            #"rules[4] ("who").then[0].topic: {customer} may have no value; then the publish is skipped"#,
            #"rules[4] ("who").fallback: {lat} may have no value either; then nothing is sent"#,
        ])
    }

    @Test("a template is complete only when every variable it uses has a non-empty value")
    func completeness() {
        let template = "Hello {customer}! A {favorite} is on its way."
        #expect(Template.isComplete(template, ["customer": "Ana", "favorite": "flat white"]))
        #expect(!Template.isComplete(template, ["customer": "Ana"]))
        #expect(!Template.isComplete(template, ["customer": "", "favorite": "tea"]))
        #expect(Template.isComplete("no variables", [:]))
    }

    /// Seed 001's ranging callback: unknown blue "Freezing!", far blue "Cold!", immediate
    /// purple "Warmer", near red "HOT!", and `[NSString stringWithFormat:@"%ddB", beacon.rssi]`.
    @Test("the original app's hot/cold words and colours by proximity class, its dB line; the game's stay the default",
          arguments: [(Proximity.unknown, "Freezing!", WordColour.blue), (.far, "Cold!", .blue),
                      (.immediate, "Warmer", .purple), (.near, "HOT!", .red)])
    func originalWords(proximity: Proximity, word: String, colour: WordColour) {
        let line = RangeLine(id: BeaconID(uuid: BeaconUUID(high: 1, low: 2), major: 7, minor: 1),
                             address: BluetoothAddress(rawValue: 1), rssi: -63, rssiSmoothed: -62, distance: 1.4,
                             proximity: proximity, warmth: .cold, gone: false, quietFor: 0)
        #expect(HotColdWords.original.word(for: line) == word)
        #expect(HotColdWords.original.colour(for: line) == colour)
        #expect(line.text(words: .original).hasSuffix("  \(proximity.rawValue)  \(word)"))
        #expect(line.text(words: .original).contains("minor 1  -63dB  smoothed -62.0 dBm"), "\(line.text(words: .original))")
        #expect(line.plainText.hasSuffix("  \(proximity.rawValue)  Cold"), "the game's words by default")
        #expect(line.plainText.contains("rssi -63 dBm"))
        #expect(HotColdWords.game.colour(for: line) == .cyan, "the game colours its own words")
    }

    @Test("without signal strength the original's dB line says 0dB, as CoreLocation did")
    func originalSignalWithoutRSSI() {
        let line = RangeLine(id: BeaconID(uuid: BeaconUUID(high: 1, low: 2), major: 7, minor: 1),
                             address: BluetoothAddress(rawValue: 1), rssi: nil, rssiSmoothed: nil, distance: nil,
                             proximity: .unknown, warmth: .unknown, gone: false, quietFor: 0)
        #expect(line.text(words: .original).contains("minor 1  0dB  rssi n/a"))
        #expect(line.text(words: .original).hasSuffix("unknown  Freezing!"))
    }

    static let marker = BeaconUUID("B9407F30-F5F8-466E-AFF9-25556B57FE6D")!

    @Test("registry entries as the navigation library allowed: UUID-only, only a heading, only a floor")
    func navigationEntries() throws {
        let config = try FleetConfig.parse(#"""
            {"beacons": [
              {"uuid": "B9407F30-F5F8-466E-AFF9-25556B57FE6D", "name": "stairs", "heading": 180, "measuredPower": -70},
              {"uuid": "B9407F30-F5F8-466E-AFF9-25556B57FE6D", "major": 3, "minor": 1, "name": "lift", "floor": 2},
              {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 100, "minor": 1, "latitude": 52.5, "longitude": 13.4}
            ]}
            """#)
        #expect(config.beacons[0].match == .uuid(Self.marker))
        #expect(config.beacons[0].id == nil)
        #expect(config.beacons[0].location == Location(heading: 180))
        #expect(config.beacons[1].location == Location(floor: 2))
        #expect(config.beacons[2].location == Location(latitude: 52.5, longitude: 13.4))

        // A beacon's own entry wins; any other major/minor of the UUID gets the UUID's entry,
        // as its own (its store is its major).
        let own = BeaconID(uuid: Self.marker, major: 3, minor: 1)
        let other = BeaconID(uuid: Self.marker, major: 7, minor: 42)
        #expect(config.beacon(own)?.name == "lift")
        let resolved = try #require(config.beacon(other))
        #expect(resolved.name == "stairs")
        #expect(resolved.id == other)
        #expect(resolved.store == 7)
        #expect(config.beacon(BeaconID(uuid: BeaconUUID(high: 1, low: 1), major: 7, minor: 42)) == nil)
        #expect(config.registry.calibration.uuids == [Self.marker: -70])
        #expect(Location(heading: 180).json == .object(["lat": .null, "lon": .null, "heading": .number(180), "floor": .null]))
    }

    @Test("what a UUID-only entry cannot have, and entries listed twice")
    func navigationEntryErrors() {
        let uuid = #""uuid": "B9407F30-F5F8-466E-AFF9-25556B57FE6D""#
        #expect(Self.errors(#"{"beacons": [{\#(uuid), "major": 3}]}"#)
                == ["beacons[0]: major and minor go together (leave both out for every beacon of the UUID)"])
        #expect(Self.errors(#"{"beacons": [{\#(uuid), "store": 3, "ad": {"title": "x"}}]}"#) == [
            "beacons[0].store: needs major and minor: the beacons of a UUID-only entry belong to their own major's store",
            "beacons[0].ad: needs major and minor (one beacon's offer); put an offer for all of them on their store",
        ])
        #expect(Self.errors(#"{"beacons": [{\#(uuid), "name": "a"}, {\#(uuid), "name": "b"}]}"#)
                == ["beacons[1]: every beacon of \(Self.marker) is listed twice"])
        #expect(Self.errors(#"{"beacons": [{\#(uuid), "latitude": 1}]}"#) == ["beacons[0]: latitude and longitude go together"])
    }

    @Test("the tracker takes a UUID-only entry's calibration for beacons without their own")
    func uuidCalibration() {
        var tracker = Tracker(settings: TrackerSettings(pathLossExponent: 2))
        tracker.uuidCalibration = [Self.marker: -70]
        let id = BeaconID(uuid: Self.marker, major: 7, minor: 42)
        let update = tracker.observe(id, address: BluetoothAddress(rawValue: 1), rssi: -70, measuredPower: -59, txPower: -59,
                                     at: CaptureTime(seconds: 0))
        #expect(update.track.distance.map { ($0 * 100).rounded() / 100 } == 1.0, "-70 dBm at -70 dBm calibrated is 1 m")
    }

    @Test("Eddystone-UID registry entries and rule keys by namespace and instance")
    func eddystoneEntries() throws {
        let config = try FleetConfig.parse(#"""
            {"beacons": [{"namespace": "00112233445566778899", "instance": "AABBCCDDEEFF", "name": "till tag", "ad": {"title": "x"}},
                         {"namespace": "00112233445566778899", "instance": "000000000001", "store": 7}],
             "rules": [{"when": "enter", "beacons": [{"namespace": "00112233445566778899", "instance": "aabbccddeeff"}], "then": [{"do": "ad"}]}]}
            """#)
        let tag = BeaconID.eddystone(namespace: EddystoneNamespace(hex: "00112233445566778899")!,
                                     instance: EddystoneInstance(hex: "aabbccddeeff")!)
        #expect(config.beacons[0].id == tag)
        #expect(config.beacons[0].storeMajor == nil, "an Eddystone beacon is in a store only by its entry's store")
        #expect(config.beacons[1].storeMajor == 7)
        #expect(config.beacon(tag)?.name == "till tag")
        let rule = try #require(config.rules.first)
        #expect(rule.matches(eddystone: tag, entry: config.beacons[0]))
        #expect(!rule.matches(major: 0, minor: 0, uuid: nil, entry: nil), "an Eddystone key names no iBeacon")
        #expect(Self.errors(#"{"beacons": [{"namespace": "0011", "instance": "aabbccddeeff", "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"}]}"#) == [
            "beacons[0].uuid: an Eddystone beacon (namespace, instance) has no uuid",
            #"beacons[0].namespace: "0011" is not an Eddystone namespace (20 hex digits)"#,
        ])
        #expect(Self.errors(#"{"beacons": [{"namespace": "00112233445566778899"}]}"#) == ["beacons[0].instance: is required"])
    }

    @Test("a store's bridge carries the joins, fleet presence and ad of the Eddystone beacons its registry names")
    func eddystoneAcrossTheBridge() throws {
        let text = BridgePlanTests.chain.replacingOccurrences(of: #""beacons": [ "#, with: """
            "beacons": [ { "namespace": "00112233445566778899", "instance": "aabbccddeeff", "store": 12 },
                         { "namespace": "00112233445566778899", "instance": "000000000002" },
            """)
        let plan = try BridgePlan(config: FleetConfig.parse(text), store: 12)
        let lines = plan.topics.map { "\($0.pattern) \($0.direction.rawValue)" }
        #expect(lines.contains("eddystone/00112233445566778899/aabbccddeeff/observers/+ both"))
        #expect(lines.contains("eddystone/00112233445566778899/aabbccddeeff/presence in"))
        #expect(lines.contains("eddystone/00112233445566778899/aabbccddeeff/ad in"))
        #expect(!lines.contains { $0.contains("000000000002") }, "an Eddystone beacon of no store stays at the centre")
    }
}

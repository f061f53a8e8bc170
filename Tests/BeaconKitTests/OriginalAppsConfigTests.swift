import BeaconKit
import Config
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

    @Test("a template is complete only when every variable it uses has a non-empty value")
    func completeness() {
        let template = "Hello {customer}! A {favorite} is on its way."
        #expect(Template.isComplete(template, ["customer": "Ana", "favorite": "flat white"]))
        #expect(!Template.isComplete(template, ["customer": "Ana"]))
        #expect(!Template.isComplete(template, ["customer": "", "favorite": "tea"]))
        #expect(Template.isComplete("no variables", [:]))
    }

    @Test("the original app's hot/cold words map the proximity class; the game's stay the default",
          arguments: [(Proximity.unknown, "Freezing!"), (.far, "Cold!"), (.near, "Warm!"), (.immediate, "Hot!")])
    func originalWords(proximity: Proximity, word: String) {
        let line = RangeLine(id: BeaconID(uuid: BeaconUUID(high: 1, low: 2), major: 7, minor: 1),
                             address: BluetoothAddress(rawValue: 1), rssi: nil, rssiSmoothed: nil, distance: nil,
                             proximity: proximity, warmth: .cold, gone: false, quietFor: 0)
        #expect(HotColdWords.original.word(for: line) == word)
        #expect(line.text(words: .original).hasSuffix("  \(proximity.rawValue)  \(word)"))
        #expect(line.plainText.hasSuffix("  \(proximity.rawValue)  Cold"), "the game's words by default")
    }
}

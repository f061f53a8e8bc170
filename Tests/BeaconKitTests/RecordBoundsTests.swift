import BeaconKit
import Config
import Foundation
import Testing

/// Issue 20 item 3: a config whose rule names or ads would make one of the brain's records
/// larger than the brain reads back (`FleetConfig.maxRecordBytes`) is refused with the
/// reason, so the brain never rejects its own record after a restart.
@Suite("Fleet config: records within what the brain reads back")
struct RecordBoundsTests {
    static func config(rules: [String], ad: String = #"{"title":"Deal"}"#) -> String {
        """
        {"broker": {"url": "mqtt://127.0.0.1:1883"}, "gateways": [{"id": "door"}],
         "stores": [{"major": 100, "name": "Main Street", "ad": \(ad)}],
         "rules": [\(rules.joined(separator: ","))]}
        """
    }

    /// `count` enter rules, each named with `length` characters, each fired once per visit.
    static func rules(_ count: Int, length: Int = FleetConfig.maxNameLength) -> [String] {
        (0..<count).map { i in
            let prefix = "rule \(i) "
            let name = prefix + String(repeating: "x", count: max(0, length - prefix.count))
            return #"{"name": "\#(name)", "when": "enter", "once": true, "then": [{"do": "publish", "topic": "log/\#(i)", "text": "{minor}"}]}"#
        }
    }

    static func errors(_ text: String) -> [String] { FleetConfigTests.errors(text) }

    @Test func aSeventyThousandCharacterRuleNameIsRefused() {
        let errors = Self.errors(Self.config(rules: Self.rules(1, length: 70_000)))
        #expect(errors == ["rules[0].name: is 70000 characters long; at most 200"], "\(errors)")
    }

    /// The largest number of 200-character rules whose names fit a visit's record passes;
    /// one more is refused, naming the budget.
    @Test func theRulesOfOneScopeMustFitOneRecord() throws {
        let each = 2 * 202 + 29
        let most = (FleetConfig.maxRecordBytes - 1024) / each
        #expect(Self.errors(Self.config(rules: Self.rules(most))).isEmpty)
        let errors = Self.errors(Self.config(rules: Self.rules(most + 1)))
        #expect(errors.count == 1 && errors[0].hasPrefix("rules: the names of the \(most + 1) visit rules take"), "\(errors)")
        #expect(errors.first?.contains("the brain reads back at most 65536") == true)
        // Join rules live in another record: as many again fit there.
        let joinRules = Self.rules(most).map { $0.replacingOccurrences(of: #""when": "enter""#, with: #""when": "join""#) }
        #expect(Self.errors(Self.config(rules: Self.rules(most) + joinRules.map { $0.replacingOccurrences(of: "rule ", with: "join ") }))
            .isEmpty)
    }

    @Test func anAdLargerThanTheBrainReadsBackIsRefused() {
        let ad = #"{"title":""# + String(repeating: "a", count: 70_000) + #""}"#
        let errors = Self.errors(Self.config(rules: [], ad: ad))
        #expect(errors.count == 1 && errors[0].hasPrefix("stores[0].ad: is 70012 bytes as JSON"), "\(errors)")
        #expect(Self.errors(Self.config(rules: [], ad: #"{"title":""# + String(repeating: "a", count: 60_000) + #""}"#)).isEmpty)
    }

    @Test func aStoreNameIsBounded() {
        let text = Self.config(rules: []).replacingOccurrences(of: "Main Street", with: String(repeating: "M", count: 5000))
        #expect(Self.errors(text) == ["stores[0].name: is 5000 characters long; at most 200"])
    }
}

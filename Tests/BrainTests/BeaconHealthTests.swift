import BeaconKit
import Contract
import BrainCore
import Config
import Foundation
import Testing

/// The brain's beacon health (issue 18 item 5): a last-seen per registry beacon, kept across
/// restarts on `brain/beacons/<beacon>`; `battery-low` and `beacon-missing` on `brain/events`.
@Suite("beacon health: last seen, battery, low-battery and missing-beacon events")
struct BeaconHealthTests {
    static let tag = BeaconRef(EddystoneKey(namespace: EddystoneNamespace(hex: "00112233445566778899")!,
                                            instance: EddystoneInstance(hex: "aabbccddeeff")!))
    static let base = "eddystone/00112233445566778899/aabbccddeeff"

    /// The brain tests' fleet with the till's Eddystone tag in the registry and the given
    /// `brain` thresholds.
    static func config(_ brain: String = "") throws -> FleetConfig {
        var text = testConfigText().replacingOccurrences(of: #""beacons": ["#, with: """
            "beacons": [ { "namespace": "00112233445566778899", "instance": "aabbccddeeff", "name": "till tag", "store": 100 },
            """)
        if !brain.isEmpty { text = text.replacingOccurrences(of: #""joins": "open""#, with: #""joins": "open", "# + brain) }
        return try FleetConfig.parse(text)
    }

    /// A gateway's telemetry as `Payloads.telemetry` writes it.
    static func telemetry(_ millivolts: Int?) -> String {
        #"{"gateway":"till","batteryMv":\#(millivolts.map(String.init) ?? "null"),"temperatureC":21.5,"advertCount":1200,"uptimeSeconds":3600.0,"ts":"2026-11-21T09:00:00.000Z"}"#
    }

    /// The `battery-low` events so far.
    static func lows(_ h: Harness) -> [(beacon: BeaconRef, name: String?, millivolts: Int, threshold: Int)] {
        h.events.compactMap {
            if case .batteryLow(let beacon, let name, let millivolts, let threshold, _) = $0 { (beacon, name, millivolts, threshold) } else { nil }
        }
    }

    /// The `beacon-missing` events of `beacon` so far.
    static func missing(_ h: Harness, _ beacon: BeaconRef) -> [(name: String?, lastSeen: CaptureTime?)] {
        h.events.compactMap {
            if case .beaconMissing(beacon, let name, let lastSeen, _, _) = $0 { (name, lastSeen) } else { nil }
        }
    }

    @Test("the defaults: 2500 mV and 24 h; both are checked by config check, with their path")
    func thresholds() throws {
        let config = try Self.config()
        #expect(config.brain.lowBattery == 2500 && config.brain.missingAfter == 86_400)
        #expect(try Self.config(#""lowBattery": 2700, "missingAfter": 3600"#).brain.lowBattery == 2700)
        #expect(throws: ConfigErrors.self) { try Self.config(#""lowBattery": 90"#) }
        do {
            _ = try Self.config(#""missingAfter": 5"#)
        } catch let error as ConfigErrors {
            #expect("\(error)".contains("brain.missingAfter"), "\(error)")
        }
    }

    @Test("a battery under the threshold is reported once, again only after it read 100 mV above; unknown is null, not 0")
    func lowBattery() throws {
        var h = Harness(config: try Self.config(#""lowBattery": 2600"#))
        #expect(h.core.subscriptions.contains(Self.base + "/telemetry") || h.core.subscriptions.contains("eddystone/+/+/telemetry"))
        h.publish(Self.base + "/telemetry", Self.telemetry(nil), retain: true, at: t(1))
        var record = try #require(h.retainedJSON("brain/beacons/eddystone/00112233445566778899/aabbccddeeff"))
        #expect(record["battery"] == .null && record["name"] == .string("till tag"))
        h.publish(Self.base + "/telemetry", Self.telemetry(2950), retain: true, at: t(2))
        h.publish(Self.base + "/telemetry", Self.telemetry(2550), retain: true, at: t(3))
        h.publish(Self.base + "/telemetry", Self.telemetry(2500), retain: true, at: t(4))
        var low = Self.lows(h)
        #expect(low.count == 1, "once: \(low)")
        #expect(low.first?.millivolts == 2550 && low.first?.threshold == 2600 && low.first?.name == "till tag")
        record = try #require(h.retainedJSON("brain/beacons/eddystone/00112233445566778899/aabbccddeeff"))
        #expect(record["battery"] == .number(2500) && record["batteryLow"] == .bool(true))
        // A new battery: above threshold + 100 re-arms; the next low is reported again.
        h.publish(Self.base + "/telemetry", Self.telemetry(2650), retain: true, at: t(5))
        h.publish(Self.base + "/telemetry", Self.telemetry(3000), retain: true, at: t(6))
        h.publish(Self.base + "/telemetry", Self.telemetry(2400), retain: true, at: t(7))
        low = Self.lows(h)
        #expect(low.count == 2 && low.last?.millivolts == 2400)
    }

    @Test("last seen is kept per registry beacon across a restart; a beacon unseen for missingAfter is reported once")
    func lastSeenAndMissing() throws {
        var h = Harness(config: try Self.config(#""missingAfter": 600"#))
        let topic = "brain/beacons/100/1"
        h.announce(counter, by: "door", rssi: -70, at: t(1))
        h.see(counter, by: "door", rssi: -70, at: t(2))
        h.advance(to: t(20))
        var record = try #require(h.retainedJSON(topic))
        #expect(record["present"] == .bool(true))
        // It leaves; last seen is when it left.
        h.withdraw(counter, by: "door", at: t(30))
        h.quiet("door", from: t(2), until: t(60))
        h.advance(to: t(100))
        record = try #require(h.retainedJSON(topic))
        #expect(record["present"] == .bool(false))
        let left = try #require(record["lastSeen"]?.stringValue.flatMap { CaptureTime(iso8601: $0) })
        #expect(left > t(1) && left <= t(100), "\(record)")

        // A restarted brain keeps it, and reports the beacon missing once, 600 s after it was last seen.
        var again = h.restarted(at: t(200))
        again.advance(to: t(210))
        #expect(again.retainedJSON(topic)?["lastSeen"] == record["lastSeen"], "last seen survives the restart")
        #expect(Self.missing(again, counter).isEmpty)
        again.advance(to: left + 600)
        again.advance(to: left + 700)
        let missing = Self.missing(again, counter)
        #expect(missing.count == 1, "\(missing)")
        #expect(missing.first?.lastSeen == left && missing.first?.name == "counter")
        #expect(again.retainedJSON(topic)?["missing"] == .bool(true))
        // The window beacon was never seen: missing 600 s after this brain began watching (t 200), lastSeen null.
        again.advance(to: t(805))
        let never = Self.missing(again, window)
        #expect(never.count == 1 && never.first?.lastSeen == nil, "\(never)")
        // Seen again: no longer missing, and re-armed.
        again.announce(counter, by: "door", rssi: -70, at: left + 800)
        again.see(counter, by: "door", rssi: -70, at: left + 801)
        again.advance(to: left + 815)
        #expect(again.retainedJSON(topic)?["missing"] == .bool(false))
    }
}

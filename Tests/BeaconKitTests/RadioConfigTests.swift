import BeaconKit
import Config
import Testing

/// The radio settings of the fleet config: the scan watchdog and the advertise object,
/// which the `{"advertise":{…}}` command parses the same way.
@Suite("fleet config: scan watchdog and advertise settings")
struct RadioConfigTests {
    @Test("scan.stallTimeout: default 60 s, 0 turns the watchdog off, negative is an error")
    func stallTimeout() throws {
        let base = #"{"broker": {"url": "mqtt://127.0.0.1"}, "gateways": [{"id": "g", "source": "hci:0"%@}]}"#
        func parse(_ extra: String) throws(ConfigErrors) -> FleetConfig {
            try FleetConfig.parse(base.replacingOccurrences(of: "%@", with: extra))
        }
        #expect(try parse("").gateways[0].scan.stallTimeout == 60)
        #expect(try parse(#", "scan": {"stallTimeout": 0}"#).gateways[0].scan.stallTimeout == 0)
        #expect(try parse(#", "scan": {"stallTimeout": 2.5}"#).gateways[0].scan.stallTimeout == 2.5)
        #expect(throws: ConfigErrors.self) { try parse(#", "scan": {"stallTimeout": -1}"#) }
    }

    @Test("AdvertiseConfig.parse: defaults, and every problem with its path")
    func advertise() throws {
        let ok = try AdvertiseConfig.parse(try JSONParser().parse(#"{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 2}"#))
        #expect(ok.beacon.txPower == -59)
        #expect(ok.intervalMs == 100)
        let bad = try JSONParser().parse(#"{"uuid": "nope", "major": 70000, "power": 99, "colour": 1}"#)
        do {
            _ = try AdvertiseConfig.parse(bad)
            Issue.record("accepted a bad advertise object")
        } catch {
            let text = error.errors.map(\.description)
            #expect(text.contains { $0.hasPrefix("advertise.uuid: \"nope\" is not a UUID") }, "\(text)")
            #expect(text.contains { $0.hasPrefix("advertise.major") }, "\(text)")
            #expect(text.contains { $0.hasPrefix("advertise.minor") }, "\(text)")
            #expect(text.contains { $0.hasPrefix("advertise.power") }, "\(text)")
            #expect(text.contains { $0.hasPrefix("advertise.colour") || $0.contains("colour") }, "\(text)")
        }
    }
}

private extension String {
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}

import BeaconKit
import Config
import Testing

@Suite("Fleet config: calibration")
struct CalibrationConfigTests {
    static func config(_ brain: String = "{}", gateway: String = "", defaults: String = "{}", beacons: String = "[]") -> String {
        """
        {"defaults": \(defaults),
         "gateways": [{"id": "door", "store": 100, "position": {"x": 1, "y": 2},
                       "advertise": {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 100, "minor": 60000}\(gateway)},
                      {"id": "till", "store": 100, "position": {"x": 9, "y": 2}}],
         "stores": [{"major": 100}], "beacons": \(beacons), "brain": \(brain)}
        """
    }

    @Test("on by default with sane limits; every limit can be set")
    func defaultsAndValues() throws {
        let plain = try FleetConfig.parse(Self.config())
        #expect(plain.brain.calibration == CalibrationSettings())
        #expect(plain.brain.calibration.enabled && plain.brain.calibration.minSamples == 60)
        let set = try FleetConfig.parse(Self.config(#"""
        {"calibration": {"enabled": false, "minSamples": 200, "minSeconds": 300, "interval": 60, "maxOffset": 10,
                         "minExponent": 2, "maxExponent": 3.5, "minChange": 1}}
        """#))
        #expect(set.brain.calibration == CalibrationSettings(enabled: false, minSamples: 200, minSeconds: 300, interval: 60,
                                                             maxOffset: 10, minExponent: 2, maxExponent: 3.5, minChange: 1))
    }

    @Test("bad limits, unknown keys and a reference beacon without its power: errors with their paths")
    func errors() {
        let errors = FleetConfigTests.errors(Self.config(#"""
        {"calibration": {"enabled": "yes", "minSamples": 2, "maxOffset": 60, "minExponent": 3.5, "maxExponent": 2.5,
                         "window": 10}}
        """#, beacons: #"""
        [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 100, "minor": 7, "position": {"x": 3, "y": 3}},
         {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "position": {"x": 3}, "measuredPower": -60}]
        """#))
        for expected in ["brain.calibration.enabled", "brain.calibration.minSamples", "brain.calibration.maxOffset",
                         "brain.calibration.minExponent: 3.5 is above maxExponent 2.5", "brain.calibration.window: unknown key",
                         "beacons[0].measuredPower: is required for a reference beacon",
                         "beacons[1].position: needs uuid, major and minor"] {
            #expect(errors.contains { $0.hasPrefix(expected) }, "missing \(expected) in \(errors)")
        }
    }

    @Test("an rssiOffset set on the gateway or in defaults pins it; a reference beacon keeps its position")
    func pinnedAndReference() throws {
        let own = try FleetConfig.parse(Self.config(gateway: #", "rssiOffset": -4"#))
        #expect(own.gateway(id: "door")?.rssiOffsetIsExplicit == true && own.gateway(id: "till")?.rssiOffsetIsExplicit == false)
        let shared = try FleetConfig.parse(Self.config(defaults: #"{"rssiOffset": 0}"#))
        #expect(shared.gateways.filter(\.rssiOffsetIsExplicit).count == 2, "an explicit 0 is the operator's too")
        let reference = try FleetConfig.parse(Self.config(beacons: #"""
        [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 100, "minor": 7, "measuredPower": -62,
          "position": {"x": 5, "y": 5}}]
        """#))
        #expect(reference.beacons.first?.position == FloorPosition(x: 5, y: 5))
    }

    @Test("config check says what calibrates what, and which advertising gateway it cannot use")
    func notes() throws {
        let config = try FleetConfig.parse(#"""
        {"gateways": [{"id": "door", "store": 100, "position": {"x": 1, "y": 2}, "rssiOffset": 2,
                       "advertise": {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 100, "minor": 60000}},
                      {"id": "till", "store": 100, "position": {"x": 9, "y": 2}},
                      {"id": "porch", "store": 100,
                       "advertise": {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 100, "minor": 60001}}],
         "stores": [{"major": 100}],
         "beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 100, "minor": 9, "measuredPower": -60,
                      "position": {"x": 5, "y": 5}}]}
        """#)
        #expect(config.calibrationNotes == [
            "store 100: calibration from 2 reference transmitters (gateway door, beacon 100/9) of 2 placed gateways; "
                + "pinned by their rssiOffset: door",
            "note: gateway porch advertises but has no position: calibration cannot use its beacon",
        ])
        #expect(try FleetConfig.parse(Self.config()).calibrationNotes.count == 1)
        #expect(try FleetConfig.parse(#"{"gateways": [{"id": "door"}]}"#).calibrationNotes.isEmpty)
    }
}

import BeaconKit
import Contract
import Tracking
import Config
import BrainCore
import Foundation

/// Seconds after a fixed test epoch (2026-11-21T09:00:00Z).
func t(_ seconds: Double) -> CaptureTime { CaptureTime(seconds: 1_795_251_600 + seconds) }
/// `t(seconds)` on a service's own clock (health, replies).
func w(_ seconds: Double) -> WallTime { WallTime(seconds: 1_795_251_600 + seconds) }

let storeUUID = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
let counter = BeaconRef(major: 100, minor: 1)
let window = BeaconRef(major: 100, minor: 2)
let otherStore = BeaconRef(major: 200, minor: 7)

func presenceReport(_ ref: BeaconRef, _ gateway: String, rssi: Double?, _ proximity: Proximity = .near,
                    zone: String? = nil) -> GatewayPresenceReport {
    GatewayPresenceReport(beacon: ref, uuid: storeUUID, gateway: gateway, zone: zone ?? gateway.capitalized,
                          proximity: proximity, rssiSmoothed: rssi, distance: 1.5, since: t(0))
}

/// One window of a gateway's RSSI report (`gateways/<id>/rssi`): each beacon heard `n`
/// times at `rssi` (its mean), in the middle of the window from `from` to `to`; `resent`: sent
/// again (`"resent":true`).
func rssiReport(_ gateway: String, from: Double, to: Double, _ heard: [(BeaconRef, Double?)],
                _ proximity: Proximity = .near, n: Int = 2, resent: Bool = false) -> RSSIReport {
    rssiReport(gateway, from: t(from), to: t(to), heard, proximity, n: n, resent: resent)
}

func rssiReport(_ gateway: String, from: CaptureTime, to: CaptureTime, _ heard: [(BeaconRef, Double?)],
                _ proximity: Proximity = .near, n: Int = 2, resent: Bool = false) -> RSSIReport {
    var report = RSSIReport(gateway: gateway, from: from, to: to, entries: heard.map { ref, rssi in
        RSSIReport.Entry(beacon: ref, uuid: ref.eddystone == nil ? storeUUID : nil, count: n, rssi: rssi,
                         at: to.seconds(since: from) / 2, rssiSmoothed: rssi, distance: 1.2, proximity: proximity)
    })
    report.resent = resent
    return report
}

/// A gateway's sighting payload as `Payloads.sighting` writes it.
func sightingJSON(_ ref: BeaconRef, _ gateway: String, rssi: Double?, _ proximity: Proximity = .near,
                  distance: Double? = 1.2, seq: Int = 1) -> String {
    var writer = JSONWriter()
    writer.object { o in
        o("uuid", storeUUID.description)
        o("major", Int(ref.major))
        o("minor", Int(ref.minor))
        o("gateway", gateway)
        o("address", "AA:BB:CC:DD:EE:FF")
        o("rssi", rssi.map { Int($0) })
        o("rssiSmoothed", rssi, places: 1)
        o("txPower", -59)
        o("distance", distance, places: 2)
        o("proximity", proximity.rawValue)
        o("ts", t(0))
        o("seq", seq)
    }
    return writer.text
}

/// A gateway's presence payload as `Payloads.gatewayPresence` writes it.
func presenceJSON(_ ref: BeaconRef, _ gateway: String, rssi: Double?, _ proximity: Proximity = .near,
                  zone: String? = nil, since: CaptureTime = t(0)) -> String {
    var writer = JSONWriter()
    writer.object { o in
        o("uuid", storeUUID.description)
        o("major", Int(ref.major))
        o("minor", Int(ref.minor))
        o("gateway", gateway)
        o("zone", zone ?? gateway.capitalized)
        o("proximity", proximity.rawValue)
        o("rssiSmoothed", rssi, places: 1)
        o("distance", 1.5, places: 2)
        o("since", since)
    }
    return writer.text
}

/// A tiny JPEG-looking photo of `count` bytes (the brain checks the magic and the size).
func photo(_ count: Int) -> [UInt8] {
    [0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 0x42, count: max(0, count - 4))
}

func joinJSON(name: String? = "Ada", favorite: String? = "flat white", photo bytes: [UInt8]? = nil) -> String {
    JoinRequest(profile: ObserverProfile(name: name, favorite: favorite, photo: bytes)).json
}

/// The fleet the brain tests use, as an operator would write it: store 100 with a deal of
/// the day, two registry beacons (the counter with a location and its own ad), store 200
/// without an ad. `rules` is the JSON array of rules. Any app may join any beacon
/// (`joins: open`) unless `joins` says otherwise: who may join is tested on its own.
func testConfigText(rules: String = "[]", joins: String = "open", zoneMargin: Double = 0, zoneUpdates: Int = 1, prefix: String = "",
                    broker: String = "mqtt://127.0.0.1:1883", counterAd: String = #"{"title":"Espresso","price":1.5}"#) -> String {
    """
    {
      "broker": { "url": "\(broker)" },
      "topicPrefix": "\(prefix)",
      "gateways": [ { "id": "door", "zone": "Entrance" }, { "id": "till", "zone": "Counter" } ],
      "stores": [ { "major": 100, "name": "Main Street", "ad": { "title": "Deal of the day" } } ],
      "beacons": [
        { "uuid": "\(storeUUID)", "major": 100, "minor": 1, "name": "counter",
          "latitude": 52.520008, "longitude": 13.404954, "heading": 90, "floor": 0, "ad": \(counterAd) },
        { "uuid": "\(storeUUID)", "major": 100, "minor": 2, "name": "window" }
      ],
      "rules": \(rules),
      "brain": { "zoneMargin": \(zoneMargin), "zoneUpdates": \(zoneUpdates), "exitMinimum": 10, "joins": "\(joins)" }
    }
    """
}

func testConfig(rules: String = "[]", zoneMargin: Double = 0, zoneUpdates: Int = 1, prefix: String = "") -> FleetConfig {
    do {
        return try FleetConfig.parse(testConfigText(rules: rules, zoneMargin: zoneMargin, zoneUpdates: zoneUpdates,
                                                    prefix: prefix))
    } catch {
        fatalError("test config: \(error)")
    }
}

extension JSONValue {
    init(text: String) { self = try! JSONParser().parse(text) }
}

extension MQTTMessage {
    var json: JSONValue? { payload.isEmpty ? nil : try? JSONParser().parse(payload) }
}

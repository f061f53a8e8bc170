import BeaconKit
import Contract
import BrainCore
import Config
import GatewayCore
import Tracking
import WebDisplay

/// Seconds after a fixed test epoch (2026-11-21T09:00:00Z).
func t(_ seconds: Double) -> CaptureTime { CaptureTime(seconds: 1_795_251_600 + seconds) }
/// `t(seconds)` on a service's own clock (health, replies).
func w(_ seconds: Double) -> WallTime { WallTime(seconds: 1_795_251_600 + seconds) }

let storeUUID = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!

/// Main Street (store 100): a door and a counter gateway placed on a 20 × 10 m floor, a
/// window gateway placed nowhere, a registry beacon, Home Assistant discovery as given.
func fleetConfig(discovery: Bool = true) throws -> FleetConfig {
    try FleetConfig.parse("""
    {
      "broker": {"url": "mqtt://127.0.0.1:1883"},
      "gateways": [
        {"id": "door", "zone": "Entrance", "store": 100, "position": {"x": 2, "y": 5}, "pathLossExponent": 2.5},
        {"id": "counter", "zone": "Counter", "store": 100, "position": {"x": 16, "y": 3}},
        {"id": "window", "zone": "Window", "store": 100}
      ],
      "stores": [{"major": 100, "name": "Main Street", "floorPlan": {"width": 20, "height": 10}}],
      "beacons": [{"uuid": "\(storeUUID)", "major": 100, "minor": 9, "name": "trolley"}],
      "homeAssistant": {"discovery": \(discovery)}
    }
    """)
}

/// The brain's fleet presence of a beacon held by `zone`.
func fleetPresence(_ major: UInt16, _ minor: UInt16, zone: String, zoneName: String) -> [UInt8] {
    Array(FleetPresenceReport(beacon: BeaconRef(major: major, minor: minor), uuid: storeUUID, zone: zone, zoneName: zoneName,
                              gateways: [.init(gateway: zone, zone: zoneName, proximity: .near, rssiSmoothed: -60, distance: 1.2)],
                              proximity: .near, since: t(0)).json.utf8)
}

/// A roster summary as the brain writes it.
func roster(_ store: UInt16, _ customers: [Roster.Customer]) -> [UInt8] {
    Array(Roster(store: store, name: "Main Street", customers: customers).json(at: t(0)).utf8)
}

func customer(_ client: String, _ name: String, minor: UInt16, since: Double, photo: Bool = false) -> Roster.Customer {
    Roster.Customer(client: client, name: name, favorite: name == "Ana" ? "flat white" : "chai",
                    photo: photo ? "beacons/100/\(minor)/observers/\(client)" : nil,
                    beacon: BeaconRef(major: 100, minor: minor), since: t(since))
}

/// The smallest JPEG-looking bytes a join accepts.
let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46, 0x49, 0x46, 0x00, 0x01]

func join(name: String, photo: [UInt8]?) -> [UInt8] {
    Array(JoinRequest(profile: ObserverProfile(name: name, favorite: "flat white", photo: photo)).json.utf8)
}

extension FleetState {
    @discardableResult
    mutating func receive(_ topic: String, _ text: String, at time: Double = 0) -> Change {
        receive(topic: topic, payload: Array(text.utf8), at: w(time))
    }

    @discardableResult
    mutating func receive(_ topic: String, bytes: [UInt8], at time: Double = 0) -> Change {
        receive(topic: topic, payload: bytes, at: w(time))
    }

    func parsed(_ page: Page, at time: Double = 0) -> JSONValue {
        try! JSONParser().parse(json(for: page, at: w(time)))
    }
}

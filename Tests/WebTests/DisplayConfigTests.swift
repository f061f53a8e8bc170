import BeaconKit
import BrainCore
import Config
import GatewayCore
import Testing

@Suite("fleet config: floor plans, gateway positions, Home Assistant")
struct DisplayConfigTests {
    @Test("positions, floor plans and discovery are read; all are optional")
    func parsed() throws {
        let config = try fleetConfig()
        #expect(config.gateway(id: "door")?.position == FloorPosition(x: 2, y: 5))
        #expect(config.gateway(id: "door")?.store == 100)
        #expect(config.gateway(id: "window")?.position == nil)
        #expect(config.storeEntry(100)?.floorPlan == FloorPlan(width: 20, height: 10))
        #expect(config.homeAssistant == HomeAssistantConfig(discovery: true, discoveryPrefix: "homeassistant"))
        let bare = try FleetConfig.parse(#"{"gateways": [{"id": "a"}]}"#)
        #expect(bare.homeAssistant.discovery == false && bare.gateways[0].position == nil)
    }

    @Test("mistakes are reported with their path", arguments: [
        (#"{"gateways": [{"id": "a", "position": {"x": 1, "y": 2}}]}"#,
         "gateways[0].position: needs the gateway's store (\"store\": major) to place it on a floor"),
        (#"{"gateways": [{"id": "a", "store": 1, "position": {"x": 30, "y": 2}}], "stores": [{"major": 1, "floorPlan": {"width": 20, "height": 10}}]}"#,
         "gateways[0].position: (30, 2) lies outside store 1's floor plan (20 × 10 m)"),
        (#"{"gateways": [{"id": "a", "store": 1, "position": {"x": 1}}]}"#, "gateways[0].position.y: is required"),
        (#"{"stores": [{"major": 1, "floorPlan": {"width": 0, "height": 10}}]}"#,
         "stores[0].floorPlan.width: 0 is out of range 1…10000 m"),
        (#"{"homeAssistant": {"discovery": "yes"}}"#, "homeAssistant.discovery: expected true or false, found a string"),
        (#"{"homeAssistant": {"discoveryPrefix": "ha/#"}}"#,
         "homeAssistant.discoveryPrefix: \"ha/#\" contains an MQTT wildcard (+ or #)"),
        (#"{"homeAssistant": {"discovry": true}}"#, "homeAssistant.discovry: unknown key (did you mean \"discovery\"?)"),
    ])
    func errors(text: String, message: String) {
        #expect(throws: ConfigErrors([ConfigError(path: String(message.prefix { $0 != ":" }),
                                                  reason: String(message.drop { $0 != ":" }.dropFirst(2)))])) {
            try FleetConfig.parse(text)
        }
    }
}

import BeaconKit
import Contract

/// What the fleet config says about how the fleet is shown: where gateways stand on a
/// store's floor (for `beacon-web`'s floor page) and whether Home Assistant discovery is
/// published. All optional; a config without them shows gateways in a row.

/// A point on a store's floor plan, in metres from its top-left corner.
public struct FloorPosition: Sendable, Equatable {
    public var x: Double
    public var y: Double

    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }
}

/// A store's floor as a rectangle in metres; gateway positions lie inside it.
public struct FloorPlan: Sendable, Equatable {
    public var width: Double
    public var height: Double

    public init(width: Double, height: Double) {
        self.width = width
        self.height = height
    }
}

/// Home Assistant MQTT discovery (`beacon-web` publishes it; docs/web.md).
public struct HomeAssistantConfig: Sendable, Equatable {
    /// Off: every discovery config published before is removed (empty retained payloads).
    public var discovery: Bool
    /// Home Assistant's `discovery_prefix` (its default: `homeassistant`).
    public var discoveryPrefix: String

    public init(discovery: Bool = false, discoveryPrefix: String = "homeassistant") {
        self.discovery = discovery
        self.discoveryPrefix = discoveryPrefix
    }
}

extension FleetConfig {
    /// The gateways placed in a store: those whose `store` is `major`.
    public func gateways(inStore major: UInt16) -> [GatewayConfig] {
        gateways.filter { $0.store == major }
    }

    public func storeEntry(_ major: UInt16) -> StoreEntry? { stores.first { $0.major == major } }

    static let homeAssistantKeys = ["discovery", "discoveryPrefix"]

    static func parseHomeAssistant(_ value: JSONValue?, _ r: inout ConfigReader) -> HomeAssistantConfig {
        var config = HomeAssistantConfig()
        guard let o = r.object(value, at: "homeAssistant", keys: homeAssistantKeys) else { return config }
        if let v = r.bool(o["discovery"], at: "homeAssistant.discovery") { config.discovery = v }
        if let text = r.string(o["discoveryPrefix"], at: "homeAssistant.discoveryPrefix") {
            if let problem = Topics.problem(withSegment: text, allowSlash: true) {
                r.fail("homeAssistant.discoveryPrefix", "\"\(text)\" \(problem)")
            } else {
                config.discoveryPrefix = text
            }
        }
        return config
    }

    static func parsePosition(_ value: JSONValue?, at path: String, _ r: inout ConfigReader) -> FloorPosition? {
        guard let o = r.object(value, at: path, keys: ["x", "y"]) else { return nil }
        let x = r.required(o, "x", at: path).flatMap { r.number($0, at: path + ".x", in: 0...10_000, unit: " m") }
        let y = r.required(o, "y", at: path).flatMap { r.number($0, at: path + ".y", in: 0...10_000, unit: " m") }
        guard let x, let y else { return nil }
        return FloorPosition(x: x, y: y)
    }

    static func parseFloorPlan(_ value: JSONValue?, at path: String, _ r: inout ConfigReader) -> FloorPlan? {
        guard let o = r.object(value, at: path, keys: ["width", "height"]) else { return nil }
        let w = r.required(o, "width", at: path).flatMap { r.number($0, at: path + ".width", in: 1...10_000, unit: " m") }
        let h = r.required(o, "height", at: path).flatMap { r.number($0, at: path + ".height", in: 1...10_000, unit: " m") }
        guard let w, let h else { return nil }
        return FloorPlan(width: w, height: h)
    }

    /// Gateways placed outside their store's floor plan, or placed without a store.
    static func checkPlacement(_ gateways: [GatewayConfig], stores: [StoreEntry], _ r: inout ConfigReader) {
        for (i, gateway) in gateways.enumerated() {
            guard let position = gateway.position else { continue }
            guard let store = gateway.store else {
                r.fail("gateways[\(i)].position", "needs the gateway's store (\"store\": major) to place it on a floor")
                continue
            }
            guard let plan = stores.first(where: { $0.major == store })?.floorPlan else { continue }
            if position.x > plan.width || position.y > plan.height {
                r.fail("gateways[\(i)].position",
                       "(\(format(position.x)), \(format(position.y))) lies outside store \(store)'s floor plan "
                           + "(\(format(plan.width)) × \(format(plan.height)) m)")
            }
        }
    }
}

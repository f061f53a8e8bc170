import BeaconKit
import CommandLineSupport
import Config
import GatewayCore
import Simulation
import Wire

/// What the gateways of simulated stores publish, decided ahead of time: each store is a
/// `StoreSimulation` (customers walking past its gateways), each gateway's capture goes
/// through a real `GatewayEngine`, and what the engine decides to publish is kept with the
/// simulated instant it decided it at. Replaying the merged timeline through one MQTT
/// connection per store puts on the store brokers exactly what the stores' gateways would,
/// without a process (and a tracker's CPU) per gateway during the measurement.
struct FleetReplay {
    struct Entry {
        /// Seconds after the simulation's start.
        var time: Double
        /// Index into the stores of the replay.
        var store: Int
        var message: MQTTMessage
    }

    static let gatewayNames = ["door", "aisle", "shelf", "till"]

    let majors: [UInt16]
    /// The simulated instant the replay's time 0 stands for (every store's start).
    let origin = StoreSimulation.defaultStart
    /// Every store's messages, ordered by time (a store's own in the order decided).
    let entries: [Entry]

    /// Gateway `k` of a store of `gateways` stands `k × 12 / (gateways − 1)` m along the walkway.
    static func gateways(of major: UInt16, count: Int) -> [StoreSimulation.Gateway] {
        (0..<count).map { k in
            let name = k < gatewayNames.count ? gatewayNames[k] : "gw\(k)"
            return StoreSimulation.Gateway(id: "\(name)-\(major)", position: count > 1 ? 12 * Double(k) / Double(count - 1) : 0)
        }
    }

    /// `config` must list each store's gateways as `gateways(of:count:)` names them.
    init(config: FleetConfig, majors: [UInt16], gateways: Int, customers: Int, duration: Double) throws {
        self.majors = majors
        var all: [Entry] = []
        for (index, major) in majors.enumerated() {
            let simulation = StoreSimulation(store: major, customers: customers, duration: duration, rate: 2,
                                             gateways: Self.gateways(of: major, count: gateways), seed: UInt64(major),
                                             start: origin)
            for (id, capture) in simulation.captures() {
                guard let gateway = config.gateways.first(where: { $0.id == id }) else {
                    throw CommandFailure("the fleet config has no gateway \(id)", status: .failure)
                }
                for (time, message) in try GatewayEngine.decisions(config: config, gateway: gateway, capture: capture.bytes,
                                                                   start: simulation.start, duration: duration) {
                    all.append(Entry(time: time, store: index, message: message))
                }
            }
        }
        // A stable sort keeps each gateway's messages in the order its engine decided them.
        entries = all.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
    }

    /// The fleet config of `majors` stores, each with a broker of its own (`ports`, same
    /// order) bridged to `central`, and `gateways` gateways named as `gateways(of:count:)`;
    /// `centre`: the fleet config's `centre` (a NATS cluster's nodes), if any.
    static func fleetConfig(central: String, centre: JSONValue? = nil, majors: [UInt16], ports: [UInt16],
                            gateways: Int) -> String {
        var stores: [JSONValue] = []
        var gatewayList: [JSONValue] = []
        for (major, port) in zip(majors, ports) {
            stores.append(.object(["major": .number(Double(major)), "name": .string("Store \(major)"),
                                   "broker": .object(["url": .string("mqtt://127.0.0.1:\(port)")])]))
            for gateway in Self.gateways(of: major, count: gateways) {
                gatewayList.append(.object(["id": .string(gateway.id), "store": .number(Double(major)),
                                            "source": .string("hci:0")]))
            }
        }
        var document: JSONObject = [
            "broker": .object(["url": .string(central)]),
            "bridge": .object(["keepalive": .number(10)]),
            "stores": .array(stores),
            "gateways": .array(gatewayList),
        ]
        if let centre { document["centre"] = centre }
        return JSONValue.object(document).jsonText
    }
}

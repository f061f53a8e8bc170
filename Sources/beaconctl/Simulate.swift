import ArgumentParser
import BeaconKit
import Config
import Simulation
import CommandLineSupport
import SystemCalls
import Wire
import LiveClock

struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a synthetic store as btsnoop captures, one per gateway, plus a fleet config.",
        discussion: """
        Customers carrying iBeacons walk in at the door, go to the counter (or browse half way),
        linger and leave; each gateway hears them with log-distance path loss and Gaussian noise,
        alongside a few phones that are not beacons. The same seed gives the same store, byte for
        byte: the captures begin at --start (a fixed morning unless you ask for "now"), and each
        gateway hears at its own phase of the advertising interval, so gateways replaying them in
        step (beacon-gateway --start-at) tell the brain the same story on every run.

        Writes into --out: <gateway>.log for each gateway and fleet.json, a fleet config whose
        gateways replay those captures in a loop, with the customers in the beacon registry. Its
        brain lets any app join any beacon (brain.joins "open", for demos and replays); a real
        store keeps the default "owned-or-near" (docs/security.md).

        Example:
          beaconctl simulate --out /tmp/store --customers 8 --duration 120
          beacon-gateway --config /tmp/store/fleet.json --id door
        """)

    @Option(name: .long, help: ArgumentHelp("Directory to write into (created if missing).", valueName: "DIR"))
    var out: String

    @Option(name: .long, help: "Number of customers (beacons) visiting.")
    var customers = 5

    @Option(name: .long, help: "Simulated seconds.")
    var duration = 120.0

    @Option(name: .long, help: "Advertisements per second per beacon.")
    var rate = 2.0

    @Option(name: .long, help: "The store's major.")
    var store: UInt16 = 100

    @Option(name: .long, help: "Proximity UUID of the customers' beacons.")
    var uuid = StoreSimulation.defaultUUID.description

    @Option(name: .long, help: ArgumentHelp("Gateways as id:metres-from-door, comma separated.", valueName: "LIST"))
    var gateways = "door:0,counter:12"

    @Option(name: .long, help: "Random seed.")
    var seed: UInt64 = 1

    @Option(name: .long, help: ArgumentHelp("When the captures begin: ISO-8601 UTC (2026-11-21T09:00:00Z) or \"now\".",
                                            valueName: "TIME"))
    var start = StoreSimulation.defaultStart.iso8601

    @Option(name: .long, help: ArgumentHelp("Broker for the generated fleet.json.", valueName: "URL"))
    var broker = "mqtt://127.0.0.1:1883"

    func validate() throws {
        guard (1...5000).contains(customers) else { throw ValidationError("--customers must be 1…5000") }
        guard duration > 0, duration <= 86400 else { throw ValidationError("--duration must be 0…86400 seconds") }
        guard rate > 0, rate <= 50 else { throw ValidationError("--rate must be 0…50 per second") }
        guard BeaconUUID(uuid) != nil else { throw ValidationError("--uuid: \"\(uuid)\" is not a UUID") }
        guard (try? BrokerURL(parsing: broker)) != nil else { throw ValidationError("--broker: not an mqtt:// URL") }
        guard startInstant != nil else { throw ValidationError("--start: \"\(start)\" is neither an ISO-8601 UTC time nor \"now\"") }
        guard try !parsedGateways().isEmpty else { throw ValidationError("--gateways: name at least one id:metres") }
    }

    func parsedGateways() throws -> [StoreSimulation.Gateway] {
        try gateways.split(separator: ",").map { item in
            let parts = item.split(separator: ":")
            guard parts.count == 2, let position = Double(parts[1]),
                  Topics.problem(withSegment: String(parts[0])) == nil
            else { throw ValidationError("--gateways: \"\(item)\" is not id:metres") }
            return StoreSimulation.Gateway(id: String(parts[0]), position: position)
        }
    }

    var startInstant: Instant? { start == "now" ? WallClock.now() : Instant(iso8601: start) }

    func run() throws {
        var simulation = StoreSimulation(uuid: BeaconUUID(uuid)!, store: store, customers: customers,
                                         duration: duration, rate: rate, gateways: try parsedGateways(), seed: seed)
        simulation.start = startInstant!
        do {
            try write(simulation)
        } catch {
            throw CommandFailure("cannot write the simulation: \(error)", status: .failure)
        }
        let visits = simulation.visits
        printLine("\(visits.count) customers over \(Int(duration)) s in store \(store); first arrives after "
                  + "\(Int(visits.map(\.arrival).min() ?? 0)) s")
    }

    func write(_ simulation: StoreSimulation) throws(SystemError) {
        try FileSystem.makeDirectories(out)
        for (id, writer) in simulation.captures().sorted(by: { $0.key < $1.key }) {
            let path = out + "/\(id).log"
            try FileSystem.write(path, writer.bytes)
            printLine("wrote \(path) (\(writer.bytes.count) bytes)")
        }
        try FileSystem.write(out + "/fleet.json", Array(fleetConfig(simulation).utf8))
        printLine("wrote \(out)/fleet.json")
    }

    func fleetConfig(_ simulation: StoreSimulation) -> String {
        let gatewayList: [JSONValue] = simulation.gateways.map { gateway in
            .object(["id": .string(gateway.id), "source": .string("btsnoop:\(out)/\(gateway.id).log?loop"),
                     "zone": .string(gateway.id)])
        }
        let beacons: [JSONValue] = simulation.visits.map { visit in
            .object(["uuid": .string(simulation.uuid.description), "major": .number(Double(simulation.store)),
                     "minor": .number(Double(visit.minor)), "name": .string("customer-\(visit.minor)")])
        }
        // Customers walk to the gateway farthest from the door: the counter.
        let counter = simulation.gateways.max { $0.position < $1.position }!
        let document: JSONValue = .object([
            "broker": .object(["url": .string(broker)]),
            "uuids": .array([.string(simulation.uuid.description)]),
            "defaults": .object(["exitTimeout": .number(10), "publishInterval": .number(1)]),
            "gateways": .array(gatewayList),
            "beacons": .array(beacons),
            "stores": .array([.object(["major": .number(Double(simulation.store)), "name": .string("Simulated store"),
                                       "ad": .object(["title": .string("Deal of the day"),
                                                      "text": .string("Two coffees for the price of one")])])]),
            "brain": .object(["joins": .string("open")]),
            "rules": .array([
                .object(["name": .string("welcome"), "when": .string("join"),
                         "fallback": .string("Hello! Your coffee is on its way."),
                         "then": .array([.object(["do": .string("greeting"),
                                                  "text": .string("Hello {customer}! A {favorite} is on its way.")])])]),
                .object(["name": .string("deal at the counter"), "when": .string("proximity:immediate"),
                         "zones": .array([.string(counter.id)]),
                         "then": .array([.object(["do": .string("ad")])]), "once": .bool(true)]),
                .object(["name": .string("tell the barista"), "when": .string("enter"),
                         "then": .array([.object(["do": .string("publish"), "topic": .string("displays/{store}/barista"),
                                                  "text": .string("{name} came in at {zone}")])])]),
            ]),
        ])
        return document.jsonText + "\n"
    }
}

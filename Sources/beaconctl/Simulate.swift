import ArgumentParser
import BeaconKit
import CommandLineSupport
import Config
import Simulation
import SystemCalls
import Wire

struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a simulated store with ground truth: one btsnoop capture per gateway, a fleet config, truth.json.",
        discussion: """
        A store model (docs/presence.md): a floor with a door and gateways (the default is issue 8's
        15 × 10 m shop with four gateways), optional walls; customers carrying iBeacons come in at
        the door, walk between points of interest near the gateways, linger and leave by the door.
        Every gateway hears them through a radio model: log-distance path loss, slow shadowing
        (a Gauss–Markov process per beacon and gateway), fast fading, lost advertisements, a
        sensitivity floor and per-gateway RSSI offsets. A few phones that are not beacons advertise
        too. The same seed gives the same store, byte for byte.

        Writes into --out: <gateway>.log for each gateway; fleet.json, whose gateways replay those
        captures (with their positions); truth.json, where each customer was and in which zone
        (the nearest gateway's), in seconds after "start". `beaconctl score` replays a store
        through the real programs and compares the brain's decisions with truth.json.

        Examples:
          beaconctl simulate --out /tmp/store
          beaconctl simulate --out /tmp/noisy --shadowing 6 --loss 0.4 --seed 7
          beaconctl simulate --out /tmp/skewed --offsets door:+6,window:-6,shelves:+6,counter:-6 --gateways-advertise
          beaconctl simulate --out /tmp/hall --size 30x12 --door 0,6 \\
              --gateways 'a:5,6;b:15,6;c:25,6' --wall 10,0,10,8:6
          beacon-gateway --config /tmp/store/fleet.json --id door
        """)

    @Option(name: .long, help: ArgumentHelp("Directory to write into (created if missing).", valueName: "DIR"))
    var out: String

    @OptionGroup var store: StoreOptions

    @Option(name: .long, help: ArgumentHelp("Broker for the generated fleet.json.", valueName: "URL"))
    var broker = "mqtt://127.0.0.1:1883"

    @Option(name: .long, help: ArgumentHelp("Capture time of second 0: \"now\" or an ISO-8601 instant.", valueName: "TIME"))
    var start = "now"

    @Flag(name: .long, inversion: .prefixedNo, help: "Gateways in fleet.json replay their captures in a loop.")
    var loop = true

    func validate() throws {
        guard (try? BrokerURL(parsing: broker)) != nil else { throw ValidationError("--broker: not an mqtt:// URL") }
        guard start == "now" || Instant(iso8601: start) != nil else {
            throw ValidationError("--start: \"\(start)\" is neither now nor an ISO-8601 instant")
        }
        _ = try store.simulation()
    }

    func run() throws {
        var simulation = try store.simulation()
        simulation.start = start == "now" ? WallClock.now() : Instant(iso8601: start)!
        do {
            try write(simulation, into: out, broker: broker, loop: loop) { printLine($0) }
        } catch {
            throw CommandFailure("cannot write the simulation: \(error)", status: .failure)
        }
        let visits = simulation.visits
        printLine("\(visits.count) customers over \(Int(simulation.crowd.duration)) s in store \(simulation.store); "
                  + "the first comes in after \(Int(visits.map(\.arrival).min() ?? 0)) s")
    }
}

/// Writes a simulation's captures, fleet config and ground truth into `directory`.
func write(_ simulation: StoreSimulation, into directory: String, broker: String, loop: Bool,
           speed: Double? = nil, report: (String) -> Void = { _ in }) throws(SystemError) {
    try FileSystem.makeDirectories(directory)
    for (id, writer) in simulation.captures().sorted(by: { $0.key < $1.key }) {
        let path = directory + "/\(id).log"
        try FileSystem.write(path, writer.bytes)
        report("wrote \(path) (\(writer.bytes.count) bytes)")
    }
    try FileSystem.write(directory + "/fleet.json", Array(fleetConfig(simulation, directory: directory, broker: broker,
                                                                      loop: loop, speed: speed).utf8))
    report("wrote \(directory)/fleet.json")
    try FileSystem.write(directory + "/truth.json", Array((simulation.truth.json + "\n").utf8))
    report("wrote \(directory)/truth.json")
}

/// A fleet config for a simulated store: its gateways replay the captures, with positions
/// and (when they advertise) their reference beacons; the customers are in the registry.
func fleetConfig(_ simulation: StoreSimulation, directory: String, broker: String, loop: Bool, speed: Double? = nil,
                 defaults: [String: JSONValue] = [:]) -> String {
    var query: [String] = []
    if let speed { query.append("speed=\(decimal(speed, places: 3))") }
    if loop { query.append("loop") }
    let suffix = query.isEmpty ? "" : "?" + query.joined(separator: "&")
    let gatewayList: [JSONValue] = simulation.layout.gateways.enumerated().map { index, gateway in
        var object: [String: JSONValue] = [
            "id": .string(gateway.id), "source": .string("btsnoop:\(directory)/\(gateway.id).log\(suffix)"),
            "zone": .string(gateway.id.prefix(1).uppercased() + gateway.id.dropFirst()),
            "position": .object(["x": .number(gateway.position.x), "y": .number(gateway.position.y)]),
            "store": .number(Double(simulation.store)),
        ]
        if gateway.id == simulation.layout.zone(at: simulation.layout.door) { object["entrance"] = .bool(true) }
        if simulation.gatewaysAdvertise {
            let beacon = simulation.referenceBeacon(of: index)
            object["advertise"] = .object(["uuid": .string(beacon.uuid.description), "major": .number(Double(beacon.major)),
                                           "minor": .number(Double(beacon.minor)), "power": .number(Double(beacon.txPower)),
                                           "intervalMs": .number(1000)])
        }
        return .object(JSONObject(object.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) }))
    }
    let beacons: [JSONValue] = simulation.visits.map { visit in
        .object(["uuid": .string(simulation.uuid.description), "major": .number(Double(simulation.store)),
                 "minor": .number(Double(visit.minor)), "name": .string("customer-\(visit.minor)")])
    }
    let document: JSONValue = .object([
        "broker": .object(["url": .string(broker)]),
        "uuids": .array([.string(simulation.uuid.description)]),
        "defaults": .object(JSONObject(["exitTimeout": JSONValue.number(10), "publishInterval": .number(1)]
            .merging(defaults) { _, new in new }.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) })),
        "gateways": .array(gatewayList),
        "beacons": .array(beacons),
        "stores": .array([.object(["major": .number(Double(simulation.store)), "name": .string("Simulated store"),
                                   "floorPlan": .object(["width": .number(simulation.layout.width),
                                                         "height": .number(simulation.layout.height)]),
                                   "ad": .object(["title": .string("Deal of the day"),
                                                  "text": .string("Two coffees for the price of one")])])]),
        "rules": .array([
            .object(["name": .string("welcome"), "when": .string("join"),
                     "fallback": .string("Hello! Your coffee is on its way."),
                     "then": .array([.object(["do": .string("greeting"),
                                              "text": .string("Hello {customer}! A {favorite} is on its way.")])])]),
            .object(["name": .string("deal nearby"), "when": .string("proximity:near"),
                     "then": .array([.object(["do": .string("ad")])]), "once": .bool(true)]),
            .object(["name": .string("tell the barista"), "when": .string("enter"),
                     "then": .array([.object(["do": .string("publish"), "topic": .string("displays/{store}/barista"),
                                              "text": .string("{name} came in at {zone}")])])]),
        ]),
    ])
    return document.jsonText + "\n"
}

/// The store model's options, shared by `simulate` and `score`.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: "Customers (one beacon each).")
    var customers = 20

    @Option(name: .long, help: "Simulated seconds; arrivals spread over the first 80 %.")
    var duration = 900.0

    @Option(name: .long, help: "Random seed.")
    var seed: UInt64 = 1

    @Option(name: .customLong("store"), help: "The store's major.")
    var major: UInt16 = 100

    @Option(name: .long, help: "Proximity UUID of the customers' beacons.")
    var uuid = StoreSimulation.defaultUUID.description

    @Option(name: .long, help: ArgumentHelp("Floor size in metres.", valueName: "WxH"))
    var size: String?

    @Option(name: .long, help: ArgumentHelp("Where customers come in and go out, metres.", valueName: "X,Y"))
    var door: String?

    @Option(name: .long, help: ArgumentHelp("Gateways as id:x,y separated by ';' (default: issue 8's four).",
                                            valueName: "LIST"))
    var gateways: String?

    @Option(name: .long, help: ArgumentHelp("A wall from (x1,y1) to (x2,y2) losing dB (default 6); repeatable.",
                                            valueName: "X1,Y1,X2,Y2[:DB]"))
    var wall: [String] = []

    @Option(name: .long, help: ArgumentHelp("Per-gateway RSSI offsets injected, dB: id:+6,id:-6 (the gateways' radios "
                                            + "read high or low; what calibration corrects).", valueName: "LIST"))
    var offsets: String?

    @Flag(name: .long, help: "Every gateway also advertises an iBeacon once a second, heard by the others (calibration).")
    var gatewaysAdvertise = false

    @Option(name: .long, help: "Slow shadowing, dB (standard deviation).")
    var shadowing = RadioModel().shadowing

    @Option(name: .long, help: "Metres walked over which shadowing decorrelates.")
    var shadowingDistance = RadioModel().shadowingDistance

    @Option(name: .long, help: "Seconds over which shadowing decorrelates standing still.")
    var shadowingTime = RadioModel().shadowingTime

    @Option(name: .long, help: "Fast fading, dB (standard deviation, per advertisement and gateway).")
    var fading = RadioModel().fading

    @Option(name: .long, help: "Fraction of advertisements each gateway misses (0…0.95).")
    var loss = RadioModel().loss

    @Option(name: .long, help: "Path-loss exponent of the simulated air.")
    var pathLoss = RadioModel().pathLossExponent

    @Option(name: .long, help: "Advertisements per second per beacon.")
    var rate = RadioModel().rate

    @Option(name: .long, help: "RSSI at 1 m, dBm.")
    var measuredPower = RadioModel().measuredPower

    @Option(name: .long, help: "Weakest RSSI a gateway hears, dBm.")
    var sensitivity = RadioModel().sensitivity

    @Option(name: .long, help: ArgumentHelp("Points of interest per customer.", valueName: "MIN-MAX"))
    var stops = "1-4"

    @Option(name: .long, help: ArgumentHelp("Seconds at each point of interest.", valueName: "MIN-MAX"))
    var dwell = "10-90"

    @Option(name: .long, help: ArgumentHelp("Walking speed, m/s.", valueName: "MIN-MAX"))
    var speed = "0.6-1.2"

    @Option(name: .long, help: "Metres from its gateway a point of interest may be.")
    var spotRadius = CrowdModel().spotRadius

    /// The simulation these options describe (start: the default instant).
    func simulation(seed override: UInt64? = nil) throws -> StoreSimulation {
        guard (1...5000).contains(customers) else { throw ValidationError("--customers must be 1…5000") }
        guard duration > 0, duration <= 86400 else { throw ValidationError("--duration must be 0…86400 seconds") }
        guard let uuid = BeaconUUID(uuid) else { throw ValidationError("--uuid: \"\(uuid)\" is not a UUID") }
        var layout = StoreLayout.standard
        if let size {
            let parts = size.split(separator: "x").compactMap { Double($0) }
            guard parts.count == 2, parts.allSatisfy({ $0 > 0 && $0 <= 1000 }) else {
                throw ValidationError("--size: \"\(size)\" is not WxH in metres (e.g. 15x10)")
            }
            layout.width = parts[0]
            layout.height = parts[1]
        }
        if let door { layout.door = try point(door, "--door") }
        if let gateways {
            layout.gateways = try gateways.split(separator: ";").map { item in
                let parts = item.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, Topics.problem(withSegment: String(parts[0])) == nil else {
                    throw ValidationError("--gateways: \"\(item)\" is not id:x,y")
                }
                return StoreLayout.Gateway(id: String(parts[0]), position: try point(String(parts[1]), "--gateways"))
            }
            guard Set(layout.gateways.map(\.id)).count == layout.gateways.count, !layout.gateways.isEmpty else {
                throw ValidationError("--gateways: ids must be unique")
            }
        }
        for text in wall {
            let (coordinates, loss) = text.split(separator: ":").map(String.init).splitLast
            let numbers = coordinates.split(separator: ",").compactMap { Double($0) }
            guard numbers.count == 4, let attenuation = Double(loss ?? "6"), attenuation >= 0 else {
                throw ValidationError("--wall: \"\(text)\" is not x1,y1,x2,y2[:dB]")
            }
            layout.walls.append(.init(from: FloorPoint(x: numbers[0], y: numbers[1]),
                                      to: FloorPoint(x: numbers[2], y: numbers[3]), attenuation: attenuation))
        }
        if let offsets {
            for item in offsets.split(separator: ",") {
                let parts = item.split(separator: ":")
                guard parts.count == 2, let value = Double(parts[1].replacingPlus), abs(value) <= 40,
                      let index = layout.gateways.firstIndex(where: { $0.id == parts[0] })
                else { throw ValidationError("--offsets: \"\(item)\" is not gateway:dB for a gateway of the store") }
                layout.gateways[index].rssiOffset = value
            }
        }
        var radio = RadioModel()
        radio.shadowing = try ranged(shadowing, 0...20, "--shadowing")
        radio.shadowingDistance = try ranged(shadowingDistance, 0.01...1000, "--shadowing-distance")
        radio.shadowingTime = try ranged(shadowingTime, 0.01...100_000, "--shadowing-time")
        radio.fading = try ranged(fading, 0...20, "--fading")
        radio.loss = try ranged(loss, 0...0.95, "--loss")
        radio.pathLossExponent = try ranged(pathLoss, 1...6, "--path-loss")
        radio.rate = try ranged(rate, 0.1...50, "--rate")
        radio.measuredPower = try ranged(measuredPower, -100...0, "--measured-power")
        radio.sensitivity = try ranged(sensitivity, -120...0, "--sensitivity")
        var crowd = CrowdModel(customers: customers, duration: duration)
        let stopRange = try range(stops, "--stops")
        guard stopRange.lowerBound >= 1, stopRange.upperBound <= 100, stopRange.lowerBound == stopRange.lowerBound.rounded(),
              stopRange.upperBound == stopRange.upperBound.rounded() else { throw ValidationError("--stops must be whole numbers 1…100") }
        crowd.stops = Int(stopRange.lowerBound)...Int(stopRange.upperBound)
        crowd.dwell = try range(dwell, "--dwell")
        crowd.speed = try range(speed, "--speed")
        guard crowd.speed.lowerBound > 0 else { throw ValidationError("--speed must be above 0") }
        crowd.spotRadius = try ranged(spotRadius, 0...100, "--spot-radius")
        var simulation = StoreSimulation(uuid: uuid, store: major, layout: layout, radio: radio, crowd: crowd,
                                         seed: override ?? seed)
        simulation.gatewaysAdvertise = gatewaysAdvertise
        return simulation
    }

    private func point(_ text: String, _ option: String) throws -> FloorPoint {
        let parts = text.split(separator: ",").compactMap { Double($0) }
        guard parts.count == 2, parts.allSatisfy({ abs($0) <= 10_000 }) else {
            throw ValidationError("\(option): \"\(text)\" is not x,y in metres")
        }
        return FloorPoint(x: parts[0], y: parts[1])
    }

    private func range(_ text: String, _ option: String) throws -> ClosedRange<Double> {
        let parts = text.split(separator: "-").compactMap { Double($0) }
        guard (1...2).contains(parts.count), parts.allSatisfy({ $0 >= 0 }), parts[0] <= parts[parts.count - 1] else {
            throw ValidationError("\(option): \"\(text)\" is not MIN-MAX (or one number)")
        }
        return parts[0]...parts[parts.count - 1]
    }

    private func ranged(_ value: Double, _ range: ClosedRange<Double>, _ option: String) throws -> Double {
        guard range.contains(value) else {
            throw ValidationError("\(option) must be \(decimal(range.lowerBound, places: 2))…\(decimal(range.upperBound, places: 2))")
        }
        return value
    }
}

extension Array where Element == String {
    /// `["1,2,3,4", "6"]` → ("1,2,3,4", "6"); one element → (it, nil).
    fileprivate var splitLast: (String, String?) {
        count > 1 ? (self[0..<(count - 1)].joined(separator: ":"), last) : (first ?? "", nil)
    }
}

extension Substring {
    /// "+6" → "6": Double() takes no leading plus.
    fileprivate var replacingPlus: String { hasPrefix("+") ? String(dropFirst()) : String(self) }
}

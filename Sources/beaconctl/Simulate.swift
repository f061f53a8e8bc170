import ArgumentParser
import BeaconKit
import Contract
import Config
import Simulation
import CommandLineSupport
import SystemCalls
import Wire
import LiveClock

struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a synthetic store as btsnoop captures, one per gateway, plus a fleet config (and its ground truth).",
        discussion: """
        Two store models:

        walkway (the default): customers carrying iBeacons walk in at the door, go to the counter
        (or browse half way), linger and leave; gateways along the walkway (--gateways id:metres)
        hear them with log-distance path loss and Gaussian noise, alongside a few phones that are
        not beacons. Each gateway hears at its own phase of the advertising interval, and every
        capture begins at --start with its controller's reset, so gateways replaying them in step
        (beacon-gateway --start-at) tell the brain the same story on every run.
        Its brain lets any app join any beacon (brain.joins "open", for demos and replays); a
        real store keeps the default "proof" (owned-or-near plus proof of presence: docs/security.md).

        floor: a shop floor with a door and gateways at x,y (default: issue 8's 15 × 10 m shop with
        four gateways, door, window, shelves and counter), optional walls; customers walk between
        points of interest near the gateways, linger and leave by the door. The radio has slow
        shadowing (a Gauss–Markov process per beacon and gateway), fast fading, lost
        advertisements, a sensitivity floor and per-gateway RSSI offsets (docs/presence.md). Also
        writes truth.json: where each customer was and in which zone (the nearest gateway's), in
        seconds after "start". `beaconctl score` replays floors through the real programs and
        compares the brain's decisions with it.

        --layout names a floor store (and implies --model floor): gateways (the default above:
        customers dwell within 0.5 m of a gateway), queue (a queue at the counter, joined 4-8
        places back across the counter/shelves boundary, stepping forward every 6-12 s), spots
        (dwell spots 0.3-4 m from the nearest gateway, a quarter between two, customers who
        shuffle and turn), crowd (40 customers; a body between beacon and gateway takes 3-10 dB,
        by where the carrier faces and how many stand in the line of sight), fobs (beacons at
        1 Hz and 0.1-0.5 Hz beside phones at 5-10 Hz). All but gateways give every beacon a
        transmit power ±3 dB off what it advertises. The other floor options apply on top.

        The same seed gives the same store, byte for byte. Writes into --out: <gateway>.log for
        each gateway and fleet.json, a fleet config whose gateways replay those captures (in a
        loop unless --no-loop), with the customers in the beacon registry.

        Examples:
          beaconctl simulate --out /tmp/store --customers 8 --duration 120
          beaconctl simulate --out /tmp/floor --model floor --shadowing 6 --seed 7
          beaconctl simulate --out /tmp/queue --layout queue --seed 301
          beaconctl simulate --out /tmp/skew --model floor --offsets door:+6,counter:-6
          beaconctl simulate --out /tmp/hall --model floor --size 30x12 --door 0,6 \\
              --gateways 'a:5,6;b:15,6;c:25,6' --wall 10,0,10,8:6
          beacon-gateway --config /tmp/store/fleet.json --id door
        """)

    enum Model: String, ExpressibleByArgument, CaseIterable {
        case walkway, floor
    }

    @Option(name: .long, help: ArgumentHelp("Directory to write into (created if missing).", valueName: "DIR"))
    var out: String

    @Option(name: .long, help: "The store model: walkway or floor (default walkway; floor with --layout).")
    var model: Model?

    /// The model: as given, else floor when a `--layout` is named.
    var effectiveModel: Model { model ?? (floor.layout == nil ? .walkway : .floor) }

    @OptionGroup var store: StoreOptions

    @Option(name: .long, help: "Random seed.")
    var seed: UInt64 = 1

    @Option(name: .long, help: ArgumentHelp("When the captures begin: ISO-8601 UTC (2026-11-21T09:00:00Z) or \"now\".",
                                            valueName: "TIME"))
    var start = StoreSimulation.defaultStart.iso8601

    @Option(name: .long, help: ArgumentHelp("Broker for the generated fleet.json.", valueName: "URL"))
    var broker = "mqtt://127.0.0.1:1883"

    @Flag(name: .long, inversion: .prefixedNo, help: "Gateways in fleet.json replay their captures in a loop.")
    var loop = true

    @OptionGroup(title: "Floor model") var floor: FloorOptions

    func validate() throws {
        guard (try? BrokerURL(parsing: broker)) != nil else { throw ValidationError("--broker: not an mqtt:// URL") }
        guard startInstant != nil else { throw ValidationError("--start: \"\(start)\" is neither an ISO-8601 UTC time nor \"now\"") }
        switch effectiveModel {
        case .walkway:
            if let option = floor.given.first { throw ValidationError("\(option) needs --model floor") }
            _ = try store.walkway(seed: seed)
        case .floor:
            guard try floor.scenarios().count == 1 else { throw ValidationError("--layout: simulate writes one layout at a time") }
            _ = try store.floor(floor, seed: seed)
        }
    }

    /// `now`: a simulation played live, its captures dated from the wall clock.
    var startInstant: CaptureTime? { start == "now" ? WallClock.now().asCaptureTime() : CaptureTime(iso8601: start) }

    func run() throws {
        do {
            switch effectiveModel {
            case .walkway:
                var simulation = try store.walkway(seed: seed)
                simulation.start = startInstant!
                try write(simulation.captures(), fleet: walkwayFleet(simulation, directory: out, broker: broker, loop: loop),
                          truth: nil, into: out) { printLine($0) }
                let visits = simulation.visits
                printLine("\(visits.count) customers over \(Int(simulation.duration)) s in store \(simulation.store); first arrives after "
                          + "\(Int(visits.map(\.arrival).min() ?? 0)) s")
            case .floor:
                var simulation = try store.floor(floor, seed: seed)
                simulation.start = startInstant!
                try write(simulation, into: out, broker: broker, loop: loop) { printLine($0) }
                let visits = simulation.visits
                printLine("\(visits.count) customers over \(Int(simulation.crowd.duration)) s (layout \(simulation.scenario.rawValue)) on a "
                          + "\(decimal(simulation.layout.width, places: 1)) × \(decimal(simulation.layout.height, places: 1)) m floor "
                          + "in store \(simulation.store); first arrives after \(Int(visits.map(\.arrival).min() ?? 0)) s")
            }
        } catch let error as SystemError {
            throw CommandFailure("cannot write the simulation: \(error)", status: .failure)
        }
    }
}

/// Writes captures, a fleet config and (for a floor) the ground truth into `directory`.
func write(_ captures: [String: BtsnoopWriter], fleet: String, truth: GroundTruth?, into directory: String,
           report: (String) -> Void = { _ in }) throws(SystemError) {
    try FileSystem.makeDirectories(directory)
    for (id, writer) in captures.sorted(by: { $0.key < $1.key }) {
        let path = directory + "/\(id).log"
        try FileSystem.write(path, writer.bytes)
        report("wrote \(path) (\(writer.bytes.count) bytes)")
    }
    try FileSystem.write(directory + "/fleet.json", Array(fleet.utf8))
    report("wrote \(directory)/fleet.json")
    if let truth {
        try FileSystem.write(directory + "/truth.json", Array((truth.json + "\n").utf8))
        report("wrote \(directory)/truth.json")
    }
}

/// Writes a floor's captures, fleet config and ground truth into `directory`.
func write(_ simulation: FloorSimulation, into directory: String, broker: String, loop: Bool, speed: Double? = nil,
           report: (String) -> Void = { _ in }) throws(SystemError) {
    try write(simulation.captures(), fleet: floorFleet(simulation, directory: directory, broker: broker, loop: loop, speed: speed),
              truth: simulation.truth, into: directory, report: report)
}

/// A fleet config for a simulated walkway: its gateways replay the captures.
func walkwayFleet(_ simulation: StoreSimulation, directory: String, broker: String, loop: Bool) -> String {
    let gateways: [JSONValue] = simulation.gateways.map { gateway in
        .object(["id": .string(gateway.id), "source": .string("btsnoop:\(directory)/\(gateway.id).log\(loop ? "?loop" : "")"),
                 "zone": .string(gateway.id)])
    }
    // Customers walk to the gateway farthest from the door: the counter.
    let counter = simulation.gateways.max { $0.position < $1.position }!
    return simulatedFleet(uuid: simulation.uuid, store: simulation.store, minors: simulation.visits.map(\.minor),
                          broker: broker, gateways: gateways, counter: counter.id)
}

/// A fleet config for a simulated floor: its gateways replay the captures, with positions,
/// the entrance marked, and (when they advertise) their reference beacons.
func floorFleet(_ simulation: FloorSimulation, directory: String, broker: String, loop: Bool, speed: Double? = nil,
                defaults: [String: JSONValue] = [:]) -> String {
    var query: [String] = []
    if let speed { query.append("speed=\(decimal(speed, places: 3))") }
    if loop { query.append("loop") }
    let suffix = query.isEmpty ? "" : "?" + query.joined(separator: "&")
    let layout = simulation.layout
    let gateways: [JSONValue] = layout.gateways.enumerated().map { index, gateway in
        var object: [String: JSONValue] = [
            "id": .string(gateway.id), "source": .string("btsnoop:\(directory)/\(gateway.id).log\(suffix)"),
            "zone": .string(gateway.id.prefix(1).uppercased() + gateway.id.dropFirst()),
            "position": .object(["x": .number(gateway.position.x), "y": .number(gateway.position.y)]),
            "store": .number(Double(simulation.store)),
        ]
        if gateway.id == layout.zone(at: layout.door) { object["entrance"] = .bool(true) }
        if simulation.gatewaysAdvertise {
            let beacon = simulation.referenceBeacon(of: index)
            object["advertise"] = .object(["uuid": .string(beacon.uuid.description), "major": .number(Double(beacon.major)),
                                           "minor": .number(Double(beacon.minor)), "power": .number(Double(beacon.txPower)),
                                           "intervalMs": .number(1000)])
        }
        return .object(JSONObject(object.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) }))
    }
    let counter = layout.gateways.first { $0.id == "counter" }?.id
    return simulatedFleet(uuid: simulation.uuid, store: simulation.store, minors: simulation.visits.map(\.minor),
                          broker: broker, gateways: gateways, counter: counter, defaults: defaults,
                          floorPlan: (layout.width, layout.height))
}

/// The fleet config both models share: the customers in the registry, the store with its
/// ad, a greeting, the deal at the counter and a note for the barista.
private func simulatedFleet(uuid: BeaconUUID, store: UInt16, minors: [UInt16], broker: String, gateways: [JSONValue],
                            counter: String?, defaults: [String: JSONValue] = [:],
                            floorPlan: (width: Double, height: Double)? = nil) -> String {
    let beacons: [JSONValue] = minors.map { minor in
        .object(["uuid": .string(uuid.description), "major": .number(Double(store)),
                 "minor": .number(Double(minor)), "name": .string("customer-\(minor)")])
    }
    var storeEntry: [(key: String, value: JSONValue)] = [
        (key: "major", value: .number(Double(store))), (key: "name", value: .string("Simulated store")),
    ]
    if let floorPlan {
        storeEntry.append((key: "floorPlan", value: .object(["width": .number(floorPlan.width), "height": .number(floorPlan.height)])))
    }
    storeEntry.append((key: "ad", value: .object(["title": .string("Deal of the day"),
                                                   "text": .string("Two coffees for the price of one")])))
    var deal: JSONObject = ["name": .string("deal at the counter"), "when": .string("proximity:immediate")]
    if let counter { deal["zones"] = .array([.string(counter)]) }
    deal["then"] = .array([.object(["do": .string("ad")])])
    deal["once"] = .bool(true)
    let document: JSONValue = .object([
        "broker": .object(["url": .string(broker)]),
        "uuids": .array([.string(uuid.description)]),
        "defaults": .object(JSONObject(["exitTimeout": JSONValue.number(10), "publishInterval": .number(1)]
            .merging(defaults) { _, new in new }.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) })),
        "gateways": .array(gateways),
        "beacons": .array(beacons),
        "stores": .array([.object(JSONObject(storeEntry))]),
        "brain": .object(["joins": .string("open")]),
        "rules": .array([
            .object(["name": .string("welcome"), "when": .string("join"),
                     "fallback": .string("Hello! Your coffee is on its way."),
                     "then": .array([.object(["do": .string("greeting"),
                                              "text": .string("Hello {customer}! A {favorite} is on its way.")])])]),
            .object(deal),
            .object(["name": .string("tell the barista"), "when": .string("enter"),
                     "then": .array([.object(["do": .string("publish"), "topic": .string("displays/{store}/barista"),
                                              "text": .string("{name} came in at {zone}")])])]),
        ]),
    ])
    return document.jsonText + "\n"
}

/// What both store models take, shared by `simulate` and `score`.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: "Customers (one beacon each); default 5 on a walkway, 20 on a floor.")
    var customers: Int?

    @Option(name: .long, help: "Simulated seconds; default 120 on a walkway, 900 on a floor.")
    var duration: Double?

    @Option(name: .long, help: "Advertisements per second per beacon (default 2).")
    var rate: Double?

    @Option(name: .customLong("store"), help: "The store's major.")
    var major: UInt16 = 100

    @Option(name: .long, help: "Proximity UUID of the customers' beacons.")
    var uuid = StoreSimulation.defaultUUID.description

    @Option(name: .long, help: ArgumentHelp(
        "Gateways: on a walkway id:metres-from-door, comma separated (default door:0,counter:12); on a floor "
        + "id:x,y separated by ';' (default issue 8's four).", valueName: "LIST"))
    var gateways: String?

    private func common() throws -> BeaconUUID {
        if let customers, !(1...5000).contains(customers) { throw ValidationError("--customers must be 1…5000") }
        if let duration, !(duration > 0 && duration <= 86400) { throw ValidationError("--duration must be 0…86400 seconds") }
        if let rate, !(rate >= 0.1 && rate <= 50) { throw ValidationError("--rate must be 0.1…50 per second") }
        guard let uuid = BeaconUUID(uuid) else { throw ValidationError("--uuid: \"\(uuid)\" is not a UUID") }
        return uuid
    }

    /// The walkway these options describe (start: the default instant).
    func walkway(seed: UInt64) throws -> StoreSimulation {
        let uuid = try common()
        let list = try (gateways ?? "door:0,counter:12").split(separator: ",").map { item in
            let parts = item.split(separator: ":")
            guard parts.count == 2, let position = Double(parts[1]), Topics.problem(withSegment: String(parts[0])) == nil
            else { throw ValidationError("--gateways: \"\(item)\" is not id:metres") }
            return StoreSimulation.Gateway(id: String(parts[0]), position: position)
        }
        guard !list.isEmpty else { throw ValidationError("--gateways: name at least one id:metres") }
        return StoreSimulation(uuid: uuid, store: major, customers: customers ?? 5, duration: duration ?? 120,
                               rate: rate ?? 2, gateways: list, seed: seed)
    }

    /// The floor these options and `floor` describe (start: the default instant), in
    /// `scenario` (default: the first `--layout`).
    func floor(_ floor: FloorOptions, seed: UInt64, scenario: FloorScenario? = nil) throws -> FloorSimulation {
        let uuid = try common()
        let scenario = try scenario ?? floor.scenarios()[0]
        var layout = StoreLayout.standard
        if let gateways {
            layout.gateways = try gateways.split(separator: ";").map { item in
                let parts = item.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, Topics.problem(withSegment: String(parts[0])) == nil else {
                    throw ValidationError("--gateways: \"\(item)\" is not id:x,y")
                }
                return StoreLayout.Gateway(id: String(parts[0]), position: try FloorOptions.point(String(parts[1]), "--gateways"))
            }
            guard Set(layout.gateways.map(\.id)).count == layout.gateways.count, !layout.gateways.isEmpty else {
                throw ValidationError("--gateways: ids must be unique")
            }
        }
        var crowd = CrowdModel()
        var radio = RadioModel()
        scenario.apply(to: &crowd, &radio)
        if let customers { crowd.customers = customers }
        if let duration { crowd.duration = duration }
        if let rate { radio.rate = rate }
        try floor.apply(to: &layout, &radio, &crowd)
        var simulation = FloorSimulation(uuid: uuid, store: major, layout: layout, radio: radio, crowd: crowd, seed: seed)
        simulation.gatewaysAdvertise = floor.gatewaysAdvertise
        simulation.scenario = scenario
        return simulation
    }
}

/// The floor model's own options (docs/presence.md has the model); each defaults to the model's value.
struct FloorOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "A named store: gateways (customers at the gateways, issue 8's), queue (a counter queue across the "
        + "counter/shelves boundary), spots (standing 0.3-4 m from any gateway, shuffling), crowd (40 customers whose "
        + "bodies attenuate), fobs (beacons at 1 and 0.1-0.5 Hz beside phones at 5-10 Hz); score takes a list or "
        + "\"all\". Other options apply on top. Default gateways.", valueName: "NAME"))
    var layout: String?

    /// The layouts `--layout` names, in order.
    func scenarios() throws -> [FloorScenario] {
        guard let layout else { return [.gateways] }
        if layout == "all" { return FloorScenario.allCases }
        let names = layout.split(separator: ",").map { String($0.filter { $0 != " " }) }
        let list = try names.map { name in
            guard let scenario = FloorScenario(rawValue: name) else {
                throw ValidationError("--layout: \"\(name)\" is not one of "
                                      + FloorScenario.allCases.map(\.rawValue).joined(separator: ", ") + " or all")
            }
            return scenario
        }
        guard !list.isEmpty else { throw ValidationError("--layout: name one") }
        return list
    }

    @Option(name: .long, help: ArgumentHelp("Floor size in metres (default 15x10).", valueName: "WxH"))
    var size: String?

    @Option(name: .long, help: ArgumentHelp("Where customers come in and go out, metres (default 0.3,2.5).", valueName: "X,Y"))
    var door: String?

    @Option(name: .long, help: ArgumentHelp("A wall from (x1,y1) to (x2,y2) losing dB (default 6); repeatable.",
                                            valueName: "X1,Y1,X2,Y2[:DB]"))
    var wall: [String] = []

    @Option(name: .long, help: ArgumentHelp("Per-gateway RSSI offsets injected, dB: id:+6,id:-6 (the gateways' radios "
                                            + "read high or low; what rssiOffset and calibration correct).", valueName: "LIST"))
    var offsets: String?

    @Flag(name: .long, help: "Every gateway also advertises an iBeacon once a second, heard by the others (calibration).")
    var gatewaysAdvertise = false

    @Option(name: .long, help: "Slow shadowing, dB (standard deviation; default 4).")
    var shadowing: Double?

    @Option(name: .long, help: "Metres walked over which shadowing decorrelates (default 2).")
    var shadowingDistance: Double?

    @Option(name: .long, help: "Seconds over which shadowing decorrelates standing still (default 5).")
    var shadowingTime: Double?

    @Option(name: .long, help: "Fast fading, dB (standard deviation, per advertisement and gateway; default 3).")
    var fading: Double?

    @Option(name: .long, help: "Fraction of advertisements each gateway misses, 0…0.95 (default 0.2).")
    var loss: Double?

    @Option(name: .long, help: "Path-loss exponent of the simulated air (default 2.5).")
    var pathLoss: Double?

    @Option(name: .long, help: "RSSI at 1 m, dBm (default -59).")
    var measuredPower: Double?

    @Option(name: .long, help: "Weakest RSSI a gateway hears, dBm (default -95).")
    var sensitivity: Double?

    @Option(name: .long, help: ArgumentHelp("Points of interest per customer (default 1-4).", valueName: "MIN-MAX"))
    var stops: String?

    @Option(name: .long, help: ArgumentHelp("Seconds at each point of interest (default 10-90).", valueName: "MIN-MAX"))
    var dwell: String?

    @Option(name: .long, help: ArgumentHelp("Walking speed, m/s (default 0.5-1).", valueName: "MIN-MAX"))
    var speed: String?

    @Option(name: .long, help: "Metres from its gateway a point of interest may be (default 0.5).")
    var spotRadius: Double?

    /// The options given, by name (they need the floor model).
    var given: [String] {
        let all: [(String, Bool)] = [
            ("--layout", layout != nil), ("--size", size != nil), ("--door", door != nil), ("--wall", !wall.isEmpty), ("--offsets", offsets != nil),
            ("--gateways-advertise", gatewaysAdvertise), ("--shadowing", shadowing != nil),
            ("--shadowing-distance", shadowingDistance != nil), ("--shadowing-time", shadowingTime != nil),
            ("--fading", fading != nil), ("--loss", loss != nil), ("--path-loss", pathLoss != nil),
            ("--measured-power", measuredPower != nil), ("--sensitivity", sensitivity != nil), ("--stops", stops != nil),
            ("--dwell", dwell != nil), ("--speed", speed != nil), ("--spot-radius", spotRadius != nil),
        ]
        return all.filter(\.1).map(\.0)
    }

    func apply(to layout: inout StoreLayout, _ radio: inout RadioModel, _ crowd: inout CrowdModel) throws {
        if let size {
            let parts = size.split(separator: "x").compactMap { Double($0) }
            guard parts.count == 2, parts.allSatisfy({ $0 > 0 && $0 <= 1000 }) else {
                throw ValidationError("--size: \"\(size)\" is not WxH in metres (e.g. 15x10)")
            }
            layout.width = parts[0]
            layout.height = parts[1]
        }
        if let door { layout.door = try Self.point(door, "--door") }
        for text in wall {
            let parts = text.split(separator: ":", maxSplits: 1)
            let numbers = parts[0].split(separator: ",").compactMap { Double($0) }
            guard numbers.count == 4, let attenuation = Double(parts.count > 1 ? parts[1] : "6"), attenuation >= 0 else {
                throw ValidationError("--wall: \"\(text)\" is not x1,y1,x2,y2[:dB]")
            }
            layout.walls.append(.init(from: FloorPoint(x: numbers[0], y: numbers[1]),
                                      to: FloorPoint(x: numbers[2], y: numbers[3]), attenuation: attenuation))
        }
        if let offsets {
            for item in offsets.split(separator: ",") {
                let parts = item.split(separator: ":")
                guard parts.count == 2, let value = Double(parts[1].hasPrefix("+") ? parts[1].dropFirst() : parts[1]),
                      abs(value) <= 40, let index = layout.gateways.firstIndex(where: { $0.id == parts[0] })
                else { throw ValidationError("--offsets: \"\(item)\" is not gateway:dB for a gateway of the store") }
                layout.gateways[index].rssiOffset = value
            }
        }
        func set(_ value: Double?, _ target: inout Double, _ range: ClosedRange<Double>, _ option: String) throws {
            guard let value else { return }
            guard range.contains(value) else {
                throw ValidationError("\(option) must be \(decimal(range.lowerBound, places: 2))…\(decimal(range.upperBound, places: 2))")
            }
            target = value
        }
        try set(shadowing, &radio.shadowing, 0...20, "--shadowing")
        try set(shadowingDistance, &radio.shadowingDistance, 0.01...1000, "--shadowing-distance")
        try set(shadowingTime, &radio.shadowingTime, 0.01...100_000, "--shadowing-time")
        try set(fading, &radio.fading, 0...20, "--fading")
        try set(loss, &radio.loss, 0...0.95, "--loss")
        try set(pathLoss, &radio.pathLossExponent, 1...6, "--path-loss")
        try set(measuredPower, &radio.measuredPower, -100...0, "--measured-power")
        try set(sensitivity, &radio.sensitivity, -120...0, "--sensitivity")
        if let stops {
            let range = try Self.range(stops, "--stops")
            guard range.lowerBound >= 1, range.upperBound <= 100, range.lowerBound == range.lowerBound.rounded(),
                  range.upperBound == range.upperBound.rounded() else { throw ValidationError("--stops must be whole numbers 1…100") }
            crowd.stops = Int(range.lowerBound)...Int(range.upperBound)
        }
        if let dwell { crowd.dwell = try Self.range(dwell, "--dwell") }
        if let speed {
            crowd.speed = try Self.range(speed, "--speed")
            guard crowd.speed.lowerBound > 0 else { throw ValidationError("--speed must be above 0") }
        }
        try set(spotRadius, &crowd.spotRadius, 0...100, "--spot-radius")
    }

    static func point(_ text: String, _ option: String) throws -> FloorPoint {
        let parts = text.split(separator: ",").compactMap { Double($0) }
        guard parts.count == 2, parts.allSatisfy({ abs($0) <= 10_000 }) else {
            throw ValidationError("\(option): \"\(text)\" is not x,y in metres")
        }
        return FloorPoint(x: parts[0], y: parts[1])
    }

    static func range(_ text: String, _ option: String) throws -> ClosedRange<Double> {
        let parts = text.split(separator: "-").compactMap { Double($0) }
        guard (1...2).contains(parts.count), parts.allSatisfy({ $0 >= 0 }), parts[0] <= parts[parts.count - 1] else {
            throw ValidationError("\(option): \"\(text)\" is not MIN-MAX (or one number)")
        }
        return parts[0]...parts[parts.count - 1]
    }
}

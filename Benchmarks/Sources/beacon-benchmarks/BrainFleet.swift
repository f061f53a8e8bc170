import BeaconKit
import Config
import Contract
import GatewayCore
import BrainCore
import Simulation

extension Workloads {
    /// One brain's core carrying a chain's stores, as the fleet bench (`beaconctl bench --only
    /// fleet`) feeds it, without brokers: `stores` stores of 4 gateways and `customers`
    /// customers each (`StoreSimulation`, 2 adverts a second), every gateway's capture through a
    /// real `GatewayEngine` with a running gateway's 100 ms timers, and what the brain subscribes
    /// to of that (RSSI reports, gateway presence and statuses; not sightings) handed to
    /// `BrainCore.receive` in time order, with `advance` every 0.2 s as the service's timer does.
    /// One operation is one message received; `sightings` says how many sightings the same
    /// gateways published, for the fleet bench's "per 1,000 sightings".
    static func brainFleet(stores: Int, customers: Int, duration: Double, runs: Int) -> (Measurement, sightings: Int, digest: UInt64) {
        let majors = (0..<stores).map { UInt16(100 + $0) }
        let names = ["door", "aisle", "shelf", "till"]
        var storeList: [String] = []
        var gatewayList: [String] = []
        for major in majors {
            storeList.append(#"{"major":\#(major),"name":"Store \#(major)"}"#)
            for name in names { gatewayList.append(#"{"id":"\#(name)-\#(major)","store":\#(major),"source":"hci:0"}"#) }
        }
        let text = #"{"broker":{"url":"mqtt://127.0.0.1:1883"},"stores":[\#(storeList.joined(separator: ","))],"gateways":[\#(gatewayList.joined(separator: ","))]}"#
        let config: FleetConfig
        do { config = try FleetConfig.parse(text) } catch { fatalError("fleet config: \(error)") }
        let start = StoreSimulation.defaultStart
        var timeline: [(time: Double, message: MQTTMessage)] = []
        var sightings = 0
        let topics = Topics()
        for major in majors {
            let gateways = names.enumerated().map { k, name in
                StoreSimulation.Gateway(id: "\(name)-\(major)", position: 12 * Double(k) / Double(names.count - 1))
            }
            let simulation = StoreSimulation(store: major, customers: customers, duration: duration, rate: 2,
                                             gateways: gateways, seed: UInt64(major), start: start)
            for (id, capture) in simulation.captures().sorted(by: { $0.key < $1.key }) {
                guard let gateway = config.gateways.first(where: { $0.id == id }) else { fatalError("no gateway \(id)") }
                let decided: [(Double, MQTTMessage)]
                do {
                    decided = try GatewayEngine.decisions(config: config, gateway: gateway, capture: capture.bytes,
                                                          start: start, duration: duration)
                } catch { fatalError("replay of \(id): \(error)") }
                for (time, message) in decided {
                    // The brain reads no sightings.
                    if case .beacon(_, .sighting)? = topics.parse(message.topic) {
                        sightings += 1
                        continue
                    }
                    timeline.append((time, message))
                }
            }
        }
        timeline = timeline.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
        let messages = timeline
        // What the brain published, hashed (FNV-1a over every topic and payload in order): the
        // same inputs must give the same digest before and after a change of its code.
        var digest: UInt64 = 0xcbf2_9ce4_8422_2325
        func fold(_ output: BrainOutput) {
            for message in output.messages {
                for byte in message.topic.utf8 { digest = (digest ^ UInt64(byte)) &* 0x100_0000_01b3 }
                for byte in message.payload { digest = (digest ^ UInt64(byte)) &* 0x100_0000_01b3 }
            }
        }
        do {
            var core = BrainCore(config: config)
            fold(core.settle(at: start))
            var nextTick = 0.2
            for (time, message) in messages {
                while nextTick <= time {
                    fold(core.advance(to: start + nextTick))
                    nextTick += 0.2
                }
                fold(core.receive(topic: message.topic, payload: message.payload, retained: false, at: start + time))
            }
        }
        let result = measure("brain/fleet-\(stores)", unit: "messages", operations: messages.count, runs: runs) {
            var core = BrainCore(config: config)
            _ = core.settle(at: start)
            var checksum = 0
            var nextTick = 0.2
            for (time, message) in messages {
                while nextTick <= time {
                    checksum &+= core.advance(to: start + nextTick).messages.count
                    nextTick += 0.2
                }
                checksum &+= core.receive(topic: message.topic, payload: message.payload, retained: false,
                                          at: start + time).messages.count
            }
            return checksum
        }
        return (result, sightings, digest)
    }
}

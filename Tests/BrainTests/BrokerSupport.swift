import BeaconKit
import Config
import Brain
import LiveClock
import Foundation
import Logging
import MQTT
import ServiceLifecycle
import TestSupport
import Testing

struct SetUpError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A `BrainService` running in this process under a `ServiceGroup`, stopped the way
/// SIGTERM stops it (graceful shutdown).
final class RunningBrain: Sendable {
    let service: BrainService
    let group: ServiceGroup
    let task: Task<Void, any Error>

    static func start(_ config: FleetConfig, broker: MosquittoBroker, stores: Set<UInt16> = [],
                      clientID: String = "brain-\(UUID().uuidString.prefix(6))",
                      clock: any ServiceClock = SystemClock(), roundSpacing: Double? = nil) async throws -> RunningBrain {
        var config = config
        config.broker.url = broker.brokerURL
        var options = BrainService.Options(clientID: clientID)
        options.clock = clock
        if let roundSpacing { options.roundSpacing = roundSpacing }
        options.tickInterval = 0.05
        options.reconnectDelay = 0.1...1
        var logger = Logger(label: "brain-test")
        logger.logLevel = .warning
        let service = try BrainService(config: config, stores: stores, password: nil, logger: logger, options: options)
        let group = ServiceGroup(configuration: .init(services: [.init(service: service)], logger: logger))
        let task = Task { try await group.run() }
        let brain = RunningBrain(service: service, group: group, task: task)
        guard await eventually(timeout: 10, { brain.service.statistics.settled }) else {
            await brain.stop()
            throw SetUpError( "the brain did not settle\n\(broker.diagnostics)")
        }
        return brain
    }

    private init(service: BrainService, group: ServiceGroup, task: Task<Void, any Error>) {
        self.service = service
        self.group = group
        self.task = task
    }

    var statistics: BrainService.Statistics { service.statistics }

    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}

/// A plain MQTT client standing in for gateways and observer apps.
final class Peer: Sendable {
    let client: MQTTClient

    init(_ broker: MosquittoBroker, id: String = "peer-\(UUID().uuidString.prefix(6))") async throws {
        client = try MQTTClient(MQTTClientOptions(broker: broker.brokerURL, clientID: id))
        try client.start()
        guard await eventually(timeout: 10, { self.client.isConnected }) else {
            throw SetUpError( "peer \(id) did not connect\n\(broker.diagnostics)")
        }
    }

    func publish(_ topic: String, _ text: String, retain: Bool = false, qos: Int = 1) throws {
        try client.publish(MQTTMessage(topic: topic, text: text, qos: qos, retain: retain))
    }

    func publish(_ topic: String, bytes: [UInt8], retain: Bool = false) throws {
        try client.publish(MQTTMessage(topic: topic, payload: bytes, qos: 1, retain: retain))
    }

    /// Waits until the broker has acknowledged everything published so far.
    func flush() async {
        _ = await client.waitUntilPublished(timeout: 5)
    }

    func stop() async { await client.stop() }
}

/// A `mosquitto_pub -l` that stays connected with a last will until it is killed with
/// SIGKILL: a gateway or an observer app that dies.
final class DyingClient: Sendable {
    let process: ChildProcess
    let stdin: Pipe

    init(_ broker: MosquittoBroker, id: String, willTopic: String, in directory: TemporaryDirectory) async throws {
        let program = try #require(Programs.system("mosquitto_pub"))
        stdin = Pipe()
        process = try ChildProcess(program, ["-h", "127.0.0.1", "-p", "\(broker.port)", "-i", id, "-l",
                                             "-t", "tests/\(id)/lines",
                                             "--will-topic", willTopic, "--will-payload", "offline",
                                             "--will-qos", "1", "--will-retain"],
                                   in: directory, name: "mosquitto_pub-\(id)", stdin: stdin.fileHandleForReading)
        guard await eventually(timeout: 10, { broker.log.contains(" as \(id) ") }) else {
            throw SetUpError( "\(id) did not connect\n\(broker.diagnostics)")
        }
    }

    func kill() async {
        process.signal(SIGKILL)
        await process.waitForExit()
        try? stdin.fileHandleForWriting.close()
    }
}

extension MosquittoSubscriber {
    /// The JSON payloads received on `topic`, in order (deletions skipped).
    func json(on topic: String) -> [JSONValue] {
        records.filter { $0.topic == topic && !$0.payload.isEmpty }.compactMap { try? JSONParser().parse($0.payload) }
    }

    /// Waits for a JSON payload on `topic` that satisfies `predicate`.
    func waitForJSON(on topic: String, timeout: Double = 5, _ predicate: @escaping (JSONValue) -> Bool = { _ in true }) async -> JSONValue? {
        let record = await waitFor(timeout: timeout) { record in
            guard record.topic == topic, !record.payload.isEmpty,
                  let json = try? JSONParser().parse(record.payload) else { return false }
            return predicate(json)
        }
        return record.flatMap { try? JSONParser().parse($0.payload) }
    }

    /// Waits for the deletion of `topic`'s retained message (an empty payload).
    func waitForDeletion(of topic: String, timeout: Double = 5) async -> Bool {
        await waitFor(timeout: timeout) { $0.topic == topic && $0.payload.isEmpty } != nil
    }
}

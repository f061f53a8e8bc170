import Foundation
import MQTT
import TestSupport
import Testing
import BeaconKit

/// Everything a client reported, collected by one consuming task, for tests to wait on.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [MQTTEvent] = []
    private var finished = false

    init(_ client: MQTTClient) {
        let stream = client.events
        Task { [self] in
            for await event in stream { lock.withLock { events.append(event) } }
            lock.withLock { finished = true }
        }
    }

    var all: [MQTTEvent] { lock.withLock { events } }
    var isFinished: Bool { lock.withLock { finished } }

    var messages: [MQTTMessage] {
        all.compactMap { if case .message(let message) = $0 { message } else { nil } }
    }

    var disconnectReasons: [String] {
        all.compactMap { if case .disconnected(let reason) = $0 { reason } else { nil } }
    }

    var connectionCount: Int {
        all.count { if case .connected = $0 { true } else { false } }
    }

    /// The first event after the first `skip` matching `predicate`, waiting up to `timeout` s.
    @discardableResult
    func waitFor(timeout: Double = 5, skipping skip: Int = 0, _ predicate: (MQTTEvent) -> Bool) async -> MQTTEvent? {
        var found: MQTTEvent?
        _ = await eventually(timeout: timeout, interval: 0.01) {
            let matches = all.filter(predicate)
            found = matches.count > skip ? matches[skip] : nil
            return found != nil
        }
        return found
    }

    func waitForConnection(number: Int = 1, timeout: Double = 5) async -> Bool {
        await eventually(timeout: timeout, interval: 0.01) { connectionCount >= number }
    }

    func waitForDisconnection(number: Int = 1, timeout: Double = 5) async -> String? {
        let event = await waitFor(timeout: timeout, skipping: number - 1) {
            if case .disconnected = $0 { true } else { false }
        }
        if case .disconnected(let reason) = event { return reason }
        return nil
    }

    func waitForMessage(topic: String, timeout: Double = 5) async -> MQTTMessage? {
        let event = await waitFor(timeout: timeout) {
            if case .message(let message) = $0 { message.topic == topic } else { false }
        }
        if case .message(let message) = event { return message }
        return nil
    }
}

/// Options for a client of `broker` with a unique id and quick reconnection.
func options(_ broker: MosquittoBroker, id: String = "test-\(UUID().uuidString.prefix(8))") -> MQTTClientOptions {
    var options = MQTTClientOptions(broker: broker.brokerURL, clientID: id)
    options.reconnectDelay = 0.1...0.5
    options.keepalive = 5
    return options
}

/// Makes and starts a client; returns it with its event log.
func startedClient(_ options: MQTTClientOptions) throws -> (MQTTClient, EventLog) {
    let client = try MQTTClient(options)
    let log = EventLog(client)
    try client.start()
    return (client, log)
}

/// Publishes probes on `topic` (which the client subscribes to) until one comes back:
/// the subscription is then in place at the broker.
func awaitSubscription(_ client: MQTTClient, _ log: EventLog, topic: String, timeout: Double = 5) async -> Bool {
    let deadline = WaitDeadline(after: timeout)
    while !deadline.hasPassed {
        try? client.publish(MQTTMessage(topic: topic, text: "probe"))
        if await log.waitForMessage(topic: topic, timeout: 0.2) != nil { return true }
    }
    return false
}

/// Runs a Mosquitto command-line client to completion (`mosquitto_pub`, …).
@discardableResult
func run(_ program: String, _ arguments: [String], in directory: TemporaryDirectory) async throws -> Int32? {
    let path = try #require(Programs.system(program), "\(program) is not installed")
    let process = try ChildProcess(path, arguments, in: directory)
    return await process.waitForExit(timeout: 10)
}

/// Raises this process's soft limit on open files to `wanted` (or the hard limit, when
/// lower), so a test can take descriptor numbers that high while the other tests running in
/// this process still find free ones; throws when the hard limit is below `needed`.
func allowDescriptors(_ wanted: Int, needed: Int) throws {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { throw DescriptorLimit("getrlimit: errno \(errno)") }
    guard limit.rlim_cur < rlim_t(wanted) else { return }
    guard limit.rlim_max >= rlim_t(needed) else {
        throw DescriptorLimit("the hard limit on open files (\(limit.rlim_max)) is below \(needed)")
    }
    limit.rlim_cur = min(rlim_t(wanted), limit.rlim_max)
    guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { throw DescriptorLimit("setrlimit: errno \(errno)") }
}

struct DescriptorLimit: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

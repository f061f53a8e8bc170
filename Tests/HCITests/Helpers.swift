import BeaconKit
import Wire
import Foundation
import HCI
import Synchronization
import SystemCalls
import TestSupport

/// One advertising report that carried an iBeacon, as a scanner decoded it.
struct Sighting: Sendable, Equatable {
    var beacon: IBeacon
    var rssi: Int8?
    var address: BluetoothAddress
    var addressType: UInt8
    var eventType: UInt16
}

/// Runs a source in a task of its own and keeps everything it outputs.
final class SourceRecorder: Sendable {
    let source: any AdvertisingSource
    private let outputs = Mutex<[SourceOutput]>([])
    private let task = Mutex<Task<Void, any Error>?>(nil)

    private init(_ source: any AdvertisingSource) { self.source = source }

    static func start(_ source: any AdvertisingSource) -> SourceRecorder {
        let recorder = SourceRecorder(source)
        let task = Task { try await source.run { output in recorder.outputs.withLock { $0.append(output) } } }
        recorder.task.withLock { $0 = task }
        return recorder
    }

    var all: [SourceOutput] { outputs.withLock { $0 } }

    var states: [(state: SourceState, detail: String)] {
        all.compactMap { if case .state(let state, let detail) = $0 { (state, detail) } else { nil } }
    }

    var frames: [HCIFrame] {
        all.compactMap { if case .frame(let frame) = $0 { frame } else { nil } }
    }

    /// Every iBeacon in the advertising reports delivered so far, in order.
    var sightings: [Sighting] { Self.sightings(in: all) }

    /// Every iBeacon in the advertising reports among `outputs`, in order.
    static func sightings(in outputs: some Sequence<SourceOutput>) -> [Sighting] {
        var decoder = AdvertisementDecoder()
        var found: [Sighting] = []
        for case .frame(let frame) in outputs {
            decoder.decode(event: frame.event) { report, result in
                if case .beacon(.iBeacon(let beacon)) = result {
                    found.append(Sighting(beacon: beacon, rssi: report.rssi, address: report.address,
                                          addressType: report.addressType, eventType: report.eventType))
                }
            }
        }
        return found
    }

    func count(_ state: SourceState) -> Int { states.filter { $0.state == state }.count }

    /// Waits until `condition` holds; false on timeout.
    func wait(timeout: Double = 10, until condition: (SourceRecorder) -> Bool) async -> Bool {
        await eventually(timeout: timeout) { condition(self) }
    }

    /// Cancels the source and waits for `run` to return; the error it threw, if any.
    @discardableResult
    func cancel() async -> (any Error)? {
        guard let task = task.withLock({ $0 }) else { return nil }
        task.cancel()
        do {
            try await task.value
            return nil
        } catch {
            return error
        }
    }

    /// Waits for `run` to end by itself (a permanent error); the error it threw.
    func finish() async -> (any Error)? {
        guard let task = task.withLock({ $0 }) else { return nil }
        do {
            try await task.value
            return nil
        } catch {
            return error
        }
    }

    var summary: String {
        states.map { "\($0.state): \($0.detail)" }.joined(separator: "\n")
    }
}

/// Runs `body` with a btvirt of its own, stopped afterwards whatever happens.
func withBtvirt<T>(_ label: String, _ body: (BtvirtServer, TemporaryDirectory) async throws -> T) async throws -> T {
    let directory = try TemporaryDirectory(label)
    let server = try await BtvirtServer.start(in: directory)
    do {
        let result = try await body(server, directory)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}

/// A listening Unix stream socket for the tests' fake controller and proxy.
final class UnixListener: Sendable {
    let path: String
    let fd: Int32

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError(call: "socket", errno: errno) }
        self.path = path
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
            raw[path.utf8.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(fd, 4) == 0 else {
            let error = SystemError(call: "bind/listen", errno: errno, subject: path)
            Glibc.close(fd)
            throw error
        }
    }

    /// The next connection, or `nil` after `timeout` seconds.
    func accept(timeout: Double) throws -> FileDescriptor? {
        guard try FileDescriptor(rawValue: fd).waitReadable(timeout: timeout) else { return nil }
        let client = Glibc.accept(fd, nil, nil)
        guard client >= 0 else { throw SystemError(call: "accept", errno: errno, subject: path) }
        return FileDescriptor(rawValue: client)
    }

    func close() {
        Glibc.close(fd)
        unlink(path)
    }
}

/// Reads H4 packets from a descriptor (the tests' side of a link).
struct PacketReader {
    let fd: FileDescriptor
    private var framer = H4Framer()
    private var pending: [(H4PacketType, [UInt8])] = []

    init(_ fd: FileDescriptor) { self.fd = fd }

    /// The next packet, `nil` on timeout; throws on end of stream.
    mutating func next(timeout: Double) throws -> (type: H4PacketType, bytes: [UInt8])? {
        let deadline = WallClock.monotonic() + timeout
        while pending.isEmpty {
            let remaining = deadline - WallClock.monotonic()
            guard remaining > 0, try fd.waitReadable(timeout: remaining) else { return nil }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = try chunk.withUnsafeMutableBytes { try fd.read(into: $0) }
            guard count > 0 else { throw SystemError(call: "read", errno: EPIPE, subject: "end of stream") }
            var framed: [(H4PacketType, [UInt8])] = []
            chunk.withUnsafeBytes { raw in
                framer.feed(UnsafeRawBufferPointer(rebasing: raw[0..<count])) { framed.append(($0, Array($1))) }
            }
            pending += framed
        }
        return pending.removeFirst()
    }

    /// Sends `command` and returns its Command Complete's status.
    mutating func execute(_ command: HCICommand, timeout: Double = 2) throws -> UInt8? {
        try sendAll(fd, command.h4Packet)
        let deadline = WallClock.monotonic() + timeout
        while let packet = try next(timeout: deadline - WallClock.monotonic()) {
            let response = packet.bytes.withUnsafeBytes { HCICommandResponse(event: $0) }
            if packet.type == .event, let response, response.opcode == command.opcode.rawValue {
                return response.status
            }
        }
        return nil
    }
}

/// Writes every byte to a socket without SIGPIPE: a peer that hung up is an error, not
/// the end of the test process.
func sendAll(_ fd: FileDescriptor, _ bytes: [UInt8]) throws {
    var offset = 0
    while offset < bytes.count {
        let sent = try syscall("send") {
            bytes.withUnsafeBytes { send(fd.rawValue, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
        }
        offset += sent
    }
}

/// Deterministic bytes for the garbage tests (SplitMix64).
struct SeededBytes: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) }
    }
}

let testBeacon = IBeacon(uuid: BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!, major: 4660, minor: 22136,
                         txPower: -59)

extension SourceOutput {
    /// A state change to `state`.
    func isState(_ state: SourceState) -> Bool {
        if case .state(state, _) = self { true } else { false }
    }
}

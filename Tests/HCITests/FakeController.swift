import BeaconKit
import Wire
import Config
import Foundation
import HCI
import Synchronization
import SystemCalls

/// Plays a controller on a Unix socket, for what the emulator cannot do (send line noise,
/// refuse a command): answers every command with a Command Complete, success or the
/// status given in `failing`; once scanning is enabled (legacy or extended) runs `whileScanning` on a thread of
/// its own with the connection and the stop flag. Serves one connection after another.
final class FakeController: Sendable {
    let listener: UnixListener
    let address = BluetoothAddress("11:22:33:44:55:66")!
    private let failing: [HCIOpcode: UInt8]
    private let whileScanning: @Sendable (FileDescriptor, AtomicFlag) -> Void
    private let stopFlag = AtomicFlag()
    private let received = Mutex<[(opcode: UInt16, parameters: [UInt8])]>([])
    private let loop = Mutex<Task<Void, any Error>?>(nil)

    var uri: SourceURI { .h4Unix(path: listener.path) }
    var commands: [(opcode: UInt16, parameters: [UInt8])] { received.withLock { $0 } }

    init(path: String, failing: [HCIOpcode: UInt8] = [:],
         whileScanning: @escaping @Sendable (FileDescriptor, AtomicFlag) -> Void = { _, _ in }) throws {
        listener = try UnixListener(path: path)
        self.failing = failing
        self.whileScanning = whileScanning
        let task = Task { [self] in
            try await BlockingThread.run(name: "fake-controller") { try self.serve() }
        }
        loop.withLock { $0 = task }
    }

    func stop() async {
        stopFlag.set()
        _ = try? await loop.withLock({ $0 })?.value
        listener.close()
    }

    private func serve() throws {
        while !stopFlag.isSet {
            guard let client = try listener.accept(timeout: 0.2) else { continue }
            var reader = PacketReader(client)
            var scanningStarted = false
            let sessionStop = AtomicFlag()
            let scriptDone = DispatchSemaphore(value: 0)
            defer {
                // The script writes to `client`: it must be done before the number is freed.
                sessionStop.set()
                if scanningStarted { scriptDone.wait() }
                client.close()
            }
            while !stopFlag.isSet {
                let packet: (type: H4PacketType, bytes: [UInt8])?
                do { packet = try reader.next(timeout: 0.2) } catch { break }
                guard let packet, packet.type == .command, packet.bytes.count >= 3 else { continue }
                let opcode = UInt16(packet.bytes[0]) | UInt16(packet.bytes[1]) << 8
                let parameters = Array(packet.bytes.dropFirst(3))
                received.withLock { $0.append((opcode, parameters)) }
                let status = HCIOpcode(rawValue: opcode).flatMap { failing[$0] } ?? 0
                let extra = opcode == HCIOpcode.readBDAddr.rawValue && status == 0 ? address.littleEndianBytes : []
                let answer = HCIEventBuilder.commandComplete(opcode, status: status, returning: extra)
                do { try sendAll(client, [H4PacketType.event.rawValue] + answer) } catch { break }
                let enablesScan = opcode == HCIOpcode.leSetScanEnable.rawValue
                    || opcode == HCIOpcode.leSetExtendedScanEnable.rawValue
                if enablesScan, parameters.first == 1, status == 0, !scanningStarted {
                    scanningStarted = true
                    let script = whileScanning
                    let stop = sessionStop
                    Thread.detachNewThread {
                        script(client, stop)
                        scriptDone.signal()
                    }
                }
            }
        }
    }
}

/// Sits between a source and an emulated controller, forwarding both ways and keeping
/// what passed; when the source hangs up it keeps the controller's connection open, so a
/// test can ask that very controller what state the source left it in.
final class RecordingProxy: Sendable {
    let listener: UnixListener
    let upstreamPath: String
    private let sent = Mutex<[[UInt8]]>([])
    private let answered = Mutex<[[UInt8]]>([])
    private let leftOver = Mutex<FileDescriptor?>(nil)
    private let stopFlag = AtomicFlag()

    var uri: SourceURI { .h4Unix(path: listener.path) }
    /// Commands from the source, without the H4 type byte.
    var commands: [[UInt8]] { sent.withLock { $0 } }
    /// Events from the controller, starting at the event code.
    var events: [[UInt8]] { answered.withLock { $0 } }
    /// The controller's connection once the source has gone.
    var upstream: FileDescriptor? { leftOver.withLock { $0 } }

    init(path: String, upstream: String) throws {
        listener = try UnixListener(path: path)
        upstreamPath = upstream
        Task { [self] in
            try? await BlockingThread.run(name: "proxy") { try self.forward() }
        }
    }

    func stop() {
        stopFlag.set()
        leftOver.withLock { $0?.close() }
        listener.close()
    }

    private func forward() throws {
        var client: FileDescriptor?
        while client == nil && !stopFlag.isSet { client = try listener.accept(timeout: 0.2) }
        guard let client else { return }
        defer { client.close() }
        let controller = try Connect.unix(path: upstreamPath)
        var commandFramer = H4Framer()
        var eventFramer = H4Framer()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopFlag.isSet {
            var fds = [pollfd(fd: client.rawValue, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: controller.rawValue, events: Int16(POLLIN), revents: 0)]
            guard poll(&fds, 2, 200) > 0 else { continue }
            for (index, entry) in fds.enumerated() where entry.revents != 0 {
                let from = index == 0 ? client : controller
                let to = index == 0 ? controller : client
                let count = try buffer.withUnsafeMutableBytes { try from.read(into: $0) }
                if count == 0 {
                    if index == 0 { leftOver.withLock { $0 = controller } } else { controller.close() }
                    return
                }
                let chunk = Array(buffer[0..<count])
                chunk.withUnsafeBytes { raw in
                    if index == 0 {
                        commandFramer.feed(raw) { type, packet in
                            if type == .command { sent.withLock { $0.append(Array(packet)) } }
                        }
                    } else {
                        eventFramer.feed(raw) { type, packet in
                            if type == .event { answered.withLock { $0.append(Array(packet)) } }
                        }
                    }
                }
                try sendAll(to, chunk)
            }
        }
        controller.close()
    }
}

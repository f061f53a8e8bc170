#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Wire
import Config
import SystemCalls
import BeaconKit

/// What a source's byte stream held besides well-framed events.
public struct StreamStatistics: Sendable, Equatable {
    /// HCI events received (every kind, advertising reports or not).
    public var events = 0
    /// Bytes the H4 framer skipped because they could not start a packet (line noise).
    public var skippedBytes = 0
    /// Bytes of an incomplete packet thrown away because the rest never came (see
    /// `HCILink.stallTimeout`): garbage that looked like a packet header.
    public var discardedBytes = 0
    /// Packets that were not events (ACL, SCO, ISO, or a command echoed back): ignored.
    public var otherPackets = 0
    /// Packets from a kernel socket shorter than their header announced (their bytes
    /// count in `discardedBytes`): each read of such a socket is one whole packet, so a
    /// short one is thrown away at once rather than glued to the next.
    public var truncatedPackets = 0

    public init() {}

    static func + (lhs: StreamStatistics, rhs: StreamStatistics) -> StreamStatistics {
        var sum = lhs
        sum.events += rhs.events
        sum.skippedBytes += rhs.skippedBytes
        sum.discardedBytes += rhs.discardedBytes
        sum.otherPackets += rhs.otherPackets
        sum.truncatedPackets += rhs.truncatedPackets
        return sum
    }
}

/// One open HCI transport with H4 framing both ways: an H4 byte stream (Unix socket, TCP,
/// UART) or a raw kernel HCI socket, whose reads are one H4 packet each.
///
/// It is used by one thread at a time and handed between threads, never shared; hence
/// `@unchecked Sendable`.
final class HCILink: @unchecked Sendable {
    /// The source URI, for messages.
    let name: String
    let fd: FileDescriptor
    private let isSocket: Bool
    /// Every read returns exactly one packet (a kernel HCI socket), never part of one.
    private let packetPerRead: Bool
    private let mapError: @Sendable (SystemError) -> HCIError
    private let onClose: @Sendable (FileDescriptor) -> Void

    private var framer = H4Framer()
    /// Events framed but not yet handed out, oldest first from `backlogStart`.
    private var backlog: [[UInt8]] = []
    private var backlogStart = 0
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)
    /// Since when (monotonic s) the framer has held an incomplete packet without progress.
    private var pendingSince = WallClock.monotonic()
    /// Skipped bytes counted by framers replaced after a stall.
    private var skippedBefore = 0
    private var isClosed = false
    private(set) var statistics = StreamStatistics()

    /// Seconds an incomplete packet may wait for the rest of its bytes. Controllers send
    /// a packet in one go (a 258-byte event takes 22 ms at 115200 baud), so a header
    /// whose length never arrives is noise; without this, one garbage header announcing
    /// a 64 KiB ACL packet would swallow every event after it.
    static let stallTimeout = 1.0

    init(name: String, fd: FileDescriptor, isSocket: Bool, packetPerRead: Bool = false,
         mapError: @escaping @Sendable (SystemError) -> HCIError,
         onClose: @escaping @Sendable (FileDescriptor) -> Void = { $0.close() }) {
        self.name = name
        self.fd = fd
        self.isSocket = isSocket
        self.packetPerRead = packetPerRead
        self.mapError = mapError
        self.onClose = onClose
    }

    deinit {
        close()
        buffer.deallocate()
    }

    /// Closes once; later calls do nothing.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        onClose(fd)
    }

    /// Sends a command. On sockets without SIGPIPE, so a peer that went away is an error
    /// and not the end of the process.
    func send(_ command: HCICommand) throws(HCIError) {
        let bytes = command.h4Packet
        guard isSocket else {
            do { try fd.writeAll(bytes) } catch { throw mapError(error) }
            return
        }
        var offset = 0
        while offset < bytes.count {
            let sent: Int
            do {
                sent = try syscall("send", subject: name) {
                    bytes.withUnsafeBytes { raw in
                        Glibc.send(fd.rawValue, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                    }
                }
            } catch {
                throw mapError(error)
            }
            offset += sent
        }
    }

    /// The next event (starting at the event code), or `nil` when none came within
    /// `timeout` seconds. Throws when the stream ends or fails.
    func nextEvent(timeout: Double) throws(HCIError) -> [UInt8]? {
        let deadline = WallClock.monotonic() + timeout
        while true {
            if backlogStart < backlog.count {
                let event = backlog[backlogStart]
                backlogStart += 1
                if backlogStart == backlog.count {
                    backlog.removeAll(keepingCapacity: true)
                    backlogStart = 0
                }
                return event
            }
            let now = WallClock.monotonic()
            dropStalledPacket(now: now)
            let remaining = deadline - now
            if remaining <= 0 { return nil }
            try fill(timeout: min(remaining, 0.2))
        }
    }

    /// Sends `command` and waits for its Command Complete (or a failing Command Status),
    /// handing every event that arrives meanwhile, the answer included, to `deliver`.
    ///
    /// `isCancelled` is asked at least every 200 ms; when it says yes this throws
    /// `CancellationError` without waiting for the answer.
    func execute(_ command: HCICommand, timeout: Double = 2, isCancelled: () -> Bool = { false },
                 deliver: ([UInt8]) -> Void) throws -> HCICommandResponse {
        try send(command)
        let deadline = WallClock.monotonic() + timeout
        while true {
            if isCancelled() { throw CancellationError() }
            let remaining = deadline - WallClock.monotonic()
            guard remaining > 0 else { throw HCIError.timeout(command.opcode, seconds: timeout) }
            guard let event = try nextEvent(timeout: min(remaining, 0.2)) else { continue }
            deliver(event)
            let response = event.withUnsafeBytes { HCICommandResponse(event: $0) }
            // A Command Status with success only says "pending": keep waiting for the end.
            if let response, response.opcode == command.opcode.rawValue,
               event[0] == HCIEvent.commandComplete || response.status != 0 {
                return response
            }
        }
    }

    /// `execute`, then a non-zero status other than those in `allowing` becomes
    /// `HCIError.command`.
    @discardableResult
    func run(_ command: HCICommand, allowing: Set<UInt8> = [], timeout: Double = 2,
             isCancelled: () -> Bool = { false }, deliver: ([UInt8]) -> Void) throws -> HCICommandResponse {
        let response = try execute(command, timeout: timeout, isCancelled: isCancelled, deliver: deliver)
        guard response.status == 0 || allowing.contains(response.status) else {
            throw HCIError.command(command.opcode, status: response.status)
        }
        return response
    }

    /// Waits up to `timeout` s for bytes, reads once and frames what came.
    private func fill(timeout: Double) throws(HCIError) {
        let readable: Bool
        do { readable = try fd.waitReadable(timeout: timeout) } catch { throw mapError(error) }
        guard readable else { return }
        let count: Int
        do {
            count = try fd.read(into: buffer)
        } catch {
            throw mapError(error)
        }
        if count == 0 { throw HCIError.closed(source: name) }
        let hadPending = framer.pendingBytes > 0
        let packetsBefore = framer.packets
        framer.feed(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) { type, packet in
            if type == .event {
                backlog.append(Array(packet))
                statistics.events += 1
            } else {
                statistics.otherPackets += 1
            }
        }
        if !hadPending || framer.packets != packetsBefore { pendingSince = WallClock.monotonic() }
        statistics.skippedBytes = skippedBefore + framer.skippedBytes
        if packetPerRead, framer.pendingBytes > 0 {
            statistics.truncatedPackets += 1
            statistics.discardedBytes += framer.pendingBytes
            skippedBefore += framer.skippedBytes
            framer = H4Framer()
        }
    }

    private func dropStalledPacket(now: Double) {
        guard framer.pendingBytes > 0, now - pendingSince > Self.stallTimeout else { return }
        statistics.discardedBytes += framer.pendingBytes
        skippedBefore += framer.skippedBytes
        framer = H4Framer()
        pendingSince = now
    }
}

extension HCILink {
    /// Opens an H4 byte stream: `h4:unix:`, `h4:tcp:` or `h4:tty:`.
    static func openH4(_ uri: SourceURI) throws(HCIError) -> HCILink {
        let name = uri.description
        let mapError: @Sendable (SystemError) -> HCIError = { .system(source: name, $0) }
        do throws(SystemError) {
            switch uri {
            case .h4Unix(let path):
                return HCILink(name: name, fd: try Connect.unix(path: path), isSocket: true, mapError: mapError)
            case .h4TCP(let host, let port):
                return HCILink(name: name, fd: try Connect.tcp(host: host, port: port), isSocket: true, mapError: mapError)
            case .h4TTY(let path, let baud):
                return HCILink(name: name, fd: try Connect.tty(path: path, baud: baud), isSocket: false, mapError: mapError)
            case .hci, .btsnoop:
                break
            }
        } catch {
            throw mapError(error)
        }
        throw HCIError.notLive(uri, reason: "not an H4 stream (expected h4:unix:, h4:tcp: or h4:tty:)")
    }
}

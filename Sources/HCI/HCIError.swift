#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
public import BeaconKit
public import Wire
import Config
public import SystemCalls

/// Why a live source or the advertiser could not do its work, said so that an operator
/// knows what failed and, where there is one, what to do about it.
public enum HCIError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The controller answered `opcode` with a non-zero status (Core spec Vol 1 Part F).
    case command(HCIOpcode, status: UInt8)
    /// The controller did not answer `opcode` within `seconds`.
    case timeout(HCIOpcode, seconds: Double)
    /// The byte stream or socket ended: the peer closed it or the adapter went away.
    case closed(source: String)
    /// A system call on the source failed.
    case system(source: String, SystemError)
    /// The kernel has no Bluetooth sockets (`socket(AF_BLUETOOTH)` gives EAFNOSUPPORT).
    case noBluetoothSockets(adapter: Int)
    /// The kernel refused a raw HCI operation: the process lacks CAP_NET_RAW, or CAP_NET_ADMIN
    /// to bring a down adapter up (HCIDEVUP).
    case permissionDenied(adapter: Int, SystemError)
    /// The adapter does not exist (yet), is down or is blocked; worth retrying.
    case adapterUnavailable(adapter: Int, reason: String)
    /// The URI names no live controller (a capture, say).
    case notLive(SourceURI, reason: String)
    /// The source cannot do what was asked (advertise from a replay, say).
    case unsupported(source: String, reason: String)

    public var description: String {
        switch self {
        case .command(let opcode, let status):
            let name = HCIStatus.describe(status)
            let code = "0x" + Hex.encode([status])
            return name.hasPrefix("status ") ? "\(opcode) failed: \(name)" : "\(opcode) failed: \(name) (\(code))"
        case .timeout(let opcode, let seconds):
            return "\(opcode): no answer from the controller within \(Self.format(seconds)) s"
        case .closed(let source):
            return "\(source): the controller's stream was closed"
        case .system(let source, let error):
            return "\(source): \(error)"
        case .noBluetoothSockets(let adapter):
            return "hci:\(adapter): this kernel has no Bluetooth sockets (socket(AF_BLUETOOTH) failed with "
                + "EAFNOSUPPORT); load the bluetooth module (modprobe bluetooth) or use a kernel built with "
                + "CONFIG_BT, or reach the controller as an H4 stream (h4:tty:/dev/ttyAMA0@115200, h4:unix:PATH)"
        case .permissionDenied(let adapter, let error) where error.call == "ioctl(HCIDEVUP)":
            // The shipped unit grants CAP_NET_RAW only: its ExecStartPre (`--adapter-up`, as
            // root) brings the adapter up before every start, so exiting here is the way back.
            return "hci:\(adapter): the adapter is down and bringing it up needs CAP_NET_ADMIN (\(error))"
                + (Self.missingCapabilities.map { "; this process lacks \($0)" } ?? "")
                + ": bring it up as root (`\(Self.executablePath) --config FLEET.json --id GATEWAY --adapter-up`, "
                + "which the systemd unit runs before every start and restart, or `hciconfig hci\(adapter) up`), "
                + "or give this process CAP_NET_ADMIN too"
        case .permissionDenied(let adapter, let error):
            return "hci:\(adapter): \(error); raw HCI access needs CAP_NET_RAW and CAP_NET_ADMIN"
                + (Self.missingCapabilities.map { " and this process lacks \($0)" } ?? "")
                + ": run `sudo setcap cap_net_raw,cap_net_admin+eip \(Self.executablePath)` or, under systemd, "
                + "set AmbientCapabilities=CAP_NET_RAW in the unit (and bring the adapter up as root before, as "
                + "the shipped unit's ExecStartPre=+… --adapter-up does)"
        case .adapterUnavailable(let adapter, let reason):
            return "hci:\(adapter): \(reason)"
        case .notLive(let uri, let reason):
            return "\(uri): \(reason)"
        case .unsupported(let source, let reason):
            return "\(source): \(reason)"
        }
    }

    /// True for errors that no retry can fix: the caller should stop and say so.
    public var isPermanent: Bool {
        switch self {
        case .noBluetoothSockets, .permissionDenied, .notLive, .unsupported: true
        case .command, .timeout, .closed, .system, .adapterUnavailable: false
        }
    }

    static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }

    /// The capabilities raw HCI access needs that this process does not have in its
    /// effective set (from `CapEff` in /proc/self/status), e.g. "CAP_NET_RAW and
    /// CAP_NET_ADMIN"; `nil` when it has both or the set cannot be read.
    static var missingCapabilities: String? {
        guard let status = try? FileSystem.readText("/proc/self/status"),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
              let mask = UInt64(line.dropFirst("CapEff:".count).filter { !$0.isWhitespace }, radix: 16)
        else { return nil }
        // capability.h: CAP_NET_ADMIN 12, CAP_NET_RAW 13.
        let missing = [(13, "CAP_NET_RAW"), (12, "CAP_NET_ADMIN")].filter { mask & (1 << UInt64($0.0)) == 0 }.map(\.1)
        return missing.isEmpty ? nil : missing.joined(separator: " and ")
    }

    /// This executable, for the setcap hint.
    static var executablePath: String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBufferPointer { raw in
            raw.withMemoryRebound(to: CChar.self) { readlink("/proc/self/exe", $0.baseAddress!, $0.count - 1) }
        }
        return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : "/usr/bin/beacon-gateway"
    }
}

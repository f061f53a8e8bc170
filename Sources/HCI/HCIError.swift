#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
public import BeaconKit
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
    /// The kernel refused a raw HCI operation: the process lacks CAP_NET_RAW/CAP_NET_ADMIN.
    case permissionDenied(adapter: Int, SystemError)
    /// The adapter does not exist (yet), is down or is blocked; worth retrying.
    case adapterUnavailable(adapter: Int, reason: String)
    /// The URI names no live controller (a capture, say).
    case notLive(SourceURI, reason: String)

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
        case .permissionDenied(let adapter, let error):
            return "hci:\(adapter): \(error); raw HCI access needs CAP_NET_RAW and CAP_NET_ADMIN: "
                + "run `sudo setcap cap_net_raw,cap_net_admin+eip \(Self.executablePath)` or, under systemd, "
                + "set AmbientCapabilities=CAP_NET_RAW CAP_NET_ADMIN in the unit"
        case .adapterUnavailable(let adapter, let reason):
            return "hci:\(adapter): \(reason)"
        case .notLive(let uri, let reason):
            return "\(uri): \(reason)"
        }
    }

    /// True for errors that no retry can fix: the caller should stop and say so.
    public var isPermanent: Bool {
        switch self {
        case .noBluetoothSockets, .permissionDenied, .notLive: true
        case .command, .timeout, .closed, .system, .adapterUnavailable: false
        }
    }

    static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
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

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
public import Config
import CBlueZ
public import Logging
public import SystemCalls

/// Advertising reports from a kernel Bluetooth adapter (`hci:N`) through a raw HCI socket
/// (libbluetooth's `hci_open_dev`): the production source on a Raspberry Pi.
///
/// The adapter is shared with bluetoothd, so the source does not reset it or touch its
/// event masks. It saves the socket's HCI filter and sets one that passes LE Meta,
/// Command Complete and Command Status events; brings a down adapter up (HCIDEVUP);
/// turns scanning off first (a scanner killed mid-scan leaves it on and the next enable
/// fails); sets passive (by default) scan parameters and enables scanning with the
/// duplicate filter off — with the legacy commands, or the LE extended ones when the
/// controller refuses the legacy ones (Command Disallowed: the kernel drove it with
/// extended commands). On exit it turns scanning off and restores the filter.
///
/// Missing privileges and a kernel without Bluetooth sockets are errors `run` throws
/// (no retry fixes them). An adapter that is missing, down or goes away is reported as
/// `.retrying` and retried with back-off: a socket bound to an adapter that goes down
/// hears nothing about it, so the source asks the kernel once a second whether the
/// adapter is still up; and when no advertising report came for `scan.stallTimeout`
/// seconds although it is, the scan is restarted.
public final class KernelHCISource: AdvertisingSource {
    public let adapter: Int
    public let clock: any SourceClock = LiveSourceClock()
    private let engine: LiveScanner

    public init(adapter: Int, scan: ScanConfig = ScanConfig(), advertise: AdvertiseConfig? = nil,
                logger: Logger = Logger(label: "beaconbridge.hci")) {
        self.adapter = adapter
        engine = LiveScanner(name: "hci:\(adapter)", ownsController: false, scan: scan, advertise: advertise,
                             logger: logger,
                             checkAdapter: { link throws(HCIError) in try HCILink.checkUp(adapter: adapter, link: link) },
                             open: { () throws(HCIError) in try HCILink.openKernel(adapter: adapter) })
    }

    public var name: String { "hci:\(adapter)" }

    public var statistics: StreamStatistics { engine.statistics }

    public var heartbeat: Heartbeat? { engine.heartbeat }

    /// Scan restarts by the stall watchdog so far.
    public var scanRestarts: Int { engine.scanRestarts }

    public func setAdvertising(_ advertise: AdvertiseConfig?, timeout: Double) async throws -> AdvertisingChange {
        try await engine.setAdvertising(advertise, timeout: timeout)
    }

    /// Brings adapter `adapter` up if it is down (HCIDEVUP, which needs CAP_NET_ADMIN) and
    /// returns: what `beacon-gateway --adapter-up` does as root before the unprivileged
    /// gateway starts, so the gateway itself needs only CAP_NET_RAW.
    public static func bringUp(adapter: Int) throws(HCIError) {
        let dd = hci_open_dev(Int32(adapter))
        guard dd >= 0 else {
            throw HCILink.kernelError(adapter, SystemError(call: "hci_open_dev", errno: errno, subject: "hci\(adapter)"))
        }
        defer { _ = Glibc.close(dd) }
        try HCILink.bringUp(adapter: adapter, socket: dd)
    }

    public func run(_ output: @escaping @Sendable (SourceOutput) -> Void) async throws {
        try await engine.run(output)
    }

    public func setScanning(_ enabled: Bool) async {
        engine.setScanning(enabled)
    }
}

extension HCILink {
    /// Opens adapter `adapter` as a raw HCI socket with a filter for the events we use.
    /// Closing the link restores the filter the socket had.
    static func openKernel(adapter: Int) throws(HCIError) -> HCILink {
        let name = "hci:\(adapter)"
        let dd = hci_open_dev(Int32(adapter))
        guard dd >= 0 else {
            throw kernelError(adapter, SystemError(call: "hci_open_dev", errno: errno, subject: "hci\(adapter)"))
        }
        do {
            try bringUp(adapter: adapter, socket: dd)
            let length = socklen_t(MemoryLayout<hci_filter>.size)
            var saved = hci_filter()
            var savedLength = length
            _ = try syscall("getsockopt", subject: "HCI_FILTER") {
                getsockopt(dd, Int32(SOL_HCI), Int32(HCI_FILTER), &saved, &savedLength)
            }
            var filter = hci_filter()
            bb_hci_filter_clear(&filter)
            bb_hci_filter_set_ptype(Int32(HCI_EVENT_PKT), &filter)
            bb_hci_filter_set_event(Int32(EVT_LE_META_EVENT), &filter)
            bb_hci_filter_set_event(Int32(EVT_CMD_COMPLETE), &filter)
            bb_hci_filter_set_event(Int32(EVT_CMD_STATUS), &filter)
            _ = try syscall("setsockopt", subject: "HCI_FILTER") {
                setsockopt(dd, Int32(SOL_HCI), Int32(HCI_FILTER), &filter, length)
            }
            let original = saved
            return HCILink(name: name, fd: FileDescriptor(rawValue: dd), isSocket: true, packetPerRead: true,
                           mapError: { kernelError(adapter, $0) },
                           onClose: { fd in
                               var restored = original
                               _ = setsockopt(fd.rawValue, Int32(SOL_HCI), Int32(HCI_FILTER), &restored, length)
                               fd.close()
                           })
        } catch {
            _ = Glibc.close(dd)
            throw error as? HCIError ?? kernelError(adapter, error as? SystemError ?? SystemError(call: "open", errno: EIO))
        }
    }

    /// Throws `adapterUnavailable` when the adapter behind `link` is down or gone. A raw
    /// socket bound to an adapter hears nothing when it goes down (the kernel tells only
    /// unbound sockets), and reads simply stop; hence this question, once a second.
    static func checkUp(adapter: Int, link: HCILink) throws(HCIError) {
        var info = hci_dev_info()
        info.dev_id = UInt16(adapter)
        let result = withUnsafeMutablePointer(to: &info) { ioctl(link.fd.rawValue, bb_HCIGETDEVINFO(), $0) }
        guard result == 0 else {
            throw kernelError(adapter, SystemError(call: "ioctl(HCIGETDEVINFO)", errno: errno, subject: "hci\(adapter)"))
        }
        guard bb_hci_devinfo_is_up(&info) != 0 else {
            throw HCIError.adapterUnavailable(adapter: adapter, reason: "the adapter went down")
        }
    }

    /// Brings a down adapter up, as `hciconfig hciN up` would (this needs CAP_NET_ADMIN).
    static func bringUp(adapter: Int, socket dd: Int32) throws(HCIError) {
        var info = hci_dev_info()
        guard hci_devinfo(Int32(adapter), &info) == 0 else {
            throw kernelError(adapter, SystemError(call: "hci_devinfo", errno: errno, subject: "hci\(adapter)"))
        }
        guard bb_hci_devinfo_is_up(&info) == 0 else { return }
        if ioctl(dd, bb_HCIDEVUP(), Int32(adapter)) < 0 && errno != EALREADY {
            let error = SystemError(call: "ioctl(HCIDEVUP)", errno: errno, subject: "hci\(adapter)")
            switch error.errno {
            case EPERM, EACCES, EAFNOSUPPORT: throw kernelError(adapter, error)
            case ERFKILL:
                throw HCIError.adapterUnavailable(
                    adapter: adapter, reason: "the adapter is blocked by rfkill (run `rfkill unblock bluetooth`)")
            default:
                throw HCIError.adapterUnavailable(adapter: adapter, reason: "the adapter is down and did not come up: \(error)")
            }
        }
    }

    /// Sorts kernel errors into the ones an operator must fix and the ones to retry.
    static func kernelError(_ adapter: Int, _ error: SystemError) -> HCIError {
        switch error.errno {
        case EAFNOSUPPORT:
            .noBluetoothSockets(adapter: adapter)
        case EPERM, EACCES:
            .permissionDenied(adapter: adapter, error)
        case ENODEV, ENXIO:
            .adapterUnavailable(adapter: adapter, reason: "no such adapter, or it went away (\(error))")
        case ENETDOWN:
            // A command sent on a link to an adapter that went down since: the same event the
            // once-a-second check (`checkUp`) reports, in the same words, whichever sees it first.
            .adapterUnavailable(adapter: adapter, reason: "the adapter went down (\(error))")
        case ERFKILL:
            .adapterUnavailable(adapter: adapter, reason: "the adapter is blocked by rfkill (run `rfkill unblock bluetooth`)")
        default:
            .system(source: "hci:\(adapter)", error)
        }
    }
}

public import BeaconKit
import Wire
import Config
public import Logging
import SystemCalls

/// Makes a controller advertise an iBeacon (`beaconctl advertise`, gateways that are
/// beacons too, and the tests' emulated beacons).
///
/// On an H4 stream (`h4:…`) the controller is reset first; on a kernel adapter (`hci:N`)
/// it is not (bluetoothd may share it). Then: advertising off, parameters
/// (non-connectable undirected, `intervalMs`), advertising data
/// `AdvertisingData.iBeacon(beacon)`, advertising on; each command waited for and
/// checked. `stop()` turns advertising off and closes.
public final class Advertiser: Sendable {
    public let name: String
    public let beacon: IBeacon
    /// The controller's public address, the one scanners report for this beacon.
    public let address: BluetoothAddress
    private let stopFlag: AtomicFlag
    private let loop: Task<Void, any Error>

    /// Connects and starts advertising; returns once the controller confirmed it.
    ///
    /// - Parameter retrigger: seconds between turning advertising off and on again, or
    ///   `nil` to leave it on. BlueZ's emulator (`btvirt`) hands scanners one report per
    ///   advertising enable (and one per scan enable), not one per advertising interval
    ///   as a radio would; retriggering keeps scanners on emulated controllers hearing
    ///   the beacon, which presence tracking (exit after silence) needs. A real
    ///   controller needs no retrigger.
    public static func start(_ uri: SourceURI, beacon: IBeacon, intervalMs: Int = 100, retrigger: Double? = nil,
                             logger: Logger = Logger(label: "beaconbridge.hci")) async throws -> Advertiser {
        let cancelled = AtomicFlag()
        let (controller, address) = try await withTaskCancellationHandler {
            try await BlockingThread.run(name: "hci-advertiser") { () throws -> (Controller, BluetoothAddress) in
                let link: HCILink
                switch uri {
                case .h4Unix, .h4TCP, .h4TTY: link = try HCILink.openH4(uri)
                case .hci(let adapter): link = try HCILink.openKernel(adapter: adapter)
                case .btsnoop: throw HCIError.notLive(uri, reason: "a capture cannot advertise")
                }
                let controller = Controller(link: link, isCancelled: { cancelled.isSet }, deliver: { _ in },
                                            logger: logger)
                do {
                    if uri.ownsController { try controller.run(HCICommand(.reset)) }
                    let address = try controller.readAddress()
                    try controller.startAdvertising(beacon, intervalMs: intervalMs)
                    return (controller, address)
                } catch {
                    controller.stopAdvertising()
                    link.close()
                    throw error
                }
            }
        } onCancel: {
            cancelled.set()
        }
        // A kernel adapter that goes down says nothing on the socket: ask once a second.
        var checkAdapter: (@Sendable (HCILink) throws(HCIError) -> Void)?
        if case .hci(let adapter) = uri {
            checkAdapter = { link throws(HCIError) in try HCILink.checkUp(adapter: adapter, link: link) }
        }
        return Advertiser(name: uri.description, beacon: beacon, address: address, controller: controller,
                          retrigger: retrigger.map { max($0, 0.02) }, checkAdapter: checkAdapter)
    }

    private init(name: String, beacon: IBeacon, address: BluetoothAddress, controller: Controller, retrigger: Double?,
                 checkAdapter: (@Sendable (HCILink) throws(HCIError) -> Void)?) {
        self.name = name
        self.beacon = beacon
        self.address = address
        let stop = AtomicFlag()
        stopFlag = stop
        loop = Task {
            try await BlockingThread.run(name: "hci-advertiser") {
                try Self.keepAdvertising(controller.with(isCancelled: { stop.isSet }), retrigger: retrigger,
                                         checkAdapter: checkAdapter, stop: stop)
            }
        }
    }

    deinit { stopFlag.set() }

    /// Turns advertising off and closes the connection.
    public func stop() async {
        stopFlag.set()
        _ = try? await loop.value
    }

    /// Returns when the advertiser stops: after `stop()`, or throwing when the link or a
    /// retrigger command failed.
    public func wait() async throws {
        try await loop.value
    }

    /// Drains the controller's events and retriggers until `stop` is set; throws when
    /// the link fails or the adapter went down (`checkAdapter`, once a second).
    private static func keepAdvertising(_ controller: Controller, retrigger: Double?,
                                        checkAdapter: (@Sendable (HCILink) throws(HCIError) -> Void)?,
                                        stop: AtomicFlag) throws {
        defer { controller.link.close() }
        var due = retrigger.map { WallClock.monotonic() + $0 }
        var nextCheck = WallClock.monotonic() + 1
        do {
            while !stop.isSet {
                let now = WallClock.monotonic()
                if let checkAdapter, now >= nextCheck {
                    try checkAdapter(controller.link)
                    nextCheck = now + 1
                }
                if let period = retrigger, let next = due, now >= next {
                    try controller.run(.leSetAdvertiseEnable(false))
                    try controller.run(.leSetAdvertiseEnable(true))
                    due = max(next + period, now)
                }
                let wait = due.map { min(0.2, max(0, $0 - WallClock.monotonic())) } ?? 0.2
                _ = try controller.link.nextEvent(timeout: wait)
            }
        } catch {
            guard stop.isSet else { throw error }
        }
        controller.stopAdvertising()
    }
}

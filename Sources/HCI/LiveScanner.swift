import BeaconKit
import Logging
import Synchronization
import SystemCalls

/// The engine behind `H4Source` and `KernelHCISource`: open, set the controller up,
/// deliver events, restore on the way out; on loss, report and retry with back-off.
///
/// Reading happens on a dedicated thread (`BlockingThread`) that polls at most 200 ms at
/// a time, so cancellation and pause requests are noticed within that.
final class LiveScanner: Sendable {
    let name: String
    /// Reset and set the event masks (an H4 controller the gateway owns), or leave the
    /// controller's configuration alone (a kernel adapter bluetoothd may share).
    let ownsController: Bool
    let scan: ScanConfig
    let advertise: AdvertiseConfig?
    let logger: Logger
    private let open: @Sendable () throws(HCIError) -> HCILink
    private let wantsScanning = Mutex(true)
    /// Counters of sessions that ended, and of the one running now.
    private let finishedSessions = Mutex(StreamStatistics())
    private let currentSession = Mutex(StreamStatistics())

    /// Back-off between attempts: 0.5 s doubling to 30 s; back to 0.5 s once a session
    /// got as far as scanning.
    static let firstDelay = 0.5
    static let maxDelay = 30.0

    init(name: String, ownsController: Bool, scan: ScanConfig, advertise: AdvertiseConfig?, logger: Logger,
         open: @escaping @Sendable () throws(HCIError) -> HCILink) {
        self.name = name
        self.ownsController = ownsController
        self.scan = scan
        self.advertise = advertise
        self.logger = logger
        self.open = open
    }

    var statistics: StreamStatistics {
        finishedSessions.withLock { $0 } + currentSession.withLock { $0 }
    }

    func setScanning(_ enabled: Bool) {
        wantsScanning.withLock { $0 = enabled }
    }

    func run(_ output: @escaping @Sendable (SourceOutput) -> Void) async throws {
        let stop = AtomicFlag()
        try await withTaskCancellationHandler {
            try await retryLoop(stop: stop, output: output)
        } onCancel: {
            stop.set()
        }
    }

    private func retryLoop(stop: AtomicFlag, output: @escaping @Sendable (SourceOutput) -> Void) async throws {
        var delay = Self.firstDelay
        output(.state(.starting, detail: "opening \(name)"))
        while !stop.isSet {
            let reachedScanning = AtomicFlag()
            do {
                try await BlockingThread.run(name: "hci-source") {
                    try self.session(stop: stop, reachedScanning: reachedScanning, output: output)
                }
                return
            } catch let error as HCIError where error.isPermanent {
                logger.error("source cannot run", metadata: ["source": "\(name)", "error": "\(error)"])
                throw error
            } catch {
                if stop.isSet { return }
                if reachedScanning.isSet { delay = Self.firstDelay }
                let reason = Self.describe(error, source: name)
                logger.warning("source lost; retrying", metadata: [
                    "source": "\(name)", "error": "\(reason)", "delay": "\(delay)",
                ])
                output(.state(.retrying, detail: "\(reason); retrying in \(HCIError.format(delay)) s"))
                do { try await Task.sleep(for: .seconds(delay)) } catch { return }
                delay = min(delay * 2, Self.maxDelay)
            }
        }
    }

    /// One connection, from opening to loss or cancellation. Returns only after `stop`
    /// was set, with the controller restored; throws when the link or a command fails.
    private func session(stop: AtomicFlag, reachedScanning: AtomicFlag,
                         output: @escaping @Sendable (SourceOutput) -> Void) throws {
        let link = try open()
        let controller = Controller(link: link, isCancelled: { stop.isSet }, deliver: { event in
            self.currentSession.withLock { $0 = link.statistics }
            output(.frame(HCIFrame(time: WallClock.now(), event: event)))
        }, logger: logger)
        defer {
            link.close()
            let counted = link.statistics
            finishedSessions.withLock { $0 = $0 + counted }
            currentSession.withLock { $0 = StreamStatistics() }
        }

        // What must be undone on the way out; set before the command that starts it, so
        // that a command cut short by cancellation is undone too.
        var scanning = false
        var advertising = false
        do {
            if ownsController { try controller.takeOver() }
            let address = try controller.readAddress()
            try controller.prepareScan(scan)
            if let advertise {
                advertising = true
                try controller.startAdvertising(advertise.beacon, intervalMs: advertise.intervalMs)
            }
            var reported: Bool?
            while !stop.isSet {
                let wanted = wantsScanning.withLock { $0 }
                if reported != wanted {
                    if wanted || scanning {
                        scanning = true
                        try controller.run(.leSetScanEnable(wanted),
                                           allowing: wanted ? [] : [Controller.commandDisallowed])
                        scanning = wanted
                    }
                    reported = wanted
                    reachedScanning.set()
                    let mode = scan.active ? "active" : "passive"
                    output(wanted
                        ? .state(.running, detail: "scanning (\(mode)) on \(name) (BD_ADDR \(address))")
                        : .state(.paused, detail: "scanning paused on \(name) (BD_ADDR \(address))"))
                }
                if let event = try link.nextEvent(timeout: 0.2) { controller.deliver(event) }
            }
        } catch {
            restore(controller, scanning: scanning, advertising: advertising)
            if stop.isSet { return }
            throw error
        }
        restore(controller, scanning: scanning, advertising: advertising)
    }

    private func restore(_ controller: Controller, scanning: Bool, advertising: Bool) {
        if scanning { controller.stopScanning() }
        if advertising { controller.stopAdvertising() }
    }

    /// An error as a state detail: HCI errors say which source already.
    static func describe(_ error: any Error, source: String) -> String {
        switch error {
        case let error as HCIError:
            switch error {
            case .command, .timeout: "\(source): \(error)"
            default: "\(error)"
            }
        case let error as SystemError: "\(source): \(error)"
        default: "\(source): \(error)"
        }
    }
}

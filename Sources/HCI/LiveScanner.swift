import Wire
import Config
import Logging
import Synchronization
import SystemCalls
import BeaconKit
import LiveClock

/// The engine behind `H4Source` and `KernelHCISource`: open, set the controller up,
/// deliver events, restore on the way out; on loss, report and retry with back-off.
///
/// Reading happens on a dedicated thread (`BlockingThread`) that polls at most 200 ms at
/// a time, so cancellation, pause and advertising requests are noticed within that.
///
/// While scanning it watches two things a quiet stream can hide: the adapter (a kernel
/// adapter taken down says nothing on the socket; `checkAdapter` asks the kernel once a
/// second) and the reports themselves (no advertising report for `scan.stallTimeout`
/// seconds while the adapter is up: someone else turned scanning off or reprogrammed
/// it, so the scan is restarted).
final class LiveScanner: Sendable {
    let name: String
    /// Reset and set the event masks (an H4 controller the gateway owns), or leave the
    /// controller's configuration alone (a kernel adapter bluetoothd may share).
    let ownsController: Bool
    let scan: ScanConfig
    let logger: Logger
    private let open: @Sendable () throws(HCIError) -> HCILink
    /// Throws when the adapter behind an open link went down or away.
    private let checkAdapter: (@Sendable (HCILink) throws(HCIError) -> Void)?
    private let wantsScanning = Mutex(true)
    private let advertising: Mutex<AdvertisingRequests>
    /// Counters of sessions that ended, and of the one running now.
    private let finishedSessions = Mutex(StreamStatistics())
    private let currentSession = Mutex(StreamStatistics())
    private let restarts = Mutex(0)
    /// Beats on every round of the session loop, every event, and while waiting to retry.
    let heartbeat = Heartbeat()

    /// Back-off between attempts: 0.5 s doubling to 30 s; back to 0.5 s once a session
    /// got as far as scanning.
    static let firstDelay = 0.5
    static let maxDelay = 30.0
    /// Seconds between two adapter checks.
    static let adapterCheckInterval = 1.0

    init(name: String, ownsController: Bool, scan: ScanConfig, advertise: AdvertiseConfig?, logger: Logger,
         checkAdapter: (@Sendable (HCILink) throws(HCIError) -> Void)? = nil,
         open: @escaping @Sendable () throws(HCIError) -> HCILink) {
        self.name = name
        self.ownsController = ownsController
        self.scan = scan
        self.logger = logger
        self.checkAdapter = checkAdapter
        self.open = open
        advertising = Mutex(AdvertisingRequests(wanted: advertise))
    }

    var statistics: StreamStatistics {
        finishedSessions.withLock { $0 } + currentSession.withLock { $0 }
    }

    /// Scan restarts by the stall watchdog so far.
    var scanRestarts: Int { restarts.withLock { $0 } }

    func setScanning(_ enabled: Bool) {
        wantsScanning.withLock { $0 = enabled }
    }

    /// Asks the session to start, replace or (nil) stop advertising, and waits up to
    /// `timeout` seconds for the controller's answer.
    func setAdvertising(_ config: AdvertiseConfig?, timeout: Double) async throws -> AdvertisingChange {
        let generation = advertising.withLock { state -> Int in
            state.wanted = config
            state.requested += 1
            return state.requested
        }
        let deadline = WallClock.monotonic() + timeout
        while true {
            // Looked at once more after the deadline: a task that woke late still reports
            // an answer that came in time.
            let outcome = advertising.withLock { state -> (applied: Bool, failure: HCIError?) in
                (state.applied >= generation, state.applied == generation ? state.failure : nil)
            }
            if outcome.applied {
                if let failure = outcome.failure { throw failure }
                return config == nil ? .stopped : .started
            }
            if WallClock.monotonic() >= deadline { return .pending }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    func run(_ output: @escaping @Sendable (SourceOutput) -> Void) async throws {
        let stop = AtomicFlag()
        defer { heartbeat.pause() }
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
            heartbeat.beat()
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
                // In slices, beating: waiting to retry is the loop going round, not a hang.
                let resume = WallClock.monotonic() + delay
                while WallClock.monotonic() < resume {
                    heartbeat.beat()
                    do { try await Task.sleep(for: .seconds(min(1, resume - WallClock.monotonic()))) } catch { return }
                }
                delay = min(delay * 2, Self.maxDelay)
            }
        }
    }

    /// One connection, from opening to loss or cancellation. Returns only after `stop`
    /// was set, with the controller restored; throws when the link or a command fails.
    private func session(stop: AtomicFlag, reachedScanning: AtomicFlag,
                         output: @escaping @Sendable (SourceOutput) -> Void) throws {
        let link = try open()
        let lastReport = Mutex(WallClock.monotonic())
        let controller = Controller(link: link, isCancelled: { stop.isSet }, deliver: { event in
            self.heartbeat.beat()
            self.currentSession.withLock { $0 = link.statistics }
            if HCIEvent.isAdvertisingReport(event) { lastReport.withLock { $0 = WallClock.monotonic() } }
            // A live controller's report is dated by the wall clock as it arrives: its capture time.
            output(.frame(HCIFrame(time: WallClock.now().asCaptureTime(), event: event)))
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
        var advertisingOn = false
        var mode = ScanMode.legacy
        do {
            if ownsController { try controller.takeOver() }
            let address = try controller.readAddress()
            mode = try controller.prepareScan(scan)
            try applyAdvertising(controller, on: &advertisingOn, initial: true)
            var reported: Bool?
            var nextAdapterCheck = WallClock.monotonic() + Self.adapterCheckInterval
            var quietRestarts = 0
            var truncatedSeen = link.statistics.truncatedPackets
            while !stop.isSet {
                heartbeat.beat()
                let wanted = wantsScanning.withLock { $0 }
                if reported != wanted {
                    if wanted || scanning {
                        scanning = true
                        try controller.run(mode.enable(wanted), allowing: wanted ? [] : [Controller.commandDisallowed])
                        scanning = wanted
                    }
                    reported = wanted
                    reachedScanning.set()
                    lastReport.withLock { $0 = WallClock.monotonic() }
                    let kind = (scan.active ? "active" : "passive") + (mode == .extended ? ", extended" : "")
                    output(wanted
                        ? .state(.running, detail: "scanning (\(kind)) on \(name) (BD_ADDR \(address))")
                        : .state(.paused, detail: "scanning paused on \(name) (BD_ADDR \(address))"))
                }
                try applyAdvertising(controller, on: &advertisingOn, initial: false)
                if let event = try link.nextEvent(timeout: 0.2) {
                    controller.deliver(event)
                    if quietRestarts > 0, HCIEvent.isAdvertisingReport(event) {
                        logger.info("advertising reports again after the scan restart", metadata: ["source": "\(name)"])
                        quietRestarts = 0
                    }
                }
                let truncated = link.statistics.truncatedPackets
                if truncated != truncatedSeen {
                    logger.warning("skipped a truncated packet from the controller", metadata: [
                        "source": "\(name)", "truncated": "\(truncated)",
                        "discardedBytes": "\(link.statistics.discardedBytes)",
                    ])
                    truncatedSeen = truncated
                }
                let now = WallClock.monotonic()
                if let checkAdapter, now >= nextAdapterCheck {
                    try checkAdapter(link)
                    nextAdapterCheck = now + Self.adapterCheckInterval
                }
                let quiet = now - lastReport.withLock { $0 }
                if scanning, scan.stallTimeout > 0, quiet >= scan.stallTimeout {
                    if let checkAdapter { try checkAdapter(link) }
                    quietRestarts += 1
                    restarts.withLock { $0 += 1 }
                    let metadata: Logger.Metadata = [
                        "source": "\(name)", "quietSeconds": "\(Int(quiet))", "restarts": "\(quietRestarts)",
                    ]
                    if quietRestarts == 1 {
                        logger.warning("no advertising reports although the adapter is up; restarting the scan",
                                       metadata: metadata)
                    } else {
                        logger.debug("still no advertising reports; restarting the scan", metadata: metadata)
                    }
                    try controller.run(mode.enable(false), allowing: [Controller.commandDisallowed])
                    try controller.run(mode.enable(true))
                    lastReport.withLock { $0 = WallClock.monotonic() }
                }
            }
        } catch {
            restore(controller, scanning: scanning ? mode : nil, advertising: advertisingOn)
            if stop.isSet { return }
            throw error
        }
        restore(controller, scanning: scanning ? mode : nil, advertising: advertisingOn)
    }

    /// Starts, replaces or stops advertising when a request is pending (or, on `initial`,
    /// whatever is wanted). A refused command fails the request, not the scan; a broken
    /// link throws.
    private func applyAdvertising(_ controller: Controller, on advertisingOn: inout Bool, initial: Bool) throws {
        let (wanted, generation, pending) = advertising.withLock { state in
            (state.wanted, state.requested, state.applied < state.requested)
        }
        guard initial || pending else { return }
        var failure: HCIError?
        do {
            if let wanted {
                advertisingOn = true
                try controller.startAdvertising(wanted.beacon, intervalMs: wanted.intervalMs)
                logger.info("advertising", metadata: [
                    "source": "\(name)", "uuid": "\(wanted.beacon.uuid)", "major": "\(wanted.beacon.major)",
                    "minor": "\(wanted.beacon.minor)", "intervalMs": "\(wanted.intervalMs)",
                ])
            } else if advertisingOn {
                try controller.run(.leSetAdvertiseEnable(false), allowing: [Controller.commandDisallowed])
                advertisingOn = false
                logger.info("advertising stopped", metadata: ["source": "\(name)"])
            }
        } catch let error as HCIError {
            guard case .command = error else { throw error }
            logger.error("the controller refused to advertise", metadata: ["source": "\(name)", "error": "\(error)"])
            failure = error
        }
        advertising.withLock { state in
            state.applied = max(state.applied, generation)
            if state.applied == generation { state.failure = failure }
        }
    }

    private func restore(_ controller: Controller, scanning: ScanMode?, advertising: Bool) {
        if let scanning { controller.stopScanning(scanning) }
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

/// Advertising wanted by the configuration and by commands, and how far the session got.
struct AdvertisingRequests: Sendable {
    var wanted: AdvertiseConfig?
    /// Requests made (`setAdvertising` calls) and the last one the session applied.
    var requested = 0
    var applied = 0
    /// Why the last applied request failed, if it did.
    var failure: HCIError?
}

/// What `setAdvertising` achieved.
public enum AdvertisingChange: String, Sendable, Equatable {
    /// The controller advertises the new beacon.
    case started
    /// The controller no longer advertises.
    case stopped
    /// The controller is not reachable now (the source is retrying); the change applies
    /// when it is back.
    case pending
}

public import Config
public import Logging
public import BeaconKit
public import SystemCalls

/// Advertising reports from a controller reached as an H4 byte stream: `h4:unix:PATH`
/// (BlueZ's `btproxy`, the `btvirt -s` emulator), `h4:tcp:HOST:PORT`, `h4:tty:DEV@BAUD`
/// (a UART controller).
///
/// The gateway owns such a controller: on every connection the source resets it, sets
/// the event masks, turns scanning off, sets the scan parameters and enables scanning
/// with the controller's duplicate filter off, each command waited for (2 s) and its
/// status checked. Then every HCI event is delivered as it comes (the consumer picks the
/// advertising reports). On cancellation it turns scanning (and its own advertising) off
/// before closing. A lost stream, a failed command or a command timeout is reported as
/// `.retrying` and the source reconnects with back-off (0.5 s doubling to 30 s) until
/// cancelled. Line noise is skipped and counted (`statistics`), never fatal.
public final class H4Source: AdvertisingSource {
    public let uri: SourceURI
    public let clock: any SourceClock = LiveSourceClock()
    private let engine: LiveScanner

    /// - Parameters:
    ///   - uri: `h4:unix:`, `h4:tcp:` or `h4:tty:`; anything else throws `HCIError.notLive`.
    ///   - scan: passive or active, interval and window (ms).
    ///   - advertise: also advertise this iBeacon from the same controller.
    public init(_ uri: SourceURI, scan: ScanConfig = ScanConfig(), advertise: AdvertiseConfig? = nil,
                logger: Logger = Logger(label: "beaconbridge.hci")) throws(HCIError) {
        switch uri {
        case .h4Unix, .h4TCP, .h4TTY: break
        case .hci, .btsnoop:
            throw HCIError.notLive(uri, reason: "not an H4 stream (expected h4:unix:, h4:tcp: or h4:tty:)")
        }
        self.uri = uri
        engine = LiveScanner(name: uri.description, ownsController: true, scan: scan, advertise: advertise,
                             logger: logger) { () throws(HCIError) in try HCILink.openH4(uri) }
    }

    public var name: String { uri.description }

    /// What the byte stream held besides events, over all connections so far.
    public var statistics: StreamStatistics { engine.statistics }

    public var heartbeat: Heartbeat? { engine.heartbeat }

    /// Scan restarts by the stall watchdog so far.
    public var scanRestarts: Int { engine.scanRestarts }

    public func run(_ output: @escaping @Sendable (SourceOutput) -> Void) async throws {
        try await engine.run(output)
    }

    /// Applied within 200 ms while connected (reported as `.paused` / `.running`), and
    /// kept across reconnections.
    public func setScanning(_ enabled: Bool) async {
        engine.setScanning(enabled)
    }

    public func setAdvertising(_ advertise: AdvertiseConfig?, timeout: Double) async throws -> AdvertisingChange {
        try await engine.setAdvertising(advertise, timeout: timeout)
    }
}

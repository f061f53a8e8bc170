public import BeaconKit
public import Config
public import Logging
import SystemCalls
import LiveClock

/// The live sources' clock: the wall clock.
public struct LiveSourceClock: SourceClock {
    public init() {}
    // A live radio's captures are dated by the wall clock: this is where they meet.
    public func now() -> CaptureTime { WallClock.now().asCaptureTime() }
}

/// The live source for `uri`: `KernelHCISource` for `hci:N`, `H4Source` for `h4:…`.
///
/// Captures (`btsnoop:`) are replayed by `BtsnoopSource`, not here: they throw
/// `HCIError.notLive`.
public func makeLiveSource(_ uri: SourceURI, scan: ScanConfig, advertise: AdvertiseConfig? = nil,
                           logger: Logger = Logger(label: "beaconbridge.hci")) throws -> any AdvertisingSource {
    switch uri {
    case .hci(let adapter):
        return KernelHCISource(adapter: adapter, scan: scan, advertise: advertise, logger: logger)
    case .h4Unix, .h4TCP, .h4TTY:
        return try H4Source(uri, scan: scan, advertise: advertise, logger: logger)
    case .btsnoop:
        throw HCIError.notLive(uri, reason: "a capture is no live controller; replay it with BtsnoopSource")
    }
}

/// The source for any URI: a live one (`makeLiveSource`) or a replay (`BtsnoopSource`),
/// with errors that say which URI failed and why.
public func makeSource(_ uri: SourceURI, scan: ScanConfig = ScanConfig(), advertise: AdvertiseConfig? = nil,
                       replayStartsAt: WallTime? = nil, replayOrigin: CaptureTime? = nil,
                       logger: Logger = Logger(label: "beaconbridge.hci")) throws -> any AdvertisingSource {
    if case .btsnoop(let path, let speed, let loop) = uri {
        return try BtsnoopSource(path: path, speed: speed, loop: loop, startsAt: replayStartsAt, origin: replayOrigin)
    }
    return try makeLiveSource(uri, scan: scan, advertise: advertise, logger: logger)
}

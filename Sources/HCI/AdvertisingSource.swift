public import BeaconKit
public import Config
public import Wire
public import SystemCalls

/// What a source hands to its consumer.
public enum SourceOutput: Sendable, Equatable {
    case frame(HCIFrame)
    /// A state change with a human-readable detail (the error, the controller's address…).
    case state(SourceState, detail: String)
    /// Time has reached this instant with no earlier frame still to come. Replays report
    /// the passage of their virtual time in-band, in order with their frames, so that a
    /// consumer's timers fire between the same frames at any replay speed. Live sources
    /// do not send ticks: their consumer follows the wall clock.
    case tick(CaptureTime)
}

/// "Now" in a source's own time: the wall clock for live sources, the virtual time of a
/// replay (capture time, advancing at the replay speed) for captures. The gateway's
/// timers (exits, rate limits) read this, never the wall clock directly, so a replay at
/// any speed gives the same events.
public protocol SourceClock: Sendable {
    func now() -> CaptureTime
}

/// A producer of HCI LE advertising report events.
public protocol AdvertisingSource: Sendable {
    /// The source URI, for logs and health.
    var name: String { get }
    var clock: any SourceClock { get }
    /// Runs until cancelled (live sources, looping replays) or until the end of a replay.
    /// Live sources report problems as `.state(.retrying, …)` and keep trying with
    /// back-off; they throw only for errors no retry can fix (a bad URI, a missing
    /// capability), with a message that says what to do.
    func run(_ output: @escaping @Sendable (SourceOutput) -> Void) async throws
    /// Pauses or resumes scanning (the `{"scan":"pause"}` command). Replays ignore it.
    func setScanning(_ enabled: Bool) async
    /// Starts, replaces (a config) or stops (`nil`) advertising an iBeacon from the
    /// source's own controller while it scans (the `{"advertise":…}` command), waiting up
    /// to `timeout` seconds for the controller's answer: `.pending` when none came by then
    /// (not connected now, or slow; the change applies when the controller answers).
    /// Throws `HCIError.unsupported` where there is no controller (replays),
    /// `HCIError.command` when the controller refused.
    func setAdvertising(_ advertise: AdvertiseConfig?, timeout: Double) async throws -> AdvertisingChange
    /// Beats whenever the source's loop goes round (a live source at least every 0.2 s
    /// while it runs, also while it waits to retry), for the service watchdog; `nil` for
    /// sources whose pace follows their input (replays).
    var heartbeat: Heartbeat? { get }
}

extension AdvertisingSource {
    public var heartbeat: Heartbeat? { nil }

    /// `setAdvertising(_:timeout:)` with the time a gateway gives the controller before it
    /// answers a command (`advertisingAnswerTimeout`).
    public func setAdvertising(_ advertise: AdvertiseConfig?) async throws -> AdvertisingChange {
        try await setAdvertising(advertise, timeout: advertisingAnswerTimeout)
    }

    public func setAdvertising(_ advertise: AdvertiseConfig?, timeout: Double) async throws -> AdvertisingChange {
        throw HCIError.unsupported(source: name, reason: "there is no controller to advertise from")
    }
}

/// Seconds a gateway waits for its controller to take an advertising change before it
/// answers the command "pending".
public let advertisingAnswerTimeout = 5.0

public import BeaconKit

/// One HCI event as a source delivers it, starting at the event code (no H4 type byte).
public struct HCIFrame: Sendable, Equatable {
    /// When the event was received: the live clock, or the capture's timestamp in a replay.
    public var time: CaptureTime
    public var event: [UInt8]

    public init(time: CaptureTime, event: [UInt8]) {
        self.time = time
        self.event = event
    }
}

/// Where a source stands, for logs and the health message.
public enum SourceState: String, Sendable, Equatable {
    /// Opening the device or file, initialising the controller.
    case starting
    /// Delivering advertising reports.
    case running
    /// Lost (adapter gone, socket closed, command failed); retrying with back-off.
    case retrying
    /// Scanning paused by an operator command.
    case paused
    /// A replay reached its end.
    case finished
}

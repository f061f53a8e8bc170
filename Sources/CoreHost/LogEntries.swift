public import BeaconKit
public import Logging

extension Logger {
    /// Logs what a pure core wrote (`LogEntry`: the gateway's engine, the brain's core) at the
    /// level of the same name. The one mapping both services use. The line's source is the
    /// caller's module (`[Gateway]`, `[Brain]`), as if it had logged the entry itself: tools
    /// and the kernel-path rig look for it.
    public func log(_ entry: LogEntry, file: String = #fileID, function: String = #function, line: UInt = #line) {
        log(level: Logger.Level(entry.level), "\(entry.message)", metadata: entry.metadata.mapValues { .string($0) },
            file: file, function: function, line: line)
    }
}

extension Logger.Level {
    /// The level of the same name (a core has no `trace` and no `critical`).
    public init(_ level: LogEntry.Level) {
        self = switch level {
        case .debug: .debug
        case .info: .info
        case .notice: .notice
        case .warning: .warning
        case .error: .error
        }
    }
}

public import BeaconKit
public import Logging

extension Logger {
    /// Logs what a pure core wrote (`LogEntry`: the gateway's engine, the brain's core) at the
    /// level of the same name. The one mapping both services use.
    public func log(_ entry: LogEntry) {
        log(level: Logger.Level(entry.level), "\(entry.message)", metadata: entry.metadata.mapValues { .string($0) })
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

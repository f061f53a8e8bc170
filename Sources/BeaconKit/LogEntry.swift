/// Something a pure core (the gateway's engine, the brain's core) wants logged: the cores
/// never log, the services that run them do.
public struct LogEntry: Sendable, Equatable {
    public enum Level: String, Sendable { case debug, info, notice, warning, error }
    public var level: Level
    public var message: String
    public var metadata: [String: String]

    public init(_ level: Level, _ message: String, _ metadata: [String: String] = [:]) {
        self.level = level
        self.message = message
        self.metadata = metadata
    }
}

import BeaconKit
import CoreHost
import Logging
import Synchronization
import Testing

/// What the two services share around their cores.
@Suite("Core host")
struct CoreHostTests {
    final class Lines: Sendable {
        let kept = Mutex<[(Logger.Level, String, Logger.Metadata?, String)]>([])
    }

    /// Keeps what is logged through it.
    struct Recorder: LogHandler {
        let lines: Lines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            lines.kept.withLock { $0.append((event.level, event.message.description, event.metadata, event.source)) }
        }
    }

    @Test("a core's log entry is logged at the level of the same name, with its metadata and the caller's module as source")
    func logEntries() {
        let lines = Lines()
        let recorder = Recorder(lines: lines)
        let logger = Logger(label: "core-host-test") { _ in recorder }
        let levels: [(LogEntry.Level, Logger.Level)] = [
            (.debug, .debug), (.info, .info), (.notice, .notice), (.warning, .warning), (.error, .error),
        ]
        for (level, _) in levels { logger.log(LogEntry(level, "gateway offline", ["gateway": "door"])) }
        let logged = lines.kept.withLock { $0 }
        #expect(logged.map(\.0) == levels.map(\.1))
        #expect(logged.allSatisfy { $0.1 == "gateway offline" && $0.2 == ["gateway": .string("door")] })
        // `[BrainTests]`, not `[CoreHost]`: logs name the service that logged (the kernel-path
        // rig waits for `[Gateway] enter`).
        #expect(logged.allSatisfy { $0.3 == "BrainTests" }, "\(logged.map(\.3))")
    }
}

import Foundation
import Logging
import Synchronization
public import Testing

/// Product logs in tests: what the code under test logs (a source retrying, the brain
/// rejecting a bad config) is kept in memory, per test, and printed only when that test
/// fails, after its name. A passing run prints none of it.
///
/// Put `.capturingLogs` on a suite (or a test) that runs product code in-process. Every
/// `Logger` made while one of its tests runs, on any thread that test starts, writes to
/// that test's buffer: the logger takes the buffer when it is made.
public struct CapturingLogs: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        guard testCase != nil else { return try await function() }
        TestLog.install()
        let log = TestLog()
        let failed = Atomic(false)
        let watch = IssueHandlingTrait.compactMapIssues { issue in
            if issue.isFailure { failed.store(true, ordering: .relaxed) }
            return issue
        }
        do {
            try await TestLog.$current.withValue(log) {
                try await watch.provideScope(for: test, testCase: testCase, performing: function)
            }
        } catch {
            log.print(for: test)
            throw error
        }
        if failed.load(ordering: .relaxed) { log.print(for: test) }
    }
}

extension Trait where Self == CapturingLogs {
    /// Keeps product logs in memory and prints them only for a test that fails.
    public static var capturingLogs: CapturingLogs { CapturingLogs() }
}

/// One test's log lines.
public final class TestLog: Sendable {
    @TaskLocal static var current: TestLog?

    private let lines = Mutex<[String]>([])

    func append(_ line: String) { lines.withLock { $0.append(line) } }

    func print(for test: Test) {
        let text = lines.withLock { $0 }
        guard !text.isEmpty else { return }
        let report = "--- what \"\(test.displayName ?? test.name)\" logged ---\n" + text.joined(separator: "\n")
            + "\n--- end of log ---\n"
        FileHandle.standardError.write(Data(report.utf8))
    }

    private static let installed: Void = {
        LoggingSystem.bootstrap { label in TestLogHandler(label: label, log: TestLog.current) }
    }()

    /// Routes every logger made from now on to the test that makes it.
    static func install() { _ = installed }
}

/// Writes to the test's `TestLog`; outside a capturing test, to stderr as before.
struct TestLogHandler: LogHandler {
    let label: String
    let log: TestLog?
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { _, new in new }
        let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let line = "\(event.level) \(label): \(fields.isEmpty ? "" : fields + " ")\(event.message)"
        if let log { log.append(line) } else { FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }
}

import ArgumentParser
import BeaconKit
import Config
import CommandLineSupport
import UnixSignals

/// SIGINT and SIGTERM, caught from the moment this is made. Make it before announcing
/// anything a script may answer with a signal: a program started in the background by a
/// non-interactive shell ignores SIGINT until it traps it, and loses one sent earlier.
func trapStopSignals() async -> UnixSignalsSequence {
    await UnixSignalsSequence(trapping: .sigint, .sigterm)
}

/// Runs `body` until it returns, or until one of `signals` arrives (then cancels it and
/// waits for it to clean up: a source restores its controller on cancellation). Returns
/// whether a signal ended it.
func runUntilSignal(_ signals: UnixSignalsSequence,
                    _ body: @escaping @Sendable () async throws -> Void) async throws -> Bool {
    try await withThrowingTaskGroup(of: Bool.self) { group in
        group.addTask {
            try await body()
            return false
        }
        group.addTask {
            for await _ in signals { return true }
            return false
        }
        let first = try await group.next() ?? false
        group.cancelAll()
        // The body's cleanup (scanning or advertising off) runs before we return.
        while let _ = try? await group.next() {}
        return first
    }
}

/// A `--source` for the live tools: a controller, or a capture where that makes sense.
func parseSource(_ text: String) throws -> SourceURI {
    do { return try SourceURI(parsing: text) } catch { throw CommandFailure("--source: \(error.reason)") }
}

func parseUUID(_ text: String, option: String = "--uuid") throws -> BeaconUUID {
    guard let uuid = BeaconUUID(text) else {
        throw CommandFailure("\(option): \"\(text)\" is not a UUID (expected 8-4-4-4-12 hex digits)")
    }
    return uuid
}

import Foundation

/// How many times its nominal `timeout` a test waits for an event before it gives up.
///
/// Tests run on machines shared with builds (two cores, load averages of 20 and more), so a
/// wait's deadline is generous: a passing wait ends at the event it waits for and costs
/// nothing extra; only a failing one waits the whole deadline. Every wait in the tests is on
/// an event (a message arrives, a file appears, a port listens), and its deadline counts
/// from when that wait begins, never from the test's start. `BEACONBRIDGE_TEST_PATIENCE`
/// sets the factor (default 6).
public let patience: Double = {
    guard let text = Foundation.ProcessInfo.processInfo.environment["BEACONBRIDGE_TEST_PATIENCE"],
          let value = Double(text), value >= 1 else { return 6 }
    return value
}()

/// The deadline of one wait of nominal `timeout` seconds (see `patience`), which does not
/// count the time the test process could not run the waiting task.
///
/// When the whole suite starts, some 500 synchronous unit tests take Swift concurrency's
/// cooperative threads (two on a two-core machine) for a minute or more in a debug build;
/// meanwhile no suspended test resumes, however long ago its event came. A wait that
/// counted that minute failed for an event the product delivered in time on its own
/// threads, or would deliver as soon as one of its tasks could run (CI on 4d7b4a9: four
/// HCI tests, their 60 s deadlines spent while the pool was held). So each pause between
/// looks is timed: what it oversleeps by more than a second moves the deadline on, up to
/// the wait's own length again, so a wait lasts at most twice its deadline.
public struct WaitDeadline: Sendable {
    private var end: ContinuousClock.Instant
    private var allowance: Duration
    /// Oversleeping by this much is the process held up, not a slow wake-up.
    static let stallThreshold = Duration.seconds(1)

    public init(after timeout: Double) {
        let length = Duration.seconds(timeout * patience)
        end = .now + length
        allowance = length
    }

    public var hasPassed: Bool { ContinuousClock.now >= end }

    /// Time left until the deadline.
    public var remaining: Duration { end - ContinuousClock.now }

    /// Sleeps `seconds` (with `sleep`, which tests of this type replace); time overslept
    /// past `stallThreshold` extends the deadline.
    public mutating func pause(_ seconds: Double,
                               sleep: (Duration) async -> Void = { try? await Task.sleep(for: $0) }) async {
        let asked = Duration.seconds(seconds)
        let start = ContinuousClock.now
        await sleep(asked)
        let held = ContinuousClock.now - start - asked
        guard held > Self.stallThreshold else { return }
        let extra = min(held, allowance)
        end += extra
        allowance -= extra
    }
}

/// Polls `condition` until true or the deadline for `timeout` seconds (see `patience` and
/// `WaitDeadline`) passes.
public func eventually(timeout: Double = 10, interval: Double = 0.05,
                       _ condition: () async throws -> Bool) async rethrows -> Bool {
    var deadline = WaitDeadline(after: timeout)
    while !deadline.hasPassed {
        if try await condition() { return true }
        await deadline.pause(interval)
    }
    return try await condition()
}

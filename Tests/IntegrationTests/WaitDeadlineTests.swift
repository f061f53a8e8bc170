import TestSupport
import Testing

/// The tests' waits do not count the time their task could not run (`WaitDeadline`).
struct WaitDeadlineTests {
    /// A pause that returns 1.5 s late, as a suspended task does while the cooperative
    /// threads are held.
    static let held: @Sendable (Duration) async -> Void = { asked in try? await Task.sleep(for: asked + .milliseconds(1_500)) }

    @Test("a pause the process was held up in moves the deadline on; a pause on time does not")
    func heldPauseMovesTheDeadline() async {
        var deadline = WaitDeadline(after: 1)
        var allowance = Duration.seconds(patience)
        /// A pause of `asked`, timed around it: the deadline must have moved on by what it
        /// overslept past 1 s, up to what is left of the wait's own length, and not otherwise
        /// (run in the whole suite, the process itself may hold any pause up: this test's
        /// first run in CI had one of 79 s).
        func pause(_ asked: Double, sleep: @escaping (Duration) async -> Void) async -> Bool {
            let before = deadline.remaining
            let start = ContinuousClock.now
            await deadline.pause(asked, sleep: sleep)
            let elapsed = ContinuousClock.now - start
            let overslept = elapsed - .seconds(asked)
            let moved = overslept > .seconds(1) ? min(overslept, allowance) : .zero
            allowance -= moved
            let expected = before - elapsed + moved
            #expect(abs((deadline.remaining - expected) / .milliseconds(1)) < 200,
                    "\(before) → \(deadline.remaining) after \(elapsed), expected \(expected)")
            return moved > .zero
        }
        #expect(await pause(0.05, sleep: Self.held), "1.5 s overslept moves the deadline on")
        _ = await pause(0.3) { try? await Task.sleep(for: $0) }
    }

    @Test("held pauses move a deadline on by at most the wait's own length")
    func extensionIsBounded() async {
        // A wait of 0.4 s in all (whatever the patience): the first held pause, 1.51 s,
        // moves it on by 0.4 s, not 1.5 s, so it has passed after that one pause.
        var deadline = WaitDeadline(after: 0.4 / patience)
        var pauses = 0
        while !deadline.hasPassed && pauses < 10 {
            await deadline.pause(0.01, sleep: Self.held)
            pauses += 1
        }
        #expect(pauses == 1)
    }
}

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
        let before = deadline.remaining
        await deadline.pause(0.05, sleep: Self.held)
        // 1.55 s or more went by, and all but the 0.05 s asked for came back.
        #expect(deadline.remaining > before - .milliseconds(500), "\(before) → \(deadline.remaining)")

        let beforeOnTime = deadline.remaining
        await deadline.pause(0.3)
        #expect(deadline.remaining <= beforeOnTime - .milliseconds(300))
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

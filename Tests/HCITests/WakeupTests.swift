import Foundation
import Synchronization
import SystemCalls
import Testing

@Suite("Wakeup: a pipe any thread can make readable")
struct WakeupTests {
    /// Bytes waiting in the pipe (`FIONREAD`).
    private func waiting(_ wakeup: Wakeup) -> Int32 {
        var count: Int32 = 0
        _ = ioctl(wakeup.descriptor.rawValue, UInt(FIONREAD), &count)
        return count
    }

    @Test("signals coalesce: ten thousand before a drain write one byte; after a drain the next one writes again")
    func coalesce() throws {
        let wakeup = try Wakeup()
        #expect(try !wakeup.descriptor.waitReadable(timeout: 0))
        for _ in 0..<10_000 { wakeup.signal() }
        #expect(try wakeup.descriptor.waitReadable(timeout: 0))
        #expect(waiting(wakeup) == 1, "one write for the whole burst")
        wakeup.drain()
        #expect(try !wakeup.descriptor.waitReadable(timeout: 0))
        wakeup.signal()
        #expect(try wakeup.descriptor.waitReadable(timeout: 0), "a signal after the drain wakes again")
    }

    @Test("no wake is lost: a waiter that drains, then reads what was handed over, always sees the last hand-over")
    func noLostWake() async throws {
        let wakeup = try Wakeup()
        let handed = Atomic<Int>(0)
        let total = 200_000
        // How often the waiter's poll ran out with work handed over and unseen: a lost wake.
        let stalls = Atomic<Int>(0)
        let waiter = Thread {
            var seen = 0
            while seen < total {
                let woken = (try? wakeup.descriptor.waitReadable(timeout: 2)) ?? false
                if woken { wakeup.drain() }
                let now = handed.load(ordering: .sequentiallyConsistent)
                if !woken && now > seen { stalls.add(1, ordering: .relaxed) }
                seen = now
            }
        }
        waiter.start()
        for _ in 0..<total {
            handed.add(1, ordering: .sequentiallyConsistent)
            wakeup.signal()
        }
        // The waiter stops once it has seen the last hand-over; a lost wake costs it 2 s a time.
        while !waiter.isFinished { try await Task.sleep(for: .milliseconds(10)) }
        #expect(stalls.load(ordering: .relaxed) == 0)
    }
}

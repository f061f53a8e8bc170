public import BrainCore
import CoreHost
import MQTT

/// What the brain shows of itself: its figures for tests and health, and who is where.
extension BrainService {
    /// A snapshot for tests and health.
    public struct Statistics: Sendable, Equatable {
        public var counters: BrainCounters
        public var settled: Bool
        public var connected: Bool
        /// Connections made so far (1 after the first).
        public var connections: Int
        public var beacons: Int
        public var joins: Int
        public var published: Int
        public var publishFailures: Int
        /// MQTT events lost because the brain fell behind (the client's buffer overflowed).
        public var droppedEvents: Int
        /// Rounds of the timers done (`CoreHost.runTimers`).
        public var ticks: Int
        /// The clock's monotonic seconds of the last round of the timers: a test that advanced
        /// a `ManualClock` to `t` waits until this is at least `t` (`CoreHost.timerRound`).
        public var timerRound: Double?
    }

    public var statistics: Statistics {
        let dropped = client.droppedEvents
        return host.withLock { h in
            let s = h.core
            return Statistics(counters: s.brain.counters, settled: s.brain.isSettled && s.synced, connected: h.isConnected,
                              connections: h.connections, beacons: s.brain.presence.beacons.count,
                              joins: s.brain.observers.count, published: h.published,
                              publishFailures: h.refused + h.outboxDropped, droppedEvents: dropped + s.droppedEvents,
                              ticks: h.rounds, timerRound: h.timerRound)
        }
    }

    /// Beacons present now by store (its major, or `none`) and zone (the gateway holding it).
    public var occupancy: [String: [String: Int]] {
        host.withLock { h in
            var counts: [String: [String: Int]] = [:]
            for (ref, beacon) in h.core.brain.presence.beacons {
                counts[h.core.brain.store(of: ref).map(String.init) ?? "none", default: [:]][beacon.zone, default: 0] += 1
            }
            return counts
        }
    }
}

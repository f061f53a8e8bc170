import BeaconKit
import Contract
@testable import BrainCore
import Testing

/// A decision step goes through its beacons in `BeaconRef` order, which is the order of its
/// events and so of the brain's output. That order is kept as beacons come and go
/// (`FleetPresence.evidenceOrder`), not sorted again at every step: these checks fail if a
/// beacon is skipped, decided twice in a step, or decided out of order.
@Suite struct DecisionOrderTests {

    @Test func mergedKeepsTheOrderWithoutRepeats() {
        var rng = SplitMix(seed: 22)
        for _ in 0..<500 {
            func refs(_ n: Int) -> [BeaconRef] {
                (0..<n).map { _ in
                    if rng.next() % 8 == 0 {
                        return BeaconRef(namespace: EddystoneNamespace(high: rng.next() % 3, low: 0),
                                         instance: EddystoneInstance(rawValue: rng.next() % 4))
                    }
                    return BeaconRef(major: UInt16(rng.next() % 3), minor: UInt16(rng.next() % 12))
                }
            }
            let order = Array(Set(refs(Int(rng.next() % 20)))).sorted()
            let added = refs(Int(rng.next() % 6))
            #expect(FleetPresence.merged(order, added) == Array(Set(order + added)).sorted())
        }
    }

    /// Six beacons heard first in another order than theirs, entering at different times; one
    /// leaves and comes back, one is forgotten (another brain's now) and heard again.
    @Test func everyStepDecidesEachBeaconOnceInOrder() {
        var fleet = newFleet()
        let gateways = ["door", "till"]
        for gateway in gateways { _ = fleet.gatewayStatus(gateway, online: true) }
        let minors: [UInt16] = [9, 3, 7, 1, 5, 8]
        let refs = minors.map { BeaconRef(major: 100, minor: $0) }
        /// When each beacon is first heard, seconds.
        func start(_ i: Int) -> Double { Double(i) * 1.5 }
        func heard(_ i: Int, _ time: Double) -> Bool {
            guard time >= start(i) else { return false }
            if minors[i] == 7 { return time < 12 || time >= 30 }   // silent long enough to leave
            return true
        }
        var enters: [BeaconRef: Int] = [:], exits: [BeaconRef: Int] = [:]
        var updates: [BeaconRef: Int] = [:]
        var time = 0.0
        while time < 50 {
            if time == 20 { fleet.forget(refs[1]) }
            var events: [FleetEvent] = []
            for gateway in gateways {
                let entries = refs.indices.filter { heard($0, time) }.map { (refs[$0], Optional(gateway == "door" ? -60.0 : -80.0)) }
                events += fleet.report(rssiReport(gateway, from: time, to: time + 0.5, entries), receivedAt: w(time + 0.5))
            }
            // The step's decisions, beacon by beacon in order, each beacon once (an entry comes
            // with its first update).
            let decided = events.compactMap { event -> BeaconRef? in
                switch event {
                case .enter(let ref), .update(let ref, _, _): ref
                case .exit(let beacon): beacon.ref
                default: nil
                }
            }
            #expect(decided == decided.sorted(), "at \(time) s: \(decided)")
            let updated = events.compactMap { if case .update(let ref, _, _) = $0 { ref } else { nil } }
            #expect(updated.count == Set(updated).count, "at \(time) s: \(updated)")
            for event in events {
                switch event {
                case .enter(let ref): enters[ref, default: 0] += 1
                case .exit(let beacon): exits[beacon.ref, default: 0] += 1
                case .update(let ref, _, _): updates[ref, default: 0] += 1
                default: break
                }
            }
            time += 0.5
        }
        #expect(enters[refs[2]] == 2, "7 left and came back")
        #expect(exits[refs[2]] == 1)
        #expect(enters[refs[1]] == 2, "3 forgotten, then heard again")
        for (i, ref) in refs.enumerated() where minors[i] != 7 && minors[i] != 3 {
            #expect(enters[ref] == 1)
            #expect(exits[ref] == nil)
            // One update a second from its entry on.
            let seconds = 50 - start(i)
            #expect(Double(updates[ref] ?? 0) >= seconds - 3 && Double(updates[ref] ?? 0) <= seconds + 1,
                    "\(ref): \(updates[ref] ?? 0) updates in \(seconds) s")
        }
    }
}

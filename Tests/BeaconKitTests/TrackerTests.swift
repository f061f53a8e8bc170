import BeaconKit
import Wire
import Tracking
import GatewayCore
import Simulation
import Foundation
import Testing

let t0 = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
let beaconA = BeaconID(uuid: airLocate, major: 100, minor: 1)
let beaconB = BeaconID(uuid: airLocate, major: 100, minor: 2)
let addressA = BluetoothAddress(rawValue: 0xC000_0064_0001)   // C0:00:00:64:00:01, as the simulator numbers them

/// The RSSI at `metres` for a beacon of -59 dBm at 1 m with path-loss exponent 2.
func rssi(at metres: Double, power: Double = -59, exponent: Double = 2) -> Double {
    power - 10 * exponent * log10(metres)
}

@Suite("Tracker")
struct TrackerTests {
    static func observe(_ tracker: inout Tracker, _ id: BeaconID = beaconA, rssi: Int8?, power: Int8? = -59,
                        at time: CaptureTime) -> TrackUpdate {
        tracker.observe(id, address: addressA, rssi: rssi, measuredPower: power, txPower: power, at: time)
    }

    @Test func entersOnTheFirstSighting() {
        var tracker = Tracker()
        let first = Self.observe(&tracker, rssi: -65, at: t0)
        #expect(first.entered)
        #expect(first.publish)
        #expect(first.proximityChangedFrom == nil)
        #expect(first.track.since == t0 && first.track.lastSeen == t0)
        #expect(first.track.sequence == 1)
        #expect(first.track.rssi == -65)
        #expect(first.track.rssiSmoothed == -65)
        #expect(first.track.measuredPower == -59)
        #expect(abs(first.track.distance! - pow(10, 6.0 / 20)) < 1e-9)   // -65 with P1m -59, n 2: 10^(6/20) ≈ 2.0 m
        #expect(first.track.proximity == .near)
        #expect(tracker.count == 1)

        let second = Self.observe(&tracker, rssi: -65, at: t0 + 0.5)
        #expect(!second.entered)
        #expect(!second.publish)                            // within the publish interval
        #expect(second.track.since == t0)
        #expect(second.track.lastSeen == t0 + 0.5)
    }

    /// README "From RSSI to presence": RSSI 127 ("not available") still counts for presence, without distance.
    @Test func withoutRSSI() {
        var tracker = Tracker()
        let update = Self.observe(&tracker, rssi: nil, at: t0)
        #expect(update.entered && update.publish)
        #expect(update.track.rssi == nil)
        #expect(update.track.rssiSmoothed == nil)
        #expect(update.track.distance == nil)
        #expect(update.track.proximity == .unknown)
        #expect(tracker.tracks[beaconA] != nil)
        // It stays present while sightings keep coming, and exits on time when they stop.
        _ = Self.observe(&tracker, rssi: nil, at: t0 + 9)
        #expect(tracker.advance(to: t0 + 18.9).isEmpty)    // never "stale": it has no proximity to lose
        #expect(tracker.advance(to: t0 + 19).map(\.track.id) == [beaconA])
        // Without a measured power there is no distance either.
        let noPower = Self.observe(&tracker, beaconB, rssi: -60, power: nil, at: t0 + 20)
        #expect(noPower.track.distance == nil && noPower.track.proximity == .unknown && noPower.track.rssi == -60)
    }

    @Test func exitsExactlyAtTheDeadline() {
        var tracker = Tracker(settings: TrackerSettings(exitTimeout: 10))
        _ = Self.observe(&tracker, rssi: -60, at: t0)
        _ = Self.observe(&tracker, rssi: -60, at: t0 + 3)
        let deadline = t0 + 13
        #expect(tracker.nextDeadline == t0 + 8)              // stale first (staleAfter 5)
        #expect(tracker.advance(to: t0 + 7.999).isEmpty)
        let stale = tracker.advance(to: t0 + 8)
        #expect(stale.count == 1)
        guard case .stale(let track, let from) = stale.first else {
            Issue.record("expected stale, got \(stale)")
            return
        }
        #expect(from == .near && track.proximity == .unknown && track.distance == nil)
        #expect(tracker.nextDeadline == deadline)
        #expect(tracker.advance(to: CaptureTime(nanoseconds: deadline.nanoseconds - 1)).isEmpty)
        let exit = tracker.advance(to: deadline)
        #expect(exit.count == 1)
        guard case .exit(let gone, let at) = exit.first else {
            Issue.record("expected exit, got \(exit)")
            return
        }
        #expect(at == deadline)
        #expect(gone.id == beaconA && gone.lastSeen == t0 + 3)
        #expect(tracker.count == 0)
        #expect(tracker.nextDeadline == nil)
        #expect(tracker.advance(to: deadline + 100).isEmpty)
    }

    /// The exit's `at` is the deadline even when `advance` runs much later, and the stale
    /// event that fell due before it is not lost.
    @Test func lateAdvanceReportsTheDeadlines() {
        var tracker = Tracker(settings: TrackerSettings(exitTimeout: 10))
        _ = Self.observe(&tracker, rssi: -60, at: t0)
        let events = tracker.advance(to: t0 + 3600)
        #expect(events.count == 2)
        guard events.count == 2, case .stale(_, let from) = events[0], case .exit(let track, let at) = events[1] else {
            Issue.record("expected stale then exit, got \(events)")
            return
        }
        #expect(from == .near)
        #expect(at == t0 + 10)
        #expect(track.proximity == .unknown)
    }

    @Test func aBeaconThatComesBackAfterItsExitEntersAgain() {
        var tracker = Tracker(settings: TrackerSettings(exitTimeout: 10))
        _ = Self.observe(&tracker, rssi: -60, at: t0)
        // No advance(to:) in between: the tracker still must not continue the old visit.
        let back = Self.observe(&tracker, rssi: -60, at: t0 + 12)
        #expect(back.entered)
        #expect(back.track.since == t0 + 12)
        #expect(back.timeouts.count == 2)
        #expect(back.timeouts.last == TrackTimeout.exit(back.timeouts.last!.track, at: t0 + 10))
    }

    @Test func events() {
        var tracker = Tracker()
        _ = Self.observe(&tracker, beaconB, rssi: -60, at: t0 + 1)
        _ = Self.observe(&tracker, beaconA, rssi: -60, at: t0 + 1)
        // Same deadline: ordered by beacon id, so the order never depends on the dictionary.
        let events = tracker.advance(to: t0 + 20)
        #expect(events.map(\.track.id) == [beaconA, beaconB, beaconA, beaconB])
    }

    @Test func staleMakesProximityUnknownUntilTheNextSighting() {
        var tracker = Tracker(settings: TrackerSettings(exitTimeout: 30, staleAfter: 4))
        _ = Self.observe(&tracker, rssi: Int8(rssi(at: 1.5)), at: t0)
        #expect(tracker.advance(to: t0 + 4).count == 1)
        #expect(tracker.tracks[beaconA]?.proximity == .unknown)
        #expect(tracker.advance(to: t0 + 10).isEmpty)         // stale once only
        let back = Self.observe(&tracker, rssi: Int8(rssi(at: 1.5)), at: t0 + 11)
        #expect(!back.entered)
        #expect(back.proximityChangedFrom == .unknown)
        #expect(back.track.proximity == .near)
        #expect(back.publish)
    }

    /// At most one sighting per `publishInterval`, at once on a proximity change, every one in raw mode.
    @Test func publishRateLimit() {
        var tracker = Tracker()
        var published: [Double] = []
        for i in 0..<40 {   // 4 Hz for 10 s, standing still at 2 m
            let time = t0 + Double(i) * 0.25
            if Self.observe(&tracker, rssi: Int8(rssi(at: 2)), at: time).publish { published.append(time.seconds(since: t0)) }
        }
        #expect(published == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
        #expect(tracker.tracks[beaconA]?.sequence == 10)

        // The customer steps up to the beacon: the change to immediate publishes at once,
        // less than a publish interval after the previous sighting went out.
        var lastPublished = 9.0
        var change: (at: Double, sincePublished: Double)?
        for i in 0..<20 {
            let at = 10.1 + Double(i) * 0.1
            let update = Self.observe(&tracker, rssi: -40, at: t0 + at)
            if update.proximityChangedFrom != nil, change == nil {
                #expect(update.publish)
                #expect(update.proximityChangedFrom == .near && update.track.proximity == .immediate)
                change = (at, at - lastPublished)
            }
            if update.publish { lastPublished = at }
        }
        #expect(change.map { $0.sincePublished < 1 } == true)
        #expect(change.map { $0.at < 11 } == true)

        var raw = Tracker(settings: TrackerSettings(raw: true))
        let all = (0..<20).filter { Self.observe(&raw, rssi: -60, at: t0 + Double($0) * 0.05).publish }
        #expect(all.count == 20)
        #expect(raw.tracks[beaconA]?.sequence == 20)
    }

    @Test func calibrationOverridesTheAdvert() {
        var tracker = Tracker(calibration: [beaconA: -65])
        let update = Self.observe(&tracker, rssi: -65, power: -59, at: t0)
        #expect(update.track.measuredPower == -65)
        #expect(update.track.txPower == -59)
        #expect(abs(update.track.distance! - 1) < 1e-9)
        let other = Self.observe(&tracker, beaconB, rssi: -65, power: -59, at: t0)
        #expect(other.track.measuredPower == -59)
    }

    @Test func rssiOffsetIsAppliedBeforeEverything() {
        var tracker = Tracker(settings: TrackerSettings(rssiOffset: -6))
        let update = Self.observe(&tracker, rssi: -59, at: t0)
        #expect(update.track.rssi == -65)
        #expect(update.track.rssiSmoothed == -65)
        #expect(abs(update.track.distance! - pow(10, 6.0 / 20)) < 1e-9)
    }

    @Test func curveFitSettings() {
        var tracker = Tracker(settings: TrackerSettings(distanceModel: .curveFit))
        let update = Self.observe(&tracker, rssi: -59, at: t0)
        #expect(update.track.distance == 0.89976 + 0.111)
    }

    /// A customer standing on the near/far boundary (3 m) with ±1.5 dB of noise: the
    /// hysteresis keeps proximity from flapping; without it, it flaps.
    @Test func noFlappingAtTheBoundary() {
        func changes(hysteresis: Double) -> Int {
            var tracker = Tracker(settings: TrackerSettings(thresholds: ProximityThresholds(hysteresis: hysteresis)))
            var random = SplitMix64(seed: 99)
            var changes = 0
            for i in 0..<600 {
                let sample = rssi(at: 3) + Double.random(in: -1.5...1.5, using: &random)
                let update = tracker.observe(beaconA, address: addressA, rssi: Int8(sample.rounded()), measuredPower: -59,
                                             txPower: -59, at: t0 + Double(i))
                if update.proximityChangedFrom != nil { changes += 1 }
            }
            return changes
        }
        #expect(changes(hysteresis: 0.2) == 0)
        #expect(changes(hysteresis: 0) > 20)
    }

    @Test func removeAllForgets() {
        var tracker = Tracker()
        _ = Self.observe(&tracker, rssi: -60, at: t0)
        tracker.removeAll()
        #expect(tracker.count == 0)
        #expect(Self.observe(&tracker, rssi: -60, at: t0 + 1).entered)
    }

    /// A damaged capture can carry any 64-bit timestamp. Replaying one must not trap in the
    /// time arithmetic of the tracker (deadlines, filter intervals) or the payloads.
    @Test func garbageTimestampsDoNotTrap() throws {
        var writer = BtsnoopWriter(datalink: .h4)
        let event = HCIEventTests.iBeaconEvent
        for _ in 0..<5 { writer.appendEvent(event, at: t0) }
        var file = writer.bytes
        // Near the largest instant, near the smallest, all ones, zero, and the 1970 epoch.
        let stamps: [UInt64] = [0x00FD_A24E_B512_D3F7, 0x00BC_1917_694C_2C09, 0xFFFF_FFFF_FFFF_FFFF, 0, 0x00DC_DDB3_0F2F_8000]
        var offset = 16
        for stamp in stamps {
            for k in 0..<8 { file[offset + 16 + k] = UInt8(truncatingIfNeeded: stamp >> (56 - 8 * UInt64(k))) }
            offset += 24 + 1 + event.count
        }
        var tracker = Tracker()
        var decoder = AdvertisementDecoder()
        var seen = 0
        try file.withUnsafeBytes { raw in
            var reader = try BtsnoopReader(bytes: raw)
            while let record = reader.next() {
                let time = record.timestamp
                decoder.decodeBeacons(event: record.hciEvent(datalink: .h4)!) { report, beacon in
                    let update = tracker.observe(beacon.id!, address: report.address, rssi: report.rssi,
                                                 measuredPower: beacon.measuredPower, txPower: beacon.txPower, at: time)
                    _ = Payloads.sighting(update.track, gateway: "g", entry: nil, at: time)
                    _ = tracker.nextDeadline
                    _ = tracker.advance(to: time)
                    seen += 1
                }
            }
        }
        #expect(seen == 5)
        _ = tracker.advance(to: CaptureTime(nanoseconds: .max))
        #expect(CaptureTime(nanoseconds: .max) + 10 == CaptureTime(nanoseconds: .max))
        #expect(CaptureTime(nanoseconds: .min) - 10 == CaptureTime(nanoseconds: .min))
        #expect(CaptureTime(nanoseconds: .max).seconds(since: CaptureTime(nanoseconds: .min)) > 1.8e10)
        #expect(CaptureTime(seconds: 1e300) == CaptureTime(nanoseconds: .max))
    }

    // MARK: Determinism

    struct Sighting {
        var time: CaptureTime
        var id: BeaconID
        var address: BluetoothAddress
        var rssi: Int8?
        var measuredPower: Int8?
        var txPower: Int8?
    }

    /// The beacons heard in a simulated store's capture, decoded as a gateway does.
    static func sightings(gateway: String) throws -> [Sighting] {
        let capture = try #require(StoreSimulation(customers: 6, duration: 150, seed: 2024).captures()[gateway])
        var decoder = AdvertisementDecoder()
        var out: [Sighting] = []
        try capture.bytes.withUnsafeBytes { raw in
            var reader = try BtsnoopReader(bytes: raw)
            while let record = reader.next() {
                guard let event = record.hciEvent(datalink: reader.datalink) else { continue }
                decoder.decodeBeacons(event: event) { report, beacon in
                    guard let id = beacon.id else { return }
                    out.append(Sighting(time: record.timestamp, id: id, address: report.address, rssi: report.rssi,
                                        measuredPower: beacon.measuredPower, txPower: beacon.txPower))
                }
            }
        }
        // Holes a little longer than the exit timeout: the beacon leaves and comes back, and
        // its return is exactly where a caller that advances rarely used to see no exit.
        return out.filter { s in
            guard let minor = s.id.minor else { return true }
            let t = s.time.seconds(since: StoreSimulation().start)
            return !(minor == 1 && t >= 40 && t < 50.4) && !(minor == 2 && t >= 70 && t < 80.9)
                && !(minor == 3 && t >= 90 && t < 99.6) && !((minor == 4 || minor == 5) && t >= 60 && t < 70.6)
        }
    }

    enum Ticks: CustomStringConvertible, CaseIterable {
        case afterEveryFrame, everyTenthOfASecond, everyTwoSeconds, onlyBeforeEachFrame, never

        var description: String {
            switch self {
            case .afterEveryFrame: "after every frame"
            case .everyTenthOfASecond: "every 0.1 s"
            case .everyTwoSeconds: "every 2 s"
            case .onlyBeforeEachFrame: "only before each frame"
            case .never: "never (only at the end)"
            }
        }
    }

    /// Replays `sightings`, calling `advance(to:)` as `ticks` says, and writes down every
    /// event with the beacon and the time it belongs to.
    static func replay(_ sightings: [Sighting], ticks: Ticks) -> [String] {
        var tracker = Tracker(settings: TrackerSettings(exitTimeout: 10, staleAfter: 5, publishInterval: 1))
        var log: [String] = []
        func record(_ timeouts: [TrackTimeout]) {
            for timeout in timeouts {
                switch timeout {
                case .stale(let track, let from):
                    log.append("stale \(track.id) from \(from) at \((track.lastSeen + 5).iso8601)")
                case .exit(let track, let at):
                    log.append("exit \(track.id) at \(at.iso8601) seq \(track.sequence)")
                }
            }
        }
        let start = sightings.first!.time
        let end = sightings.last!.time + 30
        var nextTick = start
        let step: Double? = switch ticks {
        case .everyTenthOfASecond: 0.1
        case .everyTwoSeconds: 2
        default: nil
        }
        for s in sightings {
            if let step {
                while nextTick <= s.time {
                    record(tracker.advance(to: nextTick))
                    nextTick = nextTick + step
                }
            }
            if ticks == .onlyBeforeEachFrame { record(tracker.advance(to: s.time)) }
            let update = tracker.observe(s.id, address: s.address, rssi: s.rssi, measuredPower: s.measuredPower,
                                         txPower: s.txPower, at: s.time)
            record(update.timeouts)
            let t = s.time.iso8601
            if update.entered { log.append("enter \(s.id) at \(t)") }
            if let from = update.proximityChangedFrom { log.append("proximity \(s.id) \(from)→\(update.track.proximity) at \(t)") }
            if update.publish {
                log.append("publish \(s.id) seq \(update.track.sequence) \(update.track.proximity) at \(t)")
            }
            if ticks == .afterEveryFrame { record(tracker.advance(to: s.time)) }
        }
        if let step {
            while nextTick <= end {
                record(tracker.advance(to: nextTick))
                nextTick = nextTick + step
            }
        }
        record(tracker.advance(to: end))
        #expect(tracker.count == 0)
        return log
    }

    /// "The same events at any replay speed": however often time is advanced, the same
    /// sightings give the same (event, beacon, time) sequence, exactly.
    @Test(arguments: ["door", "counter"])
    func sameEventsAtAnyTickRate(gateway: String) throws {
        let sightings = try Self.sightings(gateway: gateway)
        #expect(sightings.count > 500)
        let reference = Self.replay(sightings, ticks: .afterEveryFrame)
        #expect(reference.contains { $0.hasPrefix("stale") })
        #expect(reference.filter { $0.hasPrefix("exit") }.count == reference.filter { $0.hasPrefix("enter") }.count)
        for ticks in Ticks.allCases.dropFirst() {
            let log = Self.replay(sightings, ticks: ticks)
            #expect(log == reference, "\(ticks)")
            if log != reference, let i = Array(zip(log, reference)).firstIndex(where: { $0.0 != $0.1 }) {
                Issue.record("first difference with ticks \(ticks): \(log[i]) vs \(reference[i])")
            }
        }
        // The holes cut into the capture made beacons leave and come back.
        let enters = reference.filter { $0.hasPrefix("enter") }.count
        #expect(enters > Set(sightings.map(\.id)).count)
    }
}

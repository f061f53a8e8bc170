import BeaconKit
import Testing
import Tracking
import Wire

/// The ranging observer's decisions (`beaconctl observe --source`), with time passed in.
@Suite("AutoObserver: join the nearest at immediate, leave after the ad, far or gone")
struct AutoObserverTests {
    static let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
    static let start = CaptureTime(iso8601: "2026-11-21T10:00:00.000Z")!

    /// RSSI for a distance with P1m -59 dBm and n = 2: -40 is 0.11 m, -62 is 1.4 m, -85 is 20 m.
    static func event(minor: UInt16, rssi: Int8?) -> [UInt8] {
        HCIEventBuilder.legacyReport([.init(address: BluetoothAddress(rawValue: 0xC0FFEE000000 | UInt64(minor)),
                                            data: AdvertisingData.iBeacon(IBeacon(uuid: uuid, major: 100, minor: minor,
                                                                                  txPower: -59)),
                                            rssi: rssi)])
    }

    struct Walk {
        var observer: AutoObserver
        var time = AutoObserverTests.start
        var actions: [AutoObserver.Action] = []

        init(_ settings: AutoObserver.Settings = .init()) {
            observer = AutoObserver(settings: settings, monitor: RangeMonitor(settings: TrackerSettings(exitTimeout: 3)))
        }

        /// `seconds` of advertisements, four a second, of each beacon at its RSSI.
        mutating func hear(_ beacons: [(minor: UInt16, rssi: Int8?)], for seconds: Double) {
            let end = time + seconds
            while time < end {
                for beacon in beacons {
                    actions += AutoObserverTests.event(minor: beacon.minor, rssi: beacon.rssi).withUnsafeBytes {
                        observer.observe(event: $0, at: time)
                    }
                }
                time = time + 0.25
            }
        }

        mutating func quiet(for seconds: Double) {
            time = time + seconds
            actions += observer.advance(to: time)
        }

        mutating func answer(_ minor: UInt16) { actions += observer.answered(major: 100, minor: minor) }

        /// The actions so far as words, and forgets them.
        mutating func said() -> [String] {
            defer { actions = [] }
            return actions.map { action in
                switch action {
                case .join(let line): "join \(line.id.minor ?? 0)"
                case .leave(let id, let reason): "leave \(id.minor ?? 0): \(reason.rawValue)"
                }
            }
        }
    }

    @Test("joins at immediate, leaves on the answer, and joins again only after walking away")
    func overAndOver() {
        var walk = Walk()
        walk.hear([(1, -62)], for: 3)
        #expect(walk.said().isEmpty, "near is not close enough")
        walk.hear([(1, -40)], for: 3)
        #expect(walk.said() == ["join 1"])
        walk.answer(2)
        #expect(walk.said().isEmpty, "an answer about another beacon")
        walk.answer(1)
        #expect(walk.said() == ["leave 1: the ad arrived"])
        walk.hear([(1, -40)], for: 5)
        #expect(walk.said().isEmpty, "standing at the counter: the ad once")
        walk.hear([(1, -62)], for: 3)
        walk.hear([(1, -40)], for: 3)
        #expect(walk.said().isEmpty, "near is not away")
        walk.hear([(1, -85)], for: 4)
        walk.hear([(1, -40)], for: 4)
        #expect(walk.said() == ["join 1"], "far, then back at immediate: joined again")
        walk.hear([(1, -85)], for: 4)
        #expect(walk.said() == ["leave 1: the beacon is far"])
    }

    @Test("the nearest beacon at immediate is joined; one join at a time")
    func nearestFirst() {
        var walk = Walk()
        walk.hear([(1, -45), (2, -38)], for: 4)
        #expect(walk.said() == ["join 2"])
        walk.answer(2)
        #expect(walk.said() == ["leave 2: the ad arrived"])
        walk.hear([(1, -45), (2, -38)], for: 2)
        #expect(walk.said() == ["join 1"], "the next one at immediate, on the next report")
    }

    @Test("a beacon that goes quiet is left when gone; an unanswered join is left after the answer timeout")
    func goneAndUnanswered() {
        var walk = Walk(.init(answerTimeout: 5))
        walk.hear([(1, -40)], for: 2)
        #expect(walk.said() == ["join 1"])
        walk.quiet(for: 4)
        #expect(walk.said() == ["leave 1: the beacon is gone"])
        walk.hear([(2, -40)], for: 8)
        #expect(walk.said() == ["join 2", "leave 2: no answer came"])
        walk.hear([(2, -40)], for: 3)
        #expect(walk.said().isEmpty, "not joined again while it stays close")
    }

    /// The storefront greeter (seed 002): "we'll learn how to load that profile ... when we're
    /// in range of an iBeacon"; "I set the "enter shop" trigger at "immediate" range and the
    /// "leave shop" trigger at "far"" (its code: `leaveShop` at near, far and unknown too).
    @Test("--stay: joined from immediate through the answer while ranged; left at far (or near, or only when gone)")
    func greeterStays() {
        var walk = Walk(.init(answerTimeout: 5, stay: .far))
        walk.hear([(1, -40)], for: 2)
        #expect(walk.said() == ["join 1"])
        walk.answer(1)
        #expect(walk.said().isEmpty, "the profile stays loaded after the ad")
        walk.hear([(1, -62)], for: 10)
        #expect(walk.said().isEmpty, "near, and past the answer timeout: still in the shop")
        walk.hear([(1, -85)], for: 4)
        #expect(walk.said() == ["leave 1: the beacon is far"])
        walk.hear([(1, -40)], for: 3)
        #expect(walk.said() == ["join 1"], "back at the counter: in the shop again")

        var code = Walk(.init(stay: .near))
        code.hear([(1, -40)], for: 2)
        code.answer(1)
        code.hear([(1, -62)], for: 3)
        #expect(code.said() == ["join 1", "leave 1: the beacon is no longer at immediate"])

        var blind = Walk(.init(joinOn: .sighting, stay: .gone))
        blind.hear([(1, nil)], for: 2)
        blind.answer(1)
        blind.hear([(1, nil)], for: 12)
        #expect(blind.said() == ["join 1"], "unknown proximity all along: stays while heard")
        blind.quiet(for: 4)
        #expect(blind.said() == ["leave 1: the beacon is gone"])

        var unanswered = Walk(.init(answerTimeout: 5, stay: .far))
        unanswered.hear([(1, -40)], for: 7)
        #expect(unanswered.said() == ["join 1", "leave 1: no answer came"], "a refused join is not kept")
    }

    @Test("the brain ending the join leaves it; it is joined again only after far or gone")
    func endedByTheBrain() {
        var walk = Walk(.init(stay: .far))
        walk.hear([(1, -40)], for: 2)
        walk.answer(1)
        walk.actions += walk.observer.ended(major: 100, minor: 1)
        walk.hear([(1, -40)], for: 3)
        #expect(walk.said() == ["join 1", "leave 1: the brain ended the join"])
        walk.hear([(1, -85)], for: 4)
        walk.hear([(1, -40)], for: 3)
        #expect(walk.said() == ["join 1"])
    }

    @Test("without RSSI (an emulated controller) only --join-on sighting joins")
    func withoutRSSI() {
        var immediate = Walk()
        immediate.hear([(1, nil)], for: 2)
        #expect(immediate.said().isEmpty)
        var sighting = Walk(.init(joinOn: .sighting))
        sighting.hear([(1, nil)], for: 2)
        #expect(sighting.said() == ["join 1"])
        sighting.answer(1)
        sighting.hear([(1, nil)], for: 2)
        #expect(sighting.said() == ["leave 1: the ad arrived"])
        sighting.quiet(for: 4)
        sighting.hear([(1, nil)], for: 2)
        #expect(sighting.said() == ["join 1"], "gone and back: joined again")
        #expect(sighting.observer.stop() == [.leave(BeaconID(uuid: Self.uuid, major: 100, minor: 1), .stopped)])
    }
}

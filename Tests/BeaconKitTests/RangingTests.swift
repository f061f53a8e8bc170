import BeaconKit
import Tracking
import Foundation
import Testing

@Suite("RSSI filter and distance")
struct RangingTests {
    @Test func firstSampleIsTheEstimate() {
        var filter = RSSIFilter()
        #expect(filter.estimate == nil)
        #expect(filter.update(-63, at: t0) == -63)
        #expect(filter.estimate == -63)
    }

    /// README "From RSSI to presence": one reflection does not move a customer across the
    /// shop. After the filter has settled, one sample 10 dB off moves the estimate by less
    /// than 4 dB at 1 Hz and by less than 1.5 dB at 10 Hz, and the next good samples pull it back.
    @Test(arguments: [(1.0, 4.0), (0.1, 1.5)])
    func aSingleOutlierMovesLittle(interval: Double, limit: Double) {
        var filter = RSSIFilter()
        var time = t0
        for _ in 0..<60 {
            filter.update(-60, at: time)
            time = time + interval
        }
        #expect(abs(filter.estimate! - -60) < 1e-9)
        let moved = filter.update(-50, at: time) - -60
        #expect(moved > 0 && moved < limit)
        for _ in 0..<30 {
            time = time + interval
            filter.update(-60, at: time)
        }
        #expect(abs(filter.estimate! - -60) < 0.05)
    }

    @Test func convergesToAStep() {
        var filter = RSSIFilter()
        var time = t0
        for _ in 0..<20 {
            filter.update(-60, at: time)
            time = time + 1
        }
        var previous = filter.estimate!
        var steps = 0
        while abs(filter.estimate! - -75) > 0.5 {
            let next = filter.update(-75, at: time)
            #expect(next < previous && next >= -75)     // monotonic, no overshoot
            previous = next
            time = time + 1
            steps += 1
        }
        #expect(steps <= 8)
    }

    @Test func aLongSilenceStartsNearlyFresh() {
        var filter = RSSIFilter()
        filter.update(-60, at: t0)
        filter.update(-60, at: t0 + 1)
        // After a minute without samples the variance is large: the new sample dominates.
        let next = filter.update(-80, at: t0 + 3601)
        #expect(next < -78.5)   // Δt is capped at 60 s: a gain above 0.9
    }

    @Test func samplesOutOfOrderDoNotBreakIt() {
        var filter = RSSIFilter()
        filter.update(-60, at: t0 + 10)
        let next = filter.update(-70, at: t0)
        #expect(next.isFinite && next < -60 && next > -70)
    }

    /// Log-distance path loss (README, "From RSSI to presence"): with P1m -59 dBm and n 2, -59 dBm is 1 m and -79 is 10 m.
    @Test(arguments: [
        (-59.0, -59.0, 2.0, 1.0), (-79, -59, 2, 10), (-69, -59, 2, sqrt(10)), (-39, -59, 2, 0.1),
        (-89, -59, 3, 10), (-94, -59, 3.5, 10), (-65, -65, 2.7, 1),
    ])
    func logDistance(rssi: Double, power: Double, exponent: Double, metres: Double) {
        let d = DistanceModel.logDistance.distance(rssi: rssi, measuredPower: power, exponent: exponent)
        #expect(abs(d - metres) < 1e-9 * max(1, metres))
    }

    /// Radius Networks' fitted curve: `0.89976 · r^7.7095 + 0.111`, `r^10` below r = 1.
    @Test(arguments: [(-59.0, -59.0), (-70, -59), (-90, -59), (-50, -59), (-30, -59), (-80, -65)])
    func curveFit(rssi: Double, power: Double) {
        let ratio = rssi / power
        let expected = ratio < 1 ? pow(ratio, 10) : 0.89976 * pow(ratio, 7.7095) + 0.111
        let d = DistanceModel.curveFit.distance(rssi: rssi, measuredPower: power, exponent: 2)
        #expect(abs(d - expected) < 1e-9 * max(1, expected))
        #expect(DistanceModel.curveFit.distance(rssi: -59, measuredPower: -59, exponent: 2) == 0.89976 + 0.111)
        #expect(DistanceModel.curveFit.distance(rssi: -59, measuredPower: 0, exponent: 2) == .infinity)
    }

    @Test(arguments: [
        // distance, current, expected (defaults: 0.5 m, 3 m, hysteresis 0.2)
        (0.3, Proximity.unknown, Proximity.immediate), (1.0, .unknown, .near), (3.0, .unknown, .near),
        (3.01, .unknown, .far), (0.5, .unknown, .near),
        (3.5, .near, .near), (3.59, .near, .near), (3.61, .near, .far),
        (2.5, .far, .far), (2.4, .far, .near), (2.39, .far, .near),
        (0.55, .immediate, .immediate), (0.61, .immediate, .near),
        (0.45, .near, .near), (0.39, .near, .immediate), (0.39, .far, .immediate), (10, .immediate, .far),
        (3.5, .immediate, .near),
    ])
    func proximityWithHysteresis(distance: Double, current: Proximity, expected: Proximity) {
        #expect(ProximityThresholds().proximity(for: distance, current: current) == expected)
    }

    @Test func proximityWithoutADistanceIsUnknown() {
        #expect(ProximityThresholds().proximity(for: nil, current: .near) == .unknown)
        #expect(ProximityThresholds().proximity(for: .infinity, current: .near) == .unknown)
        #expect(ProximityThresholds().proximity(for: .nan, current: .far) == .unknown)
        #expect(Proximity.immediate < .near && Proximity.near < .far && Proximity.far < .unknown)
    }
}

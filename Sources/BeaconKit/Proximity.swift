/// iOS's proximity classes: what a gateway's payloads say of a beacon's distance (`proximity`
/// in sightings, presence and RSSI reports) and what the brain's rules test.
public enum Proximity: String, Sendable, Equatable, CaseIterable, Comparable {
    case immediate, near, far, unknown

    var rank: Int {
        switch self {
        case .immediate: 0
        case .near: 1
        case .far: 2
        case .unknown: 3
        }
    }

    public static func < (lhs: Proximity, rhs: Proximity) -> Bool { lhs.rank < rhs.rank }
}

/// Which words `beaconctl range` says.
public enum HotColdWords: String, Sendable, Equatable, CaseIterable {
    /// The default: distance and its trend (`Warmth`): HOT!, Warmer, Cold, Freezing, ?.
    /// Says whether the seeker is closing in, which proximity alone cannot.
    case game
    /// The hot/cold app BeaconBridge grew out of: the proximity class alone, as it named
    /// them: unknown Freezing!, far Cold!, near Warm!, immediate Hot!.
    case original

    /// The word for one line of a report.
    public func word(for line: RangeLine) -> String {
        switch self {
        case .game: line.warmth.rawValue
        case .original: Self.original(line.proximity)
        }
    }

    /// The original app's word for a proximity class.
    public static func original(_ proximity: Proximity) -> String {
        switch proximity {
        case .immediate: "Hot!"
        case .near: "Warm!"
        case .far: "Cold!"
        case .unknown: "Freezing!"
        }
    }

    /// How warm the word is, for colours: the game's own, or the original's by class.
    public func warmth(for line: RangeLine) -> Warmth {
        switch self {
        case .game: line.warmth
        case .original:
            switch line.proximity {
            case .immediate: .hot
            case .near: .warmer
            case .far: .cold
            case .unknown: .freezing
            }
        }
    }
}

public import BeaconKit

/// Which words `beaconctl range` says.
public enum HotColdWords: String, Sendable, Equatable, CaseIterable {
    /// The default: distance and its trend (`Warmth`): HOT!, Warmer, Cold, Freezing, ?.
    /// Says whether the seeker is closing in, which proximity alone cannot.
    case game
    /// The hot/cold app BeaconBridge grew out of, exactly as its ranging callback mapped the
    /// proximity class: unknown Freezing! (blue), far Cold! (blue), immediate Warmer (purple),
    /// near HOT! (red), with the RSSI shown as "-63dB". Its mapping puts near above
    /// immediate; kept as the original had it (the README's table says so).
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
        case .unknown: "Freezing!"
        case .far: "Cold!"
        case .immediate: "Warmer"
        case .near: "HOT!"
        }
    }

    /// The original app's background colour for a proximity class.
    public static func originalColour(_ proximity: Proximity) -> WordColour {
        switch proximity {
        case .unknown, .far: .blue
        case .immediate: .purple
        case .near: .red
        }
    }

    /// The original app's signal line: the last RSSI as "-63dB"; "0dB" without one, as
    /// CoreLocation reported a beacon it had no signal strength for.
    public static func originalSignal(_ rssi: Int?) -> String { "\(rssi ?? 0)dB" }

    /// The colour a line is drawn in on a terminal.
    public func colour(for line: RangeLine) -> WordColour {
        if line.gone { return .dim }
        switch self {
        case .original: return Self.originalColour(line.proximity)
        case .game:
            switch line.warmth {
            case .hot: return .red
            case .warmer: return .yellow
            case .cold: return .cyan
            case .freezing: return .blue
            case .unknown: return .dim
            }
        }
    }
}

/// The colours of `beaconctl range` on a terminal, with their ANSI escapes.
public enum WordColour: String, Sendable, Equatable, CaseIterable {
    case red, purple, yellow, cyan, blue, dim

    /// The escape sequence that starts the colour (bold for the loudest).
    public var ansi: String {
        switch self {
        case .red: "\u{1B}[1;31m"
        case .purple: "\u{1B}[35m"
        case .yellow: "\u{1B}[33m"
        case .cyan: "\u{1B}[36m"
        case .blue: "\u{1B}[1;34m"
        case .dim: "\u{1B}[2m"
        }
    }
}

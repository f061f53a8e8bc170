import BeaconKit

extension FleetConfig {
    /// Zone settings known to score worse than the defaults: `brain.zoneMargin` above 0 and
    /// `brain.zoneUpdates` above 1 put customers in the right zone less of the time on the
    /// simulated stores they were measured on (customers at the gateways or metres from them,
    /// one advertisement a second, σ 6 dB shadowing with 40 % loss: docs/presence.md,
    /// "Settings that score worse"); they buy fewer flaps. Also `brain.zoneSettle` where the
    /// estimator does not read it. `beaconctl config check` prints them as warnings.
    public var zoneWarnings: [String] {
        var warnings: [String] = []
        let defaults = BrainConfig()
        let instead = "for fewer zone flaps where customers stand set brain.zoneSettle (5 s), or raise "
            + "brain.zoneConfidenceWalking, instead (docs/presence.md)"
        if brain.zoneMargin > defaults.zoneMargin {
            warnings.append("brain.zoneMargin \(plain(brain.zoneMargin)) dB: a margin above the default "
                            + "\(plain(defaults.zoneMargin)) (2 and 4 were tried) measured fewer seconds in the right zone on the simulated "
                            + "stores it was tried on; \(instead)")
        }
        if brain.zoneUpdates > defaults.zoneUpdates {
            warnings.append("brain.zoneUpdates \(brain.zoneUpdates): more than the default \(defaults.zoneUpdates) "
                            + "step in a row measured fewer seconds in the right zone on the simulated stores it was "
                            + "tried on (the zone follows a walker later); \(instead)")
        }
        if brain.zoneSettle > 0, brain.zoneModel != .pairwise {
            warnings.append("brain.zoneSettle \(plain(brain.zoneSettle)) s: only the pairwise estimator settles; with "
                            + "brain.zoneModel \"\(brain.zoneModel.rawValue)\" it changes nothing")
        }
        return warnings
    }
}

/// 4 for 4.0, 2.5 for 2.5: a number as a person writes it in a config.
private func plain(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
}

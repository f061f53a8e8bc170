import BeaconKit
public import Contract
public import Config
import Tracking
import RealModule

/// What one gateway's reports say about one reference transmitter, summed up: the robust
/// level it hears it at, against the distance between them.
public struct CalibrationLink: Sendable, Equatable {
    public var gateway: String
    /// Metres between the gateway and the transmitter.
    public var distance: Double
    /// The transmitter's RSSI at 1 m, dBm.
    public var power: Double
    /// The (count-weighted) median of the RSSI the gateway reported, dBm.
    public var rssi: Double
    /// Advertisements behind `rssi`.
    public var count: Int

    public init(gateway: String, distance: Double, power: Double, rssi: Double, count: Int) {
        self.gateway = gateway
        self.distance = distance
        self.power = power
        self.rssi = rssi
        self.count = count
    }
}

/// The least-squares fit of one store: `rssi = power − 10·n·log10(distance) + bias[gateway]`
/// over every link, one path-loss exponent `n` for the store and one bias per gateway (dB it
/// reads above the model; its correction is the opposite). Robust: links are weighted by
/// their advertisements (capped) and down-weighted on their residuals (Huber, then Tukey's
/// biweight), so one link behind a shelf does not tilt the store's fit; the exponent is held towards the
/// configured one (`priorExponent`) by the weight of `priorWeight` advertisements, which
/// matters only while evidence is thin. Pinned gateways (an operator's `rssiOffset`) keep
/// bias 0: they anchor the fit.
public struct CalibrationFit: Sendable, Equatable {
    public var exponent: Double
    /// dB each gateway reads above the model; its correction is `-bias`.
    public var bias: [String: Double]
    /// RMS residual of each gateway's links, dB.
    public var residual: [String: Double]
    /// Advertisements and links behind each gateway's bias.
    public var samples: [String: Int]
    public var links: [String: Int]
    /// Gateways whose bias hit `maxOffset`.
    public var clamped: Set<String>

    /// Weight of the configured exponent, in advertisements.
    public static let priorWeight = 100.0
    /// Most advertisements one link weighs: a link heard for hours does not drown the others.
    public static let linkWeightCap = 600.0

    /// Fits `links`; `nil` when no gateway has `settings.minSamples` advertisements.
    public static func fit(_ links: [CalibrationLink], pinned: Set<String> = [], priorExponent: Double,
                           settings: CalibrationSettings) -> CalibrationFit? {
        var totals: [String: Int] = [:]
        for link in links where link.count >= Self.minimumLinkCount { totals[link.gateway, default: 0] += link.count }
        let gateways = Set(totals.filter { $0.value >= settings.minSamples }.keys)
        let used = links.filter { gateways.contains($0.gateway) && $0.count >= Self.minimumLinkCount }
        guard !used.isEmpty else { return nil }
        let y = used.map { $0.rssi - $0.power }
        let l = used.map { Double.log10(max($0.distance, 0.5)) }
        let base = used.map { min(Double($0.count), Self.linkWeightCap) }
        var robust = Array(repeating: 1.0, count: used.count)
        let n0 = min(max(priorExponent, settings.minExponent), settings.maxExponent)
        var n = n0
        var bias: [String: Double] = [:]
        var clamped: Set<String> = []
        var residuals = Array(repeating: 0.0, count: used.count)
        for iteration in 0..<8 {
            // Per free gateway, the weighted means of y and log-distance: its bias follows
            // from n, so n is fitted on what is left within each gateway.
            var sw: [String: Double] = [:], sy: [String: Double] = [:], sl: [String: Double] = [:]
            for (i, link) in used.enumerated() where !pinned.contains(link.gateway) {
                let w = base[i] * robust[i]
                sw[link.gateway, default: 0] += w
                sy[link.gateway, default: 0] += w * y[i]
                sl[link.gateway, default: 0] += w * l[i]
            }
            var num = Self.priorWeight * n0, den = Self.priorWeight
            for (i, link) in used.enumerated() {
                let w = base[i] * robust[i]
                var a = l[i], c = y[i]
                if let total = sw[link.gateway], total > 0 {
                    a -= sl[link.gateway]! / total
                    c -= sy[link.gateway]! / total
                }
                // c ≈ −10·n·a
                num += w * -c * 10 * a
                den += w * 100 * a * a
            }
            n = min(max(num / den, settings.minExponent), settings.maxExponent)
            bias = [:]
            clamped = []
            for gateway in gateways {
                guard !pinned.contains(gateway), let total = sw[gateway], total > 0 else {
                    bias[gateway] = 0
                    continue
                }
                let b = (sy[gateway]! + 10 * n * sl[gateway]!) / total
                if abs(b) > settings.maxOffset { clamped.insert(gateway) }
                bias[gateway] = min(max(b, -settings.maxOffset), settings.maxOffset)
            }
            for (i, link) in used.enumerated() { residuals[i] = y[i] + 10 * n * l[i] - bias[link.gateway]! }
            // Huber first (residuals beyond 1.5 robust standard deviations weigh less), then
            // Tukey's biweight from that start: a link beyond 4.7 of them weighs nothing.
            let scale = max(1.0, 1.4826 * median(residuals.map(abs)))
            robust = residuals.map { r in
                if iteration < 4 { return min(1, 1.5 * scale / max(abs(r), 1e-9)) }
                let u = r / (4.685 * scale)
                return abs(u) < 1 ? (1 - u * u) * (1 - u * u) : 0
            }
        }
        var residual: [String: Double] = [:], samples: [String: Int] = [:], linkCount: [String: Int] = [:]
        var squares: [String: (Double, Double)] = [:]
        for (i, link) in used.enumerated() {
            let s = squares[link.gateway] ?? (0, 0)
            squares[link.gateway] = (s.0 + base[i] * residuals[i] * residuals[i], s.1 + base[i])
            samples[link.gateway, default: 0] += link.count
            linkCount[link.gateway, default: 0] += 1
        }
        for (gateway, s) in squares { residual[gateway] = (s.0 / max(s.1, 1e-9)).squareRoot() }
        return CalibrationFit(exponent: n, bias: bias, residual: residual, samples: samples, links: linkCount,
                              clamped: clamped)
    }

    /// Fewer advertisements than this on a link say nothing about it.
    public static let minimumLinkCount = 5
}

/// The brain's calibration of its gateways: learns from the reference transmitters in the
/// gateways' RSSI reports, fits each store every `interval` seconds of capture time once
/// there is evidence enough (`CalibrationFit`), applies a fit that differs from the applied
/// values by `minChange`, and corrects every report before the zone fusion. Time is the
/// reports' capture time, so a replay calibrates as the same capture in real time. A value
/// owned by one task.
public struct Calibrator: Sendable {
    public private(set) var settings: CalibrationSettings
    /// The values applied, by gateway.
    public private(set) var applied: [String: CalibrationRecord] = [:]

    private var transmitters: [BeaconRef: ReferenceTransmitter] = [:]
    private var gateways: [String: (store: UInt16, position: FloorPosition)] = [:]
    private var pinned: Set<String> = []
    private var configuredOffsets: [String: Double] = [:]
    private var priorExponents: [UInt16: Double] = [:]
    /// What each configuration gave: a change of any of it makes the samples meaningless.
    private var basis: [String] = []
    private var heard: [LinkKey: [Sample]] = [:]
    private var firstHeard: [UInt16: CaptureTime] = [:]
    private var nextFit: [UInt16: CaptureTime] = [:]

    private struct LinkKey: Hashable, Comparable {
        var gateway: String
        var transmitter: BeaconRef
        static func < (a: LinkKey, b: LinkKey) -> Bool { (a.gateway, a.transmitter) < (b.gateway, b.transmitter) }
    }

    private struct Sample {
        var rssi: Double
        var count: Int
    }

    /// Samples kept per link, the latest: about 15 minutes of a transmitter advertising once a second.
    public static let samplesPerLink = 900

    public init(config: FleetConfig, stores: Set<UInt16> = []) {
        settings = config.brain.calibration
        configure(config, stores: stores)
    }

    /// Takes a new fleet config. Samples are dropped when positions, transmitters or
    /// configured offsets changed; applied values stay, but for gateways now pinned or gone
    /// (returned: their records are withdrawn), or all of them when calibration is turned off.
    @discardableResult
    public mutating func configure(_ config: FleetConfig, stores: Set<UInt16> = []) -> [String] {
        settings = config.brain.calibration
        let list = ReferenceTransmitter.all(in: config, stores: stores)
        transmitters = Dictionary(list.map { ($0.beacon, $0) }, uniquingKeysWith: { a, _ in a })
        gateways = [:]
        priorExponents = [:]
        var exponents: [UInt16: [Double]] = [:]
        for gateway in config.gateways {
            guard let store = gateway.store, let position = gateway.position,
                  stores.isEmpty || stores.contains(store) else { continue }
            gateways[gateway.id] = (store, position)
            exponents[store, default: []].append(gateway.tracker.pathLossExponent)
        }
        for (store, list) in exponents { priorExponents[store] = list.reduce(0, +) / Double(list.count) }
        pinned = Set(config.gateways.filter(\.rssiOffsetIsExplicit).map(\.id))
        configuredOffsets = Dictionary(config.gateways.map { ($0.id, $0.tracker.rssiOffset) }, uniquingKeysWith: { a, _ in a })
        let newBasis = list.map { "\($0.beacon) \($0.store) \($0.position.x),\($0.position.y) \($0.power)" }.sorted()
            + gateways.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.store) \($0.value.position.x),\($0.value.position.y) "
                + "\(configuredOffsets[$0.key] ?? 0) \(pinned.contains($0.key))" }
        if newBasis != basis {
            basis = newBasis
            heard = [:]
            firstHeard = [:]
            nextFit = [:]
        }
        let withdrawn = applied.keys.filter { !settings.enabled || gateways[$0] == nil || pinned.contains($0) }.sorted()
        for gateway in withdrawn { applied[gateway] = nil }
        return withdrawn
    }

    /// Whether this brain calibrates `gateway` (placed in one of its stores).
    public func calibrates(_ gateway: String) -> Bool { gateways[gateway] != nil }

    /// dB the brain adds to `gateway`'s reported RSSI.
    public func correction(of gateway: String) -> Double {
        settings.enabled ? applied[gateway]?.rssiOffset ?? 0 : 0
    }

    /// Values a previous run of the brain applied (its retained record): applied again,
    /// unless the gateway is pinned or unknown now.
    public mutating func restore(_ record: CalibrationRecord) {
        guard settings.enabled, gateways[record.gateway] != nil, !pinned.contains(record.gateway),
              applied[record.gateway] == nil else { return }
        applied[record.gateway] = record
    }

    /// `report` with its RSSI corrected by its gateway's applied offset.
    public func corrected(_ report: RSSIReport) -> RSSIReport {
        let offset = correction(of: report.gateway)
        guard offset != 0 else { return report }
        var report = report
        for i in report.entries.indices {
            report.entries[i].rssi = report.entries[i].rssi.map { $0 + offset }
            report.entries[i].rssiSmoothed = report.entries[i].rssiSmoothed.map { $0 + offset }
        }
        return report
    }

    /// Learns from the reference transmitters in `report` (as the gateway reported them,
    /// before any correction) and fits the stores that are due; returns the records of the
    /// values it applied.
    public mutating func learn(from report: RSSIReport) -> [CalibrationRecord] {
        guard settings.enabled, let receiver = gateways[report.gateway] else { return [] }
        for entry in report.entries {
            guard let rssi = entry.rssi, let transmitter = transmitters[entry.beacon], transmitter.store == receiver.store,
                  transmitter.gateway != report.gateway,
                  entry.uuid == nil || transmitter.uuid == nil || entry.uuid == transmitter.uuid else { continue }
            let key = LinkKey(gateway: report.gateway, transmitter: entry.beacon)
            heard[key, default: []].append(Sample(rssi: rssi, count: entry.count))
            if heard[key]!.count > Self.samplesPerLink { heard[key]!.removeFirst(heard[key]!.count - Self.samplesPerLink) }
            let time = report.from + entry.at
            if firstHeard[receiver.store] == nil { firstHeard[receiver.store] = time }
        }
        let now = report.to
        var changed: [CalibrationRecord] = []
        for (store, first) in firstHeard.sorted(by: { $0.key < $1.key }) {
            guard now.seconds(since: first) >= settings.minSeconds, now >= nextFit[store] ?? now else { continue }
            nextFit[store] = now + settings.interval
            changed += fit(store: store, at: now)
        }
        return changed
    }

    /// The links of one store as the fit takes them.
    public func links(ofStore store: UInt16) -> [CalibrationLink] {
        heard.keys.sorted().compactMap { key in
            guard let receiver = gateways[key.gateway], receiver.store == store, let transmitter = transmitters[key.transmitter]
            else { return nil }
            let samples = heard[key]!
            let dx = receiver.position.x - transmitter.position.x, dy = receiver.position.y - transmitter.position.y
            return CalibrationLink(gateway: key.gateway, distance: (dx * dx + dy * dy).squareRoot(), power: transmitter.power,
                                   rssi: weightedMedian(samples.map { ($0.rssi, $0.count) }),
                                   count: samples.reduce(0) { $0 + $1.count })
        }
    }

    private mutating func fit(store: UInt16, at now: CaptureTime) -> [CalibrationRecord] {
        guard let fit = CalibrationFit.fit(links(ofStore: store), pinned: pinned, priorExponent: priorExponents[store] ?? 2,
                                           settings: settings) else { return [] }
        var changed: [CalibrationRecord] = []
        for gateway in fit.bias.keys.sorted() {
            let offset = pinned.contains(gateway) ? 0 : -fit.bias[gateway]!
            let old = applied[gateway]
            if let old, abs(old.rssiOffset - offset) < max(settings.minChange, 1e-9),
               abs(old.pathLossExponent - fit.exponent) < max(settings.minChange / 20, 1e-9) { continue }
            let record = CalibrationRecord(
                gateway: gateway, values: .init(rssiOffset: offset, pathLossExponent: fit.exponent, since: now),
                samples: fit.samples[gateway] ?? 0, links: fit.links[gateway] ?? 0, residual: fit.residual[gateway] ?? 0,
                pinned: pinned.contains(gateway), configuredOffset: configuredOffsets[gateway] ?? 0, before: old?.values)
            applied[gateway] = record
            changed.append(record)
        }
        return changed
    }
}

/// The median of values weighted by counts.
func weightedMedian(_ values: [(Double, Int)]) -> Double {
    let sorted = values.sorted { $0.0 < $1.0 }
    let total = sorted.reduce(0) { $0 + $1.1 }
    var seen = 0
    for (value, count) in sorted {
        seen += count
        if 2 * seen >= total { return value }
    }
    return sorted.last?.0 ?? 0
}

func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return 0 }
    let s = values.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

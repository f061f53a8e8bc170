import BeaconKit
import CoreMetrics
import Synchronization

/// The figures a health message carries, as Prometheus metrics: every number in a
/// gateway's `gateways/<id>/health` or the brain's `brain/health/<client>` becomes
/// `beaconbridge_<kind>_<figure>` (snake case) with the sender's id as a label, so the
/// endpoint shows exactly what health says, updated each time health is published.
///
/// Figures that only grow (`dropped`, `malformed`, `published`, `received`, …) are
/// counters (`…_total`), increased by what they grew since the last message; the others
/// (`adverts_per_second`, `queue_depth`, `tracked`, `uptime`) gauges. Nested counts
/// (the brain's `malformed` by kind) get the key as a `kind` label.
public final class HealthMetrics: Sendable {
    public enum Kind: String, Sendable { case gateway, brain }

    let kind: Kind
    let id: String
    /// Figures that are rates or levels, not running totals.
    static let gauges: Set<String> = ["uptime", "advertsPerSecond", "decodedPerSecond", "queueDepth", "tracked",
                                      "beacons", "joins", "stores", "settled"]
    private let last = Mutex<[String: Double]>([:])

    public init(kind: Kind, id: String) {
        self.kind = kind
        self.id = id
    }

    /// Records one health payload (the JSON text published on the health topic).
    public func record(healthJSON text: String) {
        guard let value = try? JSONParser(maxDepth: 8).parse(text), case .object(let object) = value else { return }
        for (key, member) in object.members {
            switch member {
            case .number(let number): record(key, number, labels: [])
            case .bool(let flag): record(key, flag ? 1 : 0, labels: [])
            case .object(let nested):
                for (inner, value) in nested.members {
                    if let number = value.numberValue { record(key, number, labels: [("kind", inner)]) }
                }
            default: continue
            }
        }
    }

    private func record(_ key: String, _ value: Double, labels: [(String, String)]) {
        let name = "beaconbridge_\(kind.rawValue)_" + Self.snakeCase(key)
        let dimensions = [(kind.rawValue, id)] + labels
        if Self.gauges.contains(key) {
            Gauge(label: name, dimensions: dimensions).record(value)
            return
        }
        let identity = ([name] + labels.map { "\($0.0)=\($0.1)" }).joined(separator: ",")
        let grown = last.withLock { seen -> Double in
            defer { seen[identity] = value }
            guard let before = seen[identity], value >= before else { return value }  // first, or restarted
            return value - before
        }
        Counter(label: name + "_total", dimensions: dimensions).increment(by: Int64(grown.rounded()))
    }

    /// `advertsPerSecond` → `adverts_per_second`.
    static func snakeCase(_ key: String) -> String {
        var out = ""
        for scalar in key.unicodeScalars {
            if ("A"..."Z").contains(scalar) {
                if !out.isEmpty { out += "_" }
                out += String(scalar).lowercased()
            } else if ("a"..."z").contains(scalar) || ("0"..."9").contains(scalar) {
                out.unicodeScalars.append(scalar)
            } else {
                out += "_"
            }
        }
        return out
    }
}

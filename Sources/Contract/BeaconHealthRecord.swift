public import BeaconKit

/// The brain's health record of a registry beacon on `brain/beacons/<beacon>` (retained,
/// unsealed: beacon-web's fleet page reads it; docs/brain.md "Beacon health"):
/// `{"beacon","name","lastSeen","present","battery","batteryLow","missing"}`. The beacon
/// is the topic's and the name the registry's: both are written, neither is read back.
public struct BeaconHealthRecord: Sendable, Equatable {
    /// When a gateway last saw it (while present: at most `BeaconHealth.refresh`, 10 minutes, ago); `nil`: never.
    public var lastSeen: CaptureTime?
    public var present = false
    /// The last Eddystone-TLM battery reading, mV; `nil` when the beacon never said.
    public var battery: Int?
    public var batteryLow = false
    public var missing = false

    public init(lastSeen: CaptureTime? = nil, present: Bool = false, battery: Int? = nil, batteryLow: Bool = false,
                missing: Bool = false) {
        self.lastSeen = lastSeen
        self.present = present
        self.battery = battery
        self.batteryLow = batteryLow
        self.missing = missing
    }

    public func json(beacon: BeaconRef, name: String?) -> String {
        var writer = JSONWriter(capacity: 200)
        writer.object { o in
            o("beacon", beacon.json)
            o("name", name)
            o("lastSeen", lastSeen.map { JSONValue.string($0.iso8601) } ?? .null)
            o("present", present)
            o("battery", battery)
            o("batteryLow", batteryLow)
            o("missing", missing)
        }
        return writer.text
    }

    public init(parsing value: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        if let seen = o["lastSeen"], seen != .null { lastSeen = try r.instant(seen, "lastSeen") }
        if case .bool(let v)? = o["present"] { present = v }
        if let battery = o["battery"], battery != .null {
            let mv = try r.number(battery, "battery")
            guard mv == mv.rounded(), (0...65535).contains(mv) else { throw PayloadError("battery must be mV (0-65535)") }
            self.battery = Int(mv)
        }
        if case .bool(let v)? = o["batteryLow"] { batteryLow = v }
        if case .bool(let v)? = o["missing"] { missing = v }
    }
}

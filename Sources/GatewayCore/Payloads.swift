public import BeaconKit
public import Tracking
public import Config

/// The gateway's JSON payloads (README, "MQTT contract"), written directly as text: keys
/// in a fixed documented order, numbers rounded the same way every time.
public enum Payloads {
    /// A sighting on `beacons/<major>/<minor>`:
    /// `{"uuid","major","minor","gateway","address","rssi","rssiSmoothed","txPower","distance",
    /// "proximity","ts","seq","name"?,"location"?}`; Eddystone-UID carries `namespace` and
    /// `instance` in place of `uuid`, `major`, `minor`.
    public static func sighting(_ track: Track, gateway: String, entry: BeaconEntry?, at time: Instant) -> String {
        String(decoding: sightingBytes(track, gateway: gateway, entry: entry, at: time), as: UTF8.self)
    }

    /// The same sighting as UTF-8 bytes, ready for the wire without another copy.
    public static func sightingBytes(_ track: Track, gateway: String, entry: BeaconEntry?, at time: Instant) -> [UInt8] {
        var writer = JSONWriter(capacity: 320)
        writer.object { o in
            identity(track.id, into: &o)
            o("gateway", gateway)
            o("address", track.address)
            o("rssi", track.rssi)
            o("rssiSmoothed", track.rssi == nil ? nil : track.rssiSmoothed, places: 1)
            o("txPower", track.txPower)
            o("distance", track.distance, places: 2)
            o("proximity", track.proximity.rawValue)
            o("ts", time)
            o("seq", Int(truncatingIfNeeded: track.sequence))
            if let name = entry?.name { o("name", name) }
            if let location = entry?.location { o("location", location.json) }
        }
        return writer.takeBytes()
    }

    /// A gateway's retained view on `beacons/<major>/<minor>/presence/<gateway>`:
    /// `{"uuid","major","minor","gateway","zone","proximity","rssiSmoothed","distance","since"}`.
    /// `eddystone/<namespace>/<instance>/telemetry` (retained): an Eddystone-TLM frame of the
    /// beacon, as agreed with Home Assistant discovery:
    /// `{"gateway","batteryMv":mV|null,"temperatureC":°C|null,"advertCount":n,"uptimeSeconds":s,"ts"}`;
    /// an unknown battery or temperature is `null`, never 0.
    public static func telemetry(_ tlm: EddystoneTLM, gateway: String, at time: Instant) -> String {
        var writer = JSONWriter(capacity: 160)
        writer.object { o in
            o("gateway", gateway)
            o("batteryMv", tlm.battery.map(Int.init))
            o("temperatureC", tlm.temperature, places: 2)
            o("advertCount", Int(tlm.advertisingCount))
            o("uptimeSeconds", Double(tlm.uptimeDeciseconds) / 10, places: 1)
            o("ts", time)
        }
        return writer.text
    }

    public static func gatewayPresence(_ track: Track, gateway: String, zone: String) -> String {
        var writer = JSONWriter(capacity: 256)
        writer.object { o in
            identity(track.id, into: &o)
            o("gateway", gateway)
            o("zone", zone)
            o("proximity", track.proximity.rawValue)
            o("rssiSmoothed", track.rssi == nil ? nil : track.rssiSmoothed, places: 1)
            o("distance", track.distance, places: 2)
            o("since", track.since)
        }
        return writer.text
    }

    static func identity(_ id: BeaconID, into o: inout JSONWriter.ObjectWriter) {
        switch id {
        case .ibeacon(let uuid, let major, let minor):
            o("uuid", uuid)
            o("major", Int(major))
            o("minor", Int(minor))
        case .eddystone(let namespace, let instance):
            o("namespace", namespace.description)
            o("instance", instance.description)
        }
    }

    /// An answer to an operator's command on `gateways/<id>/events`:
    /// `{"event":"command","command","status","detail"?,"ts"}`, `status` `ok` or `rejected`.
    public static func commandReply(_ command: String, status: String, detail: String?, at time: Instant) -> String {
        var writer = JSONWriter()
        writer.object { o in
            o("event", "command")
            o("command", command)
            o("status", status)
            if let detail { o("detail", detail) }
            o("ts", time)
        }
        return writer.text
    }

    /// What became of a new fleet config, on `gateways/<id>/events`:
    /// `{"event":"config","origin","status":"applied","needsRestart"?,"ts"}` or
    /// `{"event":"config","origin","status":"rejected","errors":[…],"ts"}`.
    /// `superseded`: pushes dropped unread because this newer one came first (omitted when 0).
    public static func configReport(_ result: ConfigApplyResult, origin: String, superseded: Int = 0, at time: Instant) -> String {
        var writer = JSONWriter()
        writer.object { o in
            o("event", "config")
            o("origin", origin)
            if superseded > 0 { o("superseded", superseded) }
            switch result {
            case .applied(let needsRestart):
                o("status", "applied")
                if !needsRestart.isEmpty {
                    o("needsRestart", .array(needsRestart.map(JSONValue.string)))
                }
            case .rejected(let errors):
                o("status", "rejected")
                o("errors", .array(errors.map(JSONValue.string)))
            }
            o("ts", time)
        }
        return writer.text
    }

    public static func error(_ message: String) -> String {
        var writer = JSONWriter()
        writer.object { o in o("error", message) }
        return writer.text
    }
}

public import BeaconKit
public import Contract
public import Tracking
public import Config

/// The gateway's JSON payloads (README, "MQTT contract"), built from what the gateway holds
/// (tracks, a config's result) as the Contract types that write them.
public enum Payloads {
    /// A sighting on `beacons/<major>/<minor>` (Contract's `Sighting`) of a track as it is now.
    public static func sighting(_ track: Track, gateway: String, entry: BeaconEntry?, at time: CaptureTime) -> String {
        Sighting(track, gateway: gateway, entry: entry, at: time).json
    }

    /// The same sighting as UTF-8 bytes, ready for the wire without another copy.
    public static func sightingBytes(_ track: Track, gateway: String, entry: BeaconEntry?, at time: CaptureTime) -> [UInt8] {
        Sighting(track, gateway: gateway, entry: entry, at: time).bytes
    }

    /// `eddystone/<namespace>/<instance>/telemetry` (retained): an Eddystone-TLM frame of the
    /// beacon (Contract's `BeaconTelemetry`, which reads it back).
    public static func telemetry(_ tlm: EddystoneTLM, gateway: String, at time: CaptureTime) -> String {
        BeaconTelemetry.json(tlm, gateway: gateway, at: time)
    }

    /// A gateway's retained view on `beacons/<major>/<minor>/presence/<gateway>` (Contract's
    /// `GatewayPresenceReport`) of a track as it is now.
    public static func gatewayPresence(_ track: Track, gateway: String, zone: String) -> String {
        GatewayPresenceReport(track, gateway: gateway, zone: zone).json
    }

    /// What became of a new fleet config, on `gateways/<id>/events` (Contract's `ConfigReport`).
    /// `superseded`: pushes dropped unread because this newer one came first (omitted when 0).
    public static func configReport(_ result: ConfigApplyResult, origin: String, superseded: Int = 0, at time: WallTime) -> String {
        GatewayEvent.config(ConfigReport(result, origin: origin, superseded: superseded, at: time)).json
    }
}

extension ConfigReport where Time == ServiceWallClock {
    /// The gateway's report of `result`.
    public init(_ result: ConfigApplyResult, origin: String, superseded: Int = 0, at time: WallTime) {
        switch result {
        case .applied(let needsRestart):
            self.init(origin: origin, superseded: superseded, outcome: .applied(needsRestart: needsRestart), at: time)
        case .rejected(let errors):
            self.init(origin: origin, superseded: superseded, outcome: .rejected(errors: errors), at: time)
        }
    }
}

extension Sighting {
    /// The sighting of `track` by `gateway` at `time`, with the registry's name and location.
    public init(_ track: Track, gateway: String, entry: BeaconEntry?, at time: CaptureTime) {
        self.init(beacon: track.id.ref, uuid: track.id.uuid, gateway: gateway, address: track.address, rssi: track.rssi,
                  rssiSmoothed: track.rssi == nil ? nil : track.rssiSmoothed, txPower: track.txPower,
                  distance: track.distance, proximity: track.proximity, at: time,
                  sequence: Int(truncatingIfNeeded: track.sequence), name: entry?.name, location: entry?.location?.json)
    }
}

extension GatewayPresenceReport {
    /// `gateway`'s view of `track`, in its zone `zone`.
    public init(_ track: Track, gateway: String, zone: String) {
        self.init(beacon: track.id.ref, uuid: track.id.uuid, gateway: gateway, zone: zone, proximity: track.proximity,
                  rssiSmoothed: track.rssi == nil ? nil : track.rssiSmoothed, distance: track.distance, since: track.since)
    }
}

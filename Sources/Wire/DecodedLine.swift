public import BeaconKit

/// `beaconctl decode`'s output, one JSON object a line: the beacon in an advertising report
/// (`{"format":"ibeacon","uuid":…,"major":…,"minor":…,"txPower":…}`, altbeacon and
/// eddystone-* likewise) or `{"error":…}` for data that holds none, with the report's
/// address, RSSI and time when it came from an HCI event.
public enum DecodedLine {
    /// What an HCI advertising report adds to a `beaconctl decode` line: the controller's
    /// address and RSSI (dBm, `nil` when not available) and, from a capture, the time.
    public typealias Report = (address: BluetoothAddress, rssi: Int8?, ts: CaptureTime?)

    /// One line of `beaconctl decode`: `{"format":"ibeacon","uuid",…}` or `{"error":"…"}`.
    public static func text(_ beacon: Beacon, report: Report? = nil) -> String {
        var writer = JSONWriter()
        write(.beacon(beacon), report: report, to: &writer)
        return writer.text
    }

    /// Appends one `beaconctl decode` object (no newline) for a decoded advertising
    /// report, or its error when the data holds no beacon, to `writer`.
    public static func write(_ result: AdvertisingDataResult, report: Report?, to writer: inout JSONWriter) {
        writer.object { o in
            switch result {
            case .beacon(let beacon):
                o("format", beacon.format)
                switch beacon {
                case .iBeacon(let b):
                    o("uuid", b.uuid)
                    o("major", Int(b.major))
                    o("minor", Int(b.minor))
                    o("txPower", Int(b.txPower))
                case .altBeacon(let b):
                    o("uuid", b.uuid)
                    o("major", Int(b.major))
                    o("minor", Int(b.minor))
                    o("txPower", Int(b.referenceRSSI))
                    o("company", Int(b.company))
                case .eddystoneUID(let b):
                    o("namespace", b.namespace.description)
                    o("instance", b.instance.description)
                    o("txPower", Int(b.txPower))
                case .eddystoneURL(let b):
                    o("url", b.url)
                    o("txPower", Int(b.txPower))
                case .eddystoneTLM(let b):
                    // Unknown is null, not 0 (a beacon without a battery reading sends 0).
                    o("battery", b.battery.map(Int.init))
                    o("temperature", b.temperature, places: 2)
                    o("advertisingCount", Int(b.advertisingCount))
                    o("uptime", Double(b.uptimeDeciseconds) / 10, places: 1)
                }
            case .noBeacon:
                o("error", "no beacon in the advertising data")
            case .malformed:
                o("error", "malformed advertising data: an AD structure runs past the end")
            }
            if let report {
                o("address", report.address)
                o("rssi", report.rssi.map(Int.init))
                if let ts = report.ts { o("ts", ts) }
            }
        }
    }

}

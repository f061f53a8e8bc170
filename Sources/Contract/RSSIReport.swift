public import BeaconKit

/// What one gateway heard in one report window, for the brain's zone fusion: every beacon,
/// how many advertisements, their mean RSSI and when, plus the gateway's track (smoothed
/// RSSI, distance, proximity) at the end of the window.
///
/// Published on `gateways/<gateway>/rssi` (QoS 1, not retained): the gateway is a topic
/// level, so a broker ACL pins it to the gateway's own user, and the brain checks that the
/// payload names the same gateway. `from` is the start of the window (capture time), `to`
/// the time up to which the gateway has reported everything it heard: the brain waits for
/// every gateway's `to` before it decides, which makes its decisions depend on capture time
/// only, not on when messages arrive. A window with nothing heard still goes out (an empty
/// `beacons`): it moves `to` on. Windows are aligned to multiples of the interval since
/// the Unix epoch, so every gateway's windows coincide.
public struct RSSIReport: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public var beacon: BeaconRef
        /// The iBeacon's proximity UUID (topics carry none); `nil` for Eddystone.
        public var uuid: BeaconUUID?
        /// Advertisements heard in the window.
        public var count: Int
        /// Their mean RSSI, dBm (after the gateway's `rssiOffset`); `nil` without RSSI.
        public var rssi: Double?
        /// Their mean time, seconds after the window's start.
        public var at: Double
        /// The gateway's track at the end of the window.
        public var rssiSmoothed: Double?
        public var distance: Double?
        public var proximity: Proximity

        public init(beacon: BeaconRef, uuid: BeaconUUID? = nil, count: Int, rssi: Double?, at: Double,
                    rssiSmoothed: Double? = nil, distance: Double? = nil, proximity: Proximity = .unknown) {
            self.beacon = beacon
            self.uuid = uuid
            self.count = count
            self.rssi = rssi
            self.at = at
            self.rssiSmoothed = rssiSmoothed
            self.distance = distance
            self.proximity = proximity
        }
    }

    public var gateway: String
    public var from: CaptureTime
    public var to: CaptureTime
    public var entries: [Entry]
    /// Sent again after a disconnect (`"resent":true`): the first sending may have been lost
    /// in flight, or not; the brain skips one whose window it already has.
    public var resent = false

    public init(gateway: String, from: CaptureTime, to: CaptureTime, entries: [Entry]) {
        self.gateway = gateway
        self.from = from
        self.to = to
        self.entries = entries
    }

    /// `{"gateway","from","to","beacons":[{"major","minor"|"namespace","instance","uuid"?,"n","rssi","at",
    /// "rssiSmoothed","distance","proximity"}…],"resent"?}` (`resent` only when true: the
    /// gateway marks the bytes it already sent the same way: `markedResent`).
    public var json: String {
        var writer = JSONWriter(capacity: 96 + 160 * entries.count)
        writer.object { o in
            o("gateway", gateway)
            o("from", from)
            o("to", to)
            o("beacons", objects: entries) { e, entry in
                entry.beacon.write(into: &e)
                if let uuid = entry.uuid { e("uuid", uuid.description) }
                e("n", entry.count)
                e("rssi", entry.rssi, places: 1)
                e("at", entry.at, places: 3)
                e("rssiSmoothed", entry.rssiSmoothed, places: 1)
                e("distance", entry.distance, places: 2)
                e("proximity", entry.proximity.rawValue)
            }
            if resent { o("resent", true) }
        }
        return writer.text
    }

    /// A report's payload as sent again after a disconnect: `"resent":true` in place of its
    /// closing brace, which is what `json` writes for the report with `resent` set (the
    /// gateway marks the bytes it sent rather than writing the report again).
    public static func markedResent(_ payload: [UInt8]) -> [UInt8] { Array(payload.dropLast()) + resentEnding }

    /// A resent report's payload as first sent; any other payload as it is.
    public static func unmarked(_ payload: [UInt8]) -> [UInt8] {
        guard payload.count > resentEnding.count, payload.suffix(resentEnding.count).elementsEqual(resentEnding) else {
            return payload
        }
        return Array(payload.dropLast(resentEnding.count)) + [UInt8(ascii: "}")]
    }

    /// How a resent report's JSON object ends.
    private static let resentEnding = Array(#","resent":true}"#.utf8)

    /// Most entries in one message; a busier window goes out in several, the last one
    /// carrying the window's `to` (the others repeat `from`: they do not move time on).
    public static let entriesPerMessage = 200

    /// `init(parsing:topic:)` of the payload, read straight from its bytes without building the
    /// JSON tree: the brain reads a report from every gateway four times a second, and the
    /// tree (an object of nine members per beacon) cost more than the brain's decisions from
    /// it (docs/PERFORMANCE.md §6). `nil` for anything but the plain form gateways write:
    /// escapes, keys it does not know, Eddystone beacons, any error. The caller then parses
    /// the payload the general way, so what is accepted, and why anything is refused, stays
    /// `init(parsing:topic:)`'s; `RSSIReportDecodingTests` checks the two agree.
    public init?(decoding payload: UnsafeRawBufferPointer, topic gateway: String) {
        var s = JSONScanner(payload)
        let r = PayloadReader(path: "")
        var named: String?, from: CaptureTime?, to: CaptureTime?, entries: [Entry]?, resent = false, seen = false
        guard s.take(UInt8(ascii: "{")), !s.take(UInt8(ascii: "}")) else { return nil }
        repeat {
            guard let key = s.key() else { return nil }
            if JSONScanner.key(key, is: "gateway"), named == nil {
                guard let text = s.string(), let value = try? r.segment(.string(text), "gateway") else { return nil }
                named = value
            } else if JSONScanner.key(key, is: "from"), from == nil {
                guard let text = s.string(), let value = try? r.instant(.string(text), "from") else { return nil }
                from = value
            } else if JSONScanner.key(key, is: "to"), to == nil {
                guard let text = s.string(), let value = try? r.instant(.string(text), "to") else { return nil }
                to = value
            } else if JSONScanner.key(key, is: "beacons"), entries == nil {
                guard let list = Self.entries(&s) else { return nil }
                entries = list
            } else if JSONScanner.key(key, is: "resent"), !seen {
                guard let value = s.bool() else { return nil }
                resent = value
                seen = true
            } else {
                return nil
            }
        } while s.take(UInt8(ascii: ","))
        guard s.take(UInt8(ascii: "}")), s.atEnd(), let named, named == gateway, let from, let to, to >= from,
              let entries else { return nil }
        self.init(gateway: named, from: from, to: to, entries: entries)
        self.resent = resent
    }

    /// The `beacons` array of `init(decoding:topic:)`; a UUID the same as the entry before's is
    /// not parsed again (a store's beacons mostly share one).
    private static func entries(_ s: inout JSONScanner) -> [Entry]? {
        guard s.take(UInt8(ascii: "[")) else { return nil }
        var list: [Entry] = []
        if s.take(UInt8(ascii: "]")) { return list }
        var lastUUID: (raw: UnsafeRawBufferPointer, uuid: BeaconUUID)?
        repeat {
            guard list.count < entriesPerMessage else { return nil }
            // The exact form `json` writes, in one pass; anything else from the same place, key by key.
            let mark = s.offset
            if let entry = exactEntry(&s, lastUUID: &lastUUID) {
                list.append(entry)
                continue
            }
            s.offset = mark
            guard s.take(UInt8(ascii: "{")) else { return nil }
            var major: UInt16?, minor: UInt16?, uuid: BeaconUUID??, count: Int?, rssi: Double??, at: Double?
            var smoothed: Double??, distance: Double??, proximity: Proximity?
            let r = PayloadReader(path: "")
            if !s.take(UInt8(ascii: "}")) {
                repeat {
                    guard let raw = s.key() else { return nil }
                    let key = EntryKey(raw)
                    if key == .major, major == nil {
                        guard let n = s.number(), let value = try? r.u16(.number(n), "major") else { return nil }
                        major = value
                    } else if key == .minor, minor == nil {
                        guard let n = s.number(), let value = try? r.u16(.number(n), "minor") else { return nil }
                        minor = value
                    } else if key == .uuid, uuid == nil {
                        if s.null() {
                            uuid = .some(nil)
                        } else {
                            guard let raw = s.plainString() else { return nil }
                            if let lastUUID, JSONScanner.same(lastUUID.raw, raw) {
                                uuid = lastUUID.uuid
                            } else {
                                let text = String(decoding: raw, as: UTF8.self)
                                guard let value = try? r.uuid(.string(text), "uuid") else { return nil }
                                lastUUID = (raw, value)
                                uuid = value
                            }
                        }
                    } else if key == .n, count == nil {
                        guard let n = s.number(), n >= 1, n <= 100_000, n == n.rounded() else { return nil }
                        count = Int(n)
                    } else if key == .rssi, rssi == nil {
                        rssi = s.null() ? .some(nil) : .some(s.number() ?? .nan)
                    } else if key == .at, at == nil {
                        guard let n = s.number(), n >= 0, n <= 3600 else { return nil }
                        at = n
                    } else if key == .rssiSmoothed, smoothed == nil {
                        smoothed = s.null() ? .some(nil) : .some(s.number() ?? .nan)
                    } else if key == .distance, distance == nil {
                        distance = s.null() ? .some(nil) : .some(s.number() ?? .nan)
                    } else if key == .proximity, proximity == nil {
                        guard let raw = s.plainString() else { return nil }
                        if JSONScanner.key(raw, is: "immediate") { proximity = .immediate }
                        else if JSONScanner.key(raw, is: "near") { proximity = .near }
                        else if JSONScanner.key(raw, is: "far") { proximity = .far }
                        else if JSONScanner.key(raw, is: "unknown") { proximity = .unknown }
                        else { return nil }
                    } else {
                        return nil
                    }
                } while s.take(UInt8(ascii: ","))
                guard s.take(UInt8(ascii: "}")) else { return nil }
            }
            // A number that did not read is NaN here (no JSON number is): refused.
            guard let major, let minor, let count, let at, let proximity,
                  (rssi ?? nil).map({ !$0.isNaN }) ?? true, (smoothed ?? nil).map({ !$0.isNaN }) ?? true,
                  (distance ?? nil).map({ !$0.isNaN }) ?? true else { return nil }
            list.append(Entry(beacon: BeaconRef(major: major, minor: minor), uuid: uuid ?? nil, count: count,
                              rssi: rssi ?? nil, at: at, rssiSmoothed: smoothed ?? nil, distance: distance ?? nil,
                              proximity: proximity))
        } while s.take(UInt8(ascii: ","))
        guard s.take(UInt8(ascii: "]")) else { return nil }
        return list
    }

    /// An entry exactly as `json` writes it (an iBeacon's, keys in its order, no whitespace),
    /// each key and its punctuation taken in one comparison, with the checks of the general
    /// form of `entries`; `nil` as soon as the text is anything else.
    private static func exactEntry(_ s: inout JSONScanner, lastUUID: inout (raw: UnsafeRawBufferPointer, uuid: BeaconUUID)?) -> Entry? {
        let r = PayloadReader(path: "")
        guard s.exactly(#"{"major":"#), let a = s.number(), let major = try? r.u16(.number(a), "major"),
              s.exactly(#","minor":"#), let b = s.number(), let minor = try? r.u16(.number(b), "minor") else { return nil }
        var uuid: BeaconUUID?
        if s.exactly(#","uuid":"#), !s.null() {
            guard let raw = s.plainString() else { return nil }
            if let lastUUID, JSONScanner.same(lastUUID.raw, raw) {
                uuid = lastUUID.uuid
            } else {
                guard let value = try? r.uuid(.string(String(decoding: raw, as: UTF8.self)), "uuid") else { return nil }
                lastUUID = (raw, value)
                uuid = value
            }
        }
        guard s.exactly(#","n":"#), let count = s.number(), count >= 1, count <= 100_000, count == count.rounded(),
              s.exactly(#","rssi":"#), let rssi = optionalNumber(&s),
              s.exactly(#","at":"#), let at = s.number(), at >= 0, at <= 3600,
              s.exactly(#","rssiSmoothed":"#), let smoothed = optionalNumber(&s),
              s.exactly(#","distance":"#), let distance = optionalNumber(&s),
              s.exactly(#","proximity":"#), let raw = s.plainString(), s.exactly("}") else { return nil }
        let proximity: Proximity
        if JSONScanner.key(raw, is: "near") { proximity = .near }
        else if JSONScanner.key(raw, is: "far") { proximity = .far }
        else if JSONScanner.key(raw, is: "immediate") { proximity = .immediate }
        else if JSONScanner.key(raw, is: "unknown") { proximity = .unknown }
        else { return nil }
        return Entry(beacon: BeaconRef(major: major, minor: minor), uuid: uuid, count: Int(count), rssi: rssi, at: at,
                     rssiSmoothed: smoothed, distance: distance, proximity: proximity)
    }

    /// A number or `null` (`.some(nil)`); `nil` for anything else.
    private static func optionalNumber(_ s: inout JSONScanner) -> Double?? {
        if s.null() { return .some(nil) }
        guard let n = s.number() else { return nil }
        return .some(n)
    }

    /// The keys of an entry, told apart by length and first letters before one comparison.
    private enum EntryKey {
        case major, minor, uuid, n, rssi, at, rssiSmoothed, distance, proximity, other

        init(_ raw: UnsafeRawBufferPointer) {
            let guess: (EntryKey, StaticString) = switch (raw.count, raw.first ?? 0) {
            case (5, UInt8(ascii: "m")): raw[1] == UInt8(ascii: "a") ? (.major, "major") : (.minor, "minor")
            case (4, UInt8(ascii: "u")): (.uuid, "uuid")
            case (1, _): (.n, "n")
            case (4, UInt8(ascii: "r")): (.rssi, "rssi")
            case (2, _): (.at, "at")
            case (12, _): (.rssiSmoothed, "rssiSmoothed")
            case (8, _): (.distance, "distance")
            case (9, _): (.proximity, "proximity")
            default: (.other, "")
            }
            self = JSONScanner.key(raw, is: guess.1) ? guess.0 : .other
        }
    }

    /// Parses the payload of `gateways/<gateway>/rssi`; the payload's gateway must be the
    /// topic's (an ACL pins the topic to the gateway's user, not the payload).
    public init(parsing value: JSONValue, topic gateway: String) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(value)
        let named = try r.segment(o["gateway"], "gateway")
        guard named == gateway else { throw PayloadError("gateway \"\(named)\" does not match the topic's") }
        let from = try r.instant(o["from"], "from")
        let to = try r.instant(o["to"], "to")
        guard to >= from else { throw PayloadError("to is before from") }
        guard case .array(let list)? = o["beacons"], list.count <= RSSIReport.entriesPerMessage else {
            throw PayloadError("beacons must be an array of at most \(RSSIReport.entriesPerMessage) entries")
        }
        var entries: [Entry] = []
        entries.reserveCapacity(list.count)
        for (i, item) in list.enumerated() {
            let er = PayloadReader(path: "beacons[\(i)]")
            let e = try er.object(item)
            let count = try er.number(e["n"], "n")
            guard count >= 1, count <= 100_000, count == count.rounded() else { throw PayloadError("beacons[\(i)].n must be a count ≥ 1") }
            let at = try er.number(e["at"], "at")
            guard at >= 0, at <= 3600 else { throw PayloadError("beacons[\(i)].at must be 0…3600 s") }
            entries.append(Entry(beacon: try er.beacon(e), uuid: try er.uuid(e["uuid"], "uuid"), count: Int(count),
                                 rssi: try er.optionalNumber(e["rssi"], "rssi"), at: at,
                                 rssiSmoothed: try er.optionalNumber(e["rssiSmoothed"], "rssiSmoothed"),
                                 distance: try er.optionalNumber(e["distance"], "distance"),
                                 proximity: try er.proximity(e["proximity"], "proximity")))
        }
        self.init(gateway: named, from: from, to: to, entries: entries)
        if case .bool(true)? = o["resent"] { resent = true }
    }
}

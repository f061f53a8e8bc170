import BeaconKit
import Contract
import Testing

/// The events on `gateways/<id>/events` (`GatewayEvent`) and `brain/events` (`BrainEvent`):
/// each writes exactly the bytes its writer wrote before it was a Contract type (quoted
/// below as they were), and reads them back to the same value.
@Suite struct EventsTests {
    static let at = CaptureTime(iso8601: "2026-11-28T22:00:00.000Z")!
    static let wall = WallTime(iso8601: "2026-11-28T22:00:01.250Z")!
    static let counter = BeaconRef(major: 100, minor: 1)
    static let eddystone = BeaconRef(namespace: EddystoneNamespace(hex: "0102030405060708090a")!,
                                     instance: EddystoneInstance(hex: "0b0c0d0e0f10")!)

    /// Each event, its bytes, and the bytes decoded again equal to it.
    static func check(_ event: GatewayEvent, _ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(event.json == text, sourceLocation: sourceLocation)
        #expect(try GatewayEvent(parsing: Array(text.utf8)) == event, sourceLocation: sourceLocation)
    }

    static func check(_ event: BrainEvent, _ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(event.json == text, sourceLocation: sourceLocation)
        #expect(try BrainEvent(parsing: Array(text.utf8)) == event, sourceLocation: sourceLocation)
    }

    @Test func aGatewaysEventsAreTheBytesItWrote() throws {
        try Self.check(.command(CommandReply(command: "scan", status: .ok, detail: "paused", at: Self.wall)),
                       #"{"event":"command","command":"scan","status":"ok","detail":"paused","ts":"2026-11-28T22:00:01.250Z"}"#)
        try Self.check(.command(CommandReply(command: "reload", status: .ok, at: Self.wall)),
                       #"{"event":"command","command":"reload","status":"ok","ts":"2026-11-28T22:00:01.250Z"}"#)
        try Self.check(.command(CommandReply(command: "?", status: .rejected, detail: #"expected {"scan":"pause"}"#, at: Self.wall)),
                       #"{"event":"command","command":"?","status":"rejected","detail":"expected {\"scan\":\"pause\"}","ts":"2026-11-28T22:00:01.250Z"}"#)
        try Self.check(.config(ConfigReport(origin: "fleet/config", outcome: .applied(needsRestart: []), at: Self.wall)),
                       #"{"event":"config","origin":"fleet/config","status":"applied","ts":"2026-11-28T22:00:01.250Z"}"#)
        try Self.check(.config(ConfigReport(origin: "fleet/config", superseded: 3, outcome: .applied(needsRestart: ["source", "broker"]),
                                            at: Self.wall)),
                       #"{"event":"config","origin":"fleet/config","superseded":3,"status":"applied","needsRestart":["source","broker"],"ts":"2026-11-28T22:00:01.250Z"}"#)
        try Self.check(.config(ConfigReport(origin: "/etc/beaconbridge/fleet.json", outcome: .rejected(errors: ["gateways[0].exitTimout: unknown key"]),
                                            at: Self.wall)),
                       #"{"event":"config","origin":"/etc/beaconbridge/fleet.json","status":"rejected","errors":["gateways[0].exitTimout: unknown key"],"ts":"2026-11-28T22:00:01.250Z"}"#)
    }

    @Test func theBrainsEventsAreTheBytesItWrote() throws {
        try Self.check(.config(ConfigReport(origin: "fleet/config", outcome: .applied(needsRestart: ["brain.stores"]), at: Self.at)),
                       #"{"event":"config","origin":"fleet/config","status":"applied","needsRestart":["brain.stores"],"ts":"2026-11-28T22:00:00.000Z"}"#)
        try Self.check(.config(ConfigReport(origin: "fleet/config", outcome: .rejected(errors: []), at: Self.at)),
                       #"{"event":"config","origin":"fleet/config","status":"rejected","errors":[],"ts":"2026-11-28T22:00:00.000Z"}"#)
        try Self.check(.rejected(.init(kind: "oversized", topic: "gateways/door/rssi", reason: "payload of 70000 bytes exceeds 65536",
                                       bytes: 70000, at: Self.wall)),
                       #"{"event":"rejected","kind":"oversized","topic":"gateways/door/rssi","reason":"payload of 70000 bytes exceeds 65536","bytes":70000,"ts":"2026-11-28T22:00:01.250Z"}"#)
        try Self.check(.suppressed(count: 41, since: WallTime(iso8601: "2026-11-28T22:00:00.125Z")!, at: Self.wall),
                       #"{"event":"rejected","suppressed":41,"since":"2026-11-28T22:00:00.125Z","ts":"2026-11-28T22:00:01.250Z"}"#)
        try Self.check(.gap(gateway: "door", from: Self.at, to: Self.at + 12.5),
                       #"{"event":"gap","gateway":"door","from":"2026-11-28T22:00:00.000Z","to":"2026-11-28T22:00:12.500Z","seconds":12.5}"#)
        try Self.check(.batteryLow(Self.counter, name: "till fob", millivolts: 2350, threshold: 2400, at: Self.at),
                       #"{"event":"battery-low","beacon":{"major":100,"minor":1},"name":"till fob","battery":2350,"threshold":2400,"ts":"2026-11-28T22:00:00.000Z"}"#)
        try Self.check(.beaconMissing(Self.eddystone, name: nil, lastSeen: nil, seconds: 3600, at: Self.at),
                       #"{"event":"beacon-missing","beacon":{"namespace":"0102030405060708090a","instance":"0b0c0d0e0f10"},"name":null,"lastSeen":null,"seconds":3600,"ts":"2026-11-28T22:00:00.000Z"}"#)
        try Self.check(.beaconMissing(Self.counter, name: "spare", lastSeen: Self.at - 90, seconds: 90, at: Self.at),
                       #"{"event":"beacon-missing","beacon":{"major":100,"minor":1},"name":"spare","lastSeen":"2026-11-28T21:58:30.000Z","seconds":90,"ts":"2026-11-28T22:00:00.000Z"}"#)
        let record = CalibrationRecord(gateway: "door", values: .init(rssiOffset: -3.5, pathLossExponent: 2.25, since: Self.at),
                                       samples: 120, links: 3, residual: 1.75, pinned: false, configuredOffset: 0,
                                       before: .init(rssiOffset: -1, pathLossExponent: 2, since: Self.at - 600))
        try Self.check(.calibration(record),
                       #"{"event":"calibration","gateway":"door","rssiOffset":-3.5,"pathLossExponent":2.25,"samples":120,"links":3,"residual":1.75,"since":"2026-11-28T22:00:00.000Z","pinned":false,"configuredOffset":0,"before":{"rssiOffset":-1,"pathLossExponent":2,"since":"2026-11-28T21:50:00.000Z"}}"#)
    }

    /// A rejection's topic and reason are cut as the brain always cut them (200 and 300 characters).
    @Test func aRejectionIsCut() {
        let long = BrainEvent.Rejection(kind: "topic", topic: String(repeating: "t", count: 500), reason: String(repeating: "r", count: 500),
                                        bytes: 0, at: Self.wall)
        #expect(long.topic.count == 200 && long.reason.count == 300)
    }

    @Test func whatIsNoEventIsRefusedWithTheReason() {
        #expect(throws: PayloadError("event must be command or config")) {
            try GatewayEvent(parsing: Array(#"{"event":"gap"}"#.utf8))
        }
        #expect(throws: PayloadError("status must be ok or rejected")) {
            try GatewayEvent(parsing: Array(#"{"event":"command","command":"scan","status":"done","ts":"2026-11-28T22:00:01.250Z"}"#.utf8))
        }
        #expect(throws: PayloadError("errors is required")) {
            try BrainEvent(parsing: Array(#"{"event":"config","origin":"fleet/config","status":"rejected","ts":"2026-11-28T22:00:00.000Z"}"#.utf8))
        }
        #expect(throws: PayloadError.self) { try BrainEvent(parsing: Array(#"{"event":"battery-low","beacon":7}"#.utf8)) }
    }
}

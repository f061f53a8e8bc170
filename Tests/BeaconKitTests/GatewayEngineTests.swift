import BeaconKit
import Foundation
import Config
import Contract
import GatewayCore
import Testing
import Wire

/// The gateway's decisions as a value (`GatewayEngine`): frames, ticks and broker events in,
/// the messages to publish out, in order. The process around it is tested end to end in
/// IntegrationTests; here every decision is checked without a broker or a clock.
@Suite struct GatewayEngineTests {
    static let t0 = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
    /// The gateway's own clock at `t0`: a live gateway dates its captures by it.
    static let w0 = WallTime(iso8601: "2026-11-21T09:00:00.000Z")!
    static let uuid = BeaconUUID("E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!

    static func config(_ extra: String = "", uuids: String = "[]") -> FleetConfig {
        try! FleetConfig.parse(configText(extra, uuids: uuids))
    }

    static func configText(_ extra: String = "", uuids: String = "[]") -> String {
        """
        {"broker":{"url":"mqtt://127.0.0.1"},"uuids":\(uuids),
         "defaults":{"exitTimeout":10,"publishInterval":1\(extra)},
         "gateways":[{"id":"door","source":"hci:0","zone":"Entrance"}],
         "beacons":[{"uuid":"\(uuid)","major":100,"minor":1,"name":"counter"}]}
        """
    }

    static func engine(_ config: FleetConfig = config()) -> GatewayEngine {
        GatewayEngine(config: config, gateway: config.gateways[0])
    }

    /// One advertisement of beacon 100/`minor` heard at `seconds` after t0.
    static func frame(minor: UInt16, at seconds: Double, rssi: Int8 = -60, uuid: BeaconUUID = uuid) -> HCIFrame {
        let beacon = IBeacon(uuid: uuid, major: 100, minor: minor, txPower: -59)
        let report = HCIEventBuilder.Report(address: BluetoothAddress(rawValue: 0xC0_00_00_00_00_00 | UInt64(minor)),
                                            data: AdvertisingData.iBeacon(beacon), rssi: rssi)
        return HCIFrame(time: t0 + seconds, event: HCIEventBuilder.legacyReport([report]))
    }

    static func summary(_ messages: [MQTTMessage]) -> [String] {
        messages.map { "\($0.topic)\($0.retain ? " r" : "")\($0.payload.isEmpty ? " (delete)" : "")" }
    }

    @Test func connectedItSaysOnlineThenPublishesPresenceAndSightings() {
        var engine = Self.engine()
        #expect(Self.summary(engine.connected(at: Self.w0).messages) == ["gateways/door/status r"])
        let first = engine.handle(Self.frame(minor: 1, at: 0))
        #expect(Self.summary(first.messages) == ["beacons/100/1/presence/door r", "beacons/100/1"])
        #expect(first.messages[1].text.contains(#""name":"counter""#), "the registry's name rides along")
        // Within the publish interval no sighting, only the brain's RSSI report of the windows
        // that ended (0.25 s each, aligned to the epoch; nothing heard from 0.25 s on, so one
        // report up to 0.5 s); after it, the next sighting.
        let reported = engine.handle(Self.frame(minor: 1, at: 0.5)).messages
        #expect(Self.summary(reported) == ["gateways/door/rssi"])
        #expect(reported.first?.qos == 0, "a stream: QoS 1 would hold presence back behind it")
        let report = reported.first?.text ?? ""
        #expect(report.hasPrefix(#"{"gateway":"door","from":"2026-11-21T09:00:00.000Z","to":"2026-11-21T09:00:00.500Z","beacons":[{"major":100,"minor":1,"uuid":"#),
                "\(report)")
        #expect(report.contains(#""n":1,"rssi":-60.0,"at":0.000"#) || report.contains(#""n":1,"rssi":-60,"at":0"#), "\(report)")
        #expect(Self.summary(engine.handle(Self.frame(minor: 1, at: 1.2)).messages) == ["gateways/door/rssi", "beacons/100/1"])
        #expect(engine.statistics.tracked == 1)
    }

    /// Issue 18, beacon health: Eddystone-TLM frames of a beacon whose UID the gateway
    /// tracks (same address) become retained `eddystone/<namespace>/<instance>/telemetry`,
    /// as agreed with Home Assistant discovery; an unknown battery is null, not 0.
    @Test func eddystoneTelemetryIsPublishedRetainedPerBeaconAtMostOnceAMinute() throws {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        let address = BluetoothAddress(rawValue: 0xE0_00_00_00_00_01)
        func frame(_ data: [UInt8], at seconds: Double) -> HCIFrame {
            HCIFrame(time: Self.t0 + seconds,
                     event: HCIEventBuilder.legacyReport([.init(address: address, data: data, rssi: -60)]))
        }
        func tlm(battery: UInt16, advertCount: UInt32) -> [UInt8] {
            // Service data AAFE, frame 0x20 version 0: battery mV, temperature 8.8 (21.5 °C), count, uptime 0.1 s.
            var bytes: [UInt8] = [0x02, 0x01, 0x06, 0x03, 0x03, 0xAA, 0xFE, 0x11, 0x16, 0xAA, 0xFE, 0x20, 0x00]
            bytes += [UInt8(battery >> 8), UInt8(battery & 0xFF), 0x15, 0x80]
            bytes += withUnsafeBytes(of: advertCount.bigEndian, Array.init)
            bytes += withUnsafeBytes(of: UInt32(36_000).bigEndian, Array.init)
            return bytes
        }
        let uid = AdvertisingData.eddystoneUID(EddystoneUID(txPower: -18, namespace: EddystoneNamespace(hex: "00112233445566778899")!,
                                                            instance: EddystoneInstance(hex: "aabbccddeeff")!))
        #expect(engine.handle(frame(tlm(battery: 2950, advertCount: 10), at: 0)).messages.isEmpty,
                "a TLM frame before its beacon's UID names nobody")
        _ = engine.handle(frame(uid, at: 0.1))
        let first = engine.handle(frame(tlm(battery: 2950, advertCount: 11), at: 0.2)).messages
        let telemetry = try #require(first.first { $0.topic == "eddystone/00112233445566778899/aabbccddeeff/telemetry" })
        #expect(telemetry.retain && telemetry.qos == 1)
        #expect(telemetry.text == #"{"gateway":"door","batteryMv":2950,"temperatureC":21.5,"advertCount":11,"uptimeSeconds":3600,"ts":"2026-11-21T09:00:00.200Z"}"#)
        #expect(!engine.handle(frame(tlm(battery: 2950, advertCount: 12), at: 30)).messages.contains { $0.topic.hasSuffix("/telemetry") },
                "at most once a minute")
        let later = engine.handle(frame(tlm(battery: 0, advertCount: 13), at: 60.2)).messages
        #expect(later.first { $0.topic.hasSuffix("/telemetry") }?.text
                == #"{"gateway":"door","batteryMv":null,"temperatureC":21.5,"advertCount":13,"uptimeSeconds":3600,"ts":"2026-11-21T09:01:00.200Z"}"#)
    }

    @Test func quietForTheExitTimeoutTheBeaconExitsAndItsPresenceIsDeleted() {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        _ = engine.handle(Self.frame(minor: 1, at: 0))
        #expect(engine.advance(to: Self.t0 + 9).messages.allSatisfy { !$0.payload.isEmpty }, "not yet")
        let exit = engine.advance(to: Self.t0 + 10.5)
        #expect(Self.summary(exit.messages).last == "beacons/100/1/presence/door r (delete)")
        #expect(engine.statistics.tracked == 0)
    }

    @Test func whileDisconnectedPresenceIsKeptAndSightingsWaitThenGoOutOnReconnect() {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        _ = engine.disconnected(reason: "connection lost")
        #expect(engine.handle(Self.frame(minor: 1, at: 0)).messages.isEmpty)
        #expect(engine.handle(Self.frame(minor: 2, at: 0.1)).messages.isEmpty)
        #expect(engine.handle(Self.frame(minor: 1, at: 1.5)).messages.isEmpty)
        #expect(engine.statistics.queueDepth == 5, "two presences and three sightings")
        let back = engine.connected(at: Self.w0 + 2)
        // Online first, the brain's RSSI report kept meanwhile (up to 1.5 s), the waiting
        // sightings in order, and each presence once: the current one.
        #expect(Self.summary(back.messages) == [
            "gateways/door/status r", "gateways/door/rssi", "beacons/100/1", "beacons/100/2", "beacons/100/1",
            "beacons/100/1/presence/door r", "beacons/100/2/presence/door r",
        ])
        #expect(back.messages[1].text.contains(#""to":"2026-11-21T09:00:01.500Z""#), "\(back.messages[1].text)")
        #expect(engine.statistics.queueDepth == 0 && engine.reportsWaiting == 0)
    }

    /// Issue 20 item 4: the RSSI reports of an outage are kept (the latest
    /// `reportBacklogSeconds` of them) and go out first on reconnect, in capture-time order,
    /// so the brain decides the outage from them instead of taking it as a gap.
    @Test func rssiReportsOfAnOutageAreKeptBoundedAndSentFirstOnReconnect() throws {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        _ = engine.handle(Self.frame(minor: 1, at: 0))
        _ = engine.disconnected(reason: "connection lost")
        let outage = 150.0
        for i in 1...Int(outage * 4) { _ = engine.handle(Self.frame(minor: 1, at: Double(i) * 0.25)) }
        let back = engine.connected(at: Self.w0 + outage + 1).messages
        let reports = back.filter { $0.topic == "gateways/door/rssi" }
        #expect(back.first?.topic == "gateways/door/status" && back[1].topic == "gateways/door/rssi")
        #expect(back.lastIndex { $0.topic == "gateways/door/rssi" }! < back.firstIndex { $0.topic.hasPrefix("beacons/") }!,
                "every report before the sightings and presence")
        // Capture-time order, contiguous, and only the latest 120 s.
        let windows = try reports.map { message -> (CaptureTime, CaptureTime) in
            let o = try JSONParser().parse(message.payload)
            guard case .string(let from)? = o["from"], case .string(let to)? = o["to"],
                  let a = CaptureTime(iso8601: from), let b = CaptureTime(iso8601: to) else { throw Failure() }
            return (a, b)
        }
        #expect(zip(windows, windows.dropFirst()).allSatisfy { $0.1 == $1.0 }, "contiguous")
        #expect(windows.last?.1 == Self.t0 + outage)
        let kept = windows.last!.1.seconds(since: windows.first!.0)
        #expect(kept > GatewayEngine.reportBacklogSeconds - 1 && kept <= GatewayEngine.reportBacklogSeconds + 0.5, "\(kept) s kept")
        #expect(engine.reportsWaiting == 0)
    }

    struct Failure: Error {}

    /// Issue 20 item 3: reports sent before the brain is subscribed again reach no one, so a
    /// gateway back from an outage, where a brain has been online, says `online` and waits:
    /// its reports, queue and presence go out when the brain asks (`{"reports":"send"}`), or
    /// when the service's wait (`brainWaitSeconds`) runs out. Without a brain it does not wait.
    @Test func backFromAnOutageItWaitsForTheBrainToAskForWhatItKept() {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        _ = engine.handle(Self.frame(minor: 1, at: 0))
        engine.brainStatus(online: true)
        // The broker's graceful stop publishes the brain's will first: still a brain about.
        engine.brainStatus(online: false)
        _ = engine.disconnected(reason: "connection lost")
        for i in 1...40 { _ = engine.handle(Self.frame(minor: 1, at: Double(i) * 0.25)) }
        let waiting = engine.reportsWaiting
        #expect(waiting > 0)

        let back = engine.connected(at: Self.w0 + 11)
        #expect(Self.summary(back.messages) == ["gateways/door/status r"], "only online while the brain is away")
        #expect(engine.awaitsBrain)
        // What the tracker decides meanwhile waits too.
        let meanwhile = engine.handle(Self.frame(minor: 2, at: 10.5))
        #expect(meanwhile.messages.isEmpty)
        #expect(engine.advance(to: Self.t0 + 12).messages.isEmpty)
        #expect(engine.reportsWaiting > waiting)

        let asked = engine.brainReady().messages
        #expect(asked.first?.topic == "gateways/door/rssi", "the reports first")
        #expect(asked.lastIndex { $0.topic == "gateways/door/rssi" }! < asked.firstIndex { $0.topic.hasPrefix("beacons/") }!)
        #expect(asked.contains { $0.topic == "beacons/100/2/presence/door" && !$0.payload.isEmpty }, "presence after them")
        #expect(engine.reportsWaiting == 0 && !engine.awaitsBrain)
        #expect(engine.brainReady().messages.isEmpty, "a second request is nothing")
        #expect(!engine.handle(Self.frame(minor: 1, at: 12.5)).messages.isEmpty, "live again")

        // No brain ever online: no wait.
        var alone = Self.engine()
        _ = alone.connected(at: Self.w0)
        _ = alone.disconnected(reason: "connection lost")
        for i in 1...8 { _ = alone.handle(Self.frame(minor: 1, at: Double(i) * 0.25)) }
        let aloneBack = alone.connected(at: Self.w0 + 3).messages
        #expect(aloneBack.count > 1 && aloneBack[1].topic == "gateways/door/rssi")
        #expect(!alone.awaitsBrain)
    }

    /// The brain's own connection dropped while ours stayed up: the reports we sent meanwhile
    /// reached no one. Asked with the capture time it has our reports up to
    /// (`{"reports":{"after":…}}`), a connected gateway sends again those of its recent
    /// reports complete after it, marked resent, in order; the plain request sends nothing.
    /// Its hole runs from the broker's drop to its request, longer than the `resendSeconds` a
    /// gateway's own disconnect puts back (a CI run: the brain stopped 15 s, back 7 s later,
    /// and the last 10 s were all it got), so the request reaches back `reportBacklogSeconds`.
    @Test func aBrainBackFromItsOwnOutageGetsTheReportsSentMeanwhileAgain() throws {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        engine.brainStatus(online: true)
        var sent: [MQTTMessage] = []
        for i in 0...600 { sent += engine.handle(Self.frame(minor: 1, at: Double(i) * 0.25)).messages }
        let reports = try sent.filter { $0.topic == "gateways/door/rssi" }.map { message in
            (to: try RSSIReport(parsing: JSONParser().parse(message.payload), topic: "door").to, message: message)
        }
        #expect(reports.count > 500)
        #expect(engine.brainReady().messages.isEmpty, "not waiting, no capture time named: nothing")

        // The brain has our reports up to 60 s: a hole of 90 s, past resendSeconds (45 s).
        let after = Self.t0 + 60
        let last = reports.last!.to
        #expect(last.seconds(since: after) > engine.resendSeconds)
        let again = engine.brainReady(resendingAfter: after).messages
        let expected = reports.filter { $0.to > after }.map(\.message)
        #expect(again.count == expected.count, "\(again.count) of \(expected.count)")
        #expect(again.map { RSSIReport.unmarked($0.payload) } == expected.map(\.payload), "the same reports, in order")
        #expect(again.allSatisfy { $0.text.hasSuffix(#","resent":true}"#) && $0.qos == 0 && !$0.retain })
        #expect(!engine.awaitsBrain && engine.reportsWaiting == 0)

        // A hole longer than the backlog's span: the last reportBacklogSeconds of it.
        let whole = engine.brainReady(resendingAfter: Self.t0).messages
        let now = Self.t0 + 600 * 0.25
        let kept = reports.filter { now.seconds(since: $0.to) <= GatewayEngine.reportBacklogSeconds }
        #expect(whole.count == kept.count && whole.count < reports.count, "\(whole.count) of \(reports.count)")

        // Its own disconnect puts back only the last resendSeconds; they wait for its reconnect.
        _ = engine.disconnected(reason: "connection lost")
        #expect(engine.brainReady(resendingAfter: after).messages.isEmpty)
        let putBack = reports.filter { last.seconds(since: $0.to) <= engine.resendSeconds }
        #expect(engine.reportsWaiting == putBack.count, "\(engine.reportsWaiting) of \(putBack.count)")
    }

    /// Asked for its reports after a capture time (a store's bridge back, a hole), a gateway
    /// also deletes again, after them, the presence of beacons that left in the last
    /// `reportBacklogSeconds` and are not tracked now: a store's Mosquitto can lose an empty
    /// retained message queued for its bridge (NATSNodeFaultTests: the centre kept 100/9 at
    /// the counter after the bridge moved). A beacon back since is not deleted.
    @Test func askedForItsReportsAGatewayDeletesThePresenceOfBeaconsThatLeftAgain() {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        engine.brainStatus(online: true)
        var sent: [MQTTMessage] = []
        for i in 0...20 {
            sent += engine.handle(Self.frame(minor: 1, at: Double(i) * 0.5)).messages
            if i < 4 { sent += engine.handle(Self.frame(minor: 2, at: Double(i) * 0.5 + 0.1)).messages }
        }
        // 100/2 last heard at 1.6 s: it left at 11.6 s (exitTimeout 10).
        for i in 21...40 { sent += engine.handle(Self.frame(minor: 1, at: Double(i) * 0.5)).messages }
        let deletion = { (message: MQTTMessage) in message.topic == "beacons/100/2/presence/door" && message.payload.isEmpty }
        #expect(sent.filter(deletion).count == 1, "deleted once when it left")

        let asked = engine.brainReady(resendingAfter: Self.t0 + 5).messages
        #expect(asked.filter(deletion).count == 1, "deleted again")
        #expect(asked.allSatisfy { $0.topic != "beacons/100/1/presence/door" }, "the beacon still here is not touched")
        #expect(asked.last.map(deletion) == true, "after the reports sent again")
        #expect(asked.filter(deletion).allSatisfy { $0.retain && $0.qos == 1 })

        // 100/2 back: its presence is current, nothing of it is deleted.
        _ = engine.handle(Self.frame(minor: 2, at: 20.5))
        #expect(engine.brainReady(resendingAfter: Self.t0 + 5).messages.filter(deletion).isEmpty)
    }

    @Test func sightingsBeyondTheQueueLimitDropTheOldestAndCountThem() {
        var engine = Self.engine(Self.config(#","queueLimit":10,"raw":true"#))
        for i in 0..<15 { _ = engine.handle(Self.frame(minor: 1, at: Double(i) * 0.1)) }
        #expect(engine.statistics.dropped == 5)
        let back = engine.connected(at: Self.w0 + 2)
        let sightings = back.messages.filter { $0.topic == "beacons/100/1" }
        #expect(sightings.count == 10)
        #expect(sightings.first?.text.contains(#""seq":6"#) == true, "the five oldest went: \(sightings.first?.text ?? "")")
    }

    @Test func whatTheServiceCouldNotDeliverWaitsForTheReconnect() {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        let output = engine.handle(Self.frame(minor: 1, at: 0))
        engine.undelivered(output.messages)
        #expect(!engine.isConnected)
        #expect(engine.handle(Self.frame(minor: 2, at: 0.1)).messages.isEmpty, "queued while disconnected")
        let back = engine.connected(at: Self.w0 + 1)
        #expect(Self.summary(back.messages) == [
            "gateways/door/status r", "beacons/100/1", "beacons/100/2",
            "beacons/100/1/presence/door r", "beacons/100/2/presence/door r",
        ])
        // An RSSI report it could not deliver waits with the reports of the outage, first.
        _ = engine.handle(Self.frame(minor: 1, at: 1))
        let report = engine.handle(Self.frame(minor: 1, at: 1.6)).messages.filter { $0.topic == "gateways/door/rssi" }
        #expect(!report.isEmpty)
        engine.undelivered(report)
        _ = engine.handle(Self.frame(minor: 1, at: 2.2))
        let again = engine.connected(at: Self.w0 + 3).messages.filter { $0.topic == "gateways/door/rssi" }
        // Those sent before it first, resent (they may have been lost in flight), then it,
        // then those made while away.
        let resent = again.prefix { $0.text.contains(#""resent":true"#) }
        #expect(!resent.isEmpty)
        let fresh = Array(again.dropFirst(resent.count))
        #expect(fresh.count > report.count && Array(fresh.prefix(report.count)) == report,
                "the undelivered reports, then those made while away")
        #expect(!fresh.contains { $0.text.contains(#""resent""#) })
    }

    @Test func presenceLeftByAnEarlierRunIsDeletedUnlessTheBeaconIsSeenAgain() {
        var engine = Self.engine()
        engine.inheritedPresence(topic: "beacons/100/1/presence/door")
        engine.inheritedPresence(topic: "beacons/100/7/presence/door")
        _ = engine.connected(at: Self.w0)
        _ = engine.handle(Self.frame(minor: 1, at: 1))
        #expect(engine.settleInheritedPresence(at: Self.w0 + 5).readBackEnded == false, "one exit timeout not over")
        let settled = engine.settleInheritedPresence(at: Self.w0 + 10)
        #expect(settled.readBackEnded)
        #expect(Self.summary(settled.messages) == ["beacons/100/7/presence/door r (delete)"])
        #expect(settled.log.map(\.message) == ["cleared presence left by an earlier run"])
        #expect(engine.settleInheritedPresence(at: Self.w0 + 20).readBackEnded == false, "once")
    }

    /// A broker killed before saving brings back a delete it had acknowledged: after a
    /// reconnect the gateway reads its retained presence again and deletes at once what it
    /// does not track (the tracker is live: no exit timeout to wait), keeping what it does.
    @Test func afterAReconnectStalePresenceReadBackIsDeletedAtOnce() {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        _ = engine.handle(Self.frame(minor: 1, at: 1))
        #expect(engine.settleInheritedPresence(at: Self.w0 + 10).readBackEnded)
        _ = engine.disconnected(reason: "connection lost")
        let back = engine.connected(at: Self.w0 + 20)
        #expect(back.readBackStarted, "the service subscribes to the read-back again")
        #expect(Self.summary(back.messages) == ["gateways/door/status r", "beacons/100/1/presence/door r"])
        #expect(Self.summary(engine.inheritedPresence(topic: "beacons/100/7/presence/door").messages)
                == ["beacons/100/7/presence/door r (delete)"])
        #expect(engine.inheritedPresence(topic: "beacons/100/1/presence/door").messages.isEmpty, "tracked now")
        #expect(engine.settleInheritedPresence(at: Self.w0 + 25).readBackEnded == false)
        #expect(engine.settleInheritedPresence(at: Self.w0 + 30).readBackEnded, "the read-back ends: unsubscribe")
        #expect(engine.inheritedPresence(topic: "beacons/100/7/presence/door").messages.isEmpty, "not reading back")
    }

    @Test func aNewConfigIsAppliedLiveAndReportedBeaconsItNoLongerAcceptsExit() throws {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        _ = engine.handle(Self.frame(minor: 1, at: 0))
        let other = BeaconUUID("11111111-2222-3333-4444-555555555555")!
        let output = engine.apply(Self.config(uuids: #"["\#(other)"]"#), origin: "fleet/config", at: Self.w0 + 1)
        #expect(output.config == .applied(needsRestart: []))
        #expect(Self.summary(output.messages) == ["beacons/100/1/presence/door r (delete)", "gateways/door/events"])
        #expect(try GatewayEvent(parsing: output.messages[1].payload)
                == .config(ConfigReport(origin: "fleet/config", outcome: .applied(needsRestart: []), at: Self.w0 + 1)))
        #expect(Self.summary(engine.handle(Self.frame(minor: 1, at: 2)).messages) == ["gateways/door/rssi"],
                "filtered by the new allow-list: only the report of what came before")
        #expect(engine.statistics.filtered == 1)
    }

    /// Issue 18: "the gateway's retained presence kept the old zone name; a good push
    /// reported a spurious "needsRestart":["broker"] because the gateway was started with --broker".
    @Test func aPushedZoneNameReachesTheRetainedPresenceAndABrokerFromTheCommandLineNeedsNoRestart() throws {
        // Started with --broker: the command line's broker is in the engine's config.
        var started = Self.config()
        started.broker.url = try BrokerURL(parsing: "mqtt://10.0.0.9:1884")
        var engine = GatewayEngine(config: started, gateway: started.gateways[0])
        engine.brokerFromCommandLine = true
        _ = engine.connected(at: Self.w0)
        _ = engine.handle(Self.frame(minor: 1, at: 0))
        let pushed = try FleetConfig.parse(Self.configText().replacingOccurrences(of: #""zone":"Entrance""#,
                                                                                 with: #""zone":"Front door""#))
        let output = engine.apply(pushed, origin: "fleet/config", at: Self.w0 + 1)
        #expect(output.config == .applied(needsRestart: []), "no spurious broker restart")
        let presence = try #require(output.messages.first { $0.topic == "beacons/100/1/presence/door" })
        #expect(presence.retain && presence.text.contains(#""zone":"Front door""#), "\(presence.text)")

        // Without --broker a changed broker still needs a restart.
        var plain = Self.engine()
        _ = plain.connected(at: Self.w0)
        #expect(plain.apply(started, origin: "fleet/config", at: Self.w0 + 1).config == .applied(needsRestart: ["broker"]))
    }

    @Test func aConfigWithoutThisGatewayIsRejectedAndTheOldOneStays() throws {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        let elsewhere = try FleetConfig.parse(#"{"broker":{"url":"mqtt://127.0.0.1"},"gateways":[{"id":"till"}]}"#)
        let output = engine.apply(elsewhere, origin: "fleet/config", at: Self.w0)
        #expect(output.config == .rejected([#"the new config has no gateway "door""#]))
        #expect(output.log.first?.level == .error)
        #expect(output.messages.map(\.topic) == ["gateways/door/events"])
        #expect(engine.config == Self.config())
    }

    @Test func healthCarriesRatesSinceTheLastOneAndThePublishedCount() {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        _ = engine.health(at: Self.w0, uptime: 0, version: "0.1.0", sourceName: "hci:0", published: 0)
        for i in 0..<20 { _ = engine.handle(Self.frame(minor: 1, at: Double(i) * 0.1)) }
        let health = engine.health(at: Self.w0 + 2, uptime: 2, version: "0.1.0", sourceName: "hci:0", published: 42)
        let json = try? JSONParser().parse(health.payload)
        #expect(health.topic == "gateways/door/health" && health.retain)
        #expect(json?["advertsPerSecond"] == .number(10))
        #expect(json?["published"] == .number(42))
        #expect(json?["tracked"] == .number(1))
    }

    @Test func withdrawingDeletesEveryPresenceThenSaysOffline() {
        var engine = Self.engine()
        _ = engine.connected(at: Self.w0)
        _ = engine.handle(Self.frame(minor: 2, at: 0))
        _ = engine.handle(Self.frame(minor: 1, at: 0))
        #expect(Self.summary(engine.withdraw().messages) == [
            "beacons/100/1/presence/door r (delete)", "beacons/100/2/presence/door r (delete)", "gateways/door/status r",
        ])
    }

    @Test(arguments: [false, true])
    func entersAndExitsAreLoggedOnlyWhenAsked(_ logs: Bool) {
        var engine = Self.engine()
        engine.logsBeacons = logs
        _ = engine.connected(at: Self.w0)
        let enter = engine.handle(Self.frame(minor: 1, at: 0))
        let exit = engine.advance(to: Self.t0 + 11)
        #expect(enter.log.map(\.message) == (logs ? ["enter"] : []))
        #expect(exit.log.map(\.message) == (logs ? ["exit"] : []))
    }

    @Test func theHotPathAppendsToTheCallersOutput() {
        var engine = Self.engine(Self.config(#","raw":true"#))
        _ = engine.connected(at: Self.w0)
        var output = GatewayOutput()
        for i in 0..<3 { engine.handle(Self.frame(minor: 1, at: Double(i) * 0.01), into: &output) }
        #expect(Self.summary(output.messages) == ["beacons/100/1/presence/door r", "beacons/100/1", "beacons/100/1", "beacons/100/1"])
        output.removeAll()
        #expect(output == GatewayOutput())
    }
}

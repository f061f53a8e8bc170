import BeaconKit
import Config
import Contract
import Gateway
import GatewayCore
import HCI
import LiveClock
import Logging
import MQTT
import Synchronization
import Wire
import TestSupport
import Testing

/// The gateway's timers run on the clock it is given (`GatewayService(clock:)`), not on
/// the machine's: a test moves a `ManualClock` and waits for the round of the timers at
/// that time, however slow the machine is, instead of sleeping.
@Suite("beacon-gateway on a manual clock", .capturingLogs)
struct GatewayClockTests {
    /// A controller stand-in that hands the gateway the advertising reports a test gives it,
    /// stamped with the test's clock as a live source stamps them with the machine's.
    final class HandFedSource: AdvertisingSource {
        let name = "hand-fed"
        let clock: any SourceClock = LiveSourceClock()
        private let frames: AsyncStream<HCIFrame>
        private let feed: AsyncStream<HCIFrame>.Continuation

        init() { (frames, feed) = AsyncStream.makeStream(of: HCIFrame.self) }

        /// `time` by the test's clock, which dates the capture as the machine's dates a live one.
        func hear(_ beacon: IBeacon, at time: WallTime, rssi: Int8 = -60) {
            feed.yield(HCIFrame(time: time.asCaptureTime(), event: advertisingEvent(beacon, address: 0xD0_00_00_00_00_01, rssi: rssi)))
        }

        func run(_ output: @escaping @Sendable (SourceOutput) -> Void) async throws {
            output(.state(.running, detail: name))
            for await frame in frames { output(.frame(frame)) }
        }

        func setScanning(_ enabled: Bool) async {}

        func setAdvertising(_ advertise: AdvertiseConfig?, timeout: Double) async throws -> AdvertisingChange {
            throw HCIError.unsupported(source: name, reason: "no controller")
        }
    }

    /// Gateway `door` on `broker` with a `ManualClock` and a `HandFedSource`, running and connected.
    struct Rig {
        let clock: ManualClock
        let source: HandFedSource
        let service: GatewayService
        let running: Task<Void, any Error>

        init(broker: MosquittoBroker, exitTimeout: Double, reportInterval: Double = 0) async throws {
            let config = try FleetConfig.parse("""
                {"broker": {"url": "\(broker.url)", "keepalive": 5}, "defaults": {"exitTimeout": \(exitTimeout)},
                 "gateways": [{"id": "door", "source": "hci:0", "reportInterval": \(reportInterval)}]}
                """)
            clock = ManualClock(at: WallTime(iso8601: "2026-11-21T10:00:00.000Z")!)
            source = HandFedSource()
            let service = try GatewayService(config: config, gateway: try #require(config.gateway(id: "door")), source: source,
                                             sourceHasOwnTime: false, password: nil, configPath: nil,
                                             logger: Logger(label: "beacon-gateway.door"), clock: clock)
            self.service = service
            running = Task { try await service.run() }
            #expect(await eventually(timeout: 20) { service.statistics.engine.connected })
        }

        /// Moves the clock and waits for the gateway's timers to go round at the new time.
        func advance(by seconds: Double) async {
            clock.advance(by: seconds)
            let now = clock.monotonic()
            #expect(await eventually { (service.timerRound ?? -1) >= now }, "no round of the timers at \(now) s")
        }

        func stop() async {
            running.cancel()
            _ = try? await running.value
        }
    }

    @Test("a beacon's exit comes when the gateway's clock passes the exit timeout, not when real time does")
    func exitOnTheGatewaysClock() async throws {
        let dir = try TemporaryDirectory("gateway-clock")
        let broker = try await MosquittoBroker.start(in: dir)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/7/1/presence/door"], in: dir)
        let gateway = try await Rig(broker: broker, exitTimeout: 2)
        let (clock, source, service) = (gateway.clock, gateway.source, gateway.service)
        source.hear(IBeacon(uuid: GatewayTests.uuid, major: 7, minor: 1, txPower: -59), at: clock.now())
        let entered = await watch.waitFor(topic: "beacons/7/1/presence/door", timeout: 15)
        #expect(entered.map { !$0.payload.isEmpty } == true, "\(watch.records)")

        await gateway.advance(by: 1.5)
        #expect(service.statistics.engine.tracked == 1, "1.5 s of the gateway's time is within the exit timeout")
        await gateway.advance(by: 1)
        #expect(service.statistics.engine.tracked == 0, "the exit is due on the next round after 2 s of the gateway's time")
        let exited = await watch.waitFor(timeout: 15) { $0.topic == "beacons/7/1/presence/door" && $0.payload.isEmpty }
        #expect(exited != nil, "\(watch.records)")

        await gateway.stop()
        await watch.stop()
        await broker.stop()
    }

    @Test("a live gateway's capture time is its wall clock: its RSSI reports close on the clock's time, heard or not")
    func captureTimeFromTheWallClock() async throws {
        let dir = try TemporaryDirectory("gateway-clock-capture-time")
        let broker = try await MosquittoBroker.start(in: dir)
        let watch = try await MosquittoSubscriber.start(broker: broker, filters: ["gateways/door/rssi"], in: dir)
        let gateway = try await Rig(broker: broker, exitTimeout: 3600, reportInterval: 1)
        let (clock, source, service) = (gateway.clock, gateway.source, gateway.service)
        source.hear(IBeacon(uuid: GatewayTests.uuid, major: 7, minor: 1, txPower: -59), at: clock.now())
        // Heard before the clock moves, so it counts in the window it was heard in.
        #expect(await eventually(timeout: 15) { service.statistics.engine.tracked == 1 })
        await gateway.advance(by: 1)
        let heard = await watch.waitFor(timeout: 15) { $0.topic == "gateways/door/rssi" && $0.text.contains(#""minor":1"#) }
        let report = try #require(heard.flatMap { Self.report($0.payload) }, "\(watch.records)")
        #expect(report.from == CaptureTime(iso8601: "2026-11-21T10:00:00.000Z"))
        #expect(report.to == CaptureTime(iso8601: "2026-11-21T10:00:01.000Z"))
        #expect(report.entries.map(\.count) == [1])

        // Half an hour of the gateway's clock with nothing heard: only the service's wall
        // clock, taken as capture time, moves the reports' windows on.
        await gateway.advance(by: 1800)
        let to = "2026-11-21T10:30:01.000Z"
        let later = await watch.waitFor(timeout: 15) { $0.topic == "gateways/door/rssi" && $0.text.contains(#""to":"\#(to)""#) }
        #expect(later.flatMap { Self.report($0.payload) }?.from == CaptureTime(iso8601: "2026-11-21T10:00:01.000Z"),
                "\(watch.records.map(\.text))")

        await gateway.stop()
        await watch.stop()
        await broker.stop()
    }

    static func report(_ payload: [UInt8]) -> RSSIReport? {
        payload.withUnsafeBytes { RSSIReport(decoding: $0, topic: "door") }
    }

    @Test("after an outage the gateway waits for the brain's request 45 s of its own time, then sends what it kept")
    func brainWaitOnTheGatewaysClock() async throws {
        let dir = try TemporaryDirectory("gateway-clock-brain-wait")
        let broker = try await MosquittoBroker.start(in: dir)
        // Beacons stay (an exit timeout of an hour) while the test moves the clock by 45 s.
        let gateway = try await Rig(broker: broker, exitTimeout: 3600)
        let (clock, source, service) = (gateway.clock, gateway.source, gateway.service)
        // A brain is about; the gateway hears a beacon and says so.
        var options = MQTTClientOptions(broker: try BrokerURL(parsing: broker.url), clientID: "brain-stand-in")
        options.keepalive = 5
        let brain = try MQTTClient(options)
        try brain.start()
        #expect(await eventually(timeout: 20) { brain.isConnected })
        let before = try await MosquittoSubscriber.start(broker: broker, filters: ["beacons/7/1/presence/door",
                                                                                   "gateways/door/events"], in: dir)
        try brain.publish(MQTTMessage(topic: "brain/status", text: "online", qos: 1, retain: true))
        // Handled in order by the gateway: once the command is answered, it knows the brain is about.
        try brain.publish(MQTTMessage(topic: "gateways/door/cmd", text: #"{"scan":"resume"}"#, qos: 1, retain: false))
        #expect(await before.waitFor(topic: "gateways/door/events", timeout: 15) != nil, "\(before.records)")
        source.hear(IBeacon(uuid: GatewayTests.uuid, major: 7, minor: 1, txPower: -59), at: clock.now())
        #expect(await before.waitFor(topic: "beacons/7/1/presence/door", timeout: 15) != nil)
        await before.stop()
        await brain.stop()

        // The broker dies with its retained messages; the gateway comes back, says `online`,
        // and keeps the beacon's presence until the brain asks for it, which it never does.
        await broker.kill()
        #expect(await eventually(timeout: 20) { !service.statistics.engine.connected })
        try await broker.restart()
        let after = try await MosquittoSubscriber.start(broker: broker,
                                                        filters: ["beacons/7/1/presence/door", "gateways/door/status"], in: dir)
        #expect(await after.waitFor(topic: "gateways/door/status", text: "online", timeout: 40) != nil, "\(after.records)")
        // Published inside the round that decides it, before the round is counted.
        let waiting = service.statistics.published
        await gateway.advance(by: 44)
        #expect(service.statistics.published == waiting, "44 s of the gateway's time: nothing sent, still waiting for the brain")
        await gateway.advance(by: 1.5)
        #expect(service.statistics.published > waiting, "45 s of the gateway's time: the wait is over, what it kept sent")
        let republished = await after.waitFor(topic: "beacons/7/1/presence/door", timeout: 15)
        #expect(republished.map { !$0.payload.isEmpty } == true, "\(after.records)")

        await gateway.stop()
        await after.stop()
        await broker.stop()
    }
}

import BeaconKit
import Contract
import BrainCore
import Config
import Foundation
import MQTT
import LiveClock
import SystemCalls
import Tracking
import TestSupport
import Testing

/// beacon-web's speed in a real browser (docs/PERFORMANCE.md): first paint of each page
/// with 500 customers and 50 gateways, and how long a change takes from the MQTT publish
/// to the page's DOM. A benchmark, not a test: it asserts only that it measured, and runs
/// only when asked:
///
///     BEACONBRIDGE_BENCH_WEB=1 swift test --filter WebBenchmark
///
/// Baselines measured in the same run: the login page (no data) for first paint, and a
/// plain MQTT subscriber receiving the same message for the update.
@Suite("beacon-web benchmark", .enabled(if: Foundation.ProcessInfo.processInfo.environment["BEACONBRIDGE_BENCH_WEB"] != nil))
struct WebBenchmark {
    static let customers = 500
    static let gateways = 50
    static let loads = 15
    static let updates = 20

    static func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    static func p95(_ values: [Double]) -> Double { values.sorted()[min(values.count - 1, Int(Double(values.count) * 0.95))] }
    static func ms(_ value: Double) -> String { String(format: "%.1f ms", value) }

    @Test("first paint and update latency with 500 customers and 50 gateways")
    func measure() async throws {
        let dir = try TemporaryDirectory("web-bench")
        let broker = try await MosquittoBroker.start(in: dir)
        var gatewayJSON: [String] = []
        for g in 0..<Self.gateways {
            gatewayJSON.append(#"{"id": "g\#(g)", "zone": "Zone \#(g)", "store": 100, "position": {"x": \#(2 + (g % 10) * 5), "y": \#(2 + (g / 10) * 5)}}"#)
        }
        let config = try writeFleet(dir, broker: broker, gateways: gatewayJSON, extra: """
            "stores": [{"major": 100, "name": "Main Street", "floorPlan": {"width": 50, "height": 25}}]
            """)

        // The retained state of a busy fleet, published before beacon-web starts.
        let publisher = try MQTTClient(MQTTClientOptions(broker: broker.brokerURL, clientID: "bench-publisher"))
        let baseline = try MQTTClient(MQTTClientOptions(broker: broker.brokerURL, clientID: "bench-baseline"))
        try baseline.subscribe(["stores/100/customers/+"], qos: 1)
        try publisher.start()
        try baseline.start()
        // The roster's and presence's capture times begin now: a live fleet.
        let start = WallClock.now().asCaptureTime()
        func publish(_ topic: String, _ text: String) throws {
            try publisher.publish(MQTTMessage(topic: topic, text: text, qos: 1, retain: true))
        }
        _ = await eventually(timeout: 10) { publisher.isConnected && baseline.isConnected }
        for g in 0..<Self.gateways {
            try publish("gateways/g\(g)/status", "online")
            try publish("gateways/g\(g)/health", #"{"gateway":"g\#(g)","version":"0.1.0","uptime":60,"source":"hci:0","sourceState":"running","advertsPerSecond":40.5,"decodedPerSecond":20.1,"dropped":0,"malformed":1,"queueDepth":0,"tracked":10,"published":100,"ts":"\#(start.iso8601)"}"#)
        }
        for c in 0..<Self.customers {
            let ref = BeaconRef(major: 100, minor: UInt16(c + 1))
            let zone = "g\(c % Self.gateways)"
            try publish("stores/100/customers/c\(c)", Roster.Customer(
                client: "c\(c)", name: "Customer \(c)", favorite: "flat white", photo: nil, beacon: ref,
                since: start + Double(c)).json.jsonText)
            try publish("beacons/100/\(c + 1)/presence", FleetPresenceReport(
                beacon: ref, uuid: nil, zone: zone, zoneName: "Zone \(c % Self.gateways)",
                gateways: [.init(gateway: zone, zone: "Zone", proximity: .near, rssiSmoothed: -60, distance: 1.5)],
                proximity: .near, since: start).json)
        }
        #expect(await publisher.waitUntilPublished(timeout: 60))

        let (web, base) = try await BeaconWebTests.startWeb(config: config, in: dir)
        let browser = try Chromium(in: dir)
        let page = try await browser.newPage(width: 1280, height: 860)
        try await page.navigate(base + "/login?next=/fleet")
        try await BeaconWebTests.logIn(page)
        _ = try await page.waitFor("location.pathname === '/fleet' && document.readyState === 'complete'")
        // beacon-web has read everything (the API says so) before anything is timed.
        _ = try await page.waitFor("fetch('/api/stores/100/greeter').then(r => r.json()).then(d => d.customers.length === \(Self.customers))",
                                   timeout: 60)

        var report = ["beacon-web benchmark: \(Self.customers) customers, \(Self.gateways) gateways, Chromium headless, loopback",
                      "first contentful paint (median / p95 of \(Self.loads) loads; response end in brackets):"]
        let paint = """
            (() => { const p = performance.getEntriesByName('first-contentful-paint')[0];
                     const n = performance.getEntriesByType('navigation')[0];
                     return p && n ? [p.startTime, n.responseEnd, n.transferSize] : null; })()
            """
        for path in ["/login", "/stores/100/greeter", "/stores/100/floor", "/fleet"] {
            var paints: [Double] = [], responses: [Double] = [], size = 0.0
            for _ in 0..<Self.loads {
                try await page.navigate(base + path)
                let value = try #require(try await page.waitFor(paint, timeout: 20)?.arrayValue)
                paints.append(value[0].numberValue ?? 0)
                responses.append(value[1].numberValue ?? 0)
                size = value[2].numberValue ?? 0
            }
            report.append("  \(path.padding(toLength: 22, withPad: " ", startingAt: 0)) \(Self.ms(Self.median(paints))) / \(Self.ms(Self.p95(paints)))"
                          + "  (\(Self.ms(Self.median(responses)))), \(Int(size / 1024)) KiB")
        }

        // Update latency: a new customer published, until the greeter's DOM shows them; the
        // same message into a plain subscriber is the baseline.
        try await page.navigate(base + "/stores/100/greeter")
        _ = try await page.evaluate("""
            window.__seen = {};
            new MutationObserver(() => document.querySelectorAll('.customer[data-client^=probe]').forEach(n => {
              if (!(n.dataset.client in __seen)) __seen[n.dataset.client] = Date.now(); }))
              .observe(document.getElementById('app'), { childList: true, subtree: true }); true
            """)
        var page_: [Double] = [], broker_: [Double] = []
        let events = baseline.events
        var iterator = events.makeAsyncIterator()
        // Drain the retained customers the baseline subscriber received.
        while let event = await iterator.next() {
            if case .message(let m) = event, m.topic == "stores/100/customers/c\(Self.customers - 1)" { break }
        }
        for i in 0..<Self.updates {
            let client = "probe\(i)"
            let sent = WallClock.now()
            try publisher.publish(MQTTMessage(topic: "stores/100/customers/\(client)", text: Roster.Customer(
                client: client, name: "Probe \(i)", favorite: "espresso", photo: nil,
                beacon: BeaconRef(major: 100, minor: 1), since: sent.asCaptureTime()).json.jsonText, qos: 1, retain: true))
            while let event = await iterator.next() {
                if case .message(let m) = event, m.topic.hasSuffix("/" + client) {
                    broker_.append(WallClock.now().seconds(since: sent) * 1000)
                    break
                }
            }
            let seen = try #require(try await page.waitFor("window.__seen['\(client)']", timeout: 20)?.numberValue)
            page_.append(seen - Double(sent.nanoseconds) / 1e6)
        }
        report.append("update, MQTT publish → greeter DOM (\(Self.updates) new customers): median \(Self.ms(Self.median(page_))), p95 \(Self.ms(Self.p95(page_)))")
        report.append("  baseline, publish → a plain MQTT subscriber: median \(Self.ms(Self.median(broker_))), p95 \(Self.ms(Self.p95(broker_)))")
        let text = report.joined(separator: "\n")
        print(text)
        if let out = Foundation.ProcessInfo.processInfo.environment["BEACONBRIDGE_BENCH_OUT"] {
            try text.write(toFile: out, atomically: true, encoding: .utf8)
        }
        #expect(page_.count == Self.updates)

        await browser.stop()
        await web.stop()
        await publisher.stop()
        await baseline.stop()
        await broker.stop()
    }
}

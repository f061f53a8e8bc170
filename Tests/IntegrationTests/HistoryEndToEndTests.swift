import BeaconKit
import Contract
import BrainCore
import Config
import Foundation
import History
import HistoryStore
import MQTT
import TestSupport
import Testing

/// The store's memory end to end on real parts: the brain's decisions published on a real
/// Mosquitto, beacon-history keeping them, `beaconctl report` and `beaconctl forget` on its
/// file, its Prometheus gauges, and beacon-web's analytics page in headless Chromium.
@Suite("history: beacon-history, report, forget, analytics page", .serialized)
struct HistoryEndToEndTests {
    static let day = CaptureTime(iso8601: "2026-11-21T00:00:00.000Z")!

    /// Store 100: five visits (three reach the counter, two queue); store 200: three.
    static func decisions() -> [ZoneDecision] {
        func visit(_ major: UInt16, _ minor: UInt16, _ start: Double, _ moves: [(Double, String)], _ exit: Double?) -> [ZoneDecision] {
            let since = day + start
            var out: [ZoneDecision] = []
            var previous: String?
            for (offset, zone) in moves {
                out.append(ZoneDecision(kind: previous == nil ? .enter : .zone, beacon: BeaconRef(major: major, minor: minor),
                                        zone: zone, zoneName: zone.prefix(1).uppercased() + zone.dropFirst(), from: previous,
                                        since: since, at: since + offset))
                previous = zone
            }
            if let exit, let previous {
                out.append(ZoneDecision(kind: .exit, beacon: BeaconRef(major: major, minor: minor), zone: previous,
                                        zoneName: previous, since: since, at: since + exit))
            }
            return out
        }
        let h = 3600.0
        return visit(100, 1, 9 * h, [(0, "door"), (60, "queue"), (240, "counter")], 400)
            + visit(100, 2, 9 * h + 100, [(0, "door"), (30, "queue"), (150, "counter")], 300)
            + visit(100, 3, 11 * h, [(0, "door"), (90, "counter")], 200)
            + visit(100, 4, 15 * h, [(0, "door")], 120)
            + visit(100, 1, 17 * h, [(0, "door")], 60)
            + visit(200, 9, 10 * h, [(0, "door-200"), (45, "counter-200")], 300)
            + visit(200, 8, 10 * h + 30, [(0, "door-200")], 50)
            + visit(200, 7, 12 * h, [(0, "door-200")], nil)
    }

    @Test("decisions kept once, reported, forgotten, counted in Prometheus and drawn in the browser")
    func endToEnd() async throws {
        let dir = try TemporaryDirectory("history-e2e")
        let broker = try await MosquittoBroker.start(in: dir, extraConfig: "max_queued_messages 0")
        let database = dir.file("history.sqlite")
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "zone": "Entrance", "store": 100}"#, #"{"id": "queue", "zone": "Queue", "store": 100}"#,
            #"{"id": "counter", "zone": "Counter", "store": 100}"#, #"{"id": "door-200", "zone": "Entrance", "store": 200}"#,
            #"{"id": "counter-200", "zone": "Counter", "store": 200}"#,
        ], extra: """
        "stores": [{"major": 100, "name": "Main Street"}, {"major": 200, "name": "Harbour"}],
        "history": {"database": "\(database)", "counterZones": ["counter", "counter-200"], "queueZones": ["queue"]}
        """)
        let metricsPort = try FreePort.allocate()
        let history = try startProgram("beacon-history", ["--config", config, "--metrics", "127.0.0.1:\(metricsPort)",
                                                          "--log-level", "warning"], in: dir)
        var processes = [history]
        defer {
            let running = processes
            Task { for p in running { _ = await p.stop() } }
        }

        let publisher = try MQTTClient(MQTTClientOptions(broker: broker.brokerURL, clientID: "test-brain"))
        try publisher.start()
        defer { Task { await publisher.stop() } }
        let all = Self.decisions()
        // Until beacon-history has subscribed, the first decision is sent again.
        let subscribed = await eventually(timeout: 60, interval: 0.5) {
            try? publisher.publish(MQTTMessage(topic: Topics().zoneEvents(of: all[0].beacon), text: all[0].json, qos: 1))
            guard FileManager.default.fileExists(atPath: database),
                  let counts = try? HistoryDatabase(path: database, readOnly: true).counts() else { return false }
            return counts.visits > 0
        }
        #expect(subscribed, "\(history.diagnostics)")
        // Everything twice: the history keeps it once.
        for decision in all + all {
            try publisher.publish(MQTTMessage(topic: Topics().zoneEvents(of: decision.beacon), text: decision.json, qos: 1))
        }
        let stored = await eventually(timeout: 60) {
            (try? HistoryDatabase(path: database, readOnly: true).counts()).map { $0.visits == 8 && $0.segments == 14 } ?? false
        }
        #expect(stored, "\(history.diagnostics)")

        // beaconctl report: the chain and each store, as a table and as JSON.
        let report = try startProgram("beaconctl", ["report", "--config", config, "--from", "2026-11-21", "--json"], in: dir)
        #expect(await report.waitForExit(timeout: 30) == 0, "\(report.diagnostics)")
        let json = try JSONParser().parse(report.stdout)
        #expect(json["chain"]?["footfall"]?.numberValue == 8)
        let main = json["stores"]?.arrayValue?.first { $0["store"]?.numberValue == 100 }
        #expect(main?["footfall"]?.numberValue == 5)
        #expect(main?["reachedCounter"]?.numberValue == 3)
        #expect(main?["conversion"]?.numberValue == 0.6)
        #expect(main?["returning"]?.numberValue == 1)
        // Queue: 180 s and 120 s.
        #expect(main?["queue"]?["median"]?.numberValue == 150)
        #expect(main?["hourly"]?.arrayValue?.count == 24)
        let table = try startProgram("beaconctl", ["report", "--config", config, "--store", "100", "--from", "2026-11-21"], in: dir)
        #expect(await table.waitForExit(timeout: 30) == 0, "\(table.diagnostics)")
        #expect(table.stdout.contains("store 100 (Main Street)") && table.stdout.contains("footfall     5")
                && table.stdout.contains("conversion   60 %"), "\(table.stdout)")
        let bad = try startProgram("beaconctl", ["report", "--config", config, "--from", "yesterday"], in: dir)
        #expect(await bad.waitForExit(timeout: 30) == 2)
        #expect(bad.stderr.contains("is not a date"), "\(bad.stderr)")

        // Prometheus: today's footfall and occupancy per store (today has none of these visits),
        // read at the scrape; every decision came twice, so the duplicates are counted.
        var metrics = ""
        _ = await eventually(timeout: 40, interval: 0.5) {
            metrics = (try? await BeaconWebTests.http("http://127.0.0.1:\(metricsPort)/metrics", in: dir))?.text ?? ""
            return metrics.contains("beaconbridge_history_footfall_today")
        }
        func value(_ series: String) -> Double? { MetricsTests.value(#"beaconbridge_history_\#(series)"#, in: metrics) }
        #expect(value(#"footfall_today{history="beacon-history",store="100"}"#) == 0, "\(metrics)")
        #expect(value(#"occupancy{history="beacon-history",store="200"}"#) != nil, "\(metrics)")
        #expect((value(#"duplicates_total{history="beacon-history"}"#) ?? 0) > 0, "\(metrics)")
        #expect((value(#"stored_total{history="beacon-history"}"#) ?? 0) > 0, "\(metrics)")
        #expect(metrics.contains("# HELP beaconbridge_history_duplicates_total "), "\(metrics)")

        // beacon-web: the analytics page, both stores side by side, in a real browser; the CSV.
        if Chromium.executable != nil {
            let (web, base) = try await BeaconWebTests.startWeb(config: config, in: dir)
            processes.append(web)
            let browser = try Chromium(in: dir)
            defer { Task { await browser.stop() } }
            let page = try await browser.newPage(width: 1280, height: 1100)
            try await page.navigate(base + "/analytics?range=day&date=2026-11-21")
            _ = try await page.evaluate("""
                document.querySelector('[name=username]').value = 'manager';
                document.querySelector('[name=password]').value = '\(BeaconWebTests.password)';
                document.querySelector('form.login').submit(); true
                """)
            let arrived = try await page.waitFor("location.pathname === '/analytics' && document.readyState === 'complete'")
            #expect(arrived != nil, "\(browser.diagnostics)")
            try await page.navigate(base + "/analytics?range=day&date=2026-11-21")
            let stores = try await page.evaluate("""
                JSON.stringify([...document.querySelectorAll('section.store')].map(s => [s.dataset.store,
                  s.querySelector('[data-figure=footfall]').textContent, s.querySelector('[data-figure=conversion]').textContent,
                  [...s.querySelectorAll('svg.footfall rect')].length,
                  [...s.querySelectorAll('svg.footfall rect')].reduce((n, r) => n + Number(r.dataset.value), 0)]))
                """)
            #expect(stores == .string(#"[["100","5","60 %",24,5],["200","3","33.3 %",24,3]]"#), "\(stores)")
            let chain = try await page.evaluate("document.querySelector('section.chain [data-figure=footfall]').textContent")
            #expect(chain == .string("8"))
            // At 1280 px the two stores are side by side: one row, the second right of the
            // first (the page's style is app.css's; an inline <style> was refused by the CSP
            // and they came one under the other).
            let columns = try await page.evaluate("""
                JSON.stringify([...document.querySelectorAll('section.store')].map(s => s.getBoundingClientRect())
                  .map(r => [Math.round(r.top), Math.round(r.left), Math.round(r.right)]))
                """)
            let boxes = (try? JSONDecoder().decode([[Int]].self, from: Data((columns.stringValue ?? "").utf8))) ?? []
            #expect(boxes.count == 2 && boxes[0][0] == boxes[1][0] && boxes[1][1] >= boxes[0][2] && boxes[0][2] - boxes[0][1] >= 400,
                    "\(columns)")
            // Every chart label drawn in its own shape: scaled as much across as up (the
            // chart was stretched to the page's width alone, its labels with it).
            let shapes = try await page.evaluate("""
                JSON.stringify([...document.querySelectorAll('svg.chart text')].map(t => {
                  const r = t.getBoundingClientRect(), b = t.getBBox();
                  return Math.round(r.width / b.width / (r.height / b.height) * 100) / 100 }))
                """)
            let ratios = (try? JSONDecoder().decode([Double].self, from: Data((shapes.stringValue ?? "").utf8))) ?? []
            #expect(!ratios.isEmpty && ratios.allSatisfy { abs($0 - 1) <= 0.02 }, "\(shapes)")
            // The week of that day: Monday 2026-11-16 to Sunday, one bar a day.
            try await page.navigate(base + "/analytics?range=week&date=2026-11-21")
            let week = try await page.evaluate("""
                JSON.stringify([document.querySelector('input[name=date]').value,
                  [...document.querySelectorAll('section.store[data-store="100"] svg.footfall rect')].map(r => Number(r.dataset.value))])
                """)
            #expect(week == .string(#"["2026-11-16",[0,0,0,0,0,5,0]]"#), "\(week)")
            try await page.navigate(base + "/analytics?range=day&date=2026-11-21")
            let shot = try await page.save(screenshot: "analytics", in: dir.file("screenshots"))
            if let keep = Foundation.ProcessInfo.processInfo.environment["BEACONBRIDGE_SCREENSHOTS"] {
                try? FileManager.default.removeItem(atPath: keep + "/analytics.png")
                try FileManager.default.copyItem(atPath: shot, toPath: keep + "/analytics.png")
            }
            let jar = dir.file("cookies")
            _ = try await BeaconWebTests.http(base + "/login", cookies: jar,
                                              form: "username=manager&password=correct+horse+battery+staple&next=%2F", in: dir)
            let csv = try await BeaconWebTests.http(base + "/analytics.csv?range=day&date=2026-11-21", cookies: jar, in: dir)
            #expect(csv.status == 200 && csv.headers.contains("text/csv"), "\(csv.headers)")
            let rows = csv.text.split(separator: "\n")
            #expect(rows.first == "store,hour,footfall,peakOccupancy")
            #expect(rows.contains("100,2026-11-21T09:00:00.000Z,2,2"), "\(csv.text)")
            #expect(rows.count == 1 + 48)
            let anonymous = try await BeaconWebTests.http(base + "/analytics.csv", in: dir)
            #expect(anonymous.status != 200 && !anonymous.text.contains("store,hour"))
        } else {
            Issue.record("chromium is not installed: run scripts/install-deps")
        }

        // beaconctl forget: beacon 100/1's two visits go, the others stay.
        let forget = try startProgram("beaconctl", ["forget", "--config", config, "--beacon", "100/1"], in: dir)
        #expect(await forget.waitForExit(timeout: 30) == 0, "\(forget.diagnostics)")
        #expect(forget.stdout.contains("erased 2 visits of 100/1"), "\(forget.stdout)")
        let left = try HistoryDatabase(path: database, readOnly: true).counts()
        #expect(left.visits == 6 && left.visitors == 6)
        let again = try startProgram("beaconctl", ["forget", "--config", config, "--beacon", "100/x"], in: dir)
        #expect(await again.waitForExit(timeout: 30) == 2)
    }

    @Test("a chain's PostgreSQL: the analytics pages show its stores and share one connection")
    func analyticsOnPostgresShareOneConnection() async throws {
        let dir = try TemporaryDirectory("history-web-postgres")
        let server = try await PostgresServer.start(in: dir, settings: ["fsync=off", "log_connections=on"])
        defer { Task { await server.stop() } }
        let url = try await server.createDatabase("chain")
        let keyFile = dir.file("history.key")
        let pseudonyms = Pseudonymizer(key: try Pseudonymizer.loadOrCreateKey(at: keyFile))
        let history = try await PostgresHistory(try PostgresAddress.parse(url).get(), password: nil)
        _ = try await history.ingest(Self.decisions().map { d in
            HistoryEvent(kind: d.kind, store: d.beacon.major, beacon: d.beacon, zone: d.zone, zoneName: d.zoneName, since: d.since, at: d.at)
        }, pseudonyms: pseudonyms)
        await history.close()
        let broker = try await MosquittoBroker.start(in: dir)
        defer { Task { await broker.stop() } }
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "zone": "Entrance", "store": 100}"#, #"{"id": "door-200", "zone": "Entrance", "store": 200}"#,
        ], extra: """
        "stores": [{"major": 100, "name": "Main Street"}, {"major": 200, "name": "Harbour"}],
        "history": {"database": "\(url)", "keyFile": "\(keyFile)", "queueZones": ["queue"]}
        """)
        let (web, base) = try await BeaconWebTests.startWeb(config: config, in: dir)
        defer { Task { await web.stop() } }
        let jar = dir.file("cookies")
        _ = try await BeaconWebTests.http(base + "/login", cookies: jar,
                                          form: "username=manager&password=correct+horse+battery+staple&next=%2Fanalytics", in: dir)
        func connections() -> Int {
            server.log.components(separatedBy: "\n").count { $0.contains("connection authorized") && $0.contains("database=chain") }
        }
        let before = connections()
        for path in ["/analytics?range=day&date=2026-11-21", "/analytics?range=week&date=2026-11-21", "/analytics.csv?range=day&date=2026-11-21"] {
            let page = try await BeaconWebTests.http(base + path, cookies: jar, in: dir)
            #expect(page.status == 200, "\(path): \(page.headers)\n\(web.diagnostics)")
            if path.hasPrefix("/analytics?range=day") {
                let text = String(decoding: page.body, as: UTF8.self)
                #expect(text.contains(#"data-store="100""#) && text.contains(#"data-store="200""#), "\(text.suffix(3000))")
                #expect(text.contains(#"<dd data-figure="footfall">5</dd>"#), "\(text.suffix(3000))")
            }
        }
        // Three pages, one connection (each page used to open and close its own).
        #expect(connections() - before == 1, "\(server.log.suffix(3000))")
    }
}

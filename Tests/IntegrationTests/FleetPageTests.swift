import BeaconKit
import Contract
import Foundation
import LiveClock
import SystemCalls
import TestSupport
import Testing

/// The fleet dashboard as an operator sees it on a tablet, in Debian's headless Chromium:
/// an offline gateway's last figures greyed as stale, and nothing off-screen at 768 px.
@Suite("beacon-web fleet page")
struct FleetPageTests {
    @Test("on a 768 px tablet every cell is on screen, and an offline gateway's figures are greyed as stale")
    func tabletAndStale() async throws {
        guard Chromium.executable != nil else {
            Issue.record("chromium is not installed: run scripts/install-deps")
            return
        }
        let dir = try TemporaryDirectory("web-fleet-page")
        let broker = try await MosquittoBroker.start(in: dir)
        let source = "btsnoop:/var/lib/beaconbridge/captures/main-street-entrance-2026-11-21.log"
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "zone": "Entrance", "store": 100}"#,
            #"{"id": "counter", "zone": "Counter", "store": 100}"#,
        ], extra: #""stores": [{"major": 100, "name": "Main Street"}]"#)
        // Retained as a running fleet leaves them: door running now, counter gone offline
        // after its last health (37.5 adverts/s then).
        func health(_ id: String, adverts: Double, at time: WallTime) -> String {
            #"{"gateway":"\#(id)","version":"0.1.0","uptime":3600,"source":"\#(source)","sourceState":"running","#
                + #""advertsPerSecond":\#(adverts),"decodedPerSecond":\#(adverts / 2),"dropped":12345,"malformed":678,"#
                + #""queueDepth":0,"tracked":42,"published":99999,"ts":"\#(time.iso8601)"}"#
        }
        let now = WallClock.now()
        let retained: [(topic: String, payload: String)] = [
            ("gateways/door/status", "online"), ("gateways/door/health", health("door", adverts: 12.5, at: now)),
            ("gateways/counter/status", "offline"), ("gateways/counter/health", health("counter", adverts: 37.5, at: now - 300)),
        ]
        for (topic, payload) in retained {
            let publisher = try ChildProcess(Programs.system("mosquitto_pub")!, [
                "-h", "127.0.0.1", "-p", String(broker.port), "-r", "-q", "1", "-t", topic, "-m", payload], in: dir)
            #expect(await publisher.waitForExit(timeout: 10) == 0, "\(publisher.diagnostics)")
        }
        let (web, base) = try await BeaconWebTests.startWeb(config: config, in: dir)
        let browser = try Chromium(in: dir)
        func failure() -> String { "\(web.diagnostics)\n\(browser.diagnostics)" }
        do {
            let page = try await browser.newPage(width: 768, height: 1024)
            try await page.navigate(base + "/fleet")
            try await BeaconWebTests.logIn(page)
            let shown = try await page.waitFor("""
                location.pathname === '/fleet' && [...document.querySelectorAll('tr.gateway')]
                  .map(r => r.dataset.id + ':' + r.dataset.condition).join(' ') === 'door:ok counter:offline'
                """)
            let text = await page.shown()
            #expect(shown != nil, "\(text)\n\(failure())")
            try await page.save(screenshot: "fleet-768", in: dir.file("screenshots"))

            // The offline gateway's adverts/s is there, but greyed and dated; the running one's is not.
            let cells = try await page.evaluate("""
                JSON.stringify(['door', 'counter'].map(id => {
                  const row = document.querySelector('tr.gateway[data-id=' + id + ']');
                  const cell = [...row.querySelectorAll('td.figure')].find(c => c.dataset.label === 'Adverts/s');
                  return [id, row.classList.contains('dated'), cell.textContent, getComputedStyle(cell).color, cell.title];
                }))
                """).stringValue ?? ""
            let rows = (try JSONParser().parse(cells).arrayValue ?? []).map { $0.arrayValue ?? [] }
            #expect(rows.count == 2, "\(cells)")
            if rows.count == 2, rows[1].count == 5 {
                #expect(rows[0] == [.string("door"), .bool(false), .string("12.5"), .string("rgb(29, 35, 42)"), .string("")],
                        "\(cells)")
                #expect(rows[1][1] == .bool(true) && rows[1][2] == .string("37.5") && rows[1][3] == .string("rgb(138, 148, 157)"),
                        "\(cells)")
                // Its last health is dated 5 min before the test began; the page says how long ago
                // when it draws the row, which a loaded machine may put minutes later (once 6 min).
                let drawnBy = Int(WallClock.now().seconds(since: now - 300) / 60)
                let minutes = rows[1][4].stringValue.flatMap { title in
                    title.firstMatch(of: /^last heard (\d+) min ago, not current$/).flatMap { Int($0.1) }
                }
                #expect(minutes.map { (5...drawnBy).contains($0) } == true, "\(cells), drawn within \(drawnBy) min")
            }

            // Only the figures are greyed: the offline row's name, zone, last health and version
            // keep the page's ink, and its background stays the light "needs attention" tint.
            let plain = try await page.evaluate("""
                JSON.stringify([...document.querySelectorAll('tr.gateway[data-id=counter] td:not(.figure)')]
                  .filter(c => c.textContent !== '' && !c.querySelector('.badge'))
                  .map(c => c.dataset.label + ' ' + getComputedStyle(c).color)
                  .concat(['row ' + getComputedStyle(document.querySelector('tr.gateway[data-id=counter]')).backgroundColor]))
                """).stringValue ?? ""
            #expect(plain == #"["Gateway rgb(29, 35, 42)","Zone rgb(29, 35, 42)","Last health rgb(29, 35, 42)","#
                + #""Calibration rgb(29, 35, 42)","Version rgb(29, 35, 42)","row rgb(253, 232, 232)"]"#, "\(plain)")

            // Nothing beyond the right edge: no cell, heading or summary, and no sideways scrolling.
            let overflow = try await page.evaluate("""
                JSON.stringify([...document.querySelectorAll('#app td, #app th, #app h1, #app h2, .summary div, header.bar')]
                  .filter(e => e.getClientRects().length > 0)
                  .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
                  .map(e => (e.dataset.label || e.tagName) + ' ' + Math.round(e.getBoundingClientRect().right)))
                """).stringValue ?? ""
            #expect(overflow == "[]", "off-screen at 768 px: \(overflow)")
            let widths = try await page.evaluate("""
                [document.documentElement.scrollWidth, document.documentElement.clientWidth,
                 document.querySelector('table.gateways').getBoundingClientRect().right].join(' ')
                """).stringValue ?? ""
            let parts = widths.split(separator: " ").compactMap { Double($0) }
            #expect(parts.count == 3 && parts[0] <= parts[1] && parts[2] <= parts[1], "\(widths)")
            // Every figure keeps its name beside it (the column heads are hidden at this width).
            let labels = try await page.evaluate("""
                [...document.querySelectorAll('tr.gateway[data-id=counter] td')].map(c => getComputedStyle(c, '::before').content).join('|')
                """).stringValue ?? ""
            #expect(labels.contains("\"Adverts/s\"") && labels.contains("\"Dropped\"") && labels.contains("\"Version\""), "\(labels)")
        } catch {
            Issue.record("\(error)\n\(failure())")
        }
        await browser.stop()
        await web.stop()
        await broker.stop()
    }
    /// Beacon health on the real programs (issue 18 item 5): a gateway replays a store where
    /// the till's Eddystone tag sends TLM (2950 mV, BeaconWebTests.capture) and tag-1 (100/1)
    /// is heard; the spare tag (100/9) was last seen 3 h ago, as the retained record of a
    /// previous brain says. With `lowBattery` 3000 mV and `missingAfter` 1 h the brain reports
    /// the till tag's battery and the spare tag on `brain/events`, and the fleet page lists
    /// every registry beacon with its battery ("—" when it never said) and "not seen for 3 h".
    @Test("the fleet page shows each registry beacon's battery and when it was last seen; the brain reports low and missing ones")
    func beaconHealth() async throws {
        guard Chromium.executable != nil else {
            Issue.record("chromium is not installed: run scripts/install-deps")
            return
        }
        let dir = try TemporaryDirectory("web-beacon-health")
        let broker = try await MosquittoBroker.start(in: dir)
        let capture = try dir.write("counter.log", bytes: try BeaconWebTests.capture(ana: -60, ben: -70, till: -60))
        let uuid = BeaconWebTests.uuid
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "counter", "source": "btsnoop:\#(capture)?loop", "zone": "Counter", "store": 100}"#,
        ], extra: """
        "stores": [{"major": 100, "name": "Main Street"}],
        "beacons": [{"uuid": "\(uuid)", "major": 100, "minor": 1, "name": "tag-1"},
                    {"uuid": "\(uuid)", "major": 100, "minor": 9, "name": "spare"},
                    {"namespace": "00112233445566778899", "instance": "aabbccddeeff", "name": "till tag", "store": 100}],
        "brain": {"lowBattery": 3000, "missingAfter": 3600}
        """)
        let lastSeen = CaptureTime(seconds: (WallClock.now().seconds - 3 * 3600 - 300).rounded(.down))
        let record = #"{"beacon":{"major":100,"minor":9},"name":"spare","lastSeen":"\#(lastSeen.iso8601)","present":false,"#
            + #""battery":null,"batteryLow":false,"missing":false}"#
        try await BeaconWebTests.publish(broker, "brain/beacons/100/9", text: record, in: dir)
        let events = try await MosquittoSubscriber.start(broker: broker, filters: ["brain/events"], in: dir)
        var processes: [ChildProcess] = []
        let browser = try Chromium(in: dir)
        func failure() -> String { processes.map(\.diagnostics).joined(separator: "\n") + "\n" + browser.diagnostics }
        do {
            processes.append(try startProgram("beacon-brain", ["--config", config], in: dir))
            processes.append(try startProgram("beacon-gateway", ["--config", config, "--id", "counter"], in: dir))
            let (web, base) = try await BeaconWebTests.startWeb(config: config, in: dir)
            processes.append(web)

            // Read as Contract's `BrainEvent`.
            let low = await events.waitFor(timeout: 60) { $0.brainEvent?.name == "battery-low" }
            guard case .batteryLow(_, let name, let millivolts, let threshold, _)? = low?.brainEvent else {
                throw TestFailure("no battery-low event: \(events.records)")
            }
            #expect(name == "till tag" && millivolts == 2950 && threshold == 3000, "\(events.records)\n\(failure())")
            let missing = await events.waitFor(timeout: 30) { $0.brainEvent?.name == "beacon-missing" }
            guard case .beaconMissing(_, let missingName, let missingSince, _, _)? = missing?.brainEvent else {
                throw TestFailure("no beacon-missing event: \(events.records)")
            }
            #expect(missingName == "spare" && missingSince?.iso8601 == lastSeen.iso8601, "\(events.records)\n\(failure())")
            #expect(!events.records.contains {
                if case .beaconMissing(_, let name, _, _, _)? = $0.brainEvent { name != "spare" } else { false }
            }, "only the spare tag is missing: \(events.records)")

            let page = try await browser.newPage(width: 1180, height: 1024)
            try await page.navigate(base + "/fleet")
            try await BeaconWebTests.logIn(page)
            let rows = """
                [...document.querySelectorAll('table.beacons tr.beacon')].map(r =>
                  [r.dataset.beacon, r.querySelector('.battery').textContent, r.querySelector('.seen').textContent,
                   r.querySelector('.battery').classList.contains('low')].join('|')).sort().join(' / ')
                """
            let expected = "00112233445566778899/aabbccddeeff|2950 mV|seen now|true / "
                + "100/1|—|seen now|false / 100/9|—|not seen for 3 h|false"
            let table = try await page.waitFor("(() => { const t = \(rows); return t === '\(expected)' ? t : ''; })()", timeout: 30)
            let text = await page.shown(rows)
            #expect(table != nil, "fleet page beacons: \(text)\n\(failure())")
            try await page.save(screenshot: "fleet-beacons", in: dir.file("screenshots"))
        } catch {
            Issue.record("\(error)\n\(failure())")
        }
        await events.stop()
        await browser.stop()
        for process in processes.reversed() { await process.stop() }
        await broker.stop()
    }
}

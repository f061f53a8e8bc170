import BeaconKit
import Foundation
import TestSupport
import Testing

/// `--metrics HOST:PORT`: the gateway's, the brain's and beacon-history's figures as
/// Prometheus metrics, scraped from the running processes, and the Grafana dashboard in
/// deploy/grafana.
@Suite("Prometheus metrics")
struct MetricsTests {
    /// Scrapes `url` until `predicate` holds; the last text.
    static func scrape(_ url: String, in dir: TemporaryDirectory, until predicate: (String) -> Bool) async throws -> String {
        var text = ""
        _ = await eventually(timeout: 30, interval: 0.2) {
            text = (try? await BeaconWebTests.http(url, in: dir))?.text ?? ""
            return predicate(text)
        }
        return text
    }

    /// The value of the series `series` (name and labels, as scraped) in `text`.
    static func value(_ series: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(series + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    /// Every metric name a dashboard query uses (`expr`, and the template variables' queries).
    static func dashboardMetricNames(_ path: String) throws -> Set<String> {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let dashboard = try JSONParser(maxDepth: 32).parse(text)
        var queries: [String] = []
        func walk(_ value: JSONValue) {
            switch value {
            case .object(let object):
                for (key, member) in object.members {
                    if (key == "expr" || key == "query" || key == "definition"), let query = member.stringValue { queries.append(query) }
                    walk(member)
                }
            case .array(let items): items.forEach(walk)
            default: break
            }
        }
        walk(dashboard)
        var names: Set<String> = []
        for query in queries {
            for match in query.matches(of: /beaconbridge_[a-z0-9_]+/) { names.insert(String(match.output)) }
        }
        return names
    }

    @Test("a replaying gateway, the brain and beacon-history serve Prometheus metrics as they change; every dashboard query's metric exists")
    func scrape() async throws {
        let dir = try TemporaryDirectory("metrics")
        let broker = try await MosquittoBroker.start(in: dir)
        let capture = try dir.write("door.log", bytes: StoreLoopTests.capture(rssi: -60))
        // Health every 30 s (the default): the metrics must not wait for it.
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "door", "source": "btsnoop:\#(capture)?loop", "store": 100}"#],
                                    extra: #""stores": [{"major": 100, "name": "Main Street"}], "history": {"database": "\#(dir.file("history.sqlite"))"}"#,
                                    defaults: #"{"exitTimeout": 10}"#)
        let gatewayPort = try FreePort.allocate(), brainPort = try FreePort.allocate(), historyPort = try FreePort.allocate()
        // beacon-history first: its persistent session then holds every decision the brain makes.
        let history = try startProgram("beacon-history", ["--config", config, "--metrics", "127.0.0.1:\(historyPort)",
                                                          "--log-level", "warning"], in: dir)
        let historyURL = "http://127.0.0.1:\(historyPort)/metrics"
        let connected = #"beaconbridge_history_broker_connected{history="beacon-history"}"#
        let historyUp = try await Self.scrape(historyURL, in: dir) { Self.value(connected, in: $0) == 1 }
        #expect(Self.value(connected, in: historyUp) == 1, "\(historyUp)\n\(history.diagnostics)")
        // Then the brain, settled before the gateway starts: a beacon it hears of while it reads
        // the broker's retained state is taken as already there, with no "enter" decision to keep.
        let brain = try startProgram("beacon-brain", ["--config", config, "--metrics", "127.0.0.1:\(brainPort)"], in: dir)
        let gatewayURL = "http://127.0.0.1:\(gatewayPort)/metrics", brainURL = "http://127.0.0.1:\(brainPort)/metrics"
        let settled = #"beaconbridge_brain_settled{brain="beacon-brain"}"#
        let brainUp = try await Self.scrape(brainURL, in: dir) { Self.value(settled, in: $0) == 1 }
        #expect(Self.value(settled, in: brainUp) == 1, "\(brainUp)\n\(brain.diagnostics)")
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "door",
                                                          "--metrics", "127.0.0.1:\(gatewayPort)"], in: dir)

        // The raw counters grow from one scrape to the next, long before the first 30 s health.
        let adverts = #"beaconbridge_gateway_adverts_total{gateway="door"}"#
        let first = try await Self.scrape(gatewayURL, in: dir) { (Self.value(adverts, in: $0) ?? 0) > 0 }
        let before = try #require(Self.value(adverts, in: first), "\(first)\n\(gateway.diagnostics)")
        let gatewayText = try await Self.scrape(gatewayURL, in: dir) { (Self.value(adverts, in: $0) ?? 0) > before }
        #expect((Self.value(adverts, in: gatewayText) ?? 0) > before, "\(gatewayText)")
        for series in [#"beaconbridge_gateway_decoded_total{gateway="door"}"#, #"beaconbridge_gateway_malformed_total{gateway="door"}"#,
                       #"beaconbridge_gateway_dropped_total{gateway="door"}"#, #"beaconbridge_gateway_published_total{gateway="door"}"#,
                       #"beaconbridge_gateway_tracked_beacons{gateway="door"}"#, #"beaconbridge_gateway_queue_depth{gateway="door"}"#,
                       #"beaconbridge_gateway_uptime_seconds{gateway="door"}"#, #"beaconbridge_gateway_source_running{gateway="door"}"#,
                       #"beaconbridge_gateway_broker_connected{gateway="door"}"#] {
            #expect(Self.value(series, in: gatewayText) != nil, "\(series)\n\(gatewayText)\n\(gateway.diagnostics)")
        }
        #expect(Self.value(#"beaconbridge_gateway_broker_connected{gateway="door"}"#, in: gatewayText) == 1)
        #expect(Self.value(#"beaconbridge_gateway_decoded_total{gateway="door"}"#, in: gatewayText) ?? 0 > 0)
        #expect(gatewayText.contains(#"beaconbridge_build_info{gateway="door",program="beacon-gateway",version="0.1.0",source="btsnoop:"#),
                "\(gatewayText)")
        #expect(gatewayText.contains("# TYPE beaconbridge_gateway_adverts_total counter"))
        #expect(gatewayText.contains("# HELP beaconbridge_gateway_adverts_total Advertising reports received"))
        #expect(gatewayText.contains("# TYPE beaconbridge_gateway_tracked_beacons gauge"))

        // The brain: its counters, and occupancy by store and zone once Ana's beacon is in.
        let occupancy = #"beaconbridge_brain_occupancy_beacons{brain="beacon-brain",store="100",zone="door"}"#
        let brainText = try await Self.scrape(brainURL, in: dir) { (Self.value(occupancy, in: $0) ?? 0) > 0 }
        #expect(Self.value(occupancy, in: brainText) == 1, "\(brainText)\n\(brain.diagnostics)")
        for series in [#"beaconbridge_brain_received_total{brain="beacon-brain"}"#, #"beaconbridge_brain_beacons{brain="beacon-brain"}"#,
                       #"beaconbridge_brain_broker_connected{brain="beacon-brain"}"#, #"beaconbridge_brain_settled{brain="beacon-brain"}"#,
                       #"beaconbridge_brain_uptime_seconds{brain="beacon-brain"}"#] {
            #expect(Self.value(series, in: brainText) != nil, "\(series)\n\(brainText)")
        }
        #expect(brainText.contains(#"beaconbridge_build_info{brain="beacon-brain",program="beacon-brain",version="0.1.0"} 1"#))

        // beacon-history: the brain's decision about Ana's beacon stored, counted at the next
        // scrape (not at a timer's), and the store's figures read from the database.
        let stored = #"beaconbridge_history_stored_total{history="beacon-history"}"#
        let historyText = try await Self.scrape(historyURL, in: dir) { (Self.value(stored, in: $0) ?? 0) > 0 }
        #expect((Self.value(stored, in: historyText) ?? 0) > 0, "\(historyText)\n\(history.diagnostics)")
        for series in [#"beaconbridge_history_footfall_today{history="beacon-history",store="100"}"#,
                       #"beaconbridge_history_occupancy{history="beacon-history",store="100"}"#,
                       #"beaconbridge_history_duplicates_total{history="beacon-history"}"#,
                       #"beaconbridge_history_skipped_total{history="beacon-history",reason="malformed"}"#,
                       #"beaconbridge_history_write_failures_total{history="beacon-history"}"#,
                       #"beaconbridge_history_uptime_seconds{history="beacon-history"}"#] {
            #expect(Self.value(series, in: historyText) != nil, "\(series)\n\(historyText)")
        }
        #expect(historyText.contains(#"beaconbridge_build_info{history="beacon-history",program="beacon-history",version="0.1.0"} 1"#))

        // Prometheus conventions: every family has HELP and TYPE; counters end in _total.
        let scrapes = [gatewayText, brainText, historyText]
        for text in scrapes {
            for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                #expect(text.contains("# HELP \(parts[2]) "), "no HELP for \(parts[2])")
                #expect((parts[3] == "counter") == parts[2].hasSuffix("_total"), "\(line)")
            }
        }

        // The Grafana dashboard asks only for what the processes serve.
        let names = try Self.dashboardMetricNames(Programs.repositoryRoot + "/deploy/grafana/beaconbridge.json")
        #expect(names.count >= 15, "\(names.sorted())")
        for name in names.sorted() {
            #expect(scrapes.contains { $0.contains("# TYPE \(name) ") },
                    "deploy/grafana/beaconbridge.json queries \(name), which no scrape has")
        }

        let gatewayStatus = await gateway.stop(), brainStatus = await brain.stop(), historyStatus = await history.stop()
        #expect(gatewayStatus == 0 && brainStatus == 0 && historyStatus == 0)
        await broker.stop()
    }

    @Test("--metrics that is not HOST:PORT is bad usage", arguments: ["beacon-gateway", "beacon-brain"])
    func badAddress(program: String) async throws {
        let dir = try TemporaryDirectory("metrics-usage")
        let config = try dir.write("fleet.json", #"{"gateways": [{"id": "door", "source": "hci:0"}]}"#)
        let process = try startProgram(program, ["--config", config, "--id", "door", "--metrics", "9464"].filter {
            program == "beacon-gateway" || ($0 != "--id" && $0 != "door")
        }, in: dir)
        #expect(await process.waitForExit(timeout: 30) == 2, "\(process.diagnostics)")
        #expect(process.stderr.contains("--metrics: \"9464\" is not HOST:PORT"), "\(process.diagnostics)")
    }
}

import BeaconKit
import Foundation
import TestSupport
import Testing

/// `--metrics HOST:PORT`: the gateway's and the brain's health figures as Prometheus
/// metrics, scraped from the running processes.
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

    @Test("a replaying gateway and the brain serve their health figures on /metrics")
    func scrape() async throws {
        let dir = try TemporaryDirectory("metrics")
        let broker = try await MosquittoBroker.start(in: dir)
        let capture = try dir.write("door.log", bytes: StoreLoopTests.capture(rssi: -60))
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "door", "source": "btsnoop:\#(capture)?loop"}"#],
                                    defaults: #"{"exitTimeout": 10, "healthInterval": 1}"#)
        let gatewayPort = try FreePort.allocate(), brainPort = try FreePort.allocate()
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "door",
                                                          "--metrics", "127.0.0.1:\(gatewayPort)"], in: dir)
        let brain = try startProgram("beacon-brain", ["--config", config, "--metrics", "127.0.0.1:\(brainPort)"], in: dir)

        // The gateway's health every second: adverts/s above zero once a second of the replay is counted.
        let gatewayText = try await Self.scrape("http://127.0.0.1:\(gatewayPort)/metrics", in: dir) { text in
            text.split(separator: "\n").contains { $0.hasPrefix(#"beaconbridge_gateway_adverts_per_second{gateway="door"}"#)
                && !$0.hasSuffix(" 0.0") && !$0.hasSuffix(" 0") }
        }
        for figure in [#"beaconbridge_gateway_adverts_per_second{gateway="door"}"#, #"beaconbridge_gateway_decoded_per_second{gateway="door"}"#,
                       #"beaconbridge_gateway_tracked{gateway="door"}"#, #"beaconbridge_gateway_queue_depth{gateway="door"}"#,
                       #"beaconbridge_gateway_uptime{gateway="door"}"#, #"beaconbridge_gateway_dropped_total{gateway="door"}"#,
                       #"beaconbridge_gateway_malformed_total{gateway="door"}"#, #"beaconbridge_gateway_published_total{gateway="door"}"#] {
            #expect(gatewayText.contains(figure), "\(figure)\n\(gatewayText)\n\(gateway.diagnostics)")
        }
        #expect(gatewayText.contains("# TYPE beaconbridge_gateway_tracked gauge"))
        #expect(gatewayText.contains("# TYPE beaconbridge_gateway_published_total counter"))

        // The brain's health comes every 30 s, the first once it has settled.
        let brainText = try await Self.scrape("http://127.0.0.1:\(brainPort)/metrics", in: dir) {
            $0.contains("beaconbridge_brain_received_total")
        }
        #expect(brainText.contains(#"beaconbridge_brain_beacons{brain="beacon-brain"}"#), "\(brainText)\n\(brain.diagnostics)")
        #expect(brainText.contains(#"beaconbridge_brain_received_total{brain="beacon-brain"}"#))

        let gatewayStatus = await gateway.stop(), brainStatus = await brain.stop()
        #expect(gatewayStatus == 0 && brainStatus == 0)
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

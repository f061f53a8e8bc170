@testable import BeaconKit
@testable import Config
import Foundation
import TestSupport
import Testing

/// deploy/fleet.schema.json and the config parser describe the same document.
@Suite("fleet.schema.json")
struct SchemaTests {
    static let root = Programs.repositoryRoot + "/deploy/"

    func schema() throws -> JSONValue {
        try JSONParser().parse(String(contentsOfFile: Self.root + "fleet.schema.json", encoding: .utf8))
    }

    func keys(_ value: JSONValue?) -> Set<String> {
        Set(value?["properties"]?.objectValue?.keys ?? [])
    }

    @Test("every object lists exactly the keys the parser accepts")
    func sameKeys() throws {
        let schema = try schema()
        let defs = schema["$defs"]
        #expect(keys(schema) == Set(FleetConfig.topKeys))
        #expect(keys(defs?["broker"]) == Set(FleetConfig.brokerKeys))
        #expect(keys(defs?["broker"]?["properties"]?["tls"]) == Set(FleetConfig.tlsKeys))
        #expect(keys(defs?["tuning"]) == Set(FleetConfig.tuningKeys))
        #expect(keys(defs?["tuning"]).union(keys(defs?["gateway"])) == Set(FleetConfig.gatewayKeys))
        #expect(keys(defs?["beacon"]) == Set(FleetConfig.beaconKeys))
        #expect(keys(defs?["rule"]) == Set(FleetConfig.ruleKeys))
        #expect(keys(defs?["store"]) == Set(FleetConfig.storeKeys))
        #expect(keys(defs?["store"]?["properties"]?["bridge"]) == Set(FleetConfig.storeBridgeKeys))
        #expect(keys(schema["properties"]?["bridge"]) == Set(FleetConfig.bridgeKeys))
        #expect(keys(schema["properties"]?["brain"]) == Set(FleetConfig.brainKeys))
        #expect(keys(schema["properties"]?["history"]) == Set(FleetConfig.historyKeys))
        #expect(keys(schema["properties"]?["centre"]) == Set(FleetConfig.centreKeys))
        #expect(keys(schema["properties"]?["centre"]?["properties"]?["nodes"]?["items"]) == Set(FleetConfig.nodeKeys))
        let triggers = defs?["rule"]?["properties"]?["when"]?["enum"]?.arrayValue?.compactMap(\.stringValue)
        #expect(triggers == Rule.Trigger.names)
    }

    /// Runs Python's jsonschema (Debian python3-jsonschema) on documents; the error count of each.
    func validate(_ documents: [String]) async throws -> [Int] {
        let dir = try TemporaryDirectory("schema")
        var paths: [String] = []
        for (i, document) in documents.enumerated() { paths.append(try dir.write("doc\(i).json", document)) }
        let script = """
        import json, sys, jsonschema
        schema = json.load(open(sys.argv[1]))
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = jsonschema.Draft202012Validator(schema)
        for path in sys.argv[2:]:
            print(len(list(validator.iter_errors(json.load(open(path))))))
        """
        let process = try ChildProcess(Programs.system("python3")!, ["-c", script, Self.root + "fleet.schema.json"] + paths,
                                       in: dir)
        // Waits without holding one of the few cooperative threads, which the timing-sensitive
        // tests running beside this one need.
        let status = try #require(await process.waitForExit(timeout: 30))
        try #require(status == 0, "python3 with jsonschema is needed (scripts/install-deps): \(process.stderr)")
        return process.stdoutLines.compactMap { Int($0) }
    }

    @Test("the example and a simulated store validate; documents the parser rejects are rejected by the schema too")
    func agreesWithParser() async throws {
        let example = try String(contentsOfFile: Self.root + "fleet.example.json", encoding: .utf8)
        let rejected = [
            #"{"gateways": [{"id": "door", "exitTimout": 3}]}"#,
            #"{"gateways": [{"id": "door", "source": "usb:1"}]}"#,
            #"{"uuids": ["not-a-uuid"]}"#,
            #"{"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 70000, "minor": 1}]}"#,
            #"{"rules": [{"when": "arrive", "then": [{"do": "ad"}]}]}"#,
            #"{"rules": [{"when": "join", "then": [{"do": "greeting"}]}]}"#,
            #"{"rules": [{"when": "join", "then": [{"do": "ad"}], "cooldown": "after a while"}]}"#,
            #"{"broker": {"url": "mqtt://localhost", "tls": {"certFile": "c.pem"}}}"#,
            #"{"defaults": {"pathLossExponent": 9}}"#,
            #"{"brain": {"zoneUpdates": 0}}"#,
            #"{"stores": [{"major": 1, "broker": {"username": "u"}}]}"#,
            #"{"stores": [{"major": 1, "broker": {"url": "mqtt://s1"}, "bridge": {"passwordFile": "/p"}}]}"#,
            #"{"bridge": {"keepalive": 2}}"#,
            #"{"history": {"retentionDays": 0}}"#,
            #"{"history": {"utcOffset": "+1"}}"#,
            #"{"history": {"database": "postgres://history:secret@db.lan/beaconbridge", "keyFile": "/k"}}"#,
            #"{"history": {"database": "postgres://db.lan/beaconbridge", "keyFile": "/k"}}"#,
            #"{"history": {"database": "postgres://history@db.lan:5432/beaconbridge"}}"#,
            #"{"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1}]}"#,
            #"{"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "store": 1}]}"#,
            #"{"beacons": [{"namespace": "0011", "instance": "aabbccddeeff"}]}"#,
            #"{"beacons": [{"namespace": "00112233445566778899", "instance": "aabbccddeeff", "major": 1}]}"#,
            #"{"rules": [{"when": "join", "then": [{"do": "greeting", "text": "x"}], "fallback": 3}]}"#,
            #"{"broker": {"url": "mqtts://b.lan", "clientId": "shop"}}"#,
            #"{"broker": {"url": "mqtts://b.lan", "username": "gateway"}}"#,
            #"{"broker": {"url": "mqtts://gateway@b.lan"}}"#,
            #"{"stores": [{"major": 1, "roster": "nearby"}]}"#,
            #"{"stores": [{"major": 1, "roster": {"from": "proximity", "leave": "immediate"}}]}"#,
            #"{"stores": [{"major": 1, "roster": {"enter": "near"}}]}"#,
            #"{"beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1, "minor": 1, "profile": {"name": "A"}}]}"#,
            #"{"centre": {"kind": "nats", "nodes": [{"name": "n1", "host": "a"}, {"name": "n2", "host": "b"}]}}"#,
            #"{"centre": {"kind": "cluster"}}"#,
            #"{"centre": {"nodes": [{"name": "n1", "host": "a"}, {"name": "n2", "host": "b"}, {"name": "n3", "host": "c"}]}}"#,
            #"{"centre": {"kind": "nats", "nodes": [{"name": "n.1", "host": "a"}, {"name": "n2", "host": "b"}, {"name": "n3", "host": "c"}]}}"#,
        ]
        // Accepted by both.
        let accepted = [
            #"{"gateways": [{"id": "till", "store": 1}], "stores": [{"major": 1, "roster": {"from": "both", "enter": "immediate", "#
                + #""leave": "far", "gateways": ["till"], "enterAfter": 1, "leaveAfter": 5}}, {"major": 2, "roster": "proximity"}], "#
                + #""beacons": [{"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 9, "minor": 1, "owner": "ada", "#
                + #""profile": {"name": "Ada", "favorite": "flat white"}}]}"#,
            #"{"centre": {"kind": "nats", "storeDir": "/srv/nats", "nodes": [{"name": "n1", "host": "10.0.0.1", "mqttPort": 1883}, "#
                + #"{"name": "n2", "host": "10.0.0.2"}, {"name": "n3", "host": "10.0.0.3", "bind": "10.0.0.3"}]}}"#,
            #"{"history": {"database": "postgres://history@db.lan:5432/beaconbridge", "passwordFile": "/etc/beaconbridge/history-password", "#
                + #""keyFile": "/etc/beaconbridge/history.key"}}"#,
        ]
        for document in rejected {
            #expect(throws: ConfigErrors.self, "the parser accepts \(document)") { try FleetConfig.parse(document) }
        }
        _ = try FleetConfig.parse(example)
        for document in accepted { _ = try FleetConfig.parse(document) }
        let counts = try await validate([example] + accepted + rejected)
        try #require(counts.count == rejected.count + accepted.count + 1)
        #expect(counts[0] == 0, "the example does not validate")
        for (document, count) in zip(accepted, counts.dropFirst()) { #expect(count == 0, "the schema rejects \(document)") }
        for (document, count) in zip(rejected, counts.dropFirst(1 + accepted.count)) {
            #expect(count > 0, "the schema accepts \(document)")
        }
    }
}

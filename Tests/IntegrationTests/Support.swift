import BeaconKit
import Wire
import Foundation
import TestSupport
import Testing

/// A fleet config for one test, written to its temporary directory. Any app may join any
/// beacon (`brain.joins: open`) unless `extra` has a `brain` object: who may join is tested
/// on its own (BrainTests' JoinPolicyTests, ProvisionTests).
func writeFleet(_ directory: TemporaryDirectory, broker: MosquittoBroker, gateways: [String],
                extra: String = "", defaults: String = #"{"exitTimeout": 10}"#, keepalive: Int = 5) throws -> String {
    let brain = extra.contains(#""brain""#) ? "" : #""brain": { "joins": "open" },"#
    let text = """
    {
      "broker": { "url": "\(broker.url)", "keepalive": \(keepalive) },\(brain)
      "defaults": \(defaults),
      "gateways": [\(gateways.joined(separator: ",\n"))]\(extra.isEmpty ? "" : ",\n" + extra)
    }
    """
    return try directory.write("fleet.json", text)
}

/// Starts a built executable of this package.
func startProgram(_ name: String, _ arguments: [String], in directory: TemporaryDirectory,
                  environment: [String: String] = [:], stdin: FileHandle? = nil) throws -> ChildProcess {
    let path = Programs.built(name)
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw TestFailure("\(path) is not built: run `swift build` first")
    }
    return try ChildProcess(path, arguments, environment: environment, in: directory, name: name, stdin: stdin)
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension MosquittoSubscriber.Record {
    /// The payload as a JSON object.
    var json: JSONObject? {
        guard let value = try? JSONParser().parse(payload), case .object(let object) = value else { return nil }
        return object
    }
}

/// The payload of an iBeacon advertisement inside an LE Advertising Report event.
func advertisingEvent(_ beacon: IBeacon, address: UInt64, rssi: Int8?) -> [UInt8] {
    HCIEventBuilder.legacyReport([.init(address: BluetoothAddress(rawValue: address),
                                        data: AdvertisingData.iBeacon(beacon), rssi: rssi)])
}

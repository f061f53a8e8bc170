import BeaconKit
import Contract
import Config
import BrainCore

extension Workloads {
    /// `beaconctl bench --only flood` in process (issue 21 item 6): the brain's core taking
    /// the bench's join flood, without a broker. One store (100, with an ad), `joins` joins
    /// from as many observers `flood-<i>` to beacons 100/1…1000 (retained joins with a
    /// profile, as `mqtt-baseline flood` publishes them), a legitimate observer's join to a
    /// beacon the registry names it the owner of after every 20th, then every flood join
    /// left again (empty payload). `access`: `brain.joins`, `owned-or-near` (each flood join
    /// refused) or `open` (each answered).
    static func brainFlood(joins: Int, access: String, runs: Int) -> Measurement {
        let legitimate = max(50, joins / 20)
        let owners = (0..<legitimate).map { i in
            #"{"uuid":"F7826DA6-4FA2-4E98-8024-BC5B71E0893E","major":100,"minor":\#(i % 1000 + 1),"owner":"legit-\#(i)"}"#
        }
        let text = #"{"broker":{"url":"mqtt://127.0.0.1:1883"},"stores":[{"major":100,"name":"Flood Street","ad":{"title":"Deal of the day"}}],"#
            + #""beacons":[\#(access == "open" ? "" : owners.joined(separator: ","))],"brain":{"joins":"\#(access)"}}"#
        let config: FleetConfig
        do { config = try FleetConfig.parse(text) } catch { fatalError("brain config: \(error)") }
        let join = Array(#"{"state":"joined","profile":{"name":"Flood","favorite":"everything"}}"#.utf8)
        let legitimateJoin = Array(#"{"state":"joined","profile":{"name":"Ada","favorite":"flat white"}}"#.utf8)
        var messages: [(topic: String, payload: [UInt8])] = []
        for i in 0..<joins {
            messages.append(("beacons/100/\(i % 1000 + 1)/observers/flood-\(i)", join))
            if i % 20 == 19 {
                let k = i / 20 % legitimate
                messages.append(("beacons/100/\(k % 1000 + 1)/observers/legit-\(k)", legitimateJoin))
            }
        }
        for i in 0..<joins { messages.append(("beacons/100/\(i % 1000 + 1)/observers/flood-\(i)", [])) }
        let start = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
        return measure("brain/flood-\(access)", unit: "messages", operations: messages.count, runs: runs) {
            receivingAll(messages, config: config, from: start, spacing: 0.0001)
        }
    }
}

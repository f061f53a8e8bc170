import BeaconKit
import Contract
import CommandLineSupport
import SystemCalls

#if canImport(Glibc)
import Glibc
#endif

// MARK: 5. The brain under a join flood

extension BenchRun {
    /// `beacon-brain` (a process of its own, so its memory is its own) answering a flood of
    /// `--flood-joins` joins from as many observers, published by mqtt-baseline as fast as the
    /// broker takes them, while a legitimate observer joins every 10 ms and times each reply.
    /// Beside it, in the same run: the same legitimate joins with the brain idle, and the
    /// broker's own round trip. Also the bytes the brain wrote on `stores/#` per join and
    /// leave (the roster's cost), and the brain's resident memory idle, at its peak, and once
    /// the flood has left again. Run twice: with the default `brain.joins` (`owned-or-near`:
    /// the legitimate observer joins the beacons the registry names it the owner of, and the
    /// flood, owning nothing, is refused), then `open` (every join accepted and answered,
    /// the flood's as well: the brain's most work per join).
    mutating func flood() async throws {
        try await flood(access: "owned-or-near", key: "brainFlood")
        try await flood(access: "open", key: "brainFloodOpen")
    }

    mutating func flood(access: String, key: String) async throws {
        guard let brainPath = Programs.sibling("beacon-brain") else {
            throw CommandFailure("beacon-brain is not beside beaconctl: build the whole package (swift build)", status: .failure)
        }
        let joins = settings.floodJoins
        let legitimate = max(50, joins / 20)
        // The legitimate observer: `mqtt-baseline join --id <id>` joins beacons/100/<i + 1> as
        // `<id>-<i>`, with the brain idle and again during the flood.
        let legitimateID = unique("legit")
        let owners: [JSONValue] = (0..<legitimate).map { i in
            .object(["uuid": .string("F7826DA6-4FA2-4E98-8024-BC5B71E0893E"), "major": .number(100),
                     "minor": .number(Double(i % 1000 + 1)), "owner": .string("\(legitimateID)-\(i)")])
        }
        let config = directory + "/flood-fleet-\(access).json"
        let document: JSONValue = .object([
            "broker": .object(["url": .string(broker.url)]),
            "stores": .array([.object(["major": .number(100), "name": .string("Flood Street"),
                                       "ad": .object(["title": .string("Deal of the day")])])]),
            "beacons": .array(access == "open" ? [] : owners),
            "brain": .object(["joins": .string(access)]),
        ])
        try FileSystem.write(config, Array(document.jsonText.utf8))
        let brain = try RunningProgram(brainPath, ["--config", config, "--client-id", unique("bench-flood-brain"),
                                                 "--log-level", "info"], name: unique("flood-brain"), in: directory)
        defer { brain.signal(SIGKILL) }
        let deadline = WallClock.monotonic() + 30
        while !brain.errors.contains("settled from retained state") {
            guard brain.poll() == nil, WallClock.monotonic() < deadline else {
                throw CommandFailure("beacon-brain did not settle\n\(brain.errors)", status: .failure)
            }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        let idleMemory = brain.memory

        // The same legitimate observer with the brain idle, and the broker's own round trip.
        let loadBefore = loadAverage()
        let idle = try await baselineRun(["join", "--count", String(legitimate), "--burst", "0", "--id", legitimateID,
                                          "--interval", "0.01", "--stores", "1"], name: "flood-idle")
        let idleLatency = LatencySummary(idle["joinToReply"]) ?? LatencySummary([])
        let rtt = try await baselineRun(["rtt", "--count", String(legitimate)], name: "flood-rtt")
        let brokerLatency = LatencySummary(rtt["latency"]) ?? LatencySummary([])

        // What the brain writes for the greeter while the flood joins and leaves.
        let rosterWatch = try RunningProgram(baseline, ["sub", "--port", String(broker.port), "--filter", Topics().everything(under: .stores),
                                                      "--count", "100000000", "--idle", "5"],
                                           name: unique("flood-stores"), in: directory)
        guard await rosterWatch.waitForOutput(timeout: 20, { $0.contains("ready") }) else {
            throw CommandFailure("mqtt-baseline sub did not start\n\(rosterWatch.errors)", status: .failure)
        }

        // The flood, and the legitimate observer joining every 10 ms meanwhile.
        let during = try RunningProgram(baseline, ["join", "--port", String(broker.port), "--count", String(legitimate),
                                                 "--burst", "0", "--id", legitimateID, "--interval", "0.01", "--stores", "1"],
                                      name: unique("flood-legit"), in: directory)
        let floodResult = try await baselineRun(["flood", "--count", String(joins)], name: "flood", timeout: 600)
        guard await during.wait(timeout: 300) != nil, let legit = during.lastJSON else {
            await during.stop()
            throw CommandFailure("the legitimate observer did not finish\n\(during.errors)", status: .failure)
        }
        let floodLatency = LatencySummary(legit["joinToReply"]) ?? LatencySummary([])
        let loadAfter = loadAverage()

        // The flood has left: the brain lets go of it.
        _ = await rosterWatch.wait(timeout: 300)
        let stores = rosterWatch.lastJSON
        let settleDeadline = WallClock.monotonic() + 15
        var after = brain.memory
        while WallClock.monotonic() < settleDeadline {
            try await Task.sleep(nanoseconds: 500_000_000)
            after = brain.memory
        }
        let peak = brain.memory?.peak
        await brain.stop()

        let rate = floodResult["publishedPerSecond"]?.numberValue ?? 0
        let replied = floodResult["repliesPerSecond"]?.numberValue ?? 0
        let storeBytes = stores?["bytes"]?.numberValue ?? 0
        // Joins the brain accepted while `stores/#` was watched, each left again.
        let accepted = legitimate + (access == "open" ? joins : 0)
        let bytesPerChange = storeBytes / Double(max(1, 2 * accepted))
        let mb = { (bytes: Int?) in JSONValue.number(rounded(Double(bytes ?? 0) / 1_048_576, 1)) }
        report.add(key, .object([
            "access": .string(access), "joins": .number(Double(joins)), "publishedPerSecond": .number(rate.rounded()),
            "replies": floodResult["replies"] ?? .null, "repliesPerSecond": .number(replied.rounded()),
            "legitimateDuringFlood": floodLatency.json, "legitimateIdle": idleLatency.json,
            "brokerRoundTrip": brokerLatency.json,
            "p99RatioToIdle": .number(rounded(floodLatency.p99 / max(idleLatency.p99, 1e-6), 2)),
            "storesBytes": .number(storeBytes), "storesMessages": stores?["received"] ?? .null,
            "storesBytesPerJoinOrLeave": .number(rounded(bytesPerChange, 1)),
            "residentMiBIdle": mb(idleMemory?.resident), "residentMiBPeak": mb(peak),
            "residentMiBAfter": mb(after?.resident),
            "loadAverageBefore": .string(loadBefore), "loadAverageAfter": .string(loadAfter),
        ]), "brain (brain.joins \(access)) under a flood of \(grouped(Double(joins))) joins from as many observers, published at "
            + "\(grouped(rate)) joins/s (as fast as the broker takes them), answered at \(grouped(replied)) joins/s:\n"
            + "  a legitimate join meanwhile: \(floodLatency.text)\n"
            + "  the same joins, brain idle:  \(idleLatency.text) (p99 during the flood = "
            + "\(decimal(floodLatency.p99 / max(idleLatency.p99, 1e-6), places: 1)) × idle)\n"
            + "  the broker's own round trip: \(brokerLatency.text)\n"
            + "  greeter topics (stores/#): \(grouped(storeBytes)) bytes in \(grouped(stores?["received"]?.numberValue ?? 0)) "
            + "messages = \(decimal(bytesPerChange, places: 1)) bytes per join or leave\n"
            + "  beacon-brain resident memory: idle \(megabytes(idleMemory?.resident ?? 0)), peak "
            + "\(megabytes(peak ?? 0)), after the flood left \(megabytes(after?.resident ?? 0))\n"
            + "  load average before \(loadBefore), after \(loadAfter)")
    }
}

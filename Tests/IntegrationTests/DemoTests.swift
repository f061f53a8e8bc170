import Foundation
import TestSupport
import Testing

/// `scripts/demo`, the README's first command, with the programs this test run built.
@Suite("demo")
struct DemoTests {
    func demo(_ arguments: [String], in dir: TemporaryDirectory, name: String) throws -> ChildProcess {
        try ChildProcess(Programs.repositoryRoot + "/scripts/demo", ["--bin", Programs.buildDirectory] + arguments,
                         environment: ["TMPDIR": dir.path], in: dir, name: name)
    }

    /// The story: what the demo prints on stdout, less --keep's instructions.
    func story(_ process: ChildProcess) -> [String] {
        process.stdoutLines.filter { !$0.hasPrefix("   watch it:") && !$0.hasPrefix("   stop it:") }
    }

    @Test("two demos at once tell the same story: the deal at the counter, the gateway layer, a summary; --keep leaves the store running until its stop script")
    func sameStoryAndKeep() async throws {
        let dir = try TemporaryDirectory("demo")
        let plain = try demo([], in: dir, name: "demo")
        let kept = try demo(["--keep"], in: dir, name: "demo-keep")
        let plainStatus = await plain.waitForExit(timeout: 400)
        let keptStatus = await kept.waitForExit(timeout: 400)
        // What --keep left running is stopped whatever else this test finds.
        let stop = kept.stdoutLines.first { $0.hasPrefix("   stop it:") }.map {
            $0.dropFirst("   stop it:".count).trimmingCharacters(in: .whitespaces)
        }
        let watch = kept.stdoutLines.first { $0.hasPrefix("   watch it:") }
        var watched: [String] = []
        if let watch, let port = watch.split(separator: " ").drop(while: { $0 != "-p" }).dropFirst().first,
           let subscriber = Programs.system("mosquitto_sub") {
            #expect(watch == "   watch it:  mosquitto_sub -h 127.0.0.1 -p \(port) -t 'beacons/#' -v")
            let sub = try ChildProcess(subscriber, ["-h", "127.0.0.1", "-p", String(port), "-t", "beacons/#", "-v",
                                                    "-C", "3", "-W", "60"], in: dir)
            await sub.waitForExit(timeout: 90)
            watched = sub.stdoutLines
        }
        var stopped = ""
        if let stop {
            let stopping = try ChildProcess(stop, [], in: dir, name: "stop")
            #expect(await stopping.waitForExit(timeout: 60) == 0, "\(stopping.diagnostics)")
            stopped = stopping.stdout
        }

        #expect(plainStatus == 0, "\(plain.diagnostics)")
        #expect(keptStatus == 0, "\(kept.diagnostics)")
        let lines = story(plain)
        // Each actor tells the same story; how a gateway's lines interleave with the brain's
        // is the race of two processes (the brain decides a report window after the
        // gateways heard it, in capture time).
        // So do two gateways' last lines: each gateway is an actor of its own.
        func actor(_ lines: [String], _ prefix: String) -> [String] { lines.filter { $0.hasPrefix(prefix) } }
        let gateways = Set(lines.compactMap { line -> String? in
            guard line.hasPrefix("   gateway ") else { return nil }
            return line.split(separator: " ").dropFirst().first.map { "   gateway \($0) " }
        })
        #expect(!gateways.isEmpty, "\(plain.stdout)")
        for prefix in gateways.sorted() + ["   brain ", "   Ana's inbox", "=="] {
            #expect(actor(lines, prefix) == actor(story(kept), prefix),
                    "the same seed told two stories (\(prefix)):\n\(plain.stdout)\n---\n\(kept.stdout)")
        }
        // The README's story, truthfully: Ana's profile greets her, the deal reaches her at
        // the counter, the gateway layer and the brain's view are shown, and a summary ends it.
        let text = lines.joined(separator: "\n")
        #expect(text.contains(#"Ana's inbox       greeting "Hello Ana! A flat white is on its way." (from rule "welcome")"#))
        #expect(text.contains(#"(from rule "deal at the counter", while her zone was counter)"#))
        #expect(!text.contains(#""deal at the counter", while her zone was door"#))
        #expect(text.contains("gateway door      beacons/100/1/presence/door (retained): in range since"))
        #expect(text.contains("gateway counter   beacons/100/1/presence/counter (retained): in range since"))
        #expect(text.contains("brain             beacons/100/1/presence: deleted: Ana has left the store"))
        #expect(text.contains("== summary"))
        #expect(text.contains(#""gateway":"counter""#) || text.contains(#""gateway":"door""#), "a sighting as published")

        // --keep: the store kept running (gateways looping) until its stop script stopped it.
        #expect(watched.count == 3 && watched.allSatisfy { $0.hasPrefix("beacons/") }, "\(watched)")
        let pids = (stopped.split(separator: "\n").first ?? "").split(whereSeparator: { !$0.isNumber }).compactMap { Int32($0) }
        #expect(pids.count == 4, "gateways, brain and broker: \(stopped)")
        for pid in pids { #expect(kill(pid, 0) != 0, "process \(pid) still runs after the stop script") }
    }
}

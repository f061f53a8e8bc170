import BeaconKit
import Foundation
import TestSupport
import Testing

/// A chain's partitions on real brokers in network namespaces (`Chain`): a store's WAN cut
/// for 10 s and for 120 s, and the central broker restarted. Afterwards the centre has every
/// presence transition of the stores once, in order; the brain acted on each visit once;
/// the store's local observers saw their store throughout; the brain's view converged.
///
/// Slow (the 120 s cut is the point): the three run beside the rest of the suite.
@Suite("chain partitions in network namespaces (slow)", .enabled(if: NetworkLab.available, "needs root for ip netns"))
struct PartitionTests {
    /// Everything the store published reached the centre, once and in order, and the brain
    /// decided every visit the store saw, once.
    /// `transitionsAt`: the stores whose every presence transition the centre's observer
    /// must have seen (not one whose bridge replayed while the observer itself reconnected).
    func expectNothingLostOrDuplicated(_ chain: Chain, _ context: String, transitionsAt: [UInt16] = Chain.majors) {
        for major in Chain.majors {
            let store = Chain.transitions(chain.stores[major]!.local.records) { chain.isGatewayPresence($0, of: major) }
            #expect(!store.isEmpty, "store \(major) saw no presence at all (\(context))")
            if transitionsAt.contains(major) {
                let centre = Chain.transitions(chain.centre.records) { chain.isGatewayPresence($0, of: major) }
                let differing = Set(centre.keys).union(store.keys).filter { centre[$0] != store[$0] }.sorted()
                #expect(centre == store, """
                    store \(major)'s presence transitions at the centre (\(context)); where they differ, in order:
                    \(differing.map { evidence(chain, topic: $0, major: major) }.joined(separator: "\n"))
                    """)
            }
            #expect(chain.brainVisits(major) == chain.storeVisits(major), "store \(major)'s visits as the brain decided them (\(context))")
        }
    }

    /// What the store and the centre saw of one presence topic, in order: set (with the
    /// presence's `since` and proximity) or deleted, retained copies marked; at the centre
    /// with the store's bridge status between them (a failure's evidence: 2026-11-28's runs
    /// under load missed one set/delete pair at the centre, and the bare transitions could
    /// not say which).
    func evidence(_ chain: Chain, topic: String, major: UInt16) -> String {
        func line(_ record: MosquittoSubscriber.Record) -> String {
            let mark = record.retained ? " [retained]" : ""
            if record.topic == topic {
                guard let json = record.json else { return "deleted" + mark }
                return "set since \(json["since"]?.stringValue ?? "?") \(json["proximity"]?.stringValue ?? "?")" + mark
            }
            return "bridge \(record.text)" + mark
        }
        let store = chain.stores[major]!.local.records.filter { $0.topic == topic }.map(line)
        let centre = chain.centre.records.filter { $0.topic == topic || $0.topic == "stores/\(major)/bridge" }.map(line)
        return "\(topic)\n  store:  \(store.joined(separator: ", "))\n  centre: \(centre.joined(separator: ", "))"
    }

    func cut(seconds: Double) async throws {
        let chain = try await Chain(label: "partition-\(Int(seconds))")
        do {
            let store = chain.stores[100]!
            #expect(await chain.waitForEnters(100, more: 2), "\(chain.diagnostics)")

            // The WAN of store 100 goes down.
            let localBefore = store.local.records.count
            let centreBefore = chain.centre.records.count
            try chain.lab.set(store.link, up: false)
            // The scenario, not a wait for an event: the cut lasts this long (10 s, 120 s),
            // and what the store and the centre do meanwhile is what the checks below read.
            try await Task.sleep(for: .seconds(seconds))
            let during = store.local.records[localBefore...]
            #expect(during.contains { $0.topic.hasSuffix("/health") } && during.contains { $0.topic.split(separator: "/").count == 3 },
                    "the store's local observer kept receiving its gateways' sightings and health")
            if seconds >= 60 {
                #expect(chain.centre.records[centreBefore...].contains { $0.topic == "stores/100/bridge" && $0.text == "0" },
                        "the centre noticed the store was cut off")
                #expect(chain.brain?.stderr.contains("store bridge down") == true)
            }
            // Store 101 kept going meanwhile.
            #expect(chain.centre.records[centreBefore...].contains { chain.isGatewayPresence($0.topic, of: 101) }
                    || chain.centre.records[centreBefore...].contains { $0.topic.hasPrefix("log/101/") } || seconds < 60)

            let noticed = chain.centre.records[centreBefore...].contains { $0.topic == "stores/100/bridge" && $0.text == "0" }
            let healIndex = chain.centre.records.count
            try chain.lab.set(store.link, up: true)
            let healed = Date()
            let converged = await chain.convergence(100, after: healed, bridgeBackAfter: noticed ? healIndex : nil)
            #expect(converged != nil, "the brain's view of store 100 converged after the heal\n\(chain.diagnostics)")
            Chain.report("WAN cut \(Int(seconds)) s (noticed at the centre: \(noticed)): the brain's view of the store converged \(converged.map { String(format: "%.2f", $0) } ?? "never") s after the heal")
            if seconds >= 60 {
                #expect(chain.centre.records[centreBefore...].contains { $0.topic == "stores/100/bridge" && $0.text == "1" })
                #expect(await eventually(timeout: 30) { chain.brain?.stderr.contains("presence reconciled") == true })
            }
            #expect(await chain.waitForEnters(100, more: 1), "visits go on after the heal")
            #expect(await chain.stopGateways(), "\(chain.diagnostics)")
            expectNothingLostOrDuplicated(chain, "WAN cut \(Int(seconds)) s")
        } catch {
            Issue.record("\(error)\n\(chain.diagnostics)")
        }
        await chain.shutDown()
    }

    @Test("store 100's WAN cut for 10 s")
    func shortCut() async throws { try await cut(seconds: 10) }

    @Test("store 100's WAN cut for 120 s: the store is unknown meanwhile, not empty")
    func longCut() async throws { try await cut(seconds: 120) }

    /// The hardest case: the central broker restarts without persistence (every retained
    /// message gone) while store 100 is cut off for longer than the brain's reconnect grace.
    /// The brain keeps its state, holds store 100 as unknown (its status did not come back),
    /// and reconciles it when its bridge returns.
    @Test("the central broker restarts, without persistence, while a store is cut off")
    func centralRestart() async throws {
        let chain = try await Chain(label: "central-restart", seed: 21, persistent: false)
        do {
            let store = chain.stores[100]!
            #expect(await chain.waitForEnters(100, more: 2), "\(chain.diagnostics)")
            try chain.lab.set(store.link, up: false)
            #expect(await chain.centre.waitFor(topic: "stores/100/bridge", text: "0", timeout: 60) != nil)
            let before = chain.centre.records.count
            try await chain.central.restart()
            let restarted = Date()
            // Live or retained: the watcher may reconnect after the bridge did, and then reads
            // the bridge's "1" as retained. Either is news, for the restarted broker kept
            // nothing (no persistence): any "1" it holds is one the bridge published since.
            #expect(await eventually(timeout: 60) {
                chain.centre.records[before...].contains { $0.topic == "stores/101/bridge" && $0.text == "1" }
            }, "store 101's bridge is back")
            let converged101 = await chain.convergence(101, after: restarted)
            #expect(converged101 != nil, "the brain's view of store 101 converged after the restart\n\(chain.diagnostics)")
            Chain.report("central broker restart: store 101 converged \(converged101.map { String(format: "%.2f", $0) } ?? "never") s after")
            // Longer than the brain's reconnect grace (45 s) for clients that do not come back.
            try await Task.sleep(for: .seconds(60))
            #expect(chain.brain?.stderr.contains("store bridge") == true)
            let healIndex = chain.centre.records.count
            try chain.lab.set(store.link, up: true)
            let healed = Date()
            let converged100 = await chain.convergence(100, after: healed, bridgeBackAfter: healIndex)
            #expect(converged100 != nil, "the brain's view of store 100 converged after the heal\n\(chain.diagnostics)")
            Chain.report("central broker restart while store 100 was cut off: converged \(converged100.map { String(format: "%.2f", $0) } ?? "never") s after the heal")
            #expect(await chain.waitForEnters(100, more: 1), "visits go on after the restart")
            #expect(await chain.stopGateways(), "\(chain.diagnostics)")
            expectNothingLostOrDuplicated(chain, "central restart", transitionsAt: [100])
        } catch {
            Issue.record("\(error)\n\(chain.diagnostics)")
        }
        await chain.shutDown()
    }
}

import BeaconKit
import Contract
import BrainCore
import Config
import Testing

/// The lanes the brain sorts its messages into under a join flood (`InboundLanes`): known
/// observers first, and every observer's own messages in the order they came.
@Suite struct InboundLanesTests {
    func drained(_ lanes: inout InboundLanes<String>) -> [String] {
        var order: [String] = []
        while let next = lanes.next() { order.append(next) }
        return order
    }

    @Test func theFirstLaneGoesFirstAndEachLaneKeepsArrivalOrder() {
        var lanes = InboundLanes<String>(limit: 100, deferAbove: 0)
        lanes.push("flood-1 joins", lane: .deferred, observer: "flood-1")
        lanes.push("door reports", lane: .first)
        lanes.push("flood-2 joins", lane: .deferred, observer: "flood-2")
        lanes.push("ana joins", lane: .first, observer: "ana")
        #expect(lanes.count == 4)
        #expect(lanes.deferredCount == 2)
        #expect(drained(&lanes) == ["door reports", "ana joins", "flood-1 joins", "flood-2 joins"])
        #expect(lanes.count == 0)
    }

    @Test func withoutABacklogNothingIsDeferred() {
        var lanes = InboundLanes<String>(limit: 100)
        // An app joins, then the gateway's report that fires the beacon's rules: the join must
        // be handled first, or the app misses what the rules send it.
        lanes.push("carla joins", lane: .deferred, observer: "carla")
        lanes.push("till reports", lane: .first)
        #expect(lanes.deferredCount == 0)
        #expect(drained(&lanes) == ["carla joins", "till reports"])
        // A backlog (64 waiting): now an unknown observer's messages wait behind the rest.
        for i in 0..<64 { lanes.push("report \(i)", lane: .first) }
        lanes.push("flood-1 joins", lane: .deferred, observer: "flood-1")
        lanes.push("ana joins", lane: .first, observer: "ana")
        #expect(drained(&lanes).suffix(2) == ["ana joins", "flood-1 joins"])
    }

    @Test func anObserversLaterMessagesFollowItsDeferredOnes() {
        var lanes = InboundLanes<String>(limit: 100, deferAbove: 0)
        lanes.push("carla joins", lane: .deferred, observer: "carla")
        // Carla became known meanwhile (a new config names her an owner): her leave asks to go
        // first, but her join is still waiting, so the leave waits behind it.
        lanes.push("carla leaves", lane: .first, observer: "carla")
        lanes.push("ana joins", lane: .first, observer: "ana")
        #expect(drained(&lanes) == ["ana joins", "carla joins", "carla leaves"])
        // Once her deferred messages are handled, her messages go first again.
        lanes.push("flood-1 joins", lane: .deferred, observer: "flood-1")
        lanes.push("carla joins again", lane: .first, observer: "carla")
        #expect(drained(&lanes) == ["carla joins again", "flood-1 joins"])
    }

    @Test func aBarrierComesAfterEverythingBeforeItAndBeforeEverythingAfter() {
        var lanes = InboundLanes<String>(limit: 100, deferAbove: 0)
        lanes.push("flood-1 joins", lane: .deferred, observer: "flood-1")
        lanes.push("door reports", lane: .first)
        lanes.push("sync marker", lane: .barrier)
        lanes.push("flood-2 joins", lane: .deferred, observer: "flood-2")
        lanes.push("ana joins", lane: .first, observer: "ana")
        lanes.push("flood-1 leaves", lane: .deferred, observer: "flood-1")
        #expect(drained(&lanes) == ["door reports", "flood-1 joins", "sync marker", "ana joins", "flood-2 joins", "flood-1 leaves"])
    }

    @Test func fullLanesRefuseAllButBarriers() {
        var lanes = InboundLanes<String>(limit: 2, deferAbove: 0)
        let taken = [lanes.push("a", lane: .deferred, observer: "a"), lanes.push("b", lane: .first),
                     lanes.push("c", lane: .first), lanes.push("d", lane: .deferred, observer: "d"),
                     lanes.push("disconnected", lane: .barrier)]
        #expect(taken == [true, true, false, false, true])
        #expect(drained(&lanes) == ["b", "a", "disconnected"])
    }

    @Test func aLongFloodIsTakenInOrderBelowTheBacklogMark() {
        var lanes = InboundLanes<Int>(limit: 100_000, deferAbove: 0, newestFirstAbove: 100_000)
        var order: [Int] = []
        for i in 0..<5_000 {
            lanes.push(i, lane: .deferred, observer: "flood-\(i)")
            // Taking as it comes, as the brain does, moves the head through a growing queue.
            if i % 3 == 0, let next = lanes.next() { order.append(next) }
        }
        while let next = lanes.next() { order.append(next) }
        #expect(order.count == 5_000)
        #expect(order.indices.allSatisfy { order[$0] == $0 }, "arrival order")
    }

    @Test func underABacklogTheNewestObserverGoesFirstWithItsOwnMessagesInOrder() {
        var lanes = InboundLanes<String>(limit: 100, deferAbove: 0, newestFirstAbove: 3)
        for i in 1...4 { lanes.push("flood-\(i) joins", lane: .deferred, observer: "flood-\(i)") }
        lanes.push("flood-2 leaves", lane: .deferred, observer: "flood-2")
        lanes.push("carla joins", lane: .deferred, observer: "carla")
        // Six waiting: Carla came last and goes first; then flood-2, who came next to last,
        // with its join before its leave; at three waiting, arrival order again.
        #expect(lanes.next() == "carla joins")
        #expect(lanes.next() == "flood-2 joins")
        #expect(lanes.next() == "flood-2 leaves")
        lanes.push("ana joins", lane: .first, observer: "ana")
        #expect(drained(&lanes) == ["ana joins", "flood-1 joins", "flood-3 joins", "flood-4 joins"])
    }

    @Test func aBarrierUnderABacklogStillKeepsArrivalOrder() {
        var lanes = InboundLanes<String>(limit: 100, deferAbove: 0, newestFirstAbove: 1)
        for i in 1...3 { lanes.push("flood-\(i) joins", lane: .deferred, observer: "flood-\(i)") }
        #expect(lanes.next() == "flood-3 joins")
        lanes.push("disconnected", lane: .barrier)
        lanes.push("flood-4 joins", lane: .deferred, observer: "flood-4")
        #expect(drained(&lanes) == ["flood-1 joins", "flood-2 joins", "disconnected", "flood-4 joins"])
    }

    // MARK: What the core sorts where

    @Test func unknownObserversAreDeferredOnceSettledAndOwnersAndGatewaysAreNot() {
        let config = JoinPolicyTests.config()
        let topics = Topics(prefix: config.topicPrefix)
        var core = BrainCore(config: config)
        let flood = topics.observer("flood-1", of: counter)
        #expect(core.lane(of: flood, payloadIsEmpty: false) == (.first, "flood-1"), "nothing waits while the retained state is read")
        _ = core.settle(at: t(0))
        #expect(core.lane(of: flood, payloadIsEmpty: false) == (.deferred, "flood-1"))
        #expect(core.lane(of: flood, payloadIsEmpty: true) == (.deferred, "flood-1"))
        #expect(core.lane(of: topics.status(ofObserver: "flood-1"), payloadIsEmpty: false) == (.deferred, "flood-1"))
        #expect(core.lane(of: topics.observer("ana", of: JoinPolicyTests.anasFob), payloadIsEmpty: false) == (.first, "ana"),
                "a registry owner")
        #expect(core.lane(of: topics.observer("ana", of: counter), payloadIsEmpty: true) == (.first, "ana"))
        #expect(core.lane(of: topics.status(ofObserver: "ana"), payloadIsEmpty: false) == (.first, "ana"))
        #expect(core.lane(of: topics.rssiReports(ofGateway: "door"), payloadIsEmpty: false) == (.first, nil))
        #expect(core.lane(of: topics.fleetConfig, payloadIsEmpty: false) == (.first, nil))
    }

    @Test func anObserverWithAJoinAnsweredJoinsFirstAndLeavesDeferred() {
        var h = Harness()
        #expect(h.core.lane(of: h.topics.observer("carla", of: counter), payloadIsEmpty: false).lane == .deferred)
        h.join("carla", counter, at: t(1))
        #expect(h.core.lane(of: h.topics.observer("carla", of: window), payloadIsEmpty: false).lane == .first)
        #expect(h.core.lane(of: h.topics.observer("carla", of: counter), payloadIsEmpty: true).lane == .deferred)
        h.leave("carla", counter, at: t(2))
        #expect(h.core.lane(of: h.topics.observer("carla", of: window), payloadIsEmpty: false).lane == .deferred)
    }

    /// A flood through the lanes into the core: the owner is answered first, and an
    /// observer that joins and leaves during the flood has left in the end.
    @Test(arguments: [0, 64])
    func throughTheLanesAnOwnerIsAnsweredFirstAndEachObserversJoinAndLeaveApplyInOrder(newestFirstAbove: Int) {
        var h = Harness(config: JoinPolicyTests.config(joins: "open"))
        h.join("ana", JoinPolicyTests.anasFob, at: t(1))
        var lanes = InboundLanes<(topic: String, payload: String)>(limit: 10_000, deferAbove: 0, newestFirstAbove: newestFirstAbove)
        func arrive(_ topic: String, _ payload: String) {
            let (lane, observer) = h.core.lane(of: topic, payloadIsEmpty: payload.isEmpty)
            lanes.push((topic, payload), lane: lane, observer: observer)
        }
        for i in 0..<200 {
            arrive(h.topics.observer("flood-\(i)", of: counter), joinJSON(name: "Flood"))
            if i == 50 { arrive(h.topics.observer("carla", of: window), joinJSON(name: "Carla")) }
            if i == 100 { arrive(h.topics.observer("carla", of: window), "") }
        }
        arrive(h.topics.observer("ana", of: counter), joinJSON(name: "Ana"))
        let before = h.sent.count
        while let (topic, payload) = lanes.next() { h.publish(topic, payload, retain: true, at: t(2)) }

        let inboxes = h.sent[before...].filter { $0.topic.hasSuffix("/inbox") }.map(\.topic)
        #expect(inboxes.first == h.topics.inbox(of: "ana"), "Ana's join, published after the flood, answered first")
        #expect(inboxes.count == 202)
        #expect(h.inbox("carla", from: before).count == 1, "Carla's join was answered")
        #expect(!h.core.observers.hasJoins(ofClient: "carla"), "and her leave, which came after it, applied after it")
        #expect(h.core.observers.count == 2 + 200, "Ana on her fob and the counter, and the flood")
    }
}

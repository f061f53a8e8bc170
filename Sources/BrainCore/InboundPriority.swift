import BeaconKit
public import Contract

extension BrainCore {
    /// The lane a message waits in before `receive` (`InboundLanes`), and the observer it
    /// belongs to. Once the brain has settled, an observer's messages are deferred unless it
    /// is a registry owner (`beacons[].owner`) or it joins with a join already answered (a
    /// new profile, another beacon): a flood of made-up names, their leaves and their last
    /// wills wait behind everyone else. The rest goes first. While the retained state is
    /// read back, nothing is deferred.
    public func lane(of topic: String, payloadIsEmpty: Bool) -> (lane: InboundLane, observer: String?) {
        lane(of: topics.parse(topic), payloadIsEmpty: payloadIsEmpty)
    }

    /// `lane(of:payloadIsEmpty:)` of a topic already parsed (`topics.parse(topic)`), which the
    /// service keeps for `Inbound.Decoder.decode(topic:kind:payload:retained:)`.
    public func lane(of kind: Topics.Kind?, payloadIsEmpty: Bool) -> (lane: InboundLane, observer: String?) {
        let client: String
        var isJoin = false
        if case let .beacon(_, .observer(joining))? = kind {
            client = joining
            isJoin = !payloadIsEmpty
        } else if case .observerStatus(let reporting)? = kind {
            client = reporting
        } else {
            return (.first, nil)
        }
        guard isSettled else { return (.first, client) }
        let first = joinPolicy.owns(client) || (isJoin && observers.hasJoins(ofClient: client))
        return (first ? .first : .deferred, client)
    }
}

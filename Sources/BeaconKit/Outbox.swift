/// What a service holds while its broker is away (README, "Broker outages"): the one
/// policy of the gateway and the brain. Retained state (presence, records, rosters, set or
/// deleted) is kept, latest per topic, so no state is lost and none goes out stale; other
/// messages (sightings, RSSI reports, zone events, replies) are kept in order, bounded, the
/// oldest dropped first and counted.
public struct Outbox: Sendable {
    /// Most messages kept that are not retained.
    public let limit: Int
    private var retained: [String: MQTTMessage] = [:]
    private var retainedOrder: [String] = []
    private var sightings: [MQTTMessage] = []
    private var head = 0
    private var count = 0
    /// Messages dropped because the queue was full.
    public private(set) var dropped = 0

    public init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Messages waiting.
    public var depth: Int { retained.count + count }

    /// Queues a retained state message; a later one for the same topic replaces it.
    public mutating func keep(_ message: MQTTMessage) {
        if retained.updateValue(message, forKey: message.topic) == nil { retainedOrder.append(message.topic) }
    }

    /// Queues a message as it comes: retained ones latest per topic, others in order.
    public mutating func queue(_ message: MQTTMessage) {
        if message.retain { keep(message) } else { add(message) }
    }

    /// Queues a message that is not retained, dropping the oldest when full.
    public mutating func add(_ message: MQTTMessage) {
        if sightings.count < limit {
            sightings.append(message)
            count += 1
            return
        }
        // Full: the ring overwrites its oldest entry.
        sightings[head] = message
        head = (head + 1) % limit
        dropped += 1
    }

    /// Everything queued, the others oldest first, then state (in the order first queued);
    /// the outbox is empty afterwards. The others go first because they are older than the
    /// latest state: a beacon that left during the outage must not be brought back by the
    /// sightings from before it left (the brain takes a sighting for presence), and the
    /// brain's replies go out before the records saying they were given.
    public mutating func drain() -> [MQTTMessage] {
        var out: [MQTTMessage] = []
        out.reserveCapacity(count + retained.count)
        for i in 0..<count { out.append(sightings[(head + i) % sightings.count]) }
        out += retainedOrder.compactMap { retained[$0] }
        retained.removeAll()
        retainedOrder.removeAll()
        sightings.removeAll(keepingCapacity: true)
        head = 0
        count = 0
        return out
    }
}

public import BeaconKit

/// What a gateway holds while the broker is away (README, "Broker outages"): retained
/// state (presence set or deleted) is kept, latest per topic, so no transition is lost;
/// sightings are bounded and the oldest are dropped first, counted.
public struct Outbox: Sendable {
    public let sightingLimit: Int
    private var retained: [String: MQTTMessage] = [:]
    private var retainedOrder: [String] = []
    private var sightings: [MQTTMessage] = []
    private var head = 0
    private var count = 0
    /// Sightings dropped because the queue was full.
    public private(set) var dropped = 0

    public init(sightingLimit: Int) {
        self.sightingLimit = max(1, sightingLimit)
    }

    /// Messages waiting.
    public var depth: Int { retained.count + count }

    /// Queues a retained state message; a later one for the same topic replaces it.
    public mutating func keep(_ message: MQTTMessage) {
        if retained.updateValue(message, forKey: message.topic) == nil { retainedOrder.append(message.topic) }
    }

    /// Queues a sighting, dropping the oldest when full.
    public mutating func add(_ message: MQTTMessage) {
        if sightings.count < sightingLimit {
            sightings.append(message)
            count += 1
            return
        }
        // Full: the ring overwrites its oldest entry.
        sightings[head] = message
        head = (head + 1) % sightingLimit
        dropped += 1
    }

    /// Everything queued, sightings oldest first, then state (in the order first queued);
    /// the outbox is empty afterwards. Sightings go first because they are older than the
    /// latest state: a beacon that left during the outage must not be brought back by the
    /// sightings from before it left (the brain takes a sighting for presence).
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

public import BeaconKit

/// What the broker holds on the brain's own retained topics, as signatures: lets the brain
/// publish only what changed and delete what it left behind. A signature is any text that
/// changes when the payload's meaning does (often the payload itself, unsealed); `""`
/// marks a topic the broker holds with something the brain does not trust or could not
/// read, so whatever the brain knows replaces it.
///
/// After a reconnect (`reconnected`) nothing is known until the retained state is read
/// back (`readBackComplete`); meanwhile a topic not read back yet is not known to be absent
/// (the broker may still send it, and subscribers saw it before the outage), so deleting
/// one the brain had written is written, not skipped.
public struct RetainedMirror: Sendable, Equatable {
    private var known: [String: String] = [:]
    /// `known` when the connection came back, until the retained state is read back.
    private var writtenBeforeReconnect: [String: String] = [:]

    public init() {}

    /// The signature of what the broker holds on `topic`, `nil` if nothing (as far as known).
    /// Set while reading the retained state back.
    public subscript(topic: String) -> String? {
        get { known[topic] }
        set { known[topic] = newValue }
    }

    /// The topics the broker holds (as far as known), in order.
    public var topics: [String] { known.keys.sorted() }

    /// The retained publish that makes the broker hold `signature` on `topic` (`text()` as
    /// its payload; a `nil` signature deletes), or `nil` when it holds that already.
    /// `expiry`: seconds after which the broker drops it (MQTT 5).
    public mutating func set(_ topic: String, signature: String?, expiry: UInt32? = nil,
                             text: () -> String) -> MQTTMessage? {
        let deletesWhatItWrote = signature == nil && known[topic] == nil
            && writtenBeforeReconnect.removeValue(forKey: topic) != nil
        guard known[topic] != signature || deletesWhatItWrote else { return nil }
        known[topic] = signature
        return MQTTMessage(topic: topic, text: signature == nil ? "" : text(), qos: 1, retain: true, expiry: expiry)
    }

    /// The connection came back: what the broker holds is read again.
    public mutating func reconnected() {
        writtenBeforeReconnect = known
        known = [:]
    }

    /// The retained state is read back: what was not seen again is known to be absent.
    public mutating func readBackComplete() {
        writtenBeforeReconnect = [:]
    }
}

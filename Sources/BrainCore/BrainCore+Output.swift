import BeaconKit
import Contract
import Config

/// What goes out: retained state written only where it changed (`RetainedMirror`), records before
/// presence, rosters at most once per interval, events and log lines.
/// Part of `BrainCore`, split by concern (see BrainCore.swift for why its state is internal).
extension BrainCore {
    mutating func inbox(_ client: String, _ message: InboxMessage, at now: CaptureTime) {
        counters.inboxMessages += 1
        out.messages.append(MQTTMessage(topic: topics.inbox(of: client), text: message.json(at: now),
                                         qos: 1, retain: false))
    }

    /// Publishes the standing ads of this brain's registry beacons and deletes those that
    /// went away.
    mutating func syncAds() {
        var desired: [String: String] = [:]
        for ref in directory.ownBeacons {
            if let ad = ad(of: ref) { desired[topics.ad(of: ref)] = ad.jsonText }
        }
        for (topic, text) in desired.sorted(by: { $0.key < $1.key }) { setRetained(topic, signature: text) { text } }
        for topic in known.topics where desired[topic] == nil {
            if case .beacon(_, .ad)? = topics.parse(topic) { setRetained(topic, signature: nil) { "" } }
        }
    }

    /// Publishes `text()` retained unless the broker already holds the same `signature`;
    /// a `nil` signature deletes what the broker holds.
    /// `expiry`: seconds after which the broker drops it (MQTT 5).
    mutating func setRetained(_ topic: String, signature: String?, expiry: UInt32? = nil, text: () -> String) {
        if let message = known.set(topic, signature: signature, expiry: expiry, text: text) { out.messages.append(message) }
    }

    /// What the brain retains about customers (roster entries and summaries) expires on the
    /// broker after `brain.joinMaxAge` on MQTT 5, even if no brain is left to delete it.
    var personalExpiry: UInt32 { UInt32(config.brain.joinMaxAge.rounded(.up)) }

    /// Writes what changed: fleet presence, records, rosters. Replies and rule messages
    /// are already out, so a crash in between makes a restarted brain answer again (at
    /// least once) rather than never.
    mutating func finish(at now: CaptureTime? = nil) -> BrainOutput {
        if let now { lastTime = max(lastTime, now) }
        if isSettled {
            let seal = recordSeal
            // Records first: a presence on the broker then always has its record, so a brain
            // restarted in between never takes a visit it answered for a new one.
            for ref in dirtyVisits.sorted() where heldVisits[ref] == nil {
                let memory = rules.memory(for: RuleEngine.Scope(beacon: ref))
                let record: VisitRecord? = if let fleet = presence[ref] {
                    VisitRecord(since: fleet.since, zone: fleet.zone, rules: memory ?? RuleMemory())
                } else {
                    memory.map { VisitRecord(since: nil, rules: $0) }
                }
                let text = record?.json, topic = topics.visitRecord(of: ref)
                setRetained(topic, signature: text) { text.map { seal.seal($0, topic: topic) } ?? "" }
            }
            for ref in dirtyPresence.sorted() where heldVisits[ref] == nil {
                // Checked on every sighting: the signature decides, the payload is made only to send.
                let report = presence[ref]?.report
                let (signature, json) = presenceSignatures.signature(of: report, for: ref)
                setRetained(topics.presence(of: ref), signature: signature) { json ?? report?.json ?? "" }
            }
            for key in dirtyJoins.sorted() {
                let memory = rules.memory(for: RuleEngine.Scope(beacon: key.beacon, client: key.client))
                let record: AnsweredRecord? = if let join = observers[key] {
                    AnsweredRecord(join: join.fingerprint, since: join.since, rules: memory ?? RuleMemory())
                } else {
                    memory.map { AnsweredRecord(join: nil, since: nil, rules: $0) }
                }
                let text = record?.json, topic = topics.answeredRecord(of: key.beacon, client: key.client)
                setRetained(topic, signature: text) { text.map { seal.seal($0, topic: topic) } ?? "" }
            }
            for key in dirtyCustomers.sorted() where directory.handles(store: key.store) {
                let source = directory.storeEntry(key.store)?.roster.source ?? .joins
                let joins = source.usesJoins ? observers.joins(ofClient: key.client).filter { store(of: $0.beacon) == key.store } : []
                let visits = proximityRoster.visits(of: key.client, in: key.store)
                let text = rosterBook.update(client: key.client, store: key.store, joins: joins, visits: visits,
                                             topics: topics)?.json.jsonText
                let before = known[topics.customer(key.client, ofStore: key.store)]
                let topic = topics.customer(key.client, ofStore: key.store)
                setRetained(topic, signature: text, expiry: personalExpiry) { text.map { seal.seal($0, topic: topic) } ?? "" }
                if before != text { dirtyStores.insert(key.store) }
            }
            dirtyCustomers = []
            // Summaries at most once per `rosterInterval` per store; the rest wait for `advance`.
            var waiting: Set<UInt16> = []
            for store in dirtyStores.sorted() where directory.handles(store: store) {
                if let due = rosterDue[store], lastTime < due {
                    waiting.insert(store)
                    continue
                }
                let topic = topics.roster(ofStore: store)
                if rosterBook.count(of: store) == 0 && known[topic] == nil { continue }
                let roster = rosterBook.summary(store: store, name: directory.storeEntry(store)?.name, limit: limits.rosterLimit)
                let time = lastTime
                let signature = roster.json(at: nil)
                guard known[topic] != signature else { continue }
                setRetained(topic, signature: signature, expiry: personalExpiry) { roster.json(at: time) }
                rosterDue[store] = lastTime + limits.rosterInterval
            }
            dirtyVisits = []
            dirtyPresence = []
            dirtyJoins = []
            dirtyStores = waiting
        }
        defer { out = BrainOutput() }
        return out
    }

    /// `brain/events` (Contract's `BrainEvent`).
    mutating func event(_ event: BrainEvent) {
        out.messages.append(MQTTMessage(topic: topics.brainEvents, text: event.json, qos: 1, retain: false))
    }

    mutating func rejectConfig(_ errors: [String], at now: CaptureTime) {
        counters.configsRejected += 1
        counters.malformed[.fleetConfig, default: 0] += 1
        report(.rejected(errors: Array(errors.prefix(50))), origin: "fleet/config", at: now)
        note(.error, "rejected a fleet config; keeping the last good one",
             ["errors": errors.prefix(5).joined(separator: "; ")])
    }

    /// `brain/events`: what became of a fleet config (Contract's `ConfigReport`).
    mutating func report(_ outcome: ConfigReport<CaptureClock>.Outcome, origin: String, at now: CaptureTime) {
        event(.config(ConfigReport(origin: origin, outcome: outcome, at: now)))
    }

    mutating func note(_ level: LogEntry.Level, _ message: String, _ metadata: [String: String] = [:]) {
        out.log.append(LogEntry(level, message, metadata))
    }
}

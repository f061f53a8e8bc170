import BeaconKit
import Contract
import Config
import Tracking

/// Rules: fired on presence and joins, their actions carried out, their memory restored from
/// records.
/// Part of `BrainCore`, split by concern (see BrainCore.swift for why its state is internal).
extension BrainCore {
    /// Puts back what a record says rules did; says so when it names rules the config lacks.
    mutating func restore(_ recorded: RuleMemory, for scope: RuleEngine.Scope) {
        let unknown = rules.restore(recorded, for: scope)
        guard !unknown.isEmpty else { return }
        note(.notice, "a record names rules the config does not have (renamed or removed while no brain ran): "
             + "their once and cooldown state is dropped", ["beacon": "\(scope.beacon)", "rules": unknown.joined(separator: ", ")])
        markRecordDirty(scope)
    }

    /// The record of a scope (a visit's, or an answered join's) is to be written again.
    mutating func markRecordDirty(_ scope: RuleEngine.Scope) {
        if let client = scope.client {
            dirtyJoins.insert(ObserverJoin.Key(beacon: scope.beacon, client: client))
        } else {
            dirtyVisits.insert(scope.beacon)
        }
    }

    /// `captured`: an update's capture time, which its rules' rate limit counts in.
    mutating func runRules(_ trigger: Rule.Trigger, beacon ref: BeaconRef, fleet: FleetBeacon?, since: CaptureTime,
                                   at now: CaptureTime, captured: CaptureTime? = nil) {
        let entry = self.entry(ref, uuid: fleet?.uuid)
        var context = RuleEngine.Context(trigger: trigger, beacon: ref, uuid: fleet?.uuid, entry: entry,
                                         rssi: fleet?.zoneView?.rssiSmoothed, zone: fleet?.zone, since: since)
        context.captured = captured
        let scope = RuleEngine.Scope(beacon: ref)
        let fired = rules.fire(context, scope: scope, at: now)
        if fired.contains(where: { $0.once || $0.cooldown != nil }) { dirtyVisits.insert(ref) }
        for rule in fired {
            counters.rulesFired += 1
            note(.debug, "rule fired", ["rule": rule.name, "beacon": "\(ref)"])
            perform(rule, beacon: ref, entry: entry, fleet: fleet, targets: observers.joins(of: ref), subject: nil, at: now)
        }
    }

    mutating func runRules(_ trigger: Rule.Trigger, beacon ref: BeaconRef, join: ObserverJoin, at now: CaptureTime) {
        let fleet = presence[ref]
        let entry = self.entry(ref, uuid: fleet?.uuid)
        let context = RuleEngine.Context(trigger: trigger, beacon: ref, uuid: fleet?.uuid ?? entry?.id?.uuid,
                                         entry: entry, rssi: fleet?.zoneView?.rssiSmoothed, zone: fleet?.zone,
                                         since: join.since)
        let fired = rules.fire(context, scope: RuleEngine.Scope(beacon: ref, client: join.client), at: now)
        if fired.contains(where: { $0.once || $0.cooldown != nil }) { dirtyJoins.insert(join.key) }
        for rule in fired {
            counters.rulesFired += 1
            note(.debug, "rule fired", ["rule": rule.name, "beacon": "\(ref)", "client": join.client])
            perform(rule, beacon: ref, entry: entry, fleet: fleet, targets: [join], subject: join, at: now)
        }
    }

    /// Carries out a rule's actions. Inbox actions go to `targets` (the observer of a join or
    /// leave, or every observer joined to the beacon); `publish` goes out once.
    mutating func perform(_ rule: Rule, beacon ref: BeaconRef, entry: BeaconEntry?, fleet: FleetBeacon?,
                                  targets: [ObserverJoin], subject: ObserverJoin?, at now: CaptureTime) {
        for action in rule.actions {
            switch action {
            case .ad:
                guard let ad = ad(of: ref) else {
                    counters.actionsSkipped += 1
                    continue
                }
                for target in targets { inbox(target.client, .ad(beacon: ref, ad: ad, rule: rule.name), at: now) }
            case .greeting(let template):
                for target in targets {
                    let values = variables(rule, ref, entry, fleet, target, at: now)
                    guard let text = rule.text(template, values) else {
                        // "Hello ! A  is on its way." is worse than nothing.
                        counters.actionsSkipped += 1
                        note(.debug, "skipped a greeting whose template lacks values; give the rule a fallback",
                             ["rule": rule.name, "client": target.client])
                        continue
                    }
                    inbox(target.client, .greeting(beacon: ref, text: text, rule: rule.name), at: now)
                }
            case .locationFix:
                guard let location = entry?.location else {
                    counters.actionsSkipped += 1
                    continue
                }
                for target in targets {
                    inbox(target.client, .locationFix(beacon: ref, location: location, rule: rule.name), at: now)
                }
            case .publish(let topicTemplate, let template, let retain, let qos):
                let values = variables(rule, ref, entry, fleet, subject, at: now)
                guard let topic = renderTopic(topicTemplate, values) else {
                    counters.actionsSkipped += 1
                    note(.debug, "skipped a publish whose topic would not be valid", ["rule": rule.name])
                    continue
                }
                guard let text = rule.text(template, values) else {
                    counters.actionsSkipped += 1
                    note(.debug, "skipped a publish whose template lacks values; give the rule a fallback",
                         ["rule": rule.name, "topic": topic])
                    continue
                }
                out.messages.append(MQTTMessage(topic: topic, text: text, qos: qos, retain: retain))
            }
        }
    }

    /// Template values (see `Template.variables`); numbers as text, missing ones empty.
    func variables(_ rule: Rule, _ ref: BeaconRef, _ entry: BeaconEntry?, _ fleet: FleetBeacon?,
                           _ join: ObserverJoin?, at now: CaptureTime) -> [String: String] {
        var values: [String: String] = ["rule": rule.name, "ts": now.iso8601]
        values["store"] = store(of: ref).map(String.init)
        if let eddystone = ref.eddystone {
            values["namespace"] = eddystone.namespace.description
            values["instance"] = eddystone.instance.description
        } else {
            values["major"] = "\(ref.major)"
            values["minor"] = "\(ref.minor)"
        }
        values["uuid"] = (fleet?.uuid ?? entry?.id?.uuid)?.description
        values["name"] = entry?.name
        if let fleet {
            values["zone"] = fleet.zoneView?.zoneName ?? fleet.zone
            values["gateway"] = fleet.zone
            values["proximity"] = fleet.proximity.rawValue
            values["distance"] = fleet.zoneView?.distance.map { fixed($0, places: 2) }
            values["rssi"] = fleet.zoneView?.rssiSmoothed.map { fixed($0, places: 1) }
        }
        if let join {
            values["client"] = join.client
            values["customer"] = join.name
            values["favorite"] = join.favorite
        } else if let owner = entry?.owner {
            // A customer's own beacon: the profile of the owner's accepted join (of this beacon,
            // else of any) as the app gave it, else the registry's, as a proximity roster shows it.
            let accepted = observers[ObserverJoin.Key(beacon: ref, client: owner)]
                ?? observers.joins(ofClient: owner).first { $0.name != nil }
            values["client"] = owner
            values["customer"] = accepted?.name ?? entry?.profile?.name
            values["favorite"] = accepted?.favorite ?? entry?.profile?.favorite
        } else if let accepted = observers.joins(of: ref).filter({ $0.name != nil }).min(by: { $0.since < $1.since }) {
            // A beacon an app has joined with a profile (the customer's phone as the beacon):
            // the first such join names the customer.
            values["client"] = accepted.client
            values["customer"] = accepted.name
            values["favorite"] = accepted.favorite
        }
        if let location = entry?.location {
            values["lat"] = location.latitude.map { fixed($0, places: 6) }
            values["lon"] = location.longitude.map { fixed($0, places: 6) }
            values["heading"] = location.heading.map { fixed($0, places: 1) }
            values["floor"] = location.floor.map { "\($0)" }
        }
        return values
    }

    /// Renders a rule's topic. Every variable used in it must have a value that is one
    /// valid topic segment, so a customer named `#` or `brain/answered/1/2/x` cannot
    /// redirect the message; the rule's topic is under the fleet's topic prefix.
    func renderTopic(_ template: String, _ values: [String: String]) -> String? {
        for name in Template.names(in: template) {
            guard let value = values[name], Topics.problem(withSegment: value) == nil else { return nil }
        }
        let rendered = Template.render(template, values)
        guard Topics.problem(withSegment: rendered, allowSlash: true) == nil, !rendered.contains("//") else { return nil }
        return topics.topic(rendered)
    }
}

/// Fixed-point text for template values: `52.520008`, `1.5`, `-3`.
func fixed(_ value: Double, places: Int) -> String {
    var writer = JSONWriter(capacity: 16)
    writer.writeFixed(value, places: places)
    return writer.text
}

import BeaconKit
import Contract

extension FleetConfig {
    /// Where a rule's text or topic uses a variable that may have no value when the rule
    /// fires (a join without a profile name, a beacon without a registry name or location, a
    /// controller without RSSI), so that the brain would skip the message: a text falls back
    /// to the rule's `fallback`, a topic or a fallback with a hole is never sent ("Hello ! A
    /// is on its way." reaches no topic). `beaconctl config check` prints them as warnings.
    public var templateWarnings: [String] {
        var warnings: [String] = []
        for (i, rule) in rules.enumerated() {
            let path = "rules[\(i)]" + (rule.name == "rules[\(i)]" ? "" : " (\"\(rule.name)\")")
            var texts: [(path: String, template: String, isTopic: Bool, greeting: Bool)] = []
            for (j, action) in rule.actions.enumerated() {
                switch action {
                case .greeting(let template):
                    texts.append(("then[\(j)].text", template, false, true))
                case .publish(let topic, let template, _, _):
                    texts.append(("then[\(j)].topic", topic, true, false))
                    texts.append(("then[\(j)].text", template, false, false))
                case .ad, .locationFix:
                    break
                }
            }
            for text in texts {
                let unsure = Template.names(in: text.template).filter {
                    !knownValues(of: rule, greeting: text.greeting).contains($0)
                }
                guard !unsure.isEmpty else { continue }
                let list = unsure.map { "{\($0)}" }.joined(separator: ", ")
                if text.isTopic {
                    warnings.append("\(path).\(text.path): \(list) may have no value; then the publish is skipped")
                } else if rule.fallback == nil {
                    warnings.append("\(path).\(text.path): \(list) may have no value; then the message is skipped "
                                    + "(counted in actionsSkipped): give the rule a \"fallback\" text")
                }
            }
            if let fallback = rule.fallback {
                let greeting = rule.actions.contains { if case .greeting = $0 { true } else { false } }
                let unsure = Template.names(in: fallback).filter { !knownValues(of: rule, greeting: greeting).contains($0) }
                if !unsure.isEmpty {
                    warnings.append("\(path).fallback: \(unsure.map { "{\($0)}" }.joined(separator: ", ")) may have no value "
                                    + "either; then nothing is sent")
                }
            }
        }
        return warnings
    }

    /// The variables that always have a value when `rule` fires (for a greeting: per joined
    /// observer, whose join names the client).
    func knownValues(of rule: Rule, greeting: Bool) -> Set<String> {
        var known: Set<String> = ["rule", "ts"]
        let eddystoneKeys = rule.beacons.filter { $0.eddystone != nil }.count
        let eddystoneOnly = !rule.beacons.isEmpty && eddystoneKeys == rule.beacons.count
        func isEddystone(_ entry: BeaconEntry) -> Bool { if case .eddystone? = entry.id { true } else { false } }
        // Keys name their kind; names name registry entries; otherwise any beacon of the registry.
        let mayBeEddystone = !rule.beacons.isEmpty ? eddystoneKeys > 0
            : !rule.names.isEmpty ? beacons.contains { isEddystone($0) && $0.name.map(rule.names.contains) == true }
            : beacons.contains(where: isEddystone)
        // The registry entries the rule can concern; `nil`: any beacon, registered or not.
        let entries: [BeaconEntry?]? = {
            if !rule.beacons.isEmpty {
                return rule.beacons.map { key -> BeaconEntry? in
                    if let id = key.eddystone { return beacon(id) }
                    return beacons.first { entry in
                        guard case .ibeacon(let uuid, let major, let minor)? = entry.id else { return false }
                        return major == key.major && minor == key.minor && (key.uuid == nil || key.uuid == uuid)
                    }
                }
            }
            if !rule.names.isEmpty { return beacons.filter { entry in entry.name.map(rule.names.contains) ?? false } }
            return nil
        }()
        func all(_ has: (BeaconEntry) -> Bool) -> Bool {
            guard let entries, !entries.isEmpty else { return false }
            return entries.allSatisfy { $0.map(has) ?? false }
        }
        if !mayBeEddystone { known.formUnion(["major", "minor", "store"]) }
        // A rule of some stores matches only beacons of those stores (an Eddystone one by its entry's store).
        if !rule.stores.isEmpty { known.insert("store") }
        if eddystoneOnly {
            known.formUnion(["namespace", "instance"])
            if all({ $0.storeMajor != nil }) { known.insert("store") }
        }
        let joinRule = rule.trigger == .join || rule.trigger == .leave
        if !joinRule {
            // Enter, exit, proximity and update rules fire for a beacon present in a zone.
            known.formUnion(["zone", "gateway", "proximity"])
            if !mayBeEddystone { known.insert("uuid") }
        } else if all({ $0.id?.uuid != nil }) {
            known.insert("uuid")
        }
        if !rule.names.isEmpty || all({ $0.name != nil }) { known.insert("name") }
        if greeting || joinRule {
            known.insert("client")
        } else {
            // A publish of a beacon event names a customer only by the registry's owner.
            if all({ $0.owner != nil }) { known.insert("client") }
            if all({ $0.owner != nil && $0.profile?.name != nil }) { known.insert("customer") }
            if all({ $0.owner != nil && $0.profile?.favorite != nil }) { known.insert("favorite") }
        }
        if all({ $0.location?.latitude != nil }) { known.formUnion(["lat", "lon"]) }
        if all({ $0.location?.heading != nil }) { known.insert("heading") }
        if all({ $0.location?.floor != nil }) { known.insert("floor") }
        return known
    }
}

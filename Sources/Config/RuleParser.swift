public import BeaconKit
import Contract

/// The `rules` of a fleet config (README "Rules"), read as `FleetConfig.parse` reads the rest
/// (FleetConfigParser.swift): every problem reported with its JSON path.
extension FleetConfig {
    static func parseRule(_ value: JSONValue, at path: String, _ r: inout ConfigReader) -> Rule? {
        guard let o = r.object(value, at: path, keys: ruleKeys) else { return nil }
        // The brain's records name the rules that fired (`checkRecordBounds`).
        let name = r.string(o["name"], at: path + ".name", maxLength: FleetConfig.maxNameLength) ?? path
        let trigger = r.required(o, "when", at: path).flatMap { r.oneOf($0, at: path + ".when", Rule.Trigger.names) }
            .flatMap(Rule.Trigger.init)
        var keys: [Rule.BeaconKey] = []
        for (i, item) in (r.array(o["beacons"], at: path + ".beacons") ?? []).enumerated() {
            let ip = path + ".beacons[\(i)]"
            guard let b = r.object(item, at: ip, keys: ["uuid", "major", "minor", "namespace", "instance"]) else { continue }
            if b["namespace"] != nil || b["instance"] != nil {
                if let id = r.eddystone(b, at: ip), case .eddystone(let namespace, let instance) = id {
                    keys.append(Rule.BeaconKey(namespace: namespace, instance: instance))
                }
                continue
            }
            let uuid = b["uuid"].flatMap { r.uuid($0, at: ip + ".uuid") }
            let major = r.required(b, "major", at: ip).flatMap { r.u16($0, at: ip + ".major") }
            let minor = r.required(b, "minor", at: ip).flatMap { r.u16($0, at: ip + ".minor") }
            if let major, let minor { keys.append(Rule.BeaconKey(uuid: uuid, major: major, minor: minor)) }
        }
        let stores = (r.array(o["stores"], at: path + ".stores") ?? []).enumerated().compactMap { i, v in
            r.u16(v, at: path + ".stores[\(i)]")
        }
        let names = (r.array(o["names"], at: path + ".names") ?? []).enumerated().compactMap { i, v in
            r.string(v, at: path + ".names[\(i)]")
        }
        let zones = (r.array(o["zones"], at: path + ".zones") ?? []).enumerated().compactMap { i, v in
            r.string(v, at: path + ".zones[\(i)]")
        }
        let rssiAbove = r.number(o["rssiAbove"], at: path + ".rssiAbove", in: -127...20, unit: " dBm")
        var actions: [Rule.Action] = []
        let thenList = r.required(o, "then", at: path).flatMap { r.array($0, at: path + ".then") } ?? []
        if o["then"] != nil, thenList.isEmpty, case .array = o["then"]! { r.fail(path + ".then", "needs at least one action") }
        for (i, item) in thenList.enumerated() {
            if let action = parseAction(item, at: path + ".then[\(i)]", &r) { actions.append(action) }
        }
        let once = r.bool(o["once"], at: path + ".once") ?? false
        var cooldown: Rule.Cooldown?
        if let value = o["cooldown"] {
            cooldown = parseCooldown(value, at: path + ".cooldown", &r)
        }
        let fallback = r.template(o["fallback"], at: path + ".fallback")
        if o["fallback"] != nil, !actions.contains(where: \.usesTemplate) {
            r.fail(path + ".fallback", "applies to the texts of greeting and publish actions; this rule has none")
        }
        if let trigger, [Rule.Trigger.join, .leave].contains(trigger), rssiAbove != nil {
            r.fail(path + ".rssiAbove", "applies to beacon events (enter, exit, proximity), not to \(name)'s join/leave")
        }
        guard let trigger else { return nil }
        return Rule(name: name, trigger: trigger, beacons: keys, stores: stores, names: names, zones: zones,
                    rssiAbove: rssiAbove, actions: actions, once: once, cooldown: cooldown, fallback: fallback)
    }

    static func parseAction(_ value: JSONValue, at path: String, _ r: inout ConfigReader) -> Rule.Action? {
        guard let o = r.object(value, at: path, keys: ["do", "text", "topic", "retain", "qos"]) else { return nil }
        guard let kind = r.required(o, "do", at: path).flatMap({
            r.oneOf($0, at: path + ".do", ["ad", "greeting", "locationFix", "publish"])
        }) else { return nil }
        func forbid(_ keys: [String]) {
            for key in keys where o[key] != nil { r.fail(path + "." + key, "does not apply to \"do\": \"\(kind)\"") }
        }
        switch kind {
        case "ad":
            forbid(["text", "topic", "retain", "qos"])
            return .ad
        case "locationFix":
            forbid(["text", "topic", "retain", "qos"])
            return .locationFix
        case "greeting":
            forbid(["topic", "retain", "qos"])
            return r.required(o, "text", at: path).flatMap { r.template($0, at: path + ".text") }
                .map { .greeting(template: $0) }
        default:
            let topic = r.required(o, "topic", at: path).flatMap { r.template($0, at: path + ".topic") }
            if let topic, topic.contains("+") || topic.contains("#") {
                r.fail(path + ".topic", "a topic to publish on cannot contain + or #")
            }
            let text = r.required(o, "text", at: path).flatMap { r.template($0, at: path + ".text") }
            let retain = r.bool(o["retain"], at: path + ".retain") ?? false
            let qos = o["qos"].map { r.integer($0, at: path + ".qos", in: 0...1) } ?? 1
            guard let topic, let text, let qos else { return nil }
            return .publish(topic: topic, template: text, retain: retain, qos: qos)
        }
    }

    static func parseCooldown(_ value: JSONValue, at path: String, _ r: inout ConfigReader) -> Rule.Cooldown? {
        switch value {
        case .number:
            return r.number(value, at: path, in: 0...86400 * 7, unit: " s").map(Rule.Cooldown.seconds)
        case .string(let text):
            // "after N updates at near"
            let words = text.split(separator: " ")
            if words.count == 5, words[0] == "after", let n = Int(words[1]), (1...10_000).contains(n),
               words[2] == "updates" || words[2] == "update", words[3] == "at",
               let proximity = Proximity(rawValue: String(words[4])), proximity != .unknown {
                return .updates(count: n, at: proximity)
            }
            r.fail(path, "\"\(text)\" is neither seconds nor \"after N updates at near|far|immediate\"")
            return nil
        default:
            r.fail(path, "expected seconds or \"after N updates at near\", found \(value.typeName)")
            return nil
        }
    }
}

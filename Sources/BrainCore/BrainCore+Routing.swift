import BeaconKit
import Contract
import Config
import Tracking

/// Routing what arrives: each topic of the contract to the part that handles it; malformed and
/// foreign input counted and reported.
/// Part of `BrainCore`, split by concern (see BrainCore.swift for why its state is internal).
extension BrainCore {
    mutating func route(_ kind: Topics.Kind, topic: String, payload: [UInt8], retained: Bool, at now: Instant) {
        switch kind {
        case .gatewayRSSI(let gateway):
            guard var report = rssiReport(payload, gateway: gateway, topic: topic) else { return }
            recovery.gatewayIsLive(gateway, at: now)
            // Calibration learns from the report as the gateway sent it; the zone fusion
            // takes it corrected by the gateway's learned offset.
            for record in calibrator.learn(from: report) { calibrated(record) }
            report = calibrator.corrected(report)
            // Every store's beacons are in a report: this brain takes its own.
            if !stores.isEmpty { report.entries.removeAll { !owns($0.beacon) } }
            handle(presence.report(report, receivedAt: now, holding: holdsView), at: now)
            for gap in presence.takeGaps() {
                note(.warning, "a gateway's reports missed a span of capture time: decided as unknown, not as silence",
                     ["gateway": gap.gateway, "from": gap.from.iso8601, "to": gap.to.iso8601])
                event(gap.json)
            }
            for entry in report.entries where presence[entry.beacon]?.views[gateway] != nil {
                recovery.confirmView(entry.beacon, gateway: gateway, live: true)
            }

        case .beacon(let ref, let about):
            routeBeacon(ref, about, topic: topic, payload: payload, retained: retained, at: now)

        case .brainRecord(let record):
            readRecord(record, topic: topic, payload: payload, retained: retained)

        case .customer(let store, let client):
            readCustomer(store: store, client: client, topic: topic, payload: payload, retained: retained)

        case .gatewayCalibration(let gateway):
            readCalibration(gateway, topic: topic, payload: payload, retained: retained)

        case .gatewayStatus(let gateway):
            switch String(decoding: payload, as: UTF8.self) {
            case "online":
                if !retained { recovery.gatewayIsLive(gateway, at: now) }
                handle(presence.gatewayStatus(gateway, online: true), at: now)
                // A gateway back after an outage waits for us, subscribed, to ask for the
                // reports it kept (GatewayEngine.connected); retained, it is one we read back
                // after our own reconnect. A gateway that does not wait ignores it.
                out.messages.append(MQTTMessage(topic: topics.commands(ofGateway: gateway), text: #"{"reports":"send"}"#,
                                                qos: 1, retain: false))
            case "offline" where isSettled && retained:
                // Read back after a reconnect: perhaps the mass will of a broker's shutdown.
                // Its views wait for the gateway to come back (or the reconnect grace).
                recovery.retainedOffline(gateway: gateway, views: presence.beacons.values.filter { $0.views[gateway] != nil }.map(\.ref))
            case "offline" where isSettled && recovery.hold(offlineGateway: gateway, at: now):
                presence.gatewayDisconnected(gateway)
                note(.info, "gateway offline: dropping its views unless it is back within the grace",
                     ["gateway": gateway, "grace": "\(recovery.settings.offlineGrace)"])
            case "offline":
                dropGateway(gateway, at: now)
            case "": break
            default: malformed(.gatewayStatus, topic, "expected online or offline")
            }
            if isSettled, let major = directory.store(ofGateway: gateway) {
                bridgeChanged(bridges.gatewayStatus(gateway, store: major), at: now)
            }

        case .bridgeStatus(let major):
            guard directory.handles(store: major) else {
                counters.foreign += 1
                return
            }
            let text = String(decoding: payload, as: UTF8.self)
            guard text == "1" || text == "0" else {
                if !payload.isEmpty { malformed(.bridgeStatus, topic, "expected 1 or 0 (Mosquitto's bridge notification)") }
                return
            }
            if isSettled {
                bridgeChanged(bridges.status(major, connected: text == "1", live: !retained, at: now), at: now)
            } else {
                bridges.remember(major, connected: text == "1", live: !retained)
            }

        case .observerStatus(let client):
            switch String(decoding: payload, as: UTF8.self) {
            case "online":
                offlineObservers.remove(client)
                if !retained { recovery.observerIsLive(client, at: now) }
            case "offline" where isSettled && retained:
                recovery.retainedOffline(observer: client, joins: observers.joins(ofClient: client).map(\.key))
            case "offline" where isSettled && recovery.hold(offlineObserver: client, at: now):
                break
            case "offline" where isSettled:
                endJoins(of: client, at: now)
            case "offline":
                offlineObservers.insert(client)
            case "": break
            default: malformed(.observerStatus, topic, "expected online or offline")
            }

        case .fleetConfig:
            guard !payload.isEmpty else { return }
            let document: JSONValue
            do {
                document = try JSONParser(maxDepth: 64).parse(payload)
            } catch {
                return rejectConfig([error.description], at: now)
            }
            do {
                let new = try FleetConfig.parse(document)
                // The retained config comes again on every reconnect: only a change is news.
                if new != config { applyConfig(new, origin: "fleet/config", at: now) }
            } catch {
                rejectConfig(error.errors.map(\.description), at: now)
            }

        case .roster(let store):
            guard readingBack, retained, directory.handles(store: store), !payload.isEmpty else { return }
            guard let json = json(payload, .roster, topic) else {
                known[topic] = ""
                return
            }
            do {
                known[topic] = try Roster(parsing: json).json(at: nil)
            } catch {
                known[topic] = ""
                malformed(.roster, topic, error.reason)
            }

        case .gatewayHealth, .gatewayCommand, .gatewayEvents, .inbox, .brainStatus, .brainEvents, .brainHealth,
             .brainSync, .shardStatus, .shardHolder, .shardSync:
            unknownTopic(topic)
        }
    }

    /// A topic about one beacon, iBeacon (`beacons/<major>/<minor>…`) or Eddystone-UID
    /// (`eddystone/<namespace>/<instance>…`): both families are handled alike.
    mutating func routeBeacon(_ ref: BeaconRef, _ about: Topics.BeaconTopic, topic: String, payload: [UInt8],
                                      retained: Bool, at now: Instant) {
        switch about {
        case .sighting, .zoneEvents:
            // Not subscribed: the brain hears gateways through their RSSI reports, and writes
            // its zone decisions itself.
            unknownTopic(topic)

        case .gatewayPresence(let gateway):
            guard owned(ref) else { return }
            if !retained { recovery.gatewayIsLive(gateway, at: now) }
            if payload.isEmpty {
                handle(presence.gatewayPresenceDeleted(ref, gateway: gateway), at: now)
                recovery.viewEnded(ref, gateway: gateway)
                return
            }
            // Left behind by a gateway found offline after a reconnect: only it can say.
            if retained, isSettled, recovery.ignoresRetained(fromGateway: gateway) { return }
            guard let json = json(payload, .gatewayPresence, topic) else { return }
            do {
                let report = try GatewayPresenceReport(parsing: json, topic: ref, gateway: gateway)
                // A broker that lost a delete brings back a visit that ended: no new visit.
                if retained, presence[ref] == nil, stalePresence.isStale(report) {
                    note(.info, "ignored retained presence of a visit that ended", ["beacon": "\(ref)", "gateway": gateway])
                    return
                }
                stalePresence.took(report)
                handle(presence.gatewayPresence(report, retained: retained, at: now), at: now)
                // A gateway without reports changes its view's class with no event of the fleet's.
                if isSettled, proximityRoster.isActive { observeProximity([ref], at: now) }
                if presence[ref]?.views[gateway] != nil { recovery.confirmView(ref, gateway: gateway, live: !retained) }
                if presence[ref] != nil { dirtyPresence.insert(ref) }
            } catch {
                malformed(.gatewayPresence, topic, error.reason)
            }

        case .observer(let client):
            let key = ObserverJoin.Key(beacon: ref, client: client)
            guard owned(key.beacon) else { return }
            if !retained {
                offlineObservers.remove(client)
                recovery.observerIsLive(client, at: now)
            }
            if payload.isEmpty {
                if isSettled {
                    leave(key, deleteTopic: false, at: now)
                    recovery.joinEnded(key)
                } else {
                    pendingJoins[key] = nil
                    pendingErrors[key] = nil
                }
                return
            }
            let request: JoinRequest
            do {
                request = try JoinRequest(parsing: payload)
            } catch {
                malformed(.join, topic, error.reason)
                reject(key, reason: error.reason, at: now)
                return
            }
            let fingerprint = JoinRequest.fingerprint(payload)
            if isSettled {
                join(key, request, fingerprint: fingerprint, at: now)
            } else {
                pendingJoins[key] = (request, fingerprint)
                pendingErrors[key] = nil
            }

        case .fleetPresence:
            guard readingBack, retained, owned(ref), !payload.isEmpty else { return }
            guard let json = json(payload, .fleetPresence, topic) else { return }
            do {
                let report = try FleetPresenceReport(parsing: json, topic: ref)
                if !isSettled { retainedPresence[ref] = report }
                known[topic] = report.signature
            } catch {
                known[topic] = ""
                malformed(.fleetPresence, topic, error.reason)
            }

        case .ad:
            guard readingBack, retained, owned(ref), !payload.isEmpty else { return }
            known[topic] = String(decoding: payload, as: UTF8.self)

        case .telemetry:
            guard owned(ref), directory.isRegistered(ref), !payload.isEmpty else { return }
            guard let json = json(payload, .telemetry, topic), case .object(let o) = json else { return }
            let millivolts: Int? = switch o["batteryMv"] {
            case .number(let mv)? where mv == mv.rounded() && (1...65535).contains(mv): Int(mv)
            case .null?, nil: nil
            default: -1
            }
            guard millivolts != -1 else {
                malformed(.telemetry, topic, "batteryMv must be mV (1-65535) or null")
                return
            }
            if isSettled { telemetry(of: ref, millivolts: millivolts) } else { pendingTelemetry[ref] = millivolts }
        }
    }

    mutating func readRecord(_ record: Topics.BrainRecordTopic, topic: String, payload: [UInt8], retained: Bool) {
        let ref: BeaconRef = switch record {
        case .visit(let ref), .answered(let ref, _), .health(let ref): ref
        }
        if case .health = record {
            // Unsealed (the fleet page reads it): at worst a forged one dates a last sighting wrong.
            guard readingBack, retained, owned(ref), !payload.isEmpty else { return }
            guard let json = json(payload, .record, topic) else {
                known[topic] = ""
                return
            }
            do {
                let value = try BeaconHealth.Record(parsing: json)
                beaconHealth.restore(value, of: ref)
                known[topic] = String(decoding: payload, as: UTF8.self)
            } catch {
                known[topic] = ""
                malformed(.record, topic, error.reason)
            }
            return
        }
        // After settling the brain is the authority on its records; what comes back is its own
        // echo, or (read back after a reconnect) only tells what the broker holds.
        guard readingBack, retained, owned(ref), !payload.isEmpty, let opened = opened(payload, topic: topic) else { return }
        guard let json = json(Array(opened.utf8), .record, topic) else {
            known[topic] = ""
            return
        }
        do {
            switch record {
            case .visit(let ref):
                let value = try VisitRecord(parsing: json)
                if !isSettled { visitRecords[ref] = value }
                known[topic] = value.json
            case .answered(let ref, let client):
                let value = try AnsweredRecord(parsing: json)
                if !isSettled { answeredRecords[ObserverJoin.Key(beacon: ref, client: client)] = value }
                known[topic] = value.json
            case .health:
                break
            }
        } catch {
            known[topic] = ""
            malformed(.record, topic, error.reason)
        }
    }

    /// The record under this brain's seal (`RecordSeal`), or `nil` for one it did not seal:
    /// forged, or written under another key. That one is ignored, logged, reported on
    /// `brain/events`, and (its `known` signature emptied) replaced or deleted by what the
    /// brain knows once the retained state is in.
    mutating func opened(_ payload: [UInt8], topic: String) -> String? {
        if let opened = recordSeal.open(String(decoding: payload, as: UTF8.self), topic: topic) { return opened }
        known[topic] = ""
        note(.warning, "ignored a record without this brain's seal (brain-secret)", ["topic": String(topic.prefix(200))])
        reportRejected("record", topic: topic, reason: "not sealed with this brain's key (brain-secret): ignored")
        return nil
    }

    /// A customer topic of ours on the broker (read back while settling): a proximity visit
    /// carries on from it, so only a sealed one is trusted.
    mutating func readCustomer(store: UInt16, client: String, topic: String, payload: [UInt8], retained: Bool) {
        guard readingBack, retained, directory.handles(store: store), !payload.isEmpty,
              let opened = opened(payload, topic: topic) else { return }
        guard let json = json(Array(opened.utf8), .roster, topic) else {
            known[topic] = ""
            return
        }
        do {
            let customer = try Roster.Customer(parsing: json)
            known[topic] = customer.json.jsonText
            if !isSettled { retainedCustomers[RosterBook.Key(store: store, client: client)] = customer }
        } catch {
            known[topic] = ""
            malformed(.roster, topic, error.reason)
        }
    }

    mutating func owned(_ ref: BeaconRef) -> Bool {
        if owns(ref) { return true }
        counters.foreign += 1
        return false
    }

    /// A gateway's RSSI report, read straight from the bytes when it is in the plain form
    /// gateways write (`RSSIReport(decoding:topic:)`); otherwise parsed the general way, which
    /// says why a payload is refused (counted as malformed). `nil`: refused.
    mutating func rssiReport(_ payload: [UInt8], gateway: String, topic: String) -> RSSIReport? {
        // The report nests three levels: the general parse refuses it under a lower limit.
        if limits.maxDepth >= 3, let report = payload.withUnsafeBytes({ RSSIReport(decoding: $0, topic: gateway) }) {
            return report
        }
        guard let json = json(payload, .rssiReport, topic) else { return nil }
        do {
            return try RSSIReport(parsing: json, topic: gateway)
        } catch {
            malformed(.rssiReport, topic, error.reason)
            return nil
        }
    }

    mutating func json(_ payload: [UInt8], _ kind: BrainCounters.Input, _ topic: String) -> JSONValue? {
        do {
            return try JSONParser(maxDepth: limits.maxDepth).parse(payload)
        } catch {
            malformed(kind, topic, error.description)
            return nil
        }
    }

    mutating func malformed(_ kind: BrainCounters.Input, _ topic: String, _ reason: String) {
        counters.malformed[kind, default: 0] += 1
        note(.debug, "ignored a malformed payload", ["topic": String(topic.prefix(200)), "reason": String(reason.prefix(300))])
        reportRejected(kind.rawValue, topic: topic, reason: reason)
    }

    mutating func unknownTopic(_ topic: String) {
        counters.unknownTopics += 1
        note(.debug, "ignored a topic outside the contract", ["topic": String(topic.prefix(200))])
        reportRejected("topic", topic: topic, reason: "not a topic of the contract")
    }

    /// `brain/events`: `{"event":"rejected","kind","topic","reason","bytes","ts"}`, rate-limited
    /// (see `RejectionReports`). Every rejected input is also counted in `counters`.
    mutating func reportRejected(_ kind: String, topic: String, reason: String) {
        for text in rejections.report(kind: kind, topic: topic, reason: reason, bytes: inputBytes, at: lastTime) {
            event(text)
        }
    }
}

public import BeaconKit
public import Contract
import Config
import Tracking

/// Routing what arrives: each topic of the contract to the part that handles it; malformed and
/// foreign input counted and reported.
/// Part of `BrainCore`, split by concern (see BrainCore.swift for why its state is internal).
extension BrainCore {
    /// How this brain decodes what it receives: its prefix, its limits.
    public var decoder: Inbound.Decoder {
        Inbound.Decoder(topics: topics, maxDepth: limits.maxDepth, maxPayload: limits.maxPayload,
                        maxConfigPayload: limits.maxConfigPayload)
    }

    /// One MQTT message. `retained`: the broker delivered it from its store (state from
    /// before this connection) rather than as it was published.
    public mutating func receive(topic: String, payload: [UInt8], retained: Bool, at now: CaptureTime) -> BrainOutput {
        receive(decoder.decode(topic: topic, payload: payload, retained: retained), at: now)
    }

    /// One MQTT message whose topic is already parsed (`topics.parse(topic)`, kept from
    /// `lane(of:payloadIsEmpty:)`).
    public mutating func receive(topic: String, kind: Topics.Kind?, payload: [UInt8], retained: Bool, at now: CaptureTime) -> BrainOutput {
        receive(decoder.decode(topic: topic, kind: kind, payload: payload, retained: retained), at: now)
    }

    /// One message, decoded (`Inbound.decode`, with `decoder`'s limits), to the part that
    /// handles it.
    public mutating func receive(_ inbound: Inbound, at now: CaptureTime) -> BrainOutput {
        counters.received += 1
        lastTime = max(lastTime, now)
        inputBytes = inbound.payload.count
        route(inbound, at: now)
        return finish(at: now)
    }

    /// Asks a gateway for the reports it kept (`{"reports":"send"}`), or for those after a
    /// capture time again (`GatewayEngine.brainReady(resendingAfter:)`), on its command topic.
    mutating func askForReports(_ gateway: String, after: CaptureTime?) {
        out.messages.append(MQTTMessage(topic: topics.commands(ofGateway: gateway),
                                        text: GatewayCommand.sendReports(after: after).json, qos: 1, retain: false))
    }

    /// The gateways whose reports asked for again never came within the wait
    /// (`FleetPresence.takeUnansweredResends`). Called at the brain's tick (`advance`), not per
    /// report: a wait ended by a report is named at most one tick later.
    mutating func noteUnansweredResends() {
        for gateway in presence.takeUnansweredResends() {
            note(.warning, "a gateway did not send its reports again within the wait: what it held back is decided without them",
                 ["gateway": gateway, "waited": "\(Int(FleetPresence.resendWait)) s"])
        }
    }

    mutating func route(_ inbound: Inbound, at now: CaptureTime) {
        let topic = inbound.topic, payload = inbound.payload, retained = inbound.retained
        switch inbound.message {
        case .rssiReport(let gateway, let body):
            guard var report = read(body, .rssiReport, topic) else { return }
            recovery.gatewayIsLive(gateway, at: Self.runningClock(now))
            if bridges.awaitsAnyStatus, isSettled, !retained, let major = directory.store(ofGateway: gateway) {
                bridgeChanged(bridges.heard(fromStore: major), at: now)
            }
            // Calibration learns from the report as the gateway sent it; the zone fusion
            // takes it corrected by the gateway's learned offset.
            for record in calibrator.learn(from: report) { calibrated(record) }
            report = calibrator.corrected(report)
            // Every store's beacons are in a report: this brain takes its own.
            if !stores.isEmpty { report.entries.removeAll { !owns($0.beacon) } }
            handle(presence.report(report, receivedAt: Self.runningClock(now), holding: holdsView), at: now)
            for (gateway, after) in presence.takeResendRequests() {
                note(.info, "a hole in a gateway's reports: asking it to send them again",
                     ["gateway": gateway, "after": after.iso8601, "next": report.from.iso8601])
                askForReports(gateway, after: after)
            }
            for gap in presence.takeGaps() {
                note(.warning, "a gateway's reports missed a span of capture time: decided as unknown, not as silence",
                     ["gateway": gap.gateway, "from": gap.from.iso8601, "to": gap.to.iso8601])
                event(gap.event)
            }
            // Each entry a look-up of its beacon, copied out: only while views wait for it.
            if recovery.awaitsViews {
                for entry in report.entries where presence[entry.beacon]?.views[gateway] != nil {
                    recovery.confirmView(entry.beacon, gateway: gateway, live: true)
                }
            }

        case .gatewayPresence(let ref, let gateway, let body):
            gatewayPresence(ref, gateway: gateway, body, topic: topic, retained: retained, at: now)

        case .join(let ref, let client, let body):
            join(ObserverJoin.Key(beacon: ref, client: client), body, topic: topic, payload: payload, retained: retained, at: now)

        case .fleetPresence(let ref, let body):
            guard readingBack, retained, owned(ref), body != .empty else { return }
            switch body {
            case .value(let report):
                if !isSettled { retainedPresence[ref] = report }
                known[topic] = report.signature
            case .invalid(let reason):
                known[topic] = ""
                malformed(.fleetPresence, topic, reason)
            case .empty: break
            }

        case .ad(let ref):
            guard readingBack, retained, owned(ref), !payload.isEmpty else { return }
            known[topic] = String(decoding: payload, as: UTF8.self)

        case .telemetry(let ref, let body):
            guard owned(ref), directory.isRegistered(ref), let telemetry = read(body, .telemetry, topic) else { return }
            if isSettled {
                self.telemetry(of: ref, millivolts: telemetry.batteryMillivolts)
            } else {
                pendingTelemetry[ref] = telemetry.batteryMillivolts
            }

        case .visitRecord(let ref, let body):
            readRecord(ref, client: nil, body, topic: topic, retained: retained)

        case .answeredRecord(let ref, let client, let body):
            readRecord(ref, client: client, body, topic: topic, retained: retained)

        case .beaconHealth(let ref, let body):
            // Unsealed (the fleet page reads it): at worst a forged one dates a last sighting wrong.
            guard readingBack, retained, owned(ref), body != .empty else { return }
            switch body {
            case .value(let value):
                beaconHealth.restore(value, of: ref)
                known[topic] = String(decoding: payload, as: UTF8.self)
            case .invalid(let reason):
                known[topic] = ""
                malformed(.record, topic, reason)
            case .empty: break
            }

        case .customer(let store, let client, _):
            readCustomer(store: store, client: client, topic: topic, payload: payload, retained: retained)

        case .gatewayCalibration(let gateway, _):
            readCalibration(gateway, topic: topic, payload: payload, retained: retained)

        case .gatewayStatus(let gateway, let body):
            switch body {
            case .value(.online):
                if !retained {
                    recovery.gatewayIsLive(gateway, at: Self.runningClock(now))
                    presence.gatewayIsBack(gateway)
                }
                handle(presence.gatewayStatus(gateway, online: true), at: now)
                // A gateway back after an outage waits for us, subscribed, to ask for the
                // reports it kept (GatewayEngine.connected); retained, it is one we read back
                // after our own reconnect: we name the capture time we have its reports up
                // to, and a gateway that stayed connected sends again those it sent after it,
                // to no one while we were away (FleetPresence.resendAfter). A gateway that
                // neither waits nor is asked for anything ignores it.
                askForReports(gateway, after: presence.resendAfter(gateway))
            case .value(.offline) where isSettled && retained:
                // Read back after a reconnect: perhaps the mass will of a broker's shutdown.
                // Its views wait for the gateway to come back (or the reconnect grace).
                recovery.retainedOffline(gateway: gateway, views: presence.beacons.values.filter { $0.views[gateway] != nil }.map(\.ref))
            case .value(.offline) where isSettled && recovery.hold(offlineGateway: gateway, at: Self.runningClock(now)):
                presence.gatewayDisconnected(gateway)
                note(.info, "gateway offline: dropping its views unless it is back within the grace",
                     ["gateway": gateway, "grace": "\(recovery.settings.offlineGrace)"])
            case .value(.offline):
                dropGateway(gateway, at: now)
            case .empty: break
            case .invalid(let reason): malformed(.gatewayStatus, topic, reason)
            }
            if isSettled, let major = directory.store(ofGateway: gateway) {
                bridgeChanged(bridges.gatewayStatus(gateway, store: major), at: now)
            }

        case .bridgeStatus(let major, let body):
            guard directory.handles(store: major) else {
                counters.foreign += 1
                return
            }
            guard let connected = read(body, .bridgeStatus, topic) else { return }
            if isSettled {
                bridgeChanged(bridges.status(major, connected: connected, live: !retained, at: now), at: now)
            } else {
                bridges.remember(major, connected: connected, live: !retained)
            }

        case .observerStatus(let client, let body):
            switch body {
            case .value(.online):
                offlineObservers.remove(client)
                if !retained { recovery.observerIsLive(client, at: Self.runningClock(now)) }
            case .value(.offline) where isSettled && retained:
                recovery.retainedOffline(observer: client, joins: observers.joins(ofClient: client).map(\.key))
            case .value(.offline) where isSettled && recovery.hold(offlineObserver: client, at: Self.runningClock(now)):
                break
            case .value(.offline) where isSettled:
                endJoins(of: client, at: now)
            case .value(.offline):
                offlineObservers.insert(client)
            case .empty: break
            case .invalid(let reason): malformed(.observerStatus, topic, reason)
            }

        case .fleetConfig(let body):
            switch body {
            case .value(let document):
                do {
                    let new = try FleetConfig.parse(document)
                    // The retained config comes again on every reconnect: only a change is news.
                    if new != config { applyConfig(new, origin: "fleet/config", at: now) }
                } catch {
                    rejectConfig(error.errors.map(\.description), at: now)
                }
            case .invalid(let reason): rejectConfig([reason], at: now)
            case .empty: break
            }

        case .roster(let store, let body):
            guard readingBack, retained, directory.handles(store: store), body != .empty else { return }
            switch body {
            case .value(let roster): known[topic] = roster.json(at: nil)
            case .invalid(let reason):
                known[topic] = ""
                malformed(.roster, topic, reason)
            case .empty: break
            }

        case .refused(.oversized(let kind, let bytes, let limit)):
            counters.oversized += 1
            note(.debug, "dropped an oversized payload", ["topic": String(topic.prefix(200)), "bytes": "\(bytes)"])
            let reason = Inbound.Refusal.oversized(kind, bytes: bytes, limit: limit).reason
            reportRejected("oversized", topic: topic, reason: reason)
            if kind == .fleetConfig {
                counters.configsRejected += 1
                report(.rejected(errors: ["fleet/config: " + reason]), origin: "fleet/config", at: now)
                note(.error, "rejected an oversized fleet config; keeping the last good one", ["bytes": "\(bytes)"])
            }
            if case let .beacon(ref, .observer(client))? = kind, owns(ref) {
                reject(ObserverJoin.Key(beacon: ref, client: client),
                       reason: "join payload of \(bytes) bytes exceeds \(limits.maxPayload)", at: now)
            }

        case .refused(.unknownTopic), .gatewayHealth, .gatewayCommand, .brainStatus, .other:
            // Sightings and zone decisions are not subscribed: the brain hears gateways
            // through their RSSI reports, and writes its zone decisions itself.
            unknownTopic(topic)
        }
    }

    /// A gateway's retained view of a beacon (`beacons/…/presence/<gateway>`); empty when
    /// the beacon left it.
    mutating func gatewayPresence(_ ref: BeaconRef, gateway: String, _ body: Inbound.Body<GatewayPresenceReport>, topic: String,
                                  retained: Bool, at now: CaptureTime) {
        guard owned(ref) else { return }
        if !retained { recovery.gatewayIsLive(gateway, at: Self.runningClock(now)) }
        if body == .empty {
            handle(presence.gatewayPresenceDeleted(ref, gateway: gateway), at: now)
            recovery.viewEnded(ref, gateway: gateway)
            return
        }
        // Left behind by a gateway found offline after a reconnect: only it can say.
        if retained, isSettled, recovery.ignoresRetained(fromGateway: gateway) { return }
        guard let report = read(body, .gatewayPresence, topic) else { return }
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
    }

    /// An observer's join (`beacons/…/observers/<client>`); empty when it leaves.
    mutating func join(_ key: ObserverJoin.Key, _ body: Inbound.Body<JoinRequest>, topic: String, payload: [UInt8],
                       retained: Bool, at now: CaptureTime) {
        guard owned(key.beacon) else { return }
        if !retained {
            offlineObservers.remove(key.client)
            recovery.observerIsLive(key.client, at: Self.runningClock(now))
        }
        switch body {
        case .empty:
            if isSettled {
                leave(key, deleteTopic: false, at: now)
                recovery.joinEnded(key)
            } else {
                pendingJoins[key] = nil
                pendingErrors[key] = nil
            }
        case .invalid(let reason):
            malformed(.join, topic, reason)
            reject(key, reason: reason, at: now)
        case .value(let request):
            let fingerprint = JoinRequest.fingerprint(payload)
            if isSettled {
                join(key, request, fingerprint: fingerprint, at: now)
            } else {
                pendingJoins[key] = (request, fingerprint)
                pendingErrors[key] = nil
            }
        }
    }

    /// A sealed record of the brain's own (`brain/visits/…`, or `brain/answered/…` with the
    /// client): after settling the brain is the authority on its records; what comes back is
    /// its own echo, or (read back after a reconnect) only tells what the broker holds.
    mutating func readRecord(_ ref: BeaconRef, client: String?, _ body: Inbound.Body<String>, topic: String, retained: Bool) {
        guard readingBack, retained, owned(ref), case .value(let sealed) = body,
              let opened = opened(Array(sealed.utf8), topic: topic) else { return }
        guard let json = json(Array(opened.utf8), .record, topic) else {
            known[topic] = ""
            return
        }
        do {
            if let client {
                let value = try AnsweredRecord(parsing: json)
                if !isSettled { answeredRecords[ObserverJoin.Key(beacon: ref, client: client)] = value }
                known[topic] = value.json
            } else {
                let value = try VisitRecord(parsing: json)
                if !isSettled { visitRecords[ref] = value }
                known[topic] = value.json
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

    /// The value of a body, or `nil` (counted as malformed when invalid, ignored when empty).
    mutating func read<Value>(_ body: Inbound.Body<Value>, _ kind: BrainCounters.Input, _ topic: String) -> Value? {
        switch body {
        case .value(let value): return value
        case .empty: return nil
        case .invalid(let reason):
            malformed(kind, topic, reason)
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
        for rejected in rejections.report(kind: kind, topic: topic, reason: reason, bytes: inputBytes, at: Self.runningClock(lastTime)) {
            event(rejected)
        }
    }
}

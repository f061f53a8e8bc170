import BeaconKit
import Contract
import Config
import Tracking

/// The fleet presence's events (enter, exit, zone, proximity, update), the views a reconnect did
/// not confirm, stores whose bridge is down, calibration records and the registry beacons' health.
/// Part of `BrainCore`, split by concern (see BrainCore.swift for why its state is internal).
extension BrainCore {
    mutating func handle(_ events: [FleetEvent], at now: CaptureTime) {
        defer {
            if isSettled, proximityRoster.isActive, !events.isEmpty { observeProximity(Set(events.map(\.beacon)), at: now) }
            // A registry beacon's arrival and departure date its last sighting at once.
            let moved = events.compactMap { event -> BeaconRef? in
                switch event {
                case .enter(let ref): ref
                case .exit(let beacon): beacon.ref
                default: nil
                }
            }
            if !moved.isEmpty { checkBeaconHealth(Set(moved), at: now) }
        }
        var resumed: Set<BeaconRef> = []
        for event in events {
            let ref = event.beacon
            switch event {
            case .enter:
                dirtyVisits.insert(ref)
                dirtyPresence.insert(ref)
                if isSettled, let held = heldVisits.removeValue(forKey: ref) {
                    // A visit held while its store was unknown goes on: no enter rules.
                    restore(held.rules, for: RuleEngine.Scope(beacon: ref))
                    presence.restore(ref, since: held.since, zone: nil)
                    resumed.insert(ref)
                } else if isSettled {
                    let scope = RuleEngine.Scope(beacon: ref)
                    if lingering.remove(scope) != nil { _ = rules.retire(scope, at: now) }
                    runRules(.enter, beacon: ref, fleet: presence[ref], since: presence[ref]?.since ?? now, at: now)
                }
            case .exit(let last):
                recovery.beaconLeft(ref)
                dirtyVisits.insert(ref)
                dirtyPresence.insert(ref)
                if isSettled {
                    runRules(.exit, beacon: ref, fleet: last, since: last.since, at: now)
                    let scope = RuleEngine.Scope(beacon: ref)
                    if rules.retire(scope, at: now) { lingering.insert(scope) }
                    visitEnded(ref, at: now)
                }
            case .zoneChanged:
                dirtyPresence.insert(ref)
                dirtyVisits.insert(ref)
            case .viewsChanged:
                dirtyPresence.insert(ref)
            case .proximity(_, _, let to):
                dirtyPresence.insert(ref)
                if isSettled, to != .unknown, !resumed.contains(ref), let fleet = presence[ref] {
                    runRules(.proximity(to), beacon: ref, fleet: fleet, since: fleet.since, at: now)
                }
            case .update(_, let proximity, let captured):
                guard isSettled else { break }
                if !rules.update(ref, proximity: proximity).isEmpty { dirtyVisits.insert(ref) }
                if !resumed.contains(ref), let fleet = presence[ref] {
                    runRules(.update, beacon: ref, fleet: fleet, since: fleet.since, at: now, captured: captured)
                }
            }
        }
        // The zone decisions with their capture times (dropped while collecting: the brain
        // says nothing before it has settled).
        for decision in presence.takeDecisions() where isSettled {
            out.messages.append(MQTTMessage(topic: topics.zoneEvents(of: decision.beacon), text: decision.json,
                                            qos: 1, retain: false))
        }
    }

    mutating func dropGateway(_ gateway: String, at now: CaptureTime) {
        note(.info, "gateway offline: dropping its views", ["gateway": gateway])
        handle(presence.gatewayStatus(gateway, online: false), at: now)
    }

    mutating func apply(_ due: ConnectionRecovery.Due, at now: CaptureTime) {
        for gateway in due.offlineGateways { dropGateway(gateway, at: now) }
        for client in due.offlineObservers { endJoins(of: client, at: now) }
        let (bridges, storeOf) = (self.bridges, viewStore)
        for (ref, gateway) in due.views where !bridges.isUnknown(storeOf(ref, gateway)) {
            // (A view of a store that is cut off waits for its store: see `bridgeChanged`.)
            // One its gateway's reports keep ends by their silence, in capture time.
            if presence.reportsKeep(ref, gateway: gateway) { continue }
            note(.info, "a view not seen again after the reconnect ends", ["beacon": "\(ref)", "gateway": gateway])
            handle(presence.endView(ref, gateway: gateway), at: now)
        }
        for key in due.joins {
            note(.info, "a join not seen again after the reconnect ends", ["beacon": "\(key.beacon)", "client": key.client])
            leave(key, deleteTopic: false, at: now)
        }
    }

    /// The bridged stores this brain handles, with their gateways.
    func bridgedStores(_ config: FleetConfig) -> [UInt16: Set<String>] {
        var bridged: [UInt16: Set<String>] = [:]
        for store in config.bridgedStores where directory.handles(store: store.major) {
            bridged[store.major] = Set(config.gateways(ofStore: store.major).map(\.id))
        }
        return bridged
    }

    /// Whether a beacon's view from a gateway is held (its store's bridge is down): its
    /// silence says nothing, so it neither ends nor lets the beacon exit.
    var holdsView: (BeaconRef, String) -> Bool {
        guard !bridges.unknownStores.isEmpty else { return { _, _ in false } }
        let (bridges, storeOf) = (self.bridges, viewStore)
        return { ref, gateway in bridges.isUnknown(storeOf(ref, gateway)) }
    }

    /// The store a gateway's view comes from (`BeaconDirectory.viewStore`).
    var viewStore: @Sendable (BeaconRef, String) -> UInt16? { directory.viewStore }

    mutating func bridgeChanged(_ change: StoreBridges.Change, at now: CaptureTime) {
        switch change {
        case .none:
            break
        case .lost(let major):
            note(.notice, "store bridge down: holding the store's presence until it is back", ["store": "\(major)"])
        case .healing(let major):
            note(.info, "store bridge up: reading what changed", ["store": "\(major)"])
            // What its gateways sent while it was down, or into a connection the centre had
            // lost without telling, is asked for again (`FleetPresence.storeReconnected`).
            presence.storeReconnected(bridges.gateways(ofStore: major), at: Self.runningClock(now))
        case .found(let major):
            note(.info, "store bridge came back while the brain was away", ["store": "\(major)"])
        case .heard(let major):
            note(.info, "store bridge status not read yet, its gateways heard live: taking the bridge as up", ["store": "\(major)"])
        case .reconciled(let major, let since):
            // The replay is in: views it did not confirm are gone, held visits without a view end.
            let storeOf = viewStore
            let dropped = presence.dropViews { ref, view in storeOf(ref, view.gateway) == major && view.lastUpdate < since }
            handle(dropped, at: now)
            var ended = 0
            for (ref, record) in heldVisits.sorted(by: { $0.key < $1.key }) where store(of: ref) == major {
                heldVisits[ref] = nil
                if presence[ref] == nil {
                    endVisit(ref, record, at: now)
                    ended += 1
                }
            }
            note(.notice, "store bridge back: presence reconciled", [
                "store": "\(major)", "exits": "\(dropped.filter { if case .exit = $0 { true } else { false } }.count)",
                "heldVisitsEnded": "\(ended)",
            ])
        }
    }

    /// A visit that ended while no brain saw it (or while its store was unknown): its exit
    /// rules, and its record and fleet presence go.
    mutating func endVisit(_ ref: BeaconRef, _ record: VisitRecord, at now: CaptureTime) {
        let scope = RuleEngine.Scope(beacon: ref)
        restore(record.rules, for: scope)
        if let since = record.since {
            runRules(.exit, beacon: ref, fleet: nil, since: since, at: now)
        }
        if rules.retire(scope, at: now) { lingering.insert(scope) }
        dirtyVisits.insert(ref)
        dirtyPresence.insert(ref)
        visitEnded(ref, at: now)
    }

    /// A calibration record read back (retained): a restarted brain applies what it had
    /// learned, if it sealed it. Records of gateways another brain calibrates (`--stores`)
    /// are that brain's to check.
    mutating func readCalibration(_ gateway: String, topic: String, payload: [UInt8], retained: Bool) {
        guard readingBack, retained, !payload.isEmpty else { return }
        guard calibrator.calibrates(gateway) else {
            known[topic] = String(decoding: payload, as: UTF8.self)
            return
        }
        guard let opened = opened(payload, topic: topic) else { return }
        known[topic] = opened
        guard let json = json(Array(opened.utf8), .record, topic) else { return }
        do {
            calibrator.restore(try CalibrationRecord(parsing: json, topic: gateway))
        } catch {
            known[topic] = ""
            malformed(.record, topic, error.reason)
        }
    }

    /// The retained calibration records as the calibrator has them: applied ones written,
    /// those of gateways this brain calibrates but no longer corrects deleted.
    mutating func syncCalibration() {
        let seal = recordSeal
        for (gateway, record) in calibrator.applied.sorted(by: { $0.key < $1.key }) {
            let text = record.json, topic = topics.calibration(ofGateway: gateway)
            setRetained(topic, signature: text) { seal.seal(text, topic: topic) }
        }
        for topic in known.topics {
            guard case .gatewayCalibration(let gateway)? = topics.parse(topic), calibrator.applied[gateway] == nil,
                  stores.isEmpty || calibrator.calibrates(gateway) else { continue }
            setRetained(topic, signature: nil) { "" }
        }
    }

    /// New values applied for a gateway: the retained record, a log line and an event.
    mutating func calibrated(_ record: CalibrationRecord) {
        let text = record.json, topic = topics.calibration(ofGateway: record.gateway), seal = recordSeal
        setRetained(topic, signature: text) { seal.seal(text, topic: topic) }
        var metadata = ["gateway": record.gateway, "rssiOffset": fixed(record.rssiOffset, places: 1),
                        "pathLossExponent": fixed(record.pathLossExponent, places: 2), "samples": "\(record.samples)",
                        "residual": fixed(record.residual, places: 1)]
        if let before = record.before {
            metadata["was"] = fixed(before.rssiOffset, places: 1) + " dB, n " + fixed(before.pathLossExponent, places: 2)
        }
        if record.pinned { metadata["pinned"] = "rssiOffset set in the config" }
        note(.info, "calibrated a gateway from reference beacons", metadata)
        event(.calibration(record))
    }

    /// The registry's beacons this brain handles, against the fleet presence: records
    /// written where they changed, records of beacons gone from the registry deleted.
    mutating func checkBeaconHealth(_ only: Set<BeaconRef>? = nil, at now: CaptureTime) {
        guard isSettled else { return }
        let all = directory.ownBeacons
        let beacons = only.map { only in all.filter(only.contains) } ?? all
        guard !beacons.isEmpty else { return }
        let present = presence.beacons
        let (changed, reports) = beaconHealth.check(beacons, isPresent: { present[$0] != nil },
                                                    missingAfter: config.brain.missingAfter, at: now)
        for ref in changed { writeHealth(ref) }
        for report in reports { health(report, at: now) }
        guard only == nil else { return }
        for ref in beaconHealth.keep(only: Set(all)) { setRetained(topics.beaconHealth(of: ref), signature: nil) { "" } }
    }

    mutating func telemetry(of ref: BeaconRef, millivolts: Int?) {
        let (changed, report) = beaconHealth.telemetry(of: ref, millivolts: millivolts, lowBattery: config.brain.lowBattery)
        if changed { writeHealth(ref) }
        if let report { health(report, at: lastTime) }
    }

    mutating func writeHealth(_ ref: BeaconRef) {
        guard let record = beaconHealth.records[ref] else { return }
        let text = record.json(beacon: ref, name: entry(ref)?.name)
        setRetained(topics.beaconHealth(of: ref), signature: text) { text }
    }

    /// `brain/events`: `battery-low` or `beacon-missing` (Contract's `BrainEvent`).
    mutating func health(_ report: BeaconHealth.Report, at now: CaptureTime) {
        switch report {
        case .batteryLow(let ref, let millivolts, let threshold):
            note(.warning, "a beacon's battery is low", ["beacon": "\(ref)", "battery": "\(millivolts) mV"])
            event(.batteryLow(ref, name: entry(ref)?.name, millivolts: millivolts, threshold: threshold, at: now))
        case .missing(let ref, let lastSeen, let seconds):
            note(.warning, "a registry beacon has not been seen", ["beacon": "\(ref)", "seconds": "\(Int(seconds))"])
            event(.beaconMissing(ref, name: entry(ref)?.name, lastSeen: lastSeen, seconds: seconds, at: now))
        }
    }
}

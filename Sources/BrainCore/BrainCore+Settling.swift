public import BeaconKit
import Contract
import Config
import Tracking

/// Settling from the retained state, at start and after a reconnect (see the type's documentation).
/// Part of `BrainCore`, split by concern (see BrainCore.swift for why its state is internal).
extension BrainCore {
    /// The retained messages are in: reconcile them and start answering (see the type's
    /// documentation). Calling it again does nothing.
    public mutating func settle(at now: CaptureTime) -> BrainOutput {
        guard !isSettled else {
            if recovery.isReadingBack { readBackComplete(at: now) }
            return finish(at: now)
        }
        isSettled = true
        bridges.settle(at: now)

        // Visits the records show as answered carry on silently.
        var begun: [BeaconRef] = []
        for ref in presence.beacons.keys.sorted() {
            let record = visitRecords[ref]
            if let record { restore(record.rules, for: RuleEngine.Scope(beacon: ref)) }
            // With a key only the sealed record is trusted: anyone may write the fleet presence.
            let trusted = recordSeal.isOn ? nil : retainedPresence[ref]
            if let since = record?.since ?? trusted?.since {
                presence.restore(ref, since: since, zone: record?.zone ?? trusted?.zone)
            } else {
                // Begun while no brain ran: dated by its evidence (capture time), not by now.
                presence.restore(ref, since: nil, zone: nil)
                begun.append(ref)
            }
            dirtyVisits.insert(ref)
            dirtyPresence.insert(ref)
        }

        // Joins: carry on the answered ones, answer the new ones, close the ended ones.
        for (key, pending) in pendingJoins.sorted(by: { $0.key < $1.key }) {
            let record = answeredRecords[key]
            let scope = RuleEngine.Scope(beacon: key.beacon, client: key.client)
            if let record { restore(record.rules, for: scope) }
            if offlineObservers.contains(key.client) {
                // The observer died while no brain ran: its join ends now.
                deleteJoinTopic(key)
                if record?.join != nil, let since = record?.since {
                    let join = ObserverJoin(key: key, profile: pending.request.profile, since: since,
                                            fingerprint: pending.fingerprint)
                    counters.leaves += 1
                    runRules(.leave, beacon: key.beacon, join: join, at: now)
                }
                if rules.retire(scope, at: now) { lingering.insert(scope) }
                dirtyJoins.insert(key)
            } else if let record, record.join != nil {
                let join = ObserverJoin(key: key, profile: pending.request.profile, since: record.since ?? now,
                                        fingerprint: pending.fingerprint)
                observers.insert(join)
                dirtyJoins.insert(key)
                touchRoster(key)
            } else if allowJoin(key, at: now), permitted(key, at: now) {
                accept(key, pending.request, fingerprint: pending.fingerprint, at: now)
            }
        }
        for (key, record) in answeredRecords.sorted(by: { $0.key < $1.key }) where pendingJoins[key] == nil {
            let scope = RuleEngine.Scope(beacon: key.beacon, client: key.client)
            restore(record.rules, for: scope)
            if record.join != nil, let since = record.since {
                // Left while no brain ran.
                counters.leaves += 1
                runRules(.leave, beacon: key.beacon,
                         join: ObserverJoin(key: key, profile: nil, since: since, fingerprint: record.join ?? ""), at: now)
            }
            if rules.retire(scope, at: now) { lingering.insert(scope) }
            dirtyJoins.insert(key)
        }

        // Visits begun or ended while no brain ran, now that the observers are known.
        for ref in begun {
            var events: [FleetEvent] = [.enter(ref)]
            if let proximity = presence[ref]?.proximity, proximity != .unknown {
                events.append(.proximity(ref, from: .unknown, to: proximity))
            }
            handle(events, at: now)
        }
        for (ref, record) in visitRecords.sorted(by: { $0.key < $1.key }) where presence[ref] == nil {
            if record.since != nil, bridges.isUnknown(store(of: ref)) {
                // Its store's bridge is down: the visit may well go on.
                heldVisits[ref] = record
                continue
            }
            endVisit(ref, record, at: now)
        }

        // Proximity rosters: visits on the broker carry on while their beacon is still there.
        if proximityRoster.isActive {
            for (key, customer) in retainedCustomers.sorted(by: { $0.key < $1.key })
            where joinPolicy.owner(of: customer.beacon) == key.client && owns(customer.beacon) {
                proximityRoster.resume(ProximityRoster.Visit(beacon: customer.beacon, client: key.client,
                                                             profile: entry(customer.beacon)?.profile, since: customer.since),
                                       store: key.store)
                dirtyCustomers.insert(key)
            }
            observeProximity(Set(presence.beacons.keys).union(proximityRoster.visits.map { $0.visit.beacon }), at: now)
        }
        retainedCustomers = [:]
        for (ref, millivolts) in pendingTelemetry.sorted(by: { $0.key < $1.key }) { telemetry(of: ref, millivolts: millivolts) }
        pendingTelemetry = [:]
        checkBeaconHealth(at: now)

        for (key, reason) in pendingErrors.sorted(by: { $0.key < $1.key }) {
            inbox(key.client, .error(beacon: key.beacon, reason: reason), at: now)
            if observers[key] == nil { deleteJoinTopic(key) }
        }
        markLeftovers()
        syncCalibration()
        visitRecords = [:]
        answeredRecords = [:]
        retainedPresence = [:]
        pendingJoins = [:]
        pendingErrors = [:]
        offlineObservers = []
        syncAds()
        note(.info, "settled from retained state", [
            "beacons": "\(presence.beacons.count)", "joins": "\(observers.count)",
        ])
        return finish(at: now)
    }

    /// The broker connection is back after being lost. A brain that had settled keeps its
    /// state: it is the authority on what it answered, and the broker may have lost its
    /// records (a broker without persistence) or hold stale ones. It reads the retained
    /// state again while handling what comes live, and `settle` ends the read-back: then it
    /// republishes whatever of its retained topics the broker lacks, and visits and joins
    /// not seen again end once their gateways and observers are back (`ConnectionRecovery`).
    /// A brain that had not settled yet starts its collection again.
    public mutating func reconnect(at now: CaptureTime) -> BrainOutput {
        guard isSettled else {
            var fresh = BrainCore(config: config, stores: stores, limits: limits)
            fresh.recordSeal = recordSeal
            fresh.proofSecrets = proofSecrets
            fresh.counters = counters
            fresh.recovery = ConnectionRecovery(settings: recovery.settings)
            fresh.asksForLostReports = asksForLostReports
            self = fresh
            return BrainOutput()
        }
        recovery.reconnected(views: presence.beacons.mapValues { Array($0.views.keys) },
                             joins: Array(observers.joins.keys))
        presence.reconnected(at: Self.runningClock(now), patience: recovery.settings.reconnectGrace)
        bridges.reconnected()
        known.reconnected()
        note(.info, "reconnected; reading the retained state back",
             ["beacons": "\(presence.beacons.count)", "joins": "\(observers.count)"])
        return finish(at: now)
    }

    /// The broker connection dropped (`ConnectionRecovery.connectionLost`): the last wills
    /// it held are not acted on.
    public mutating func connectionLost() {
        recovery.connectionLost()
    }

    /// The end of a read-back after a reconnect: every retained topic of ours is checked
    /// against what the broker holds (`known`).
    mutating func readBackComplete(at now: CaptureTime) {
        recovery.readBackComplete(at: Self.runningClock(now))
        known.readBackComplete()
        // A bridged store whose status the broker no longer holds (it lost its retained
        // messages) is unknown until its bridge says 1 again.
        for change in bridges.readBackComplete() { bridgeChanged(change, at: now) }
        for ref in presence.beacons.keys {
            dirtyVisits.insert(ref)
            dirtyPresence.insert(ref)
        }
        for scope in lingering { markRecordDirty(scope) }
        for key in observers.joins.keys {
            dirtyJoins.insert(key)
            touchRoster(key)
        }
        for (store, _) in rosterBook.stores { dirtyStores.insert(store) }
        for (store, visit) in proximityRoster.visits { dirtyCustomers.insert(RosterBook.Key(store: store, client: visit.client)) }
        markLeftovers()
        syncCalibration()
        rosterDue = [:]
        syncAds()
        let pending = recovery.pending
        note(.info, "read the retained state back", ["unconfirmedViews": "\(pending.views)", "unconfirmedJoins": "\(pending.joins)"])
    }

    /// Whatever of ours the broker holds gets checked, so leftovers are deleted.
    mutating func markLeftovers() {
        for topic in known.topics {
            switch topics.parse(topic) {
            case .beacon(let ref, .fleetPresence)?: dirtyPresence.insert(ref)
            case .roster(let store)?: dirtyStores.insert(store)
            case .customer(let store, let client)?: dirtyCustomers.insert(RosterBook.Key(store: store, client: client))
            case .brainRecord(.visit(let ref))?: dirtyVisits.insert(ref)
            case .brainRecord(.answered(let ref, let client))?: dirtyJoins.insert(ObserverJoin.Key(beacon: ref, client: client))
            default: break
            }
        }
    }
}

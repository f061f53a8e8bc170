import BeaconKit
import Contract
import Config

/// Observers: joins answered, refused, throttled and ended; rosters touched.
/// Part of `BrainCore`, split by concern (see BrainCore.swift for why its state is internal).
extension BrainCore {
    /// The observer's last will: every join ends and its retained joins are deleted, so the
    /// profiles leave the broker.
    mutating func endJoins(of client: String, at now: CaptureTime) {
        let joins = observers.joins(ofClient: client)
        if !joins.isEmpty { note(.info, "observer offline: ending its joins", ["client": client, "joins": "\(joins.count)"]) }
        for join in joins { leave(join.key, deleteTopic: true, at: now) }
    }

    mutating func join(_ key: ObserverJoin.Key, _ request: JoinRequest, fingerprint: String, at now: CaptureTime) {
        if var existing = observers[key] {
            recovery.confirmJoin(key, live: true)
            guard existing.fingerprint != fingerprint else { return }
            // The same observer re-published its join (a new profile): no new ad.
            let since = existing.since
            guard allowJoin(key, at: now) else { return }
            existing = ObserverJoin(key: key, profile: request.profile, since: since, fingerprint: fingerprint)
            observers.insert(existing)
            dirtyJoins.insert(key)
            touchRoster(key)
            return
        }
        guard allowJoin(key, at: now), permitted(key, at: now) else { return }
        accept(key, request, fingerprint: fingerprint, at: now)
    }

    /// Whether `brain.joins` lets this client join this beacon now; otherwise it gets an
    /// error and its join leaves the broker (`JoinPolicy`).
    mutating func permitted(_ key: ObserverJoin.Key, at now: CaptureTime) -> Bool {
        guard let refusal = joinPolicy.refusal(client: key.client, beacon: key.beacon, store: store(of: key.beacon),
                                               presence: presence, viewStore: viewStore, at: now) else { return true }
        note(.info, "join refused", ["beacon": "\(key.beacon)", "client": key.client, "reason": refusal])
        reportRejected("join", topic: topics.observer(key.client, of: key.beacon), reason: refusal)
        reject(key, reason: refusal, at: now)
        return false
    }

    /// A visit ended (`owned-or-near`, `proof`): the joins of its beacon end, and so do its owner's
    /// joins of the store's beacons once none of the owner's beacons is in that store; their
    /// profiles leave the broker. (`open` joins last until the app leaves, its last will,
    /// or `brain.joinMaxAge`.)
    mutating func visitEnded(_ ref: BeaconRef, at now: CaptureTime) {
        guard joinPolicy.access != .open else { return }
        for join in observers.joins(of: ref) {
            leave(join.key, deleteTopic: true, told: "the visit of beacon \(ref) ended: it left the store", at: now)
        }
        guard let owner = joinPolicy.owner(of: ref) else { return }
        for join in observers.joins(ofClient: owner) where joinPolicy.owner(of: join.beacon) == nil
            && !joinPolicy.isNear(owner, store: store(of: join.beacon), presence: presence, viewStore: viewStore) {
            leave(join.key, deleteTopic: true,
                  told: "none of \(owner)'s beacons is in store \(store(of: join.beacon).map(String.init) ?? "?") any more", at: now)
        }
    }

    /// Joins older than `brain.joinMaxAge` end, whatever the app does: profiles do not stay
    /// on the broker for ever. Looked for once a second.
    mutating func endOldJoins(at now: CaptureTime) {
        guard now >= nextAgeCheck else { return }
        nextAgeCheck = now + 1
        let maxAge = config.brain.joinMaxAge
        for join in observers.joins.values.sorted(by: { $0.key < $1.key }) where now.seconds(since: join.since) >= maxAge {
            note(.info, "join ended: older than brain.joinMaxAge", ["beacon": "\(join.beacon)", "client": join.client])
            leave(join.key, deleteTopic: true,
                  told: "the join is older than brain.joinMaxAge (\(fixed(maxAge, places: 0)) s); join again to stay", at: now)
        }
        for key in proximityRoster.endVisits(olderThan: maxAge, at: now) {
            note(.info, "roster visit ended: older than brain.joinMaxAge", ["store": "\(key.store)", "client": key.client])
            dirtyCustomers.insert(key)
        }
    }

    mutating func accept(_ key: ObserverJoin.Key, _ request: JoinRequest, fingerprint: String, at now: CaptureTime) {
        let scope = RuleEngine.Scope(beacon: key.beacon, client: key.client)
        if lingering.remove(scope) != nil { _ = rules.retire(scope, at: now) }
        let join = ObserverJoin(key: key, profile: request.profile, since: now, fingerprint: fingerprint)
        observers.insert(join)
        counters.joinsAccepted += 1
        inbox(key.client, .ad(beacon: key.beacon, ad: ad(of: key.beacon), rule: nil), at: now)
        runRules(.join, beacon: key.beacon, join: join, at: now)
        dirtyJoins.insert(key)
        touchRoster(key)
        note(.debug, "join answered", ["beacon": "\(key.beacon)", "client": key.client])
    }

    /// `told`: why the brain ended the join, said to the app on its inbox (`left`); `nil`
    /// when the app left itself or is offline.
    mutating func leave(_ key: ObserverJoin.Key, deleteTopic: Bool, told reason: String? = nil, at now: CaptureTime) {
        guard let join = observers.remove(key) else { return }
        if let reason { inbox(key.client, .left(beacon: key.beacon, reason: reason), at: now) }
        counters.leaves += 1
        runRules(.leave, beacon: key.beacon, join: join, at: now)
        let scope = RuleEngine.Scope(beacon: key.beacon, client: key.client)
        if rules.retire(scope, at: now) { lingering.insert(scope) }
        if deleteTopic { deleteJoinTopic(key) }
        dirtyJoins.insert(key)
        touchRoster(key)
    }

    /// Deletes a join the observer can no longer delete itself, so its profile leaves the broker.
    mutating func deleteJoinTopic(_ key: ObserverJoin.Key) {
        out.messages.append(MQTTMessage(topic: topics.observer(key.client, of: key.beacon), text: "", qos: 1, retain: true))
    }

    /// The client may make this join (new, or a changed profile) within its rate; otherwise
    /// it gets an error and nothing changes.
    mutating func allowJoin(_ key: ObserverJoin.Key, at now: CaptureTime) -> Bool {
        guard !joinLimiter.allow(key.client, at: Self.runningClock(now)) else { return true }
        counters.joinsThrottled += 1
        let reason = "too many joins from \(key.client): at most \(limits.joinBurst) at once, then one every "
            + "\(fixed(limits.joinInterval, places: 1)) s; publish the join again later"
        reportRejected("join", topic: topics.observer(key.client, of: key.beacon), reason: reason)
        reject(key, reason: reason, at: now)
        return false
    }

    /// A client's roster entry in the store of `key`'s beacon is to be checked.
    mutating func touchRoster(_ key: ObserverJoin.Key) {
        // An Eddystone beacon of no store has no roster.
        guard let store = store(of: key.beacon) else { return }
        dirtyCustomers.insert(RosterBook.Key(store: store, client: key.client))
    }

    /// Customer beacons (registry beacons with an `owner`) as the gateways see them now, for
    /// the stores whose roster is driven by proximity; a beacon that is nobody's any more, or
    /// no longer this brain's, leaves them.
    mutating func observeProximity(_ refs: Set<BeaconRef>, at now: CaptureTime) {
        let storeOf = viewStore
        for ref in refs.sorted() {
            guard let owner = joinPolicy.owner(of: ref), owns(ref) else {
                for key in proximityRoster.forget(ref) { dirtyCustomers.insert(key) }
                continue
            }
            let views = presence[ref].map { Array($0.views.values) } ?? []
            for key in proximityRoster.observe(ref, owner: owner, profile: entry(ref)?.profile, views: views,
                                               storeOf: { storeOf(ref, $0) }, at: now) {
                dirtyCustomers.insert(key)
            }
        }
    }

    /// An oversized, malformed, throttled or refused join: an error to the observer, and a
    /// join that was not one already leaves the broker (its profile and photo with it).
    mutating func reject(_ key: ObserverJoin.Key, reason: String, at now: CaptureTime) {
        counters.joinsRejected += 1
        if isSettled {
            inbox(key.client, .error(beacon: key.beacon, reason: reason), at: now)
            if observers[key] == nil { deleteJoinTopic(key) }
        } else {
            pendingErrors[key] = reason
        }
    }
}

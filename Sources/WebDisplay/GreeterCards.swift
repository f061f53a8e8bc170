public import BeaconKit
public import Contract

/// The cards of the greeter display, one per customer on a store's roster, kept steady the
/// way a shopkeeper expects: a customer whose tag drops out for a moment is the same card
/// with the same "in store since" when it is heard again.
///
/// A customer who leaves the roster while their beacon is (or was, less than `hold` seconds
/// ago) in range is *held*: shown as before, `away` set, for `hold` seconds (the store's
/// exit timeout). A proximity roster lets a customer go after `leaveAfter` (3 s) and an app
/// that leaves at `far` rejoins a moment later, and neither is the customer leaving the
/// shop. Back on the roster within the hold, the card carries on; otherwise it goes. In the
/// same way a tag unheard for less than `hold` still counts as in range. A customer who was
/// not in range (an app user whose tag is not in the store) goes as soon as the join ends:
/// there is no visit to keep steady.
///
/// Pure: the roster, whether a customer's beacon is heard and the time are passed in.
public struct GreeterCards: Sendable, Equatable {
    public struct Card: Sendable, Equatable {
        public var customer: Roster.Customer
        /// When this visit began: the earliest roster `since` seen during it (a rejoin after
        /// a drop-out does not restart it).
        public var inStoreSince: CaptureTime
        /// Shown in the store: heard there now, or less than `hold` seconds ago.
        public var inRange: Bool
        /// Heard in the store when last looked at.
        var heard: Bool
        /// When it was last heard in the store, by the display's clock.
        var lastHeard: WallTime?
        /// When the customer left the roster while in range; the card is held until `hold`
        /// has passed since then (the display's clock). `nil` while on the roster.
        public var away: WallTime?
    }

    private(set) var stores: [UInt16: [String: Card]] = [:]

    public init() {}

    /// Brings one store's cards in line with its roster (`present`) at `now`; returns whether
    /// anything shown changed.
    @discardableResult
    public mutating func reconcile(store: UInt16, present: [Roster.Customer], heard: (Roster.Customer) -> Bool,
                                   hold: Double, at now: WallTime) -> Bool {
        let before = stores[store] ?? [:]
        var cards = before
        var listed: Set<String> = []
        for customer in present {
            listed.insert(customer.client)
            var card = cards[customer.client]
                ?? Card(customer: customer, inStoreSince: customer.since, inRange: false, heard: false, lastHeard: nil, away: nil)
            card.customer = customer
            card.inStoreSince = min(card.inStoreSince, customer.since)
            card.away = nil
            // Heard until now when heard before: the presence is there until its end arrives.
            if card.heard { card.lastHeard = now }
            card.heard = heard(customer)
            if card.heard { card.lastHeard = now }
            card.inRange = card.heard || card.lastHeard.map { now.seconds(since: $0) < hold } ?? false
            cards[customer.client] = card
        }
        for (client, card) in cards where !listed.contains(client) && card.away == nil {
            if card.inRange {
                cards[client]?.away = now
            } else {
                cards[client] = nil
            }
        }
        stores[store] = cards.isEmpty ? nil : cards
        return cards != before
    }

    /// Ends the holds that have lasted `hold(store)` seconds by `now` (cards off the roster
    /// go; tags unheard that long are no longer in range); returns the stores whose display
    /// changed.
    public mutating func expire(hold: (UInt16) -> Double, at now: WallTime) -> Set<UInt16> {
        var changed: Set<UInt16> = []
        for (store, cards) in stores {
            let limit = hold(store)
            for (client, card) in cards {
                if let away = card.away, now.seconds(since: away) >= limit {
                    stores[store]?[client] = nil
                    changed.insert(store)
                } else if card.away == nil, card.inRange, !card.heard,
                          card.lastHeard.map({ now.seconds(since: $0) >= limit }) ?? true {
                    stores[store]?[client]?.inRange = false
                    changed.insert(store)
                }
            }
            if stores[store]?.isEmpty == true { stores[store] = nil }
        }
        return changed
    }

    /// Whether a hold is running (the server then checks the holds as time passes).
    public var holding: Bool {
        stores.values.contains { $0.values.contains { $0.away != nil || ($0.inRange && !$0.heard) } }
    }

    /// A store's cards, oldest visit first.
    public func cards(inStore store: UInt16) -> [Card] {
        (stores[store] ?? [:]).values.sorted { ($0.inStoreSince, $0.customer.client) < ($1.inStoreSince, $1.customer.client) }
    }
}

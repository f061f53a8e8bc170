import BeaconKit
public import Contract
import Config

/// Who is in each store, read from whatever the brain publishes for the greeter: the
/// retained summary on `stores/<store>/roster`, and, when the brain writes them, one
/// retained topic per customer, `stores/<store>/customers/<client>` (empty = left).
///
/// The one place that knows how the roster is published: a change to that contract is a
/// change here. Once a store has shown a per-customer topic, its per-customer topics are
/// the truth (the summary may be bounded); before that, the summary is.
public struct CustomerBook: Sendable, Equatable {
    var summaries: [UInt16: Roster] = [:]
    var individual: [UInt16: [String: Roster.Customer]] = [:]

    public init() {}

    /// The filters that deliver everything the book reads.
    public static func subscriptions(_ topics: Topics) -> [String] {
        [topics.rosterFilter(ofStore: nil), topics.customersFilter(ofStore: nil)]
    }

    public enum Update: Sendable, Equatable {
        /// The store whose customers changed (or may have).
        case changed(store: UInt16)
        case malformed
        /// Not a roster topic.
        case ignored
    }

    /// Applies one message; `segments` are the topic's levels after the prefix.
    public mutating func receive(segments s: [Substring], payload: [UInt8]) -> Update {
        guard s.count >= 3, s[0] == "stores", let store = UInt16(s[1]), String(store) == s[1] else { return .ignored }
        switch (s.count, s[2]) {
        case (3, "roster"):
            if payload.isEmpty {
                summaries[store] = nil
                return .changed(store: store)
            }
            guard let value = try? JSONParser(maxDepth: 8).parse(payload),
                  let roster = try? Roster(parsing: value), roster.store == store else { return .malformed }
            summaries[store] = roster
            return .changed(store: store)
        case (4, "customers"):
            let client = String(s[3])
            if payload.isEmpty {
                individual[store, default: [:]][client] = nil
                return .changed(store: store)
            }
            // One customer has the shape of a summary's entry: parsed as a summary of one.
            guard let value = try? JSONParser(maxDepth: 8).parse(payload),
                  let roster = try? Roster(parsing: .object(["store": .number(Double(store)), "name": .null,
                                                              "customers": .array([value])])),
                  let customer = roster.customers.first, customer.client == client else { return .malformed }
            individual[store, default: [:]][client] = customer
            return .changed(store: store)
        default:
            return .ignored
        }
    }

    /// The customers present in `store`, oldest arrival first.
    public func customers(inStore store: UInt16) -> [Roster.Customer] {
        if let list = individual[store] {
            return list.values.sorted { ($0.since, $0.client) < ($1.since, $1.client) }
        }
        return summaries[store]?.customers ?? []
    }

    /// Every customer present anywhere, by store.
    public var stores: Set<UInt16> { Set(summaries.keys).union(individual.keys) }

    /// The store's name as the brain published it.
    public func name(ofStore store: UInt16) -> String? { summaries[store]?.name }
}


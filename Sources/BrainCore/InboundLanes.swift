/// What waits for the brain, in two lanes, so that a flood of joins from observers the
/// brain does not know cannot keep the others waiting (docs/PERFORMANCE.md, section 4).
///
/// Every message reaches the brain over one connection, in the order the broker took them;
/// handled in that order, a registry owner's join waits behind every join published before
/// it. So the brain sorts what arrives (`BrainCore.lane(of:payloadIsEmpty:)`): the *first*
/// lane holds everything it must not keep waiting (gateways, config, everything of a
/// registry owner, the joins of observers it has already answered); the *deferred* lane
/// holds the other messages of observers, where a flood of made-up names lands. It takes
/// from the first lane while that holds anything.
///
/// Only under a backlog: while fewer than `deferAbove` messages wait, the brain keeps up and
/// nothing is deferred, so everything is handled in arrival order as by a single lane (an
/// app's join and the gateway report that came after it keep their order).
///
/// Under a backlog (more than `newestFirstAbove` deferred) the deferred lane serves the
/// newest observer first (adaptive LIFO, as servers do under overload): an app that joins
/// while thousands of flood joins wait is answered at once instead of after all of them,
/// and the old ones are still answered, later. Below it, arrival order.
///
/// What stays in order:
/// - the first lane: arrival order;
/// - each observer: arrival order. Once an observer has a message in the deferred lane, its
///   later messages follow it there whatever lane they asked for, and the deferred lane
///   takes an observer's messages oldest first, so a join and then a leave of one observer
///   are never swapped;
/// - a barrier (a connection change, the brain's sync marker) is taken after everything that
///   arrived before it and before everything that arrives after it: it moves whatever the
///   deferred lane holds to the end of the first lane (in arrival order), and follows it.
///
/// Bounded: past `limit` waiting, a new message is refused (`push` returns false) unless it
/// is a barrier.
///
/// Inlinable, so the service that holds it (`BrainService`, a lane of its own `Arrival`s)
/// gets code specialised for its element: across the module boundary a generic type runs
/// unspecialised, looking its element's metadata and value witnesses up at run time, which
/// was 4 % of the live brain's instructions (docs/PERFORMANCE.md, section 11).
public struct InboundLanes<Element> {
    @usableFromInline
    struct Entry {
        @usableFromInline var element: Element
        @usableFromInline var observer: String?

        @inlinable
        init(element: Element, observer: String?) {
            self.element = element
            self.observer = observer
        }
    }

    @usableFromInline var first = LaneQueue<Entry>()
    /// The deferred lane by arrival number; `oldest` and `newest` bound the numbers in it.
    @usableFromInline var deferred: [Int: Entry] = [:]
    @usableFromInline var oldest = 0
    @usableFromInline var newest = -1
    /// Each observer's deferred arrival numbers, oldest first.
    @usableFromInline var waiting: [String: LaneQueue<Int>] = [:]
    public let limit: Int
    public let deferAbove: Int
    public let newestFirstAbove: Int

    @inlinable
    public init(limit: Int, deferAbove: Int = 64, newestFirstAbove: Int = 64) {
        self.limit = max(1, limit)
        self.deferAbove = max(0, deferAbove)
        self.newestFirstAbove = max(0, newestFirstAbove)
    }

    /// Messages waiting in both lanes.
    @inlinable
    public var count: Int { first.count + deferred.count }
    /// Messages waiting in the deferred lane.
    @inlinable
    public var deferredCount: Int { deferred.count }

    /// Queues `element` in the lane it asks for, or behind what must come before it.
    /// `observer`: the observer it belongs to (a join, a leave, a status), if any.
    @discardableResult @inlinable
    public mutating func push(_ element: Element, lane: InboundLane, observer: String? = nil) -> Bool {
        guard lane == .barrier || count < limit else { return false }
        let entry = Entry(element: element, observer: observer)
        // No backlog: arrival order.
        let lane = lane == .deferred && count < deferAbove ? .first : lane
        switch lane {
        case .first where observer.map({ waiting[$0] == nil }) ?? true:
            first.append(entry)
        case .barrier:
            for number in oldest...max(oldest, newest) {
                if let waited = deferred[number] { first.append(waited) }
            }
            deferred = [:]
            waiting = [:]
            oldest = newest + 1
            first.append(entry)
        case .first, .deferred:
            newest += 1
            if deferred.isEmpty { oldest = newest }
            deferred[newest] = entry
            if let observer { waiting[observer, default: LaneQueue()].append(newest) }
        }
        return true
    }

    /// The message to handle next: the oldest of the first lane; else (`takingDeferred`) the
    /// oldest deferred, or under a backlog the oldest of the observer that arrived last.
    @inlinable
    public mutating func next(takingDeferred: Bool = true) -> Element? {
        if let entry = first.removeFirst() { return entry.element }
        guard takingDeferred, !deferred.isEmpty else { return nil }
        var number: Int
        if deferred.count > newestFirstAbove {
            // Numbers above the newest left are free again: an arrival takes `newest + 1`.
            while deferred[newest] == nil { newest -= 1 }
            number = newest
            if let observer = deferred[newest]?.observer, let theirs = waiting[observer]?.peek { number = theirs }
        } else {
            while deferred[oldest] == nil { oldest += 1 }
            number = oldest
        }
        guard let entry = deferred.removeValue(forKey: number) else { return nil }
        if let observer = entry.observer {
            _ = waiting[observer]?.removeFirst()
            if waiting[observer]?.isEmpty == true { waiting[observer] = nil }
        }
        // A flood is over: what it took goes back (a dictionary keeps its capacity).
        if deferred.isEmpty && deferred.capacity > 1_024 {
            deferred = [:]
            waiting = [:]
        }
        return entry.element
    }
}

/// Where a message asks to wait (`InboundLanes`).
public enum InboundLane: Sendable, Equatable {
    /// Ahead of the deferred lane.
    case first
    /// Behind the first lane: an observer the brain does not know.
    case deferred
    /// After everything that came before it (the deferred lane too), before everything after it.
    case barrier
}

extension InboundLanes: Sendable where Element: Sendable {}
extension InboundLanes.Entry: Sendable where Element: Sendable {}

/// A queue over an array: appends at the end, takes from a moving head, and compacts once
/// the taken part is the larger half, so a long flood costs no per-message shifting.
@usableFromInline
struct LaneQueue<Item> {
    @usableFromInline var items: [Item] = []
    @usableFromInline var head = 0

    @inlinable init() {}

    @inlinable var count: Int { items.count - head }
    @inlinable var isEmpty: Bool { head == items.count }
    /// The item `removeFirst` would return.
    @inlinable var peek: Item? { head < items.count ? items[head] : nil }

    @inlinable
    mutating func append(_ item: Item) {
        items.append(item)
    }

    @inlinable
    mutating func removeFirst() -> Item? {
        guard head < items.count else { return nil }
        let item = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: items.count <= 1_024)
            head = 0
        } else if head >= 1_024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return item
    }
}

extension LaneQueue: Sendable where Item: Sendable {}

import BeaconKit
import Contract
public import Config

/// Who answers for which shard of the fleet, from what the shards' brains say about
/// themselves (docs/fleet.md, "Brains in shards").
///
/// Every brain of a sharded fleet keeps `brain/shards/<name>/status` retained: `online`
/// while it runs, `offline` as its last will. When a shard is not online, the first shard
/// after it in the config's order (round the end) that is online answers for it too, and
/// says so in `brain/shards/<name>/holder`. A shard's own brain starts answering only when
/// no live brain holds it, so two brains never answer for the same store: the holder lets
/// go when the shard's brain is back, then clears the holder, then the shard's brain starts.
/// Every brain computes the same from the same retained messages. Pure: no I/O, no clock.
public struct ShardTable: Sendable, Equatable {
    public enum Status: String, Sendable, Equatable {
        case online, offline
    }

    public let shards: [BrainShard]
    /// This brain's shard.
    public let me: String
    public private(set) var statuses: [String: Status] = [:]
    /// Which shard's brain holds a shard it does not own.
    public private(set) var holders: [String: String] = [:]

    /// `me` must name one of `shards`.
    public init(shards: [BrainShard], me: String) {
        self.shards = shards
        self.me = me
    }

    public func shard(_ name: String) -> BrainShard? { shards.first { $0.name == name } }

    /// `brain/shards/<shard>/status`: `nil` when deleted or unreadable.
    public mutating func status(of shard: String, _ status: Status?) {
        guard self.shard(shard) != nil else { return }
        statuses[shard] = status
    }

    /// `brain/shards/<shard>/holder`: `nil` when nobody holds it.
    public mutating func holder(of shard: String, _ holder: String?) {
        guard self.shard(shard) != nil else { return }
        holders[shard] = holder.flatMap { $0.isEmpty ? nil : $0 }
    }

    private func isOnline(_ shard: String) -> Bool { shard == me || statuses[shard] == .online }

    /// Whether this brain may answer for its own shard: no other live brain holds it.
    public var mayRunOwnShard: Bool {
        guard let holder = holders[me], holder != me else { return true }
        return !isOnline(holder)
    }

    /// The shard that answers for `shard` now: itself when online, else the first online
    /// shard after it in config order.
    public func successor(of shard: String) -> String? {
        guard let index = shards.firstIndex(where: { $0.name == shard }) else { return nil }
        for step in 0..<shards.count {
            let candidate = shards[(index + step) % shards.count].name
            if isOnline(candidate) { return candidate }
        }
        return nil
    }

    /// The other shards this brain answers for now, in config order.
    public var covered: [String] {
        shards.map(\.name).filter { $0 != me && !isOnline($0) && successor(of: $0) == me }
    }
}

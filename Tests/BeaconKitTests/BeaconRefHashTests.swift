import BeaconKit
import Contract
import Testing

/// `BeaconRef` hashes an iBeacon in a table by a seeded mix of its one word, not SipHash
/// (`_rawHashValue(seed:)`): equal refs must hash alike, tables must find every ref, and a
/// chain's beacons must spread over the buckets.
@Suite struct BeaconRefHashTests {

    /// 1,000 stores of 50 beacons (major = store), the shape of the brain's tables.
    static let chain = (1...1000).flatMap { major in (1...50).map { BeaconRef(major: UInt16(major), minor: UInt16($0)) } }

    @Test func tablesFindEveryBeaconAndNoOther() {
        var table: [BeaconRef: Int] = [:]
        for (i, ref) in Self.chain.enumerated() { table[ref] = i }
        #expect(table.count == Self.chain.count)
        for (i, ref) in Self.chain.enumerated() { #expect(table[ref] == i) }
        #expect(table[BeaconRef(major: 1, minor: 51)] == nil)
        #expect(table[BeaconRef(major: 1001, minor: 1)] == nil)
        let eddystone = BeaconRef(namespace: EddystoneNamespace(high: 1, low: 0), instance: EddystoneInstance(rawValue: 1))
        #expect(table[eddystone] == nil, "an Eddystone beacon is not the iBeacon 0/0")
        table[eddystone] = -1
        table[BeaconRef(major: 0, minor: 0)] = -2
        #expect(table[eddystone] == -1)
        #expect(table[BeaconRef(major: 0, minor: 0)] == -2)
        #expect(Set(Self.chain + Self.chain).count == Self.chain.count)
    }

    @Test func equalRefsHashAlike() {
        for ref in Self.chain.prefix(500) {
            let copy = BeaconRef(major: ref.major, minor: ref.minor)
            #expect(copy.hashValue == ref.hashValue)
            for seed in [0, 1, 0x7FFF_0000_1234] { #expect(copy._rawHashValue(seed: seed) == ref._rawHashValue(seed: seed)) }
        }
    }

    /// 50,000 beacons in 65,536 buckets: with a uniform hash the fullest bucket holds about 8;
    /// the word itself (major << 16 | minor) masked to 16 bits would put a thousand in one.
    @Test func aChainSpreadsOverTheBuckets() {
        for seed in [0, 0x5555_0000, Int.max / 3] {
            var load = [Int](repeating: 0, count: 1 << 16)
            for ref in Self.chain { load[ref._rawHashValue(seed: seed) & 0xFFFF] += 1 }
            #expect(load.max()! <= 12, "seed \(seed): \(load.max()!) in one bucket")
            // And the high bits too (a table's bucket is taken from the low bits, but a weak mix shows there).
            var high = [Int](repeating: 0, count: 1 << 16)
            for ref in Self.chain { high[Int(UInt64(bitPattern: Int64(ref._rawHashValue(seed: seed))) >> 48)] += 1 }
            #expect(high.max()! <= 12, "seed \(seed): \(high.max()!) in one bucket (high bits)")
        }
    }
}

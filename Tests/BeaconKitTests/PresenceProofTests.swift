import BeaconKit
import Config
import Testing

/// A store's proof of presence (issue 18): a rotating value only someone hearing the store's
/// beacon now can know, derived from the store's secret and the time slot.
@Suite struct PresenceProofTests {
    static let proof = PresenceProof(secret: Array("the store secret of Main Street 100".utf8), slotSeconds: 30)
    /// 2026-11-21T09:00:00Z, the start of slot 59,841,720 of 30 s.
    static let nine = WallTime(iso8601: "2026-11-21T09:00:00.000Z")!

    @Test("the value is the first two bytes of HMAC-SHA256(secret, label, store, slot), as Python's hmac computes it")
    func knownValues() {
        // python3: hmac.new(secret, b"beaconbridge proof of presence" + store.to_bytes(2, "big")
        //                   + slot.to_bytes(8, "big", signed=True), hashlib.sha256).digest()[:2]
        #expect(Self.proof.slot(at: Self.nine) == 59_841_720)
        #expect(Self.proof.value(store: 100, slot: 59_841_720) == 20732)
        #expect(Self.proof.value(store: 100, slot: 59_841_719) == 17920)
        #expect(Self.proof.value(store: 100, slot: 59_841_721) == 5258)
        #expect(Self.proof.value(store: 9, slot: 59_841_720) == 40946, "each store its own value")
        #expect(Self.proof.value(store: 100, at: Self.nine + 29.999) == 20732)
        #expect(Self.proof.value(store: 100, at: Self.nine + 30) == 5258, "a new value every slot")
        #expect(Self.proof.nextSlotStart(after: Self.nine + 12) == Self.nine + 30)
        let other = PresenceProof(secret: Array("another store's secret, not ours".utf8), slotSeconds: 30)
        #expect(other.value(store: 100, at: Self.nine) != 20732, "another secret, another value")
    }

    @Test("accepted: the current slot's value and the previous one's (and the next's within the clock skew); nothing older")
    func acceptance() {
        let now = Self.nine + 10
        #expect(Self.proof.accepts(20732, store: 100, at: now))
        #expect(Self.proof.accepts(17920, store: 100, at: now), "read just before the slot changed")
        #expect(!Self.proof.accepts(Self.proof.value(store: 100, slot: 59_841_718), store: 100, at: now), "stale")
        #expect(!Self.proof.accepts(5258, store: 100, at: now), "the next slot's, 20 s early")
        #expect(Self.proof.accepts(5258, store: 100, at: Self.nine + 29), "the gateway's clock 1 s ahead")
        #expect(!Self.proof.accepts(20732, store: 9, at: now), "another store's value proves nothing")
        #expect(!Self.proof.accepts(20732, store: 100, at: Self.nine + 60), "two slots later it is stale")
    }

    @Test("stores[].proof and advertise.proof in the fleet config, and what is wrong with them")
    func config() throws {
        let uuid = "0CF052C2-97CA-407C-84F8-B62AAC4E9020"
        let config = try FleetConfig.parse("""
            {"gateways": [{"id": "counter", "advertise": {"uuid": "\(uuid)", "major": 9, "proof": true}}],
             "stores": [{"major": 9, "proof": {"secretFile": "/etc/beaconbridge/store-9.secret", "slotSeconds": 60}}]}
            """)
        #expect(config.brain.joins == .proof, "proof of presence is the default")
        #expect(config.stores[0].proof == ProofConfig(secretFile: "/etc/beaconbridge/store-9.secret", slotSeconds: 60))
        let advertise = try #require(config.gateways[0].advertise)
        #expect(advertise.proof)
        let proof = PresenceProof(secret: Array("0123456789abcdef".utf8), slotSeconds: 60)
        #expect(advertise.at(Self.nine, proof: proof).beacon.minor == proof.value(store: 9, at: Self.nine))
        #expect(advertise.at(Self.nine, proof: proof).beacon.major == 9)

        #expect(Self.configErrors("""
            {"gateways": [{"id": "counter", "advertise": {"uuid": "\(uuid)", "major": 9, "minor": 6, "proof": true}}],
             "stores": [{"major": 9, "proof": {"slotSeconds": 2}}]}
            """) == [
            #"gateways[0].advertise.minor: with "proof": true the minor is the store's rotating value; leave it out"#,
            "stores[0].proof.secretFile: is required",
            "stores[0].proof.slotSeconds: 2 is out of range 5…3600",
        ])
        #expect(Self.configErrors("""
            {"gateways": [{"id": "counter", "advertise": {"uuid": "\(uuid)", "major": 9, "proof": true}}]}
            """) == [#"gateways[0].advertise.proof: store 9 (its major) has no proof: give it "proof": {"secretFile": …} in stores[]"#])
    }

    static func configErrors(_ json: String) -> [String] {
        do {
            _ = try FleetConfig.parse(json)
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }
}

/// A store's proof of presence: a short-lived value that only someone hearing the store's
/// beacon now can know (in the spirit of Eddystone-EID).
///
/// A gateway that is also the store's beacon (`gateways[].advertise` with `"proof": true`)
/// advertises, as its iBeacon minor, `value(store:slot:)`: the first two bytes of
/// HMAC-SHA256 under the store's provisioned secret (`stores[].proof.secretFile`) of the
/// store's major and the time slot (`slotSeconds`, Unix time divided into slots). The value
/// changes every slot. An app that ranges the beacon joins the channel it hears,
/// `beacons/<major>/<value>`, and so quotes the value; the brain accepts the join while the
/// value is the current or the previous slot's (`accepts`). docs/security.md has the threat
/// model: a value replayed within its slot (and the next) or relayed from the store is
/// accepted; a stale or guessed one is not (a guess is right once in 32,768 tries).
public struct PresenceProof: Sendable, Equatable {
    /// Seconds a value lasts, unless the config says otherwise.
    public static let defaultSlotSeconds = 30
    /// Seconds a gateway's clock may run ahead of the brain's: a value of the next slot is
    /// accepted that close to it.
    public static let clockSkew = 2.0

    public let secret: [UInt8]
    public let slotSeconds: Int

    public init(secret: [UInt8], slotSeconds: Int = PresenceProof.defaultSlotSeconds) {
        self.secret = secret
        self.slotSeconds = max(1, slotSeconds)
    }

    /// The slot `time` falls in: whole slots since the Unix epoch. The gateway reads it by its
    /// wall clock, the brain by the capture time of what it checks; both are the same clock live.
    public func slot(at time: TimePoint<some TimeKind>) -> Int64 {
        let length = Int64(slotSeconds) * 1_000_000_000
        let t = time.nanoseconds
        return t >= 0 ? t / length : (t - length + 1) / length
    }

    /// When the slot after the one `time` falls in begins.
    public func nextSlotStart<Kind>(after time: TimePoint<Kind>) -> TimePoint<Kind> {
        TimePoint(nanoseconds: (slot(at: time) + 1) * Int64(slotSeconds) * 1_000_000_000)
    }

    /// The value of `store` in `slot`.
    public func value(store: UInt16, slot: Int64) -> UInt16 {
        var message = Array("beaconbridge proof of presence".utf8)
        message += [UInt8(store >> 8), UInt8(store & 0xFF)]
        for shift in stride(from: 56, through: 0, by: -8) { message.append(UInt8(truncatingIfNeeded: slot >> Int64(shift))) }
        let mac = HMACSHA256.mac(key: secret, message: message)
        return UInt16(mac[0]) << 8 | UInt16(mac[1])
    }

    /// The value of `store` at `time`.
    public func value(store: UInt16, at time: TimePoint<some TimeKind>) -> UInt16 { value(store: store, slot: slot(at: time)) }

    /// Whether `value` is `store`'s value now: of the slot of `time`, of the slot before
    /// (the app read it just before the slot changed), or of the next one within
    /// `clockSkew` of its start (the gateway's clock runs a little ahead).
    public func accepts(_ value: UInt16, store: UInt16, at time: TimePoint<some TimeKind>) -> Bool {
        let current = slot(at: time)
        if value == self.value(store: store, slot: current) || value == self.value(store: store, slot: current - 1) {
            return true
        }
        let ahead = slot(at: time + Self.clockSkew)
        return ahead != current && value == self.value(store: store, slot: ahead)
    }
}

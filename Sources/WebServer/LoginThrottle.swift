/// Slows password guessing: failed logins are counted per user name and per client
/// address; past `freeFailures` of either, that name (or address) may not try again for
/// a delay that doubles with every further failure (1 s, 2 s, 4 s … up to `maxDelay`).
///
/// A name is counted whether or not such a user exists, so the throttle tells a guesser
/// nothing about who does. A success clears its name and address; a key with no failure
/// for `forgetAfter` seconds is forgotten. Both tables are bounded (`maxKeys`): when one
/// is full the key that failed longest ago goes first.
///
/// Pure: the time (monotonic seconds) is passed in.
public struct LoginThrottle: Sendable {
    public struct Settings: Sendable, Equatable {
        /// Failures (per name, per address) answered without delay.
        public var freeFailures = 5
        /// The delay after the first failure past the free ones, in s; doubled with each further one.
        public var firstDelay = 1.0
        /// The longest delay, in s.
        public var maxDelay = 300.0
        /// A name or address with no failure for this long starts afresh, in s.
        public var forgetAfter = 900.0
        /// Names (and addresses) remembered at most.
        public var maxKeys = 10_000

        public init() {}
    }

    /// Why an attempt is refused before its password is checked, and for how long.
    public struct Refusal: Sendable, Equatable {
        /// Seconds until the next attempt is allowed (rounded up, at least 1).
        public var retryAfter: Int
        /// `"user"` or `"address"`: which limit was reached.
        public var limit: String

        public init(retryAfter: Int, limit: String) {
            self.retryAfter = retryAfter
            self.limit = limit
        }
    }

    struct Record: Sendable, Equatable {
        var failures = 0
        var lastFailure = 0.0
        var blockedUntil = 0.0
    }

    public let settings: Settings
    private(set) var users: [String: Record] = [:]
    private(set) var addresses: [String: Record] = [:]
    private var lastSweep = 0.0

    public init(settings: Settings = Settings()) { self.settings = settings }

    /// Names and addresses remembered now.
    public var trackedKeys: Int { users.count + addresses.count }

    /// `nil` when `user` from `address` may try now.
    public mutating func check(user: String, address: String, at now: Double) -> Refusal? {
        forgetStale(at: now)
        let wait = [("user", users[user]?.blockedUntil ?? 0), ("address", addresses[address]?.blockedUntil ?? 0)]
            .max { $0.1 < $1.1 }!
        guard wait.1 > now else { return nil }
        return Refusal(retryAfter: max(1, Int((wait.1 - now).rounded(.up))), limit: wait.0)
    }

    /// A wrong name or password: both counts grow, and past the free ones both wait.
    public mutating func failed(user: String, address: String, at now: Double) {
        Self.fail(&users, key: user, at: now, settings: settings)
        Self.fail(&addresses, key: address, at: now, settings: settings)
    }

    /// A login that worked: its name and address start afresh.
    public mutating func succeeded(user: String, address: String) {
        users[user] = nil
        addresses[address] = nil
    }

    static func fail(_ table: inout [String: Record], key: String, at now: Double, settings: Settings) {
        if table[key] == nil, table.count >= settings.maxKeys,
           let oldest = table.min(by: { $0.value.lastFailure < $1.value.lastFailure })?.key {
            table[oldest] = nil
        }
        var record = table[key] ?? Record()
        if now - record.lastFailure >= settings.forgetAfter && record.blockedUntil <= now { record = Record() }
        record.failures += 1
        record.lastFailure = now
        let over = record.failures - settings.freeFailures
        if over > 0 {
            let delay = min(settings.maxDelay, settings.firstDelay * Double(1 << min(over - 1, 30)))
            record.blockedUntil = max(record.blockedUntil, now + delay)
        }
        table[key] = record
    }

    /// Drops the keys past `forgetAfter`, at most once a minute (a sweep reads every key).
    mutating func forgetStale(at now: Double) {
        guard now - lastSweep >= 60 || lastSweep == 0 else { return }
        lastSweep = now
        let settings = settings
        func keep(_ record: Record) -> Bool { now - record.lastFailure < settings.forgetAfter || record.blockedUntil > now }
        users = users.filter { keep($0.value) }
        addresses = addresses.filter { keep($0.value) }
    }
}

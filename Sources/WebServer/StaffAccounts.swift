import HummingbirdBcrypt
import NIOPosix

/// The staff who may log in: a file of `name:bcrypt-hash` lines (the format of
/// `htpasswd -B`; `#` starts a comment), made with `beacon-web hash-password`.
/// Passwords are never stored, only their bcrypt hashes.
public struct StaffAccounts: Sendable, Equatable {
    public let hashes: [String: String]
    /// A hash that matches nothing, checked for unknown names so that a wrong name takes
    /// as long as a wrong password: made at the cost most of the real hashes have
    /// (`$2b$12$…` is cost 12, each step doubling the work).
    let decoy: String

    public struct FileError: Error, Sendable, Equatable, CustomStringConvertible {
        public var line: Int
        public var reason: String
        public var description: String { "line \(line): \(reason)" }

        public init(line: Int, reason: String) {
            self.line = line
            self.reason = reason
        }
    }

    public init(hashes: [String: String]) {
        self.hashes = hashes
        decoy = Self.decoy(like: hashes)
    }

    public static func == (a: StaffAccounts, b: StaffAccounts) -> Bool { a.hashes == b.hashes }

    /// Parses the file's text; every bad line is an error (a typo must not lock staff out silently).
    public init(parsing text: String) throws(FileError) {
        var hashes: [String: String] = [:]
        // Any line break (a file edited on Windows has CRLF, one Character in Swift).
        for (index, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let colon = line.firstIndex(of: ":") else {
                throw FileError(line: index + 1, reason: "expected name:hash")
            }
            let name = String(line[..<colon])
            let hash = String(line[line.index(after: colon)...])
            guard !name.isEmpty else { throw FileError(line: index + 1, reason: "the name is empty") }
            guard Self.isBcrypt(hash) else {
                throw FileError(line: index + 1,
                                reason: "\"\(name)\": not a bcrypt hash ($2a$/$2b$/$2y$…); make one with beacon-web hash-password")
            }
            guard hashes[name] == nil else { throw FileError(line: index + 1, reason: "\"\(name)\" is listed twice") }
            hashes[name] = hash
        }
        guard !hashes.isEmpty else { throw FileError(line: 0, reason: "no accounts: nobody could log in") }
        self.init(hashes: hashes)
    }

    static func isBcrypt(_ hash: String) -> Bool {
        let utf8 = Array(hash.utf8)
        guard utf8.count == 60, hash.hasPrefix("$2a$") || hash.hasPrefix("$2b$") || hash.hasPrefix("$2y$") else { return false }
        return utf8[6] == UInt8(ascii: "$") && cost(of: hash) != nil
    }

    /// The cost in a bcrypt hash (`$2b$12$…`: 12), 4-31.
    public static func cost(of hash: String) -> UInt8? {
        let utf8 = Array(hash.utf8)
        guard utf8.count >= 7, let cost = UInt8(String(decoding: utf8[4..<6], as: UTF8.self)),
              (4...31).contains(cost) else { return nil }
        return cost
    }

    /// The cost most of `hashes` have (the higher on a tie; 12, `hash-password`'s default,
    /// for none).
    public static func decoyCost(for hashes: [String: String]) -> UInt8 {
        var counts: [UInt8: Int] = [:]
        for hash in hashes.values { if let cost = cost(of: hash) { counts[cost, default: 0] += 1 } }
        return counts.max { ($0.value, $0.key) < ($1.value, $1.key) }?.key ?? 12
    }

    static func decoy(like hashes: [String: String]) -> String {
        Bcrypt.hash("decoy \(UInt64.random(in: 0...UInt64.max))", cost: decoyCost(for: hashes))
    }

    /// The decoy's cost (what an unknown name costs to check).
    public var decoyCost: UInt8 { Self.cost(of: decoy) ?? 0 }

    /// Checks a name and password (bcrypt is slow on purpose: off the event loop).
    public func verify(name: String, password: String) async -> Bool {
        let hash = hashes[name]
        let matches = (try? await NIOThreadPool.singleton.runIfActive {
            Bcrypt.verify(password, hash: hash ?? decoy)
        }) ?? false
        return hash != nil && matches
    }
}

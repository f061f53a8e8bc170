import HummingbirdBcrypt
import NIOPosix

/// The staff who may log in: a file of `name:bcrypt-hash` lines (the format of
/// `htpasswd -B`; `#` starts a comment), made with `beacon-web hash-password`.
/// Passwords are never stored, only their bcrypt hashes.
public struct StaffAccounts: Sendable, Equatable {
    public private(set) var hashes: [String: String]

    public struct FileError: Error, Sendable, Equatable, CustomStringConvertible {
        public var line: Int
        public var reason: String
        public var description: String { "line \(line): \(reason)" }

        public init(line: Int, reason: String) {
            self.line = line
            self.reason = reason
        }
    }

    public init(hashes: [String: String]) { self.hashes = hashes }

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
        self.hashes = hashes
    }

    static func isBcrypt(_ hash: String) -> Bool {
        let utf8 = Array(hash.utf8)
        guard utf8.count == 60, hash.hasPrefix("$2a$") || hash.hasPrefix("$2b$") || hash.hasPrefix("$2y$") else { return false }
        return utf8[6] == UInt8(ascii: "$")
    }

    /// A hash that matches nothing, checked for unknown names so that a wrong name takes
    /// as long as a wrong password.
    static let decoy = Bcrypt.hash("decoy \(UInt64.random(in: 0...UInt64.max))", cost: 10)

    /// Checks a name and password (bcrypt is slow on purpose: off the event loop).
    public func verify(name: String, password: String) async -> Bool {
        let hash = hashes[name]
        let matches = (try? await NIOThreadPool.singleton.runIfActive {
            Bcrypt.verify(password, hash: hash ?? Self.decoy)
        }) ?? false
        return hash != nil && matches
    }
}

import BeaconKit
public import Contract
import History
import SystemCalls

/// Turns a beacon's id into the history's visitor id: HMAC-SHA-256 under the store's own
/// key, first 16 bytes in hex. The same beacon always gets the same pseudonym (so returning
/// visitors are counted), but without the key nobody can tell which beacon it was.
public struct Pseudonymizer: Sendable {
    private let key: [UInt8]

    public init(key: [UInt8]) { self.key = key }

    public func pseudonym(of beacon: BeaconRef) -> String {
        let code = HMACSHA256.mac(key: key, message: Array(HistoryEvent.key(of: beacon).utf8))
        return code.prefix(16).map { $0 < 16 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    /// The key in `path`'s first line; when the file does not exist, a new random key is
    /// written there first (readable by its owner only).
    public static func loadOrCreateKey(at path: String) throws(HistoryStoreError) -> [UInt8] {
        try loadKey(at: path, create: true)
    }

    /// The key in `path`'s first line (`create`: a new one when there is none).
    public static func loadKey(at path: String, create: Bool = false) throws(HistoryStoreError) -> [UInt8] {
        if !FileSystem.exists(path) {
            guard create else {
                throw HistoryStoreError("no pseudonym key at \(path) (history.keyFile): without the key the history's visitors cannot be matched to a beacon")
            }
            var generator = SystemRandomNumberGenerator()
            let hex = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
                .map { $0 < 16 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
            do { try FileSystem.write(path, Array((hex + "\n").utf8), mode: 0o600) } catch {
                throw HistoryStoreError("cannot create the pseudonym key \(path): \(error)")
            }
        }
        let text: String
        do { text = try FileSystem.readText(path) } catch { throw HistoryStoreError("cannot read the pseudonym key \(path): \(error)") }
        let line = text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard line.utf8.count >= 16 else {
            throw HistoryStoreError("the pseudonym key \(path) is too short: its first line needs at least 16 characters")
        }
        return Array(line.utf8)
    }
}

/// What went wrong with the history's database or key, said plainly.
public struct HistoryStoreError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

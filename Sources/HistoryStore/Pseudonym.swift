import BeaconKit
public import Contract
import History
import Synchronization
import SystemCalls

/// Turns a beacon's id into the history's visitor id: HMAC-SHA-256 under the store's own
/// key, first 16 bytes in hex. The same beacon always gets the same pseudonym (so returning
/// visitors are counted), but without the key nobody can tell which beacon it was.
///
/// The pseudonyms made are remembered (up to `remembered` beacons, then forgotten all at
/// once and made again): a beacon's decisions come in several batches over its visit, and
/// its pseudonym was an HMAC in each.
public struct Pseudonymizer: Sendable {
    private let key: [UInt8]
    private let made = Memo()
    static let remembered = 65_536

    public init(key: [UInt8]) { self.key = key }

    public func pseudonym(of beacon: BeaconRef) -> String {
        if let known = made.names.withLock({ $0[beacon] }) { return known }
        let code = HMACSHA256.mac(key: key, message: Array(HistoryEvent.key(of: beacon).utf8))
        let digits = Array("0123456789abcdef".utf8)
        var hex: [UInt8] = []
        hex.reserveCapacity(32)
        for byte in code.prefix(16) {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 15)])
        }
        let name = String(decoding: hex, as: UTF8.self)
        made.names.withLock { names in
            if names.count >= Self.remembered { names.removeAll(keepingCapacity: true) }
            names[beacon] = name
        }
        return name
    }

    private final class Memo: Sendable {
        let names = Mutex<[BeaconRef: String]>([:])
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

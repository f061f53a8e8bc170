import Crypto

/// HMAC-SHA256 and SHA-256 through swift-crypto (BoringSSL's implementations, the same
/// library Hummingbird's bcrypt and NIO's TLS stack already bring): the brain seals its
/// records with it (`RecordSeal`), stores prove presence with it (`PresenceProof`), the
/// history names visitors with it (`Pseudonymizer`). Until 2026-11-27 it was hand-written
/// here; records sealed then still open (RecordSealTests).
public enum HMACSHA256 {
    public static func mac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }

    /// Whether `mac` is `message`'s code under `key`, compared in constant time.
    public static func isValid(_ mac: [UInt8], key: [UInt8], message: [UInt8]) -> Bool {
        HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: message, using: SymmetricKey(data: key))
    }

    public static func sha256(_ message: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: message)) }
}

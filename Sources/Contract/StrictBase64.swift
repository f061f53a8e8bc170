import ExtrasBase64

/// RFC 4648 base64 (standard alphabet, padded) for profile photos, through swift-extras-base64
/// (the decoder Hummingbird's auth already builds), held to the one canonical spelling: a text
/// that does not re-encode to itself (missing or misplaced padding, non-zero padding bits,
/// whitespace) is refused, so one photo has one encoding.
public enum StrictBase64 {
    /// Characters needed for `count` bytes.
    public static func encodedLength(_ count: Int) -> Int { Base64.encodedLength(bytesCount: count) }

    public static func encode(_ bytes: [UInt8]) -> String { Base64.encodeToString(bytes: bytes) }

    /// The bytes of padded, canonical base64; `nil` for anything else.
    public static func decode(_ text: String) -> [UInt8]? {
        guard text.utf8.count % 4 == 0, let bytes = try? Base64.decode(string: text),
              Base64.encodeToString(bytes: bytes) == text else { return nil }
        return bytes
    }
}

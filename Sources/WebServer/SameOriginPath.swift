/// A path on this site, and only that: where a login may send the browser next.
///
/// A parser, not a blocklist. The text (as the form or the query string gives it, once
/// percent-decoded) must be an RFC 3986 `path-absolute` with an optional query, made of
/// the characters that grammar allows and nothing else:
///
/// - it starts with one `/` and no second `/` or `\` (`//host` and `/\host` name another
///   site to a browser);
/// - every byte is an unreserved character, a sub-delimiter, `:`, `@`, `/`, a `%` with
///   two hex digits, or `?` (the query's characters are the same): no control character (a browser drops
///   tabs and newlines from a URL, so `/\t/evil.example` would become `//evil.example`),
///   no space, no `\` (read as `/`), no `#`, nothing outside ASCII;
/// - no percent-encoded `/`, `\` or control character: a proxy or server that decodes
///   them would rebuild what the rules above refuse.
public struct SameOriginPath: Sendable, Equatable, CustomStringConvertible {
    /// The path (and query), safe to send as a `Location`.
    public let text: String

    /// Longer ones are refused: no page of ours has such a path.
    public static let maxLength = 2048

    public var description: String { text }

    /// `nil` when `text` is not a path on this site.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count <= Self.maxLength, bytes.first == UInt8(ascii: "/") else { return nil }
        if bytes.count > 1, bytes[1] == UInt8(ascii: "/") || bytes[1] == UInt8(ascii: "\\") { return nil }
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "%"):
                guard index + 2 < bytes.count, let high = Self.hexValue(bytes[index + 1]),
                      let low = Self.hexValue(bytes[index + 2]) else { return nil }
                let decoded = high << 4 | low
                if decoded < 0x20 || decoded == 0x7F || decoded == UInt8(ascii: "/") || decoded == UInt8(ascii: "\\") {
                    return nil
                }
                index += 3
                continue
            case _ where Self.isPathCharacter(byte) || byte == UInt8(ascii: "?"):
                break
            default:
                return nil
            }
            index += 1
        }
        self.text = text
    }

    /// Where to go after logging in: `next` when it is a path on this site, else `/`.
    public static func orHome(_ next: String?) -> String {
        next.flatMap(SameOriginPath.init)?.text ?? "/"
    }

    /// RFC 3986 `pchar` without `%` (handled with its digits), plus `/`.
    static func isPathCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            // unreserved - . _ ~, sub-delims ! $ & ' ( ) * + , ; =, and : @ /
            return "-._~!$&'()*+,;=:@/".utf8.contains(byte)
        }
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

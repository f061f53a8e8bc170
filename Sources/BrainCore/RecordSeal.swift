import BeaconKit

/// The brain's seal on its own records (`brain/visits/…`, `brain/answered/…`): an
/// HMAC-SHA256 of the topic and the record under the brain's secret (`beaconctl provision`
/// writes it; systemd passes it as the credential `brain-secret`). A restarted brain trusts
/// only records it sealed, so a forged record (anyone may write `brain/#` on an anonymous
/// broker) cannot make it run exit or leave rules, or take a visit for answered. Without a
/// key records are neither sealed nor checked (the brain warns).
///
/// A sealed record is the record's JSON object with one more key last:
/// `{…,"seal":"<64 hex digits>"}`; the MAC covers `topic + "\n" + the object without it`.
public struct RecordSeal: Sendable, Equatable {
    private let key: [UInt8]?

    public init(key: [UInt8]? = nil) {
        self.key = key.flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Whether records are sealed and checked.
    public var isOn: Bool { key != nil }

    /// `record` (a JSON object) sealed for `topic`; unchanged without a key.
    public func seal(_ record: String, topic: String) -> String {
        guard let key, record.hasSuffix("}") else { return record }
        let mac = HMACSHA256.mac(key: key, message: Array((topic + "\n" + record).utf8))
        let body = record.dropLast()
        return body + (body.hasSuffix("{") ? "" : ",") + "\"seal\":\"" + hex(mac) + "\"}"
    }

    /// The record under the seal, or `nil` when the seal is missing or wrong. Without a key,
    /// `payload` itself.
    public func open(_ payload: String, topic: String) -> String? {
        guard let key else { return payload }
        let suffixLength = 8 + 64 + 2 // "seal":" … "}
        guard payload.utf8.count > suffixLength else { return nil }
        let bytes = Array(payload.utf8)
        let macStart = bytes.count - 66
        guard bytes[bytes.count - 2] == UInt8(ascii: "\""), bytes[bytes.count - 1] == UInt8(ascii: "}"),
              Array(bytes[(macStart - 8)..<macStart]) == Array("\"seal\":\"".utf8),
              let mac = unhex(bytes[macStart..<(macStart + 64)]) else { return nil }
        var body = Array(bytes[..<(macStart - 8)])
        if body.last == UInt8(ascii: ",") { body.removeLast() }
        body.append(UInt8(ascii: "}"))
        guard HMACSHA256.isValid(mac, key: key, message: Array((topic + "\n").utf8) + body) else { return nil }
        return String(decoding: body, as: UTF8.self)
    }

    private func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private func unhex(_ digits: ArraySlice<UInt8>) -> [UInt8]? {
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }
}

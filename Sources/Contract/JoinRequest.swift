public import BeaconKit

/// What an observer may tell the shop about themselves. Personal data: it lives in the
/// retained join only while the customer is present.
public struct ObserverProfile: Sendable, Equatable {
    public var name: String?
    /// The usual order ("flat white").
    public var favorite: String?
    /// A JPEG (at most `JoinRequest.maxPhotoBytes`), carried base64-encoded in the join.
    public var photo: [UInt8]?

    public init(name: String? = nil, favorite: String? = nil, photo: [UInt8]? = nil) {
        self.name = name
        self.favorite = favorite
        self.photo = photo
    }
}

/// A join on `beacons/<major>/<minor>/observers/<client>` (retained; an empty payload
/// leaves): `{"state":"joined","profile":{"name","favorite","photo"}}`, `profile` and each
/// of its keys optional, `photo` base64 (RFC 4648, padded) of a JPEG.
public struct JoinRequest: Sendable, Equatable {
    /// Longest accepted name or favorite, characters.
    public static let maxTextLength = 100
    /// Largest accepted photo after base64 decoding, bytes (20 KiB).
    public static let maxPhotoBytes = 20 * 1024
    /// Largest accepted join payload, bytes: room for the photo's base64 and the rest.
    public static let maxPayloadBytes = 64 * 1024
    /// Deepest accepted nesting (the document is two levels deep).
    public static let maxDepth = 4

    public var profile: ObserverProfile?

    public init(profile: ObserverProfile? = nil) { self.profile = profile }

    /// Validates an untrusted join payload; the error's reason goes back to the observer.
    public init(parsing payload: [UInt8]) throws(PayloadError) {
        guard payload.count <= Self.maxPayloadBytes else {
            throw PayloadError("join payload of \(payload.count) bytes exceeds \(Self.maxPayloadBytes)")
        }
        let document: JSONValue
        do {
            document = try JSONParser(maxDepth: Self.maxDepth).parse(payload)
        } catch {
            throw PayloadError("join is not valid JSON: \(error.description)")
        }
        try self.init(parsing: document)
    }

    public init(parsing document: JSONValue) throws(PayloadError) {
        let r = PayloadReader(path: "")
        let o = try r.object(document)
        try r.only(o, ["state", "profile"])
        let state = try r.string(o["state"], "state", maxLength: 32)
        guard state == "joined" else {
            throw PayloadError("state must be \"joined\" (leave by deleting the retained join)")
        }
        guard let value = o["profile"], value != .null else {
            profile = nil
            return
        }
        let pr = PayloadReader(path: "profile")
        let p = try pr.object(value)
        try pr.only(p, ["name", "favorite", "photo"])
        var profile = ObserverProfile()
        profile.name = try pr.optionalString(p["name"], "name", maxLength: Self.maxTextLength)
        profile.favorite = try pr.optionalString(p["favorite"], "favorite", maxLength: Self.maxTextLength)
        if let photo = try pr.optionalString(p["photo"], "photo", maxLength: StrictBase64.encodedLength(Self.maxPhotoBytes)) {
            guard let bytes = StrictBase64.decode(photo) else { throw PayloadError("profile.photo is not valid base64") }
            guard bytes.count <= Self.maxPhotoBytes else {
                throw PayloadError("profile.photo is \(bytes.count) bytes; at most \(Self.maxPhotoBytes)")
            }
            guard bytes.count >= 3, bytes[0] == 0xFF, bytes[1] == 0xD8, bytes[2] == 0xFF else {
                throw PayloadError("profile.photo is not a JPEG")
            }
            profile.photo = bytes
        }
        self.profile = profile
    }

    /// The join payload, for observers (`beaconctl observe`).
    public var json: String {
        var writer = JSONWriter()
        writer.object { o in
            o("state", "joined")
            if let profile {
                var object = JSONObject()
                if let name = profile.name { object["name"] = .string(name) }
                if let favorite = profile.favorite { object["favorite"] = .string(favorite) }
                if let photo = profile.photo { object["photo"] = .string(StrictBase64.encode(photo)) }
                o("profile", .object(object))
            }
        }
        return writer.text
    }
}

extension JoinRequest {
    /// A short stable digest of a join payload (FNV-1a, 64 bits, hex): equal payloads,
    /// equal fingerprints. Identifies "the join already answered", not a security measure.
    public static func fingerprint(_ payload: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in payload {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return Hex.encode((0..<8).map { UInt8(truncatingIfNeeded: hash >> (56 - 8 * UInt64($0))) })
    }
}

import Contract
import CJPEG

/// A photo over the 20 KiB a join allows, made to fit as the storefront greeter's app did
/// ("compress the photo until it is smaller than the required size"): re-encoded with
/// libjpeg-turbo at falling quality, then at half, a quarter and an eighth of its size
/// (libjpeg scales while decoding), until it fits.
enum PhotoFit {
    struct Fitted {
        var bytes: [UInt8]
        var quality: Int
        var width: Int
        var height: Int
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// JPEG qualities tried at each size, best first.
    static let qualities = [85, 75, 65, 55, 45, 35]

    /// `jpeg` re-encoded to at most `limit` bytes; throws when it is no JPEG libjpeg can read,
    /// or even an eighth of it at the lowest quality is too large.
    static func fit(_ jpeg: [UInt8], limit: Int = JoinRequest.maxPhotoBytes) throws -> Fitted {
        for scale in [1, 2, 4, 8] {
            for quality in qualities {
                let fitted = try recompress(jpeg, quality: quality, scale: scale)
                if fitted.bytes.count <= limit { return fitted }
            }
        }
        throw Failure(description: "still over \(limit) bytes at an eighth of its size and JPEG quality \(qualities.last!)")
    }

    static func recompress(_ jpeg: [UInt8], quality: Int, scale: Int) throws -> Fitted {
        var output: UnsafeMutablePointer<UInt8>?
        var length: UInt = 0
        var width: UInt32 = 0
        var height: UInt32 = 0
        var message = [CChar](repeating: 0, count: 200)
        let status = jpeg.withUnsafeBufferPointer { input in
            bb_jpeg_recompress(input.baseAddress, UInt(input.count), Int32(quality), Int32(scale), &output, &length,
                               &width, &height, &message, message.count)
        }
        guard status == 0, let output else {
            let text = message.withUnsafeBufferPointer { buffer in
                String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            throw Failure(description: "not a JPEG libjpeg can read: \(text)")
        }
        defer { bb_jpeg_free(output) }
        return Fitted(bytes: Array(UnsafeBufferPointer(start: output, count: Int(length))), quality: quality,
                      width: Int(width), height: Int(height))
    }
}

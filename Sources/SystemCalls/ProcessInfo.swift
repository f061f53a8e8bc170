#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Facts about this process.
public enum ProcessInfo {
    public static var id: Int32 { getpid() }

    /// Resident set size in bytes, from /proc/self/statm.
    public static func residentBytes() -> Int? {
        guard let text = try? FileSystem.readText("/proc/self/statm") else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    public static var hostName: String {
        var buffer = [UInt8](repeating: 0, count: 256)
        buffer.withUnsafeMutableBufferPointer { raw in
            raw.withMemoryRebound(to: CChar.self) { _ = gethostname($0.baseAddress!, $0.count - 1) }
        }
        return String(decoding: buffer.prefix { $0 != 0 }, as: UTF8.self)
    }
}

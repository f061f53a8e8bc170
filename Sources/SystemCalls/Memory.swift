#if canImport(Glibc)
import Glibc
#endif

/// The C allocator's memory, as the operating system sees it.
public enum Memory {
    private typealias Trim = @convention(c) (Int) -> Int32

    /// glibc's `malloc_trim(0)` (not in the headers Swift imports, so looked up once): hands
    /// the free memory at the top of the heap and in whole free pages back to the system.
    /// After a burst (a join flood) freed objects otherwise stay resident. Does nothing where
    /// the C library has no such function.
    private static let trim: Trim? = {
        #if canImport(Glibc)
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: Trim.self)
        #else
        return nil
        #endif
    }()

    /// Returns free heap memory to the system; true when some was returned.
    @discardableResult
    public static func returnFreeMemory() -> Bool { (trim?(0) ?? 0) != 0 }
}

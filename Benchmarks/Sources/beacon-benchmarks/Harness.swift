#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import MallocCounter

/// One benchmark's outcome: `operations` per run, timed `runs` times.
struct Measurement {
    var name: String
    /// What one operation is ("reports", "updates", "sightings", "configs").
    var unit: String
    var operations: Int
    /// Thread CPU seconds per run: time the benchmark's thread actually ran, so a busy
    /// neighbour on a shared machine slows a run less than wall time would show.
    var cpuSeconds: [Double]
    var wallSeconds: [Double]
    /// Allocations and bytes requested per operation, counted over one whole run.
    var allocationsPerOperation: Double
    var bytesPerOperation: Double

    var medianRate: Double { Double(operations) / median(cpuSeconds) }
    var bestRate: Double { Double(operations) / (cpuSeconds.min() ?? .infinity) }
    var medianWallRate: Double { Double(operations) / median(wallSeconds) }
    var nanosecondsPerOperation: Double { median(cpuSeconds) * 1e9 / Double(operations) }

    var json: String {
        "{\"name\":\"\(name)\",\"unit\":\"\(unit)\",\"operationsPerRun\":\(operations),\"runs\":\(cpuSeconds.count),"
            + "\"medianPerSecond\":\(Int(medianRate)),\"bestPerSecond\":\(Int(bestRate)),"
            + "\"medianWallPerSecond\":\(Int(medianWallRate)),"
            + "\"nanosecondsPerOperation\":\(format(nanosecondsPerOperation, 1)),"
            + "\"allocationsPerOperation\":\(format(allocationsPerOperation, 3)),"
            + "\"bytesPerOperation\":\(format(bytesPerOperation, 1))}"
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

enum Clock {
    static func seconds(_ clock: clockid_t) -> Double {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    static var monotonic: Double { seconds(CLOCK_MONOTONIC) }
    static var threadCPU: Double { seconds(CLOCK_THREAD_CPUTIME_ID) }
}

/// Keeps results alive so the optimiser cannot drop the work that made them.
nonisolated(unsafe) var sink = 0

@inline(never)
func consume(_ value: Int) { sink &+= value }

/// Runs `body` (which performs `operations` operations and returns a checksum) once to
/// warm up and once more per run, counting allocations over the last run.
func measure(_ name: String, unit: String, operations: Int, runs: Int, _ body: () -> Int) -> Measurement {
    consume(body())
    var cpu: [Double] = []
    var wall: [Double] = []
    var allocations: UInt64 = 0
    var bytes: UInt64 = 0
    for _ in 0..<max(1, runs) {
        let allocationsBefore = malloc_counter_allocations()
        let bytesBefore = malloc_counter_bytes()
        let wallStart = Clock.monotonic
        let cpuStart = Clock.threadCPU
        consume(body())
        cpu.append(Clock.threadCPU - cpuStart)
        wall.append(Clock.monotonic - wallStart)
        allocations = malloc_counter_allocations() - allocationsBefore
        bytes = malloc_counter_bytes() - bytesBefore
    }
    return Measurement(name: name, unit: unit, operations: operations, cpuSeconds: cpu, wallSeconds: wall,
                       allocationsPerOperation: Double(allocations) / Double(operations),
                       bytesPerOperation: Double(bytes) / Double(operations))
}

/// Fixed-point text without Foundation.
func format(_ value: Double, _ places: Int) -> String {
    guard value.isFinite else { return "null" }
    var scale = 1.0
    for _ in 0..<places { scale *= 10 }
    let scaled = (value * scale).rounded()
    let negative = scaled < 0
    let magnitude = Int(abs(scaled))
    let whole = magnitude / Int(scale)
    var text = (negative ? "-" : "") + String(whole)
    if places > 0 {
        let fraction = String(magnitude % Int(scale))
        text += "." + String(repeating: "0", count: places - fraction.count) + fraction
    }
    return text
}

/// `12 345 678` — thousands separated so rates read at a glance.
func grouped(_ value: Double) -> String {
    guard value.isFinite else { return "-" }
    let digits = String(Int(value.rounded()))
    var out = ""
    for (i, c) in digits.enumerated() {
        if i > 0, (digits.count - i) % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return out
}

func padded(_ text: String, _ width: Int, left: Bool = false) -> String {
    let pad = String(repeating: " ", count: max(0, width - text.count))
    return left ? text + pad : pad + text
}

func printTable(_ results: [Measurement]) {
    print(padded("benchmark", 26, left: true) + padded("median/s (cpu)", 16) + padded("best/s", 14)
          + padded("ns/op", 10) + padded("allocs/op", 11) + padded("bytes/op", 10) + padded("wall/s", 14))
    for r in results {
        print(padded(r.name, 26, left: true) + padded(grouped(r.medianRate), 16) + padded(grouped(r.bestRate), 14)
              + padded(format(r.nanosecondsPerOperation, 1), 10) + padded(format(r.allocationsPerOperation, 3), 11)
              + padded(format(r.bytesPerOperation, 1), 10) + padded(grouped(r.medianWallRate), 14))
    }
}

public import BeaconKit
public import Wire
import Config
import SystemCalls
import LiveClock
import Synchronization

/// Virtual time of a replay: capture time advancing at the replay speed.
///
/// Anchored at each frame delivered, so a consumer that falls behind does not make the
/// clock run ahead of frames still to come. Speed 0 (as fast as possible) holds time at
/// the last frame; after the end of a replay time runs on (at speed 0 it jumps a day
/// ahead) so that every beacon's exit comes due.
public final class ReplayClock: SourceClock {
    struct Anchor {
        var wall: Double
        var virtual: CaptureTime
        var finished = false
    }

    public let speed: Double
    private let anchor: Mutex<Anchor>

    public init(speed: Double, start: CaptureTime) {
        self.speed = speed
        anchor = Mutex(Anchor(wall: WallClock.monotonic(), virtual: start))
    }

    public func now() -> CaptureTime {
        anchor.withLock { a in
            if speed == 0 { return a.finished ? a.virtual + 86_400 : a.virtual }
            return a.virtual + (WallClock.monotonic() - a.wall) * speed
        }
    }

    func set(_ virtual: CaptureTime) {
        anchor.withLock { $0 = Anchor(wall: WallClock.monotonic(), virtual: virtual, finished: $0.finished) }
    }

    func finish() { anchor.withLock { $0.finished = true } }
}

/// Replays a btsnoop capture (datalink 1001, 1002 H4 or 2001 BlueZ monitor) as if a
/// controller were sending its events now, at `speed` times real time (0: as fast as
/// possible), optionally looping. Frames carry capture time (shifted by the capture's
/// span on each loop so time keeps increasing).
public struct BtsnoopSource: AdvertisingSource {
    public let path: String
    public let speed: Double
    public let loop: Bool
    /// The wall-clock time at which the capture's first frame plays (`nil`: as soon as the
    /// replay starts). Gateways replaying captures of one store with the same value stay in
    /// step, whenever each process happened to start: one that starts late or falls behind
    /// catches up rather than shifting its timeline.
    public let startsAt: WallTime?
    /// The capture time that plays at `startsAt` (`nil`: the capture's first frame). Gateways
    /// given the same `startsAt` and `origin` replay captures that began at different
    /// times on one timeline, each frame at its own place on it.
    public let origin: CaptureTime?
    private let replayClock: ReplayClock
    /// Largest wall-clock gap between in-band ticks, seconds.
    static let tickInterval = 0.1
    /// Longest a replay waits between two frames, wall-clock seconds, whatever the capture's gap.
    public static let longestPause = 5.0
    /// The same for a replay in step with others (`startsAt`), which share one timeline: a
    /// capture's quiet stretch (no customer near that gateway for a while) is waited out in
    /// full, or that gateway's capture time would run ahead of the others' for the rest of the
    /// replay. Only a gap longer than this (an old log's kept tail) is cut.
    public static let longestPauseInStep = 3600.0

    public init(path: String, speed: Double = 1, loop: Bool = false, startsAt: WallTime? = nil,
                origin: CaptureTime? = nil) throws(BtsnoopError) {
        self.path = path
        self.speed = speed
        self.loop = loop
        self.startsAt = startsAt
        self.origin = startsAt == nil ? nil : origin
        let bytes: [UInt8]
        do {
            bytes = try FileSystem.read(path)
        } catch {
            throw BtsnoopError("\(path): \(error)")
        }
        let start: CaptureTime = try bytes.withUnsafeBytes { raw in
            Result { () throws(BtsnoopError) -> CaptureTime in
                var reader = try BtsnoopReader(bytes: raw)
                return reader.next()?.timestamp ?? .epoch
            }
        }.get()
        replayClock = ReplayClock(speed: speed, start: self.origin.map { min($0, start) } ?? start)
    }

    public var name: String { SourceURI.btsnoop(path: path, speed: speed, loop: loop).description }
    public var clock: any SourceClock { replayClock }

    public func setScanning(_ enabled: Bool) async {}

    public func run(_ output: @escaping @Sendable (SourceOutput) -> Void) async throws {
        let bytes: [UInt8]
        do { bytes = try FileSystem.read(path) } catch { throw BtsnoopError("\(path): \(error)") }
        output(.state(.running, detail: "replaying \(path) at \(speed == 0 ? "full speed" : "\(speed)×")"))
        var offset = 0.0
        var pass = 0
        var lastTime: CaptureTime?
        var wallAnchor = WallClock.monotonic()
        var virtualAnchor: CaptureTime?
        // Ticks fall on a grid of capture time (every tickInterval × speed seconds from the
        // first frame), not on whenever the process woke up: timers (stale, exit) come due at
        // the same capture times on every run, however busy the machine.
        let tickStep = Self.tickInterval * speed
        var grid: (origin: CaptureTime, next: CaptureTime)?
        if speed == 0, let startsAt {
            // At full speed too the replay begins at `startsAt`, so that gateways replaying one
            // store together have all connected (and said `online`: the brain waits for their
            // reports) before the first of them races through its capture.
            let wait = startsAt.seconds(since: WallClock.now())
            if wait > 0 { try await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
        }
        func gridPoint(after time: CaptureTime, origin: CaptureTime) -> CaptureTime {
            origin + ((time.seconds(since: origin) / tickStep).rounded(.down) + 1) * tickStep
        }
        repeat {
            let frames = try Self.events(in: bytes)
            guard let first = frames.first, let last = frames.last else { break }
            for frame in frames {
                try Task.checkCancellation()
                var time = frame.time + offset
                if let previous = lastTime, time < previous { time = previous }
                if speed > 0 {
                    if virtualAnchor == nil {
                        virtualAnchor = origin ?? time
                        wallAnchor = WallClock.monotonic() + (startsAt.map { $0.seconds(since: WallClock.now()) } ?? 0)
                    }
                    var due = wallAnchor + time.seconds(since: virtualAnchor!) / speed
                    let longest = startsAt == nil ? Self.longestPause : Self.longestPauseInStep
                    if lastTime != nil, due - WallClock.monotonic() > longest {
                        // A capture resumed after hours or months (the kept tail of an
                        // old log): skip ahead instead of sleeping; capture time still jumps,
                        // and the ticks of the part skipped are due no more.
                        wallAnchor -= due - WallClock.monotonic() - longest
                        due = wallAnchor + time.seconds(since: virtualAnchor!) / speed
                        if let g = grid {
                            let skippedTo = virtualAnchor! + (WallClock.monotonic() - wallAnchor) * speed
                            grid!.next = max(g.next, gridPoint(after: skippedTo, origin: g.origin))
                        }
                    }
                    while let tick = grid?.next, tick < time {
                        let wait = wallAnchor + tick.seconds(since: virtualAnchor!) / speed - WallClock.monotonic()
                        if wait > 0 { try await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
                        output(.tick(tick))
                        grid!.next = tick + tickStep
                    }
                    let wait = due - WallClock.monotonic()
                    if wait > 0 { try await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
                    if startsAt == nil, WallClock.monotonic() - due > 1 {
                        // Fell behind (a slow consumer): re-anchor rather than rushing. A
                        // replay meant to be in step with others (--start-at) catches up instead.
                        virtualAnchor = time
                        wallAnchor = WallClock.monotonic()
                    }
                }
                replayClock.set(time)
                lastTime = time
                output(.frame(HCIFrame(time: time, event: frame.event)))
                if speed > 0 {
                    let origin = grid?.origin ?? time
                    grid = (origin, gridPoint(after: time, origin: origin))
                }
            }
            pass += 1
            offset += last.time.seconds(since: first.time) + 1
        } while loop
        replayClock.finish()
        output(.state(.finished, detail: "end of \(path) after \(pass) pass\(pass == 1 ? "" : "es")"))
    }

    /// Every HCI event in a capture, in file order.
    public static func events(in bytes: [UInt8]) throws(BtsnoopError) -> [HCIFrame] {
        try bytes.withUnsafeBytes { raw in
            Result { () throws(BtsnoopError) -> [HCIFrame] in
                var reader = try BtsnoopReader(bytes: raw)
                var frames: [HCIFrame] = []
                while let record = reader.next() {
                    if let event = record.hciEvent(datalink: reader.datalink) {
                        frames.append(HCIFrame(time: record.timestamp, event: Array(event)))
                    }
                }
                return frames
            }
        }.get()
    }
}

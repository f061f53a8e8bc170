import BeaconKit
import Wire
import Foundation
import HCI
import Synchronization
import SystemCalls
import LiveClock
import TestSupport
import Testing

/// Replaying captures: frames in order with capture time, at any speed, looping.
@Suite("btsnoop replay source", .capturingLogs)
struct BtsnoopSourceTests {
    static let legacy = Programs.capturesDirectory + "/btsnoop-decoder_hci.log"

    final class Collected: Sendable {
        let outputs = Mutex<[SourceOutput]>([])
        var frames: [HCIFrame] { outputs.withLock { $0.compactMap { if case .frame(let f) = $0 { f } else { nil } } } }
        var ticks: [CaptureTime] { outputs.withLock { $0.compactMap { if case .tick(let t) = $0 { t } else { nil } } } }
    }

    func replay(speed: Double, loop: Bool = false, until: (@Sendable (Collected) -> Bool)? = nil) async throws -> Collected {
        let source = try BtsnoopSource(path: Self.legacy, speed: speed, loop: loop)
        let collected = Collected()
        let task = Task { try await source.run { output in collected.outputs.withLock { $0.append(output) } } }
        if let until {
            _ = await eventually(timeout: 30) { until(collected) }
            task.cancel()
        }
        _ = try? await task.value
        return collected
    }

    @Test("every event of a real capture in file order with its capture time, at any speed")
    func realCapture() async throws {
        let paced = try await replay(speed: 2)
        let fast = try await replay(speed: 0)
        #expect(paced.frames.count == 47)
        #expect(paced.frames == fast.frames)
        #expect(paced.frames.first?.time.iso8601 == "2015-10-14T07:59:27.893Z")
        #expect(paced.frames.last?.time.iso8601 == "2015-10-14T07:59:32.905Z")
        // Ticks (when the replay had time to send any between frames) report time in order
        // between the frames, never past a frame still to come.
        let times = paced.outputs.withLock { $0 }.compactMap { output -> CaptureTime? in
            switch output {
            case .frame(let frame): frame.time
            case .tick(let time): time
            case .state: nil
            }
        }
        #expect(times == times.sorted())
        #expect(paced.outputs.withLock { $0.last } == .state(.finished, detail: "end of \(Self.legacy) after 1 pass"))
    }

    @Test("a capture that resumes three months later replays in seconds, capture time still jumping")
    func longPause() async throws {
        let dir = try TemporaryDirectory("btsnoop-pause")
        var writer = BtsnoopWriter(datalink: .h4)
        let start = CaptureTime(iso8601: "2015-10-14T08:00:00.000Z")!
        let event = HCIEventBuilder.commandComplete(HCIOpcode.reset.rawValue)
        writer.appendEvent(event, at: start)
        writer.appendEvent(event, at: start + 90 * 86_400)
        let path = try dir.write("pause.log", bytes: writer.bytes)
        let source = try BtsnoopSource(path: path, speed: 1)
        let collected = Collected()
        let began = Date()
        try await source.run { output in collected.outputs.withLock { $0.append(output) } }
        let took = Date().timeIntervalSince(began)
        // The gap is cut to `longestPause`: a replay never waits less than that, and takes
        // seconds, not three months (the upper bound only needs to tell the two apart, so
        // it leaves room for a busy machine).
        #expect(took >= BtsnoopSource.longestPause - 0.5 && took < BtsnoopSource.longestPause * 20)
        #expect(collected.frames.map(\.time) == [start, start + 90 * 86_400])
    }

    /// Found in BrokerOutageTests' door-hiccup case (2026-11-28): the counter's capture is
    /// quiet from 0.5 s to 15 s, its replay cut that to 5 s and ran 9.5 s of capture time
    /// ahead of the door's for the rest of the run; a door stopped long enough to be let go
    /// then lost its beacons to the counter's time and never caught up.
    @Test("a replay in step with others (--start-at) waits out a quiet stretch instead of running ahead of them")
    func quietStretchInStep() async throws {
        let dir = try TemporaryDirectory("btsnoop-quiet")
        var writer = BtsnoopWriter(datalink: .h4)
        let start = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
        let event = HCIEventBuilder.commandComplete(HCIOpcode.reset.rawValue)
        for second in [0, 0.5, 15] { writer.appendEvent(event, at: start + second) }
        let path = try dir.write("quiet.log", bytes: writer.bytes)
        // At speed 2 the 14.5 s stretch is 7.25 s of wall-clock time: more than `longestPause`.
        let startsAt = WallTime(seconds: Date().timeIntervalSince1970 + 0.5)
        let source = try BtsnoopSource(path: path, speed: 2, startsAt: startsAt, origin: start)
        let arrivals = Mutex<[Double]>([])
        try await source.run { output in
            if case .frame = output { arrivals.withLock { $0.append(Date().timeIntervalSince1970) } }
        }
        let last = try #require(arrivals.withLock { $0 }.last)
        // Capture second 15 plays 7.5 s after `startsAt`, as every replay given the same
        // `startsAt` plays it (a busy machine can only make it later); cut to `longestPause`
        // it came 5.25 s after.
        #expect(last - startsAt.seconds >= 7.5 - 0.05, "\(last - startsAt.seconds) s after startsAt")
    }

    @Test("a looping replay keeps time increasing across passes")
    func looping() async throws {
        let collected = try await replay(speed: 0, loop: true) { $0.frames.count >= 150 }
        let times = collected.frames.map(\.time)
        #expect(times.count >= 150)
        #expect(times == times.sorted())
        #expect(Set(times).count > 100)
    }

    /// Three events a second apart from `start`.
    func threeSeconds(_ dir: TemporaryDirectory, start: CaptureTime) throws -> String {
        var writer = BtsnoopWriter(datalink: .h4)
        let event = HCIEventBuilder.commandComplete(HCIOpcode.reset.rawValue)
        for second in 0..<3 { writer.appendEvent(event, at: start + Double(second)) }
        return try dir.write("three.log", bytes: writer.bytes)
    }

    @Test("ticks fall on a grid of capture time (tickInterval × speed from the first frame), the same on every run")
    func ticksOnAGrid() async throws {
        let dir = try TemporaryDirectory("btsnoop-grid")
        let start = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
        let path = try threeSeconds(dir, start: start)
        for _ in 0..<2 {
            let collected = Collected()
            try await BtsnoopSource(path: path, speed: 4).run { output in collected.outputs.withLock { $0.append(output) } }
            // Every 0.4 s of capture time between frames, whenever the process got to run.
            #expect(collected.ticks.map { ($0.seconds(since: start) * 1000).rounded() } == [400, 800, 1200, 1600])
        }
    }

    @Test("--start-at: the first frame plays at the given wall-clock time, not before")
    func startsAt() async throws {
        let dir = try TemporaryDirectory("btsnoop-start")
        let path = try threeSeconds(dir, start: CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!)
        let startsAt = WallClock.now() + 1.5
        let firstFrame = Mutex<WallTime?>(nil)
        try await BtsnoopSource(path: path, speed: 10, startsAt: startsAt).run { output in
            if case .frame = output { firstFrame.withLock { $0 = $0 ?? WallClock.now() } }
        }
        let played = try #require(firstFrame.withLock { $0 })
        #expect(played.seconds(since: startsAt) > -0.05, "played \(startsAt.seconds(since: played)) s early")
    }

    @Test("a file that is not a capture is refused with the reason")
    func notACapture() throws {
        let dir = try TemporaryDirectory("btsnoop-bad")
        let path = try dir.write("notes.txt", "hello")
        #expect { try BtsnoopSource(path: path) } throws: { error in
            "\(error)".contains("shorter than the 16-byte header")
        }
        #expect { try BtsnoopSource(path: dir.path + "/missing.log") } throws: { error in
            "\(error)".contains("No such file")
        }
    }
}

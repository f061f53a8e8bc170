import ArgumentParser
import BeaconKit
import Wire
import Tracking
import CommandLineSupport
import HCI
import Logging
import Synchronization
import SystemCalls
import Config
import LiveClock

#if canImport(Glibc)
import Glibc
#endif

struct RangeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "range",
        abstract: "Live \"hot/cold\" view of the iBeacons a controller hears, once a second.",
        discussion: """
        Every second, one line per iBeacon heard (nearest first): the time (UTC), UUID, major, minor, the last
        RSSI, the Kalman-smoothed RSSI, the estimated distance (log-distance path loss from the
        beacon's measured power; an estimate), the proximity class (immediate, near, far) and
        the word of a hide-and-seek game: HOT! (immediate), Warmer (closing in, or near and
        not moving away), Cold (far, or moving away), Freezing (10 m or more and not closing
        in). --words original says what the original hot/cold app said, from the proximity
        class alone and in its colours: Freezing! (unknown: no signal strength, or not heard
        lately; blue), Cold! (far; blue), Warmer (immediate; purple), HOT! (near; red), with
        the RSSI as it showed it ("-63dB") in place of the rssi field. A beacon not heard for --exit-timeout seconds gets a last "gone" line.
        Controllers that report no signal strength (RSSI 127, like BlueZ's emulator) give
        "rssi n/a" and no distance.

        On a terminal the view is redrawn in place, in colour; otherwise (a pipe, a file)
        it prints plain lines, as does --plain. SIGINT (Ctrl-C) or SIGTERM stops it and
        turns scanning off again.

        Sources: hci:N (kernel adapter; needs CAP_NET_RAW and CAP_NET_ADMIN), h4:…, or a
        capture replayed with btsnoop:FILE (--speed; 0 = as fast as possible), where the
        seconds are the capture's.

        Examples:
          beaconctl range --source hci:0
          beaconctl range --source hci:0 --uuid E2C56DB5-DFFB-48D2-B060-D0F5A71096E0
          beaconctl range --source btsnoop:capture.log --speed 0 --plain
          beaconctl range --source hci:0 --words original
        """)

    @Option(name: .long, help: ArgumentHelp("hci:N, h4:… or btsnoop:FILE.", valueName: "URI"))
    var source: String

    @Option(name: .long, help: ArgumentHelp("Only beacons with this proximity UUID.", valueName: "UUID"))
    var uuid: String?

    @Option(name: .long, help: "Replay speed for btsnoop sources (0 = as fast as possible).")
    var speed: Double?

    @Option(name: .long, help: "Seconds without a sighting after which a beacon is gone.")
    var exitTimeout = 10.0

    @Option(name: .long, help: "Path-loss exponent n: 2.0 open space … 3.5 cluttered rooms.")
    var pathLoss = 2.0

    @Option(name: .long, help: ArgumentHelp("Stop after S seconds (of the source's time).", valueName: "S"))
    var duration: Double?

    @Option(name: .long, help: ArgumentHelp("game (distance and trend: HOT!, Warmer, Cold, Freezing) or original "
                                            + "(the original app's, by proximity class: Freezing!, Cold!, Warmer, HOT!).", valueName: "WORDS"),
            transform: { text in
                guard let words = HotColdWords(rawValue: text) else {
                    throw ValidationError("--words: \"\(text)\" is neither game nor original")
                }
                return words
            })
    var words: HotColdWords = .game

    @Flag(name: .long, help: "Plain lines even on a terminal.")
    var plain = false

    @Option(name: .long, help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: LogLevelOption = .warning

    func run() async throws {
        bootstrapLogging(logLevel)
        var uri = try parseSource(source)
        let filter = try uuid.map { try parseUUID($0) }
        guard exitTimeout > 0 else { throw CommandFailure("--exit-timeout: must be positive") }
        guard (1.0...6.0).contains(pathLoss) else { throw CommandFailure("--path-loss: \(pathLoss) is outside 1…6") }
        if let speed, !(speed >= 0) { throw CommandFailure("--speed: must not be negative") }
        let logger = Logger(label: "beaconctl.range")

        if case .btsnoop(let path, let configuredSpeed, let loop) = uri {
            uri = .btsnoop(path: path, speed: speed ?? configuredSpeed, loop: loop)
        } else if speed != nil {
            throw CommandFailure("--speed applies to btsnoop: sources only")
        }
        let advertisingSource: any AdvertisingSource
        do {
            advertisingSource = try makeSource(uri, logger: logger)
        } catch let error as BtsnoopError {
            throw CommandFailure("--source: \(error)", status: .failure)
        }
        let replay = uri.isReplay

        let signals = await trapStopSignals()
        let settings = TrackerSettings(exitTimeout: exitTimeout, pathLossExponent: pathLoss)
        let view = RangeView(monitor: RangeMonitor(settings: settings, uuid: filter),
                             display: RangeDisplay(terminal: !plain && isatty(1) == 1, source: uri.description, words: words),
                             stopAfter: duration)
        let source = advertisingSource
        var failure: (any Error)?
        do {
            _ = try await runUntilSignal(signals) {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        try await source.run { output in view.handle(output) }
                        // A replay that ended reports on until its beacons are gone; a live
                        // source returns only when cancelled, and then nothing more is said.
                        if replay { view.finish() }
                    }
                    if !replay {
                        group.addTask {
                            while !Task.isCancelled {
                                try await Task.sleep(nanoseconds: 100_000_000)
                                // The live radio's captures are dated by the wall clock.
                                view.advance(to: WallClock.now().asCaptureTime())
                            }
                        }
                    }
                    group.addTask {
                        while !view.isDone { try await Task.sleep(nanoseconds: 50_000_000) }
                    }
                    try await group.next()
                    group.cancelAll()
                }
            }
        } catch is CancellationError {
        } catch {
            failure = error
        }
        view.close()
        if let failure { throw CommandFailure("\(failure)", status: .failure) }
    }
}

/// The range view's state: the monitor, the next report's time, and the display. Frames
/// arrive on the source's thread, wall-clock ticks on another: one lock.
final class RangeView: Sendable {
    private struct State {
        var monitor: RangeMonitor
        var display: RangeDisplay
        var nextReport: CaptureTime?
        var stopAt: CaptureTime?
        var done = false
    }

    private let state: Mutex<State>
    private let stopAfter: Double?

    init(monitor: RangeMonitor, display: RangeDisplay, stopAfter: Double?) {
        state = Mutex(State(monitor: monitor, display: display))
        self.stopAfter = stopAfter
    }

    var isDone: Bool { state.withLock { $0.done } }

    func handle(_ output: SourceOutput) {
        switch output {
        case .frame(let frame):
            advance(to: frame.time)
            state.withLock { s in
                frame.event.withUnsafeBytes { s.monitor.observe(event: $0, at: frame.time) }
            }
        case .tick(let time):
            advance(to: time)
        case .state(let sourceState, let detail):
            state.withLock { $0.display.status("\(sourceState.rawValue): \(detail)") }
        }
    }

    /// Reports every whole second of source time up to `now`: the first a second after the
    /// source's first sign of life.
    func advance(to now: CaptureTime) {
        state.withLock { s in
            if s.nextReport == nil {
                s.nextReport = now + 1
                s.stopAt = stopAfter.map { now + $0 }
            }
            while let due = s.nextReport, due <= now, !s.done {
                let lines = s.monitor.report(at: due)
                s.display.show(lines, at: due)
                s.nextReport = due + 1
                if let stop = s.stopAt, due >= stop { s.done = true }
            }
        }
    }

    /// A replay ended: report until every beacon has gone, then stop.
    func finish() {
        state.withLock { s in
            guard let due = s.nextReport, !s.done else { s.done = true; return }
            var time = due
            while !s.monitor.tracker.tracks.isEmpty, !s.done {
                s.display.show(s.monitor.report(at: time), at: time)
                if let stop = s.stopAt, time >= stop { break }
                time = time + 1
            }
            s.done = true
        }
    }

    func close() {
        state.withLock { $0.display.close() }
    }
}

/// Where the lines go: plain lines, or a screen redrawn in place with colours.
struct RangeDisplay: Sendable {
    let terminal: Bool
    let source: String
    let words: HotColdWords
    private var lastStatus = ""

    init(terminal: Bool, source: String, words: HotColdWords = .game) {
        self.terminal = terminal
        self.source = source
        self.words = words
    }

    mutating func status(_ text: String) {
        lastStatus = text
        if !terminal { writeStandardError("beaconctl range: \(text)\n") }
    }

    func show(_ lines: [RangeLine], at time: CaptureTime) {
        guard terminal else {
            // hh:mm:ss (UTC) of the report, so the lines of one second read as one group.
            let clock = time.iso8601.dropFirst(11).prefix(8)
            for line in lines { printLine("\(clock)  \(line.text(words: words))") }
            return
        }
        var screen = "\u{1B}[H\u{1B}[2J"
        screen += "\u{1B}[1mbeaconctl range\u{1B}[0m  \(source)  \(time.iso8601)  (Ctrl-C stops)\n"
        screen += "\u{1B}[2m\(lastStatus)\u{1B}[0m\n\n"
        if lines.isEmpty { screen += "listening… no iBeacon heard yet\n" }
        for line in lines {
            screen += words.colour(for: line).ansi + line.text(words: words) + "\u{1B}[0m\n"
        }
        printLine(String(screen.dropLast()))
    }

    func close() {
        if terminal { printLine("\u{1B}[0m") }
    }
}

import BeaconKit
import Contract
import BrainCore
import CommandLineSupport
import Config
import HCI
import Logging
import MQTT
import Synchronization
import SystemCalls
import Tracking
import Wire
import LiveClock

/// `beaconctl observe --source`: the observer's own radio. Frames go through `AutoObserver`
/// (ranging, which beacon to join and when to leave); its decisions become joins and leaves
/// on the broker, and the brain's answer in the inbox lets it leave.
struct ObserverRadio: Sendable {
    let uri: SourceURI
    let source: any AdvertisingSource
    let observer: AutoObserver

    init(_ command: Observe, text: String) throws {
        var uri = try parseSource(text)
        if case .btsnoop(let path, let configuredSpeed, let loop) = uri {
            uri = .btsnoop(path: path, speed: command.speed ?? configuredSpeed, loop: loop)
        }
        self.uri = uri
        let filter = try command.uuid.map { try parseUUID($0) }
        do {
            source = try makeSource(uri, logger: Logger(label: "beaconctl.observe"))
        } catch let error as BtsnoopError {
            throw CommandFailure("--source: \(error)", status: .failure)
        }
        let tracker = TrackerSettings(exitTimeout: command.exitTimeout, pathLossExponent: command.pathLoss)
        observer = AutoObserver(settings: .init(joinOn: command.joinOn, answerTimeout: command.answerTimeout,
                                                stay: command.stay ? command.leaveAt ?? .far : nil),
                                monitor: RangeMonitor(settings: tracker, uuid: filter))
    }

    func run(_ session: ObserverSession, count: Int?, timeout: Double?) async -> ExitStatus {
        let state = RadioState(observer, session: session)
        let (source, replay, answerTimeout) = (self.source, uri.isReplay, observer.settings.answerTimeout)
        writeStandardError("ranging on \(uri) (joining on \(observer.settings.joinOn.rawValue))\n")
        var tasks: [@Sendable () async -> ExitStatus?] = [{
            do {
                try await source.run { output in state.handle(output) }
            } catch is CancellationError {
                return nil
            } catch {
                writeStandardError("beaconctl observe: \(error)\n")
                return .failure
            }
            guard replay, !Task.isCancelled else { return nil }
            // The capture ended: an answer still due may come, then the observer leaves.
            await state.waitWhileJoined(atMost: answerTimeout)
            state.stop()
            return .success
        }]
        if !replay {
            // A live source sends no ticks: time passes on the wall clock.
            tasks.append {
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: 100_000_000)
                    // The live radio's captures are dated by the wall clock.
                    state.advance(to: WallClock.now().asCaptureTime())
                }
                return nil
            }
        }
        return await session.run(count: count, timeout: timeout, onInbox: { state.inbox($0) }, exitWhenEnded: false,
                                 tasks: tasks)
    }
}

/// The observer's decisions, fed from the radio's thread, the inbox and the clock: one lock.
/// Joins and leaves are published under it, so they reach the broker in decision order.
final class RadioState: Sendable {
    private let observer: Mutex<AutoObserver>
    private let session: ObserverSession

    init(_ observer: AutoObserver, session: ObserverSession) {
        self.observer = Mutex(observer)
        self.session = session
    }

    func handle(_ output: SourceOutput) {
        switch output {
        case .frame(let frame):
            observer.withLock { o in apply(frame.event.withUnsafeBytes { o.observe(event: $0, at: frame.time) }) }
        case .tick(let time):
            advance(to: time)
        case .state(let state, let detail):
            writeStandardError("radio \(state.rawValue): \(detail)\n")
        }
    }

    func advance(to now: CaptureTime) {
        observer.withLock { apply($0.advance(to: now)) }
    }

    /// An inbox message: the ad answering a join lets the observer leave.
    func inbox(_ message: MQTTMessage) {
        guard let value = try? JSONParser(maxDepth: 8).parse(message.payload) else { return }
        switch try? InboxMessage(parsing: value) {
        case .ad(let beacon, _, nil)?:
            observer.withLock { apply($0.answered(major: beacon.major, minor: beacon.minor)) }
        case .left(let beacon, _)?:
            observer.withLock { apply($0.ended(major: beacon.major, minor: beacon.minor)) }
        default:
            break
        }
    }

    func stop() {
        observer.withLock { apply($0.stop()) }
    }

    /// Waits (wall clock) until nothing is joined, at most `seconds`.
    func waitWhileJoined(atMost seconds: Double) async {
        let deadline = WallClock.monotonic() + seconds
        while observer.withLock({ $0.joined != nil }), WallClock.monotonic() < deadline, !Task.isCancelled {
            try? await Task.sleep(nanoseconds: 50_000_000)
        }
    }

    private func apply(_ actions: [AutoObserver.Action]) {
        for action in actions {
            switch action {
            case .join(let line):
                guard let major = line.id.major, let minor = line.id.minor else { continue }
                let beacon = BeaconRef(major: major, minor: minor)
                session.join(beacon)
                let distance = line.distance.map { ", ~\(RangeLine.format($0, decimals: 2)) m" } ?? ""
                writeStandardError("joined beacon \(beacon) (\(line.proximity.rawValue)\(distance))\n")
            case .leave(let id, let reason):
                session.leave()
                writeStandardError("left beacon \(id.major.map(String.init) ?? "?")/\(id.minor.map(String.init) ?? "?"): "
                                   + "\(reason.rawValue)\n")
            }
        }
    }
}

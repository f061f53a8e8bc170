// Over 500 lines: libmosquitto's handle and its state are private to this file, reached only under its lock.
public import BeaconKit
internal import CMosquitto
internal import CMosquittoTLS
import Synchronization
public import SystemCalls

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A connection to one MQTT broker through libmosquitto.
///
/// `start()` begins connecting; from then on a network thread of this client runs
/// libmosquitto's loop and reconnects with back-off until `stop()`, also when the broker is
/// not reachable yet. What happens arrives on `events`. `publish`, `subscribe` and `stop`
/// may be called from any thread or task.
///
/// Subscriptions are remembered and made again on every (re)connection, so they survive a
/// broker restart or a clean session. Publishing while disconnected throws
/// `MQTTError.isNoConnection`: queueing across an outage is the caller's policy.
///
/// A started client lives until `stop()`: its network thread holds a reference to it.
public final class MQTTClient: Sendable {
    /// How many events `events` holds for a slow consumer before the oldest are dropped
    /// (and counted in `droppedEvents`); the network thread never waits for the consumer.
    public static let eventBufferLimit = 65_536
    /// How many times a round with a `roundSpacing` calls `mosquitto_loop_read` (a packet or
    /// more each) before it leaves the rest to the next round as a backlog.
    static let readAhead = 256
    /// A round that read this many messages and acknowledgements is not followed by a
    /// `roundSpacing` pause: the stream is dense enough to gather by itself, and a broker sends
    /// only so many QoS 1 messages unacknowledged (Mosquitto: 20), so pausing after full rounds
    /// would cap them (20 a pause).
    static let fullRound = 16

    private let handle: Handle
    private let options: MQTTClientOptions
    /// What OpenSSL said about the last handshake (TLS connections only).
    private let tlsReport: TLSReport?
    private let state: Mutex<State>
    /// Held around every libmosquitto call made from a caller's thread and around
    /// `mosquitto_destroy`, so a late `publish` never touches a destroyed handle. The value is
    /// whether the handle is destroyed. The network thread never takes this lock.
    private let calls = Mutex<Bool>(false)
    private let stream: AsyncStream<MQTTEvent>
    private let continuation: AsyncStream<MQTTEvent>.Continuation
    /// One stream per `options.newestOnly` topic, each holding the newest message not yet taken.
    private let newestStreams: [String: (stream: AsyncStream<MQTTMessage>, continuation: AsyncStream<MQTTMessage>.Continuation)]
    /// Wakes the network thread when a caller has queued a packet (publish, subscribe,
    /// disconnect), so it is written at once rather than at the next round.
    private let wakeup: Wakeup
    /// Beats every time the network thread goes round (at least 5 times a second while it
    /// runs, also between reconnection attempts), for the service watchdog.
    public let heartbeat = Heartbeat()
    /// Where events go instead of `events` (`start(deliveringTo:)`). Written once, before the
    /// network thread is created (which orders the write before every read), and read only
    /// on that thread.
    nonisolated(unsafe) private var sink: EventSink?
    /// The network thread's `pthread_self()` while it runs (0 before): a `publish` made on it
    /// (by a sink's `roundEnded`) needs no wake-up, as the thread writes right after.
    private let networkThread = Atomic<UInt>(0)
    /// Messages and acknowledgements read so far (on the network thread): whether a call of
    /// `mosquitto_loop_read` read one (`roundSpacing`).
    private let packetsRead = Atomic<Int>(0)

    /// Creates the libmosquitto handle and applies the will, credentials, TLS and protocol
    /// version. Nothing touches the network before `start()`.
    public init(_ options: MQTTClientOptions) throws(MQTTError) {
        guard Mosquitto.initialised else {
            throw MQTTError(operation: "lib_init", code: Int32(MOSQ_ERR_UNKNOWN.rawValue))
        }
        // An empty id lets libmosquitto (3.1.1) or the broker (5) choose one.
        let id: String? = options.clientID.isEmpty ? nil : options.clientID
        do {
            wakeup = try Wakeup()
        } catch {
            throw MQTTError(operation: "pipe", code: Int32(MOSQ_ERR_ERRNO.rawValue), message: "\(error)")
        }
        guard let raw = mosquitto_new(id, options.cleanSession, nil) else {
            let code = errno == EINVAL ? MOSQ_ERR_INVAL : MOSQ_ERR_NOMEM
            throw MQTTError(operation: "new", code: Int32(code.rawValue),
                            message: code == MOSQ_ERR_INVAL ? "a persistent session (cleanSession false) needs a client id"
                                                           : nil)
        }
        let tlsReport = options.usesTLS ? TLSReport() : nil
        do {
            try Self.configure(raw, with: options)
        } catch {
            mosquitto_destroy(raw)
            throw error
        }
        self.handle = Handle(raw: raw)
        self.options = options
        self.tlsReport = tlsReport
        let lowest = max(0.01, options.reconnectDelay.lowerBound)
        self.state = Mutex(State(delay: lowest))
        (stream, continuation) = AsyncStream.makeStream(of: MQTTEvent.self,
                                                        bufferingPolicy: .bufferingNewest(Self.eventBufferLimit))
        var newestStreams: [String: (stream: AsyncStream<MQTTMessage>, continuation: AsyncStream<MQTTMessage>.Continuation)] = [:]
        for topic in options.newestOnly {
            newestStreams[topic] = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: .bufferingNewest(1))
        }
        self.newestStreams = newestStreams

        // Callbacks run on the network thread, which holds a strong reference to `self`
        // while it runs, so an unretained pointer is enough.
        mosquitto_user_data_set(raw, Unmanaged.passUnretained(self).toOpaque())
        mosquitto_connect_with_flags_callback_set(raw) { _, context, code, flags in
            MQTTClient.from(context).didConnect(code: code, flags: flags)
        }
        mosquitto_disconnect_callback_set(raw) { _, context, code in
            MQTTClient.from(context).didDisconnect(code: code)
        }
        mosquitto_publish_callback_set(raw) { _, context, mid in
            let client = MQTTClient.from(context)
            client.packetsRead.add(1, ordering: .relaxed)
            client.state.withLock { $0.acknowledgements.acknowledged(mid) }
        }
        mosquitto_message_callback_set(raw) { _, context, message in
            guard let message else { return }
            MQTTClient.from(context).didReceive(message.pointee)
        }
        if tlsReport != nil { captureErrorLog(true) }
    }

    deinit {
        // Reached only when no network thread runs: it holds a reference until it ends.
        calls.withLock { destroyed in
            if !destroyed {
                mosquitto_destroy(handle.raw)
                destroyed = true
            }
        }
        finishStreams()
    }

    /// Every event, for one consumer. Finishes after `stop()`. Messages on a
    /// `newestOnly` topic come on `newest(on:)` instead.
    public var events: AsyncStream<MQTTEvent> { stream }

    /// The messages on `topic`, one of `options.newestOnly`, for one consumer: each is the
    /// newest that came since the consumer last took one, as the network thread drops
    /// the one waiting when a newer one comes (`supersededMessages`). Finishes after `stop()`;
    /// empty for a topic not in `newestOnly`.
    public func newest(on topic: String) -> AsyncStream<MQTTMessage> {
        newestStreams[topic]?.stream ?? AsyncStream { $0.finish() }
    }

    /// Messages on `newestOnly` topics dropped unread because a newer one came first.
    public var supersededMessages: Int { state.withLock { $0.supersededMessages } }

    /// Whether the broker has accepted the connection and it has not been lost since.
    public var isConnected: Bool { state.withLock { $0.connected } }

    /// Events that did not fit the `events` buffer (the oldest go first).
    public var droppedEvents: Int { state.withLock { $0.droppedEvents } }

    /// Connections lost and connection attempts failed since the start, each one counted,
    /// although `events` reports a failure identical to the one before only once.
    public var disconnections: Int { state.withLock { $0.disconnections } }

    /// QoS > 0 messages published and not yet acknowledged by the broker: in flight, or
    /// queued in libmosquitto behind those (it sends a few at a time). What this client
    /// publishes next waits behind all of them.
    public var unacknowledged: Int { state.withLock { $0.acknowledgements.count } }

    /// Begins connecting and starts the network thread. A broker that cannot be reached is
    /// retried with back-off (`options.reconnectDelay`) for as long as the client runs;
    /// only a configuration libmosquitto rejects (a keepalive under 5 s, a bad port) throws.
    /// Calling it again while running does nothing.
    ///
    /// `sink`: events go to it, on the network thread, instead of to `events` (which then
    /// stays empty); see `EventSink`.
    public func start(deliveringTo sink: EventSink? = nil) throws(MQTTError) {
        try calls.withLock { destroyed throws(MQTTError) in
            let phase = state.withLock { $0.phase }
            switch phase {
            case .running: return
            case .draining, .stopping, .stopped:
                throw MQTTError(operation: "start", code: Int32(MOSQ_ERR_INVAL.rawValue),
                                message: "the client was stopped; make a new one")
            case .idle: break
            }
            precondition(!destroyed)
            self.sink = sink
            let code = mosquitto_connect_async(handle.raw, options.broker.host, Int32(options.broker.port),
                                               Int32(options.keepalive))
            if code == Mosquitto.success { boundSilence(to: options.broker.host) }
            watchHandshake()
            var connectLater = false
            switch code {
            case Mosquitto.success:
                break
            case Int32(MOSQ_ERR_INVAL.rawValue), Int32(MOSQ_ERR_NOMEM.rawValue), Int32(MOSQ_ERR_NOT_SUPPORTED.rawValue):
                throw MQTTError(operation: "connect", code: code,
                                message: "\(Mosquitto.errorText(code)) (broker \(options.broker), keepalive \(options.keepalive) s)")
            default:
                // Name resolution or the socket failed at once: report it and let the
                // network thread retry like any other failed attempt.
                noteDisconnected(reason: failureText(code))
                connectLater = true
            }

            state.withLock {
                $0.phase = .running
                $0.connectOnStart = connectLater
            }
            do {
                try BlockingThread.detach(name: "mqtt-\(options.clientID)") { self.runNetworkLoop() }
            } catch {
                state.withLock { $0.phase = .idle }
                throw MQTTError(operation: "pthread_create", code: Int32(MOSQ_ERR_ERRNO.rawValue), message: "\(error)")
            }
        }
    }

    /// Publishes `message`. Returns once libmosquitto has queued it; QoS > 0 messages count
    /// as outstanding until the broker acknowledges them (see `waitUntilPublished`).
    /// Throws `isNoConnection` when not connected, so the caller keeps the message.
    public func publish(_ message: MQTTMessage) throws(MQTTError) {
        guard isConnected else { throw .noConnection("publish") }
        guard message.payload.count <= 268_435_455 else {
            throw MQTTError(operation: "publish", code: Int32(MOSQ_ERR_PAYLOAD_SIZE.rawValue))
        }
        var message = message
        if message.retain, let highest = options.retainedQoS, message.qos > highest { message.qos = highest }
        try calls.withLock { destroyed throws(MQTTError) in
            guard !destroyed else { throw .noConnection("publish") }
            var mid: Int32 = 0
            let code = message.payload.withUnsafeBytes { bytes in
                // MQTT 5: the message expiry, as a PUBLISH property (a deletion needs none).
                guard options.version == .v5, let expiry = message.expiry, !message.payload.isEmpty else {
                    return mosquitto_publish(handle.raw, &mid, message.topic, Int32(bytes.count), bytes.baseAddress,
                                             Int32(message.qos), message.retain)
                }
                var properties: OpaquePointer?
                defer { mosquitto_property_free_all(&properties) }
                let added = mosquitto_property_add_int32(&properties, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expiry)
                guard added == Mosquitto.success else { return added }
                return mosquitto_publish_v5(handle.raw, &mid, message.topic, Int32(bytes.count), bytes.baseAddress,
                                            Int32(message.qos), message.retain, properties)
            }
            // libmosquitto 2.0 keeps a QoS > 0 message that finds the connection just gone
            // and sends it after reconnecting, although it returns NO_CONN: it is queued, and
            // reporting it as not sent would make the caller send it twice.
            let queued = code == Mosquitto.success || (code == Mosquitto.noConnection && message.qos > 0)
            guard queued else {
                throw MQTTError(operation: "publish", code: code,
                                message: "\(Mosquitto.errorText(code)) (topic \"\(message.topic)\", QoS \(message.qos))")
            }
            // QoS 0 is never acknowledged: nothing to wait for, so no lock and no bookkeeping on
            // the path every raw-mode sighting takes.
            if message.qos > 0 {
                state.withLock { $0.acknowledgements.published(mid, awaitingAcknowledgement: true) }
            }
        }
        // On the network thread (a sink's `roundEnded`) the write follows in the same round.
        if networkThread.load(ordering: .relaxed) != UInt(pthread_self()) { wakeup.signal() }
    }

    /// Subscribes to `filters` now if connected, and again after every reconnection.
    /// An invalid filter throws and nothing is subscribed.
    public func subscribe(_ filters: [String], qos: Int = 1) throws(MQTTError) {
        guard (0...2).contains(qos) else {
            throw MQTTError(operation: "subscribe", code: Int32(MOSQ_ERR_INVAL.rawValue),
                            message: "QoS must be 0, 1 or 2, not \(qos)")
        }
        for filter in filters {
            let code = mosquitto_sub_topic_check(filter)
            guard code == Mosquitto.success else {
                throw MQTTError(operation: "subscribe", code: code,
                                message: "\"\(filter)\" is not a valid topic filter")
            }
        }
        let connected = state.withLock { state in
            for filter in filters { state.subscriptions[filter] = qos }
            return state.connected
        }
        guard connected else { return }
        try calls.withLock { destroyed throws(MQTTError) in
            guard !destroyed else { return }
            let code = Mosquitto.filterPackets(filters) { strings, count in
                mosquitto_subscribe_multiple(handle.raw, nil, count, strings, Int32(qos), 0, nil)
            }
            try Self.check(code, "subscribe", filters)
        }
        wakeup.signal()
    }

    /// libmosquitto's `code` for `operation` on `filters`: success, or NO_CONN (the connection
    /// just went; the next connection subscribes to what is remembered), else an error that
    /// names the filters.
    static func check(_ code: Int32, _ operation: String, _ filters: [String]) throws(MQTTError) {
        guard code != Mosquitto.success, code != Mosquitto.noConnection else { return }
        throw MQTTError(operation: operation, code: code, message: "\(Mosquitto.errorText(code)) (filters \(named(filters)))")
    }

    /// The filters for an error's text: the first three quoted, then how many more.
    static func named(_ filters: [String]) -> String {
        let shown = filters.prefix(3).map { "\"\($0)\"" }.joined(separator: ", ")
        return filters.count > 3 ? shown + " and \(filters.count - 3) more" : shown
    }

    /// Forgets `filters` and unsubscribes from them if connected.
    public func unsubscribe(_ filters: [String]) throws(MQTTError) {
        let connected = state.withLock { state in
            for filter in filters { state.subscriptions[filter] = nil }
            return state.connected
        }
        guard connected else { return }
        try calls.withLock { destroyed throws(MQTTError) in
            guard !destroyed else { return }
            let code = Mosquitto.filterPackets(filters) { strings, count in
                mosquitto_unsubscribe_multiple(handle.raw, nil, count, strings, nil)
            }
            try Self.check(code, "unsubscribe", filters)
        }
        wakeup.signal()
    }

    /// Waits until the broker has acknowledged every QoS > 0 message published so far;
    /// false when `timeout` seconds pass first (or the task is cancelled).
    public func waitUntilPublished(timeout: Double) async -> Bool {
        let deadline = WallClock.monotonic() + max(0, timeout)
        while true {
            if state.withLock({ $0.acknowledgements.isEmpty }) { return true }
            if WallClock.monotonic() >= deadline || Task.isCancelled { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Waits up to `timeout` seconds for outstanding QoS > 0 acknowledgements, disconnects
    /// cleanly (so the broker does not publish the will), ends the network thread, frees the
    /// handle and finishes `events`. Safe to call more than once and from several tasks.
    public func stop(timeout: Double = 2) async {
        // Under `calls`, so a concurrent start() is either finished or will see the stop.
        let phase = calls.withLock { _ in
            state.withLock { state in
                let phase = state.phase
                switch phase {
                case .idle: state.phase = .stopping
                case .running: state.phase = .draining
                case .draining, .stopping, .stopped: break
                }
                return phase
            }
        }
        switch phase {
        case .draining, .stopping, .stopped:
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let stopped = state.withLock { state in
                    if state.phase == .stopped { return true }
                    state.stopWaiters.append(waiter)
                    return false
                }
                if stopped { waiter.resume() }
            }
            return
        case .idle:
            break
        case .running:
            _ = await waitUntilPublished(timeout: timeout)
            state.withLock { $0.phase = .stopping }
            calls.withLock { _ in _ = mosquitto_disconnect(handle.raw) }
            wakeup.signal()
            await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
                let finished = state.withLock { state in
                    if state.threadFinished { return true }
                    state.threadWaiters.append(waiter)
                    return false
                }
                if finished { waiter.resume() }
            }
        }
        calls.withLock { destroyed in
            if !destroyed {
                mosquitto_destroy(handle.raw)
                destroyed = true
            }
        }
        finishStreams()
        let waiters = state.withLock { state in
            state.phase = .stopped
            state.connected = false
            defer { state.stopWaiters = [] }
            return state.stopWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    // MARK: - The network thread

    /// Runs libmosquitto's loop until `stop()`, reconnecting with back-off. Own loop rather
    /// than `mosquitto_loop_start`: libmosquitto's thread gives up for good on errors it
    /// deems fatal (a failed DNS lookup, a TLS or protocol error), and its back-off sleep
    /// cannot be interrupted by a clean stop.
    private func runNetworkLoop() {
        networkThread.store(UInt(pthread_self()), ordering: .relaxed)
        defer { networkThread.store(0, ordering: .relaxed) }
        var connectNow = state.withLock { $0.connectOnStart }
        var stopDeadline: Double?
        let spacing = sink == nil ? 0 : max(0, options.roundSpacing)
        while true {
            heartbeat.beat()
            if state.withLock({ $0.phase.networkThreadEnds }) {
                // Stopping: give the DISCONNECT a moment to go out, then leave.
                let deadline = stopDeadline ?? WallClock.monotonic() + 2
                stopDeadline = deadline
                if connectNow || WallClock.monotonic() >= deadline { break }
            }
            if connectNow {
                connectNow = false
                state.withLock {
                    $0.attemptReported = false
                    $0.errorLog = []
                }
                tlsReport?.reset()
                let code = reconnect()
                watchHandshake()
                guard code == Mosquitto.success else {
                    noteDisconnected(reason: failureText(code))
                    _ = sink?.roundEnded(false)
                    connectNow = true
                    if !backOff() { break }
                    continue
                }
            }
            let roundBegan = spacing > 0 ? WallClock.monotonic() : 0
            var gather = false
            let code = loopOnce(timeout: 0.2, spacing: spacing, gather: &gather)
            watchHandshake()
            if code == Mosquitto.success, gather, spacing > 0 {
                // A steady stream: let the next messages gather in the socket (`roundSpacing`).
                let rest = roundBegan + spacing - WallClock.monotonic()
                if rest > 0 { Self.pause(seconds: rest) }
            }
            if code != Mosquitto.success {
                // The connection is gone or was never made. on_disconnect has said why, except
                // for some failures before the CONNACK (a failed TLS handshake, in 2.0.11).
                let (ending, reported) = state.withLock { ($0.phase.networkThreadEnds, $0.attemptReported) }
                if ending { break }
                if !reported {
                    noteDisconnected(reason: failureText(code))
                }
                _ = sink?.roundEnded(false)
                connectNow = true
                if !backOff() { break }
            }
        }
        heartbeat.pause()
        let waiters = state.withLock { state in
            state.threadFinished = true
            state.connected = false
            defer { state.threadWaiters = [] }
            return state.threadWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// One round of libmosquitto's network loop, as `mosquitto_loop` does it but over
    /// `poll(2)`: `mosquitto_loop`'s `select(2)` refuses a socket numbered 1024 or above
    /// (MOSQ_ERR_INVAL on every attempt, so the client never connects), and a process with
    /// many files open (a busy server, a test run) is handed such numbers. Waits up to
    /// `timeout` seconds for the socket or a caller's `wakeup`, then reads (which also
    /// carries a TLS handshake on), writes what is queued, and does the housekeeping
    /// (keepalive).
    ///
    /// With a `spacing` (the sink's `roundSpacing`; 0 without a sink), it reads until the
    /// socket is empty, up to `readAhead` calls of `mosquitto_loop_read`, so what gathered
    /// during the pause is handled in this round; when the bound ends the reading, what is
    /// left is a backlog
    /// (`EventSink.roundEnded`'s `moreWaiting`). `gather`: the round read fewer than
    /// `fullRound` packets, and the sink's `roundEnded` let the next messages gather.
    private func loopOnce(timeout: Double, spacing: Double, gather: inout Bool) -> Int32 {
        let socket = mosquitto_socket(handle.raw)
        guard socket >= 0 else { return Mosquitto.noConnection }
        let wanted: Readiness = mosquitto_want_write(handle.raw) ? [.readable, .writable] : .readable
        let ready: Readiness
        let woken: Readiness
        do {
            (ready, woken) = try Readiness.wait((FileDescriptor(rawValue: socket), wanted),
                                                (wakeup.descriptor, .readable), timeout: timeout)
        } catch {
            errno = error.errno
            return Int32(MOSQ_ERR_ERRNO.rawValue)
        }
        if woken.contains(.readable) { wakeup.drain() }
        // Until the broker's CONNACK, writability may be the TLS handshake's turn too.
        let handshaking = !state.withLock { $0.connected }
        var moreWaiting = false
        var read = false
        let packetsBefore = packetsRead.load(ordering: .relaxed)
        if !ready.isDisjoint(with: [.readable, .hungUp]) || (handshaking && ready.contains(.writable)) {
            read = true
            if spacing > 0, !handshaking {
                // What gathered during the pause (`roundSpacing`): read on while a call reads a
                // whole message or acknowledgement, which takes the place of a look per packet
                // (the call after the last meets the empty socket). Not errno: libmosquitto
                // leaves EAGAIN there when its own wake-up pipe is full, after any packet.
                var calls = 0
                while true {
                    let before = packetsRead.load(ordering: .relaxed)
                    let code = mosquitto_loop_read(handle.raw, 1)
                    guard code == Mosquitto.success else { return code }
                    guard mosquitto_socket(handle.raw) >= 0 else { return Mosquitto.success }
                    if packetsRead.load(ordering: .relaxed) == before { break }
                    calls += 1
                    // Still reading: a backlog, left to the next round.
                    if calls >= Self.readAhead {
                        moreWaiting = true
                        break
                    }
                }
            } else {
                let code = mosquitto_loop_read(handle.raw, 1)
                guard code == Mosquitto.success else { return code }
                guard mosquitto_socket(handle.raw) >= 0 else { return Mosquitto.success }
                if sink != nil {
                    // Whether the socket holds more already (a backlog): a look without taking it.
                    var byte: UInt8 = 0
                    moreWaiting = recv(socket, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0
                }
            }
        }
        // What the sink's owner publishes now is written below, in this round.
        let gathers = sink?.roundEnded(moreWaiting) ?? false
        // A full round needs no pause: the stream gathers by itself.
        gather = read && gathers && packetsRead.load(ordering: .relaxed) - packetsBefore < Self.fullRound
        // A caller's packet may have come after the wait began: try to write it now.
        if ready.contains(.writable) || woken.contains(.readable) || (sink != nil && mosquitto_want_write(handle.raw)) {
            let code = mosquitto_loop_write(handle.raw, 1)
            guard code == Mosquitto.success else { return code }
            guard mosquitto_socket(handle.raw) >= 0 else { return Mosquitto.success }
        }
        return mosquitto_loop_misc(handle.raw)
    }

    /// Connects again: to the same broker, or, when the URL names several nodes of a cluster
    /// (`mqtt://n1,n2,n3`), to the next one in turn. The handle keeps the client id, the
    /// clean-session flag, the will and the subscriptions to renew, so a client with a
    /// persistent session finds it on the node it moves to (the cluster shares sessions).
    private func reconnect() -> Int32 {
        let endpoints = options.broker.endpoints
        let code: Int32
        let host: String
        if endpoints.count > 1 {
            let next = state.withLock { state in
                state.endpoint = (state.endpoint + 1) % endpoints.count
                return endpoints[state.endpoint]
            }
            code = mosquitto_connect_async(handle.raw, next.host, Int32(next.port), Int32(options.keepalive))
            host = next.host
        } else {
            code = mosquitto_reconnect_async(handle.raw)
            host = options.broker.host
        }
        if code == Mosquitto.success { boundSilence(to: host) }
        return code
    }

    /// Sleeps `seconds` on the network thread (`roundSpacing`'s pause).
    private static func pause(seconds: Double) {
        var time = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
        var left = timespec()
        while nanosleep(&time, &left) == -1 && errno == EINTR { time = left }
    }

    /// Bounds how long the new connection's socket outlives a silent path to `host`
    /// (`options.linkTimeout`, `TCPLiveness`): libmosquitto makes a socket per connection, and
    /// its connection attempt is under way, so the bound covers the handshake too. MQTT's
    /// keepalive stays as it was: it also notices a broker that answers TCP but not MQTT.
    ///
    /// Why the kernel's bound rather than watching for the broker's answers (PUBACKs,
    /// PINGRESPs): an answer may legitimately take seconds (a clustered broker holds a QoS 1
    /// PUBACK until its replicas have stored the message), while a host that acknowledges
    /// nothing at the TCP level for seconds has gone; and libmosquitto sends its pings on
    /// its own schedule (a keepalive of at least 5 s), so a faster MQTT-level check has
    /// nothing to wait for on an idle connection.
    private func boundSilence(to host: String) {
        let seconds = options.linkTimeout(to: host)
        let socket = mosquitto_socket(handle.raw)
        var bounded = false
        if seconds > 0, socket >= 0 {
            // Refused only for a socket that is not TCP (a Unix socket), which has no path to lose.
            bounded = (try? TCPLiveness.bound(socket, seconds: seconds)) != nil
        }
        state.withLock { $0.linkTimeout = bounded ? seconds : nil }
    }

    /// Waits out the current reconnection delay and doubles it; false when stopping.
    ///
    /// With several nodes (a cluster) the next node is tried at once: after a connection that
    /// lived `TakeOver.window` seconds or more is lost (its node died: the others are most
    /// likely up), and after a failed attempt until every node was tried in this round; only
    /// then does the client wait out the delay, which doubles once per round. A connection
    /// closed sooner than that waits, so a node that keeps accepting and closing (a take-over,
    /// a node refusing sessions while JetStream elects leaders) is not hammered.
    ///
    /// Waits on `wakeup`, which `stop()` signals after it has set the phase: a stop that
    /// comes before the wait begins leaves the pipe readable, so it is never missed, and
    /// the phase is read again after every wake.
    private func backOff() -> Bool {
        let highest = max(0.01, options.reconnectDelay.upperBound)
        let nodes = options.broker.endpoints.count
        let delay = state.withLock { state in
            let lost = state.lost
            state.lost = nil
            if nodes > 1, lost == .afterWhile {
                state.attemptsInRound = 1
                return 0.0
            }
            let delay = state.delay
            state.attemptsInRound += 1
            if state.attemptsInRound >= nodes || lost == .soon {
                state.attemptsInRound = 0
                state.delay = min(delay * 2, highest)
                return delay
            }
            return 0
        }
        let deadline = WallClock.monotonic() + delay
        while true {
            if state.withLock({ $0.phase.networkThreadEnds }) { return false }
            let remaining = deadline - WallClock.monotonic()
            if remaining <= 0 { return true }
            heartbeat.beat()
            // In slices of 0.2 s, beating: waiting to reconnect is the loop going round.
            if (try? wakeup.descriptor.waitReadable(timeout: min(remaining, 0.2))) ?? true {
                wakeup.drain()
            }
        }
    }

    private func didConnect(code: Int32, flags: Int32) {
        guard code == 0 else {
            // on_disconnect follows; it reports this more precise reason.
            let reason = Mosquitto.refusalText(code, version: options.version)
            state.withLock { $0.refusal = reason }
            return
        }
        let lowest = max(0.01, options.reconnectDelay.lowerBound)
        let subscriptions = state.withLock { state in
            state.connected = true
            state.connectedAt = WallClock.monotonic()
            state.lastReason = nil
            state.refusal = nil
            state.errorLog = []
            state.delay = lowest
            state.attemptsInRound = 0
            return state.subscriptions
        }
        if tlsReport != nil { captureErrorLog(false) }
        // On the network thread, where the handle is alive; libmosquitto queues these. A
        // packet per QoS, in filter order (`Mosquitto.filterPackets`).
        let byQoS = Dictionary(grouping: subscriptions.sorted(by: { $0.key < $1.key }), by: \.value)
        for (qos, filters) in byQoS.sorted(by: { $0.key < $1.key }) {
            _ = Mosquitto.filterPackets(filters.map(\.key)) { strings, count in
                mosquitto_subscribe_multiple(handle.raw, nil, count, strings, Int32(qos), 0, nil)
            }
        }
        emit(.connected(sessionPresent: flags & 1 != 0))
    }

    private func didDisconnect(code: Int32) {
        let reason = state.withLock { state in
            defer {
                state.refusal = nil
                state.attemptReported = true
            }
            return state.refusal
        } ?? failureText(code)
        noteDisconnected(reason: reason)
        if tlsReport != nil { captureErrorLog(true) }
    }

    /// Why a connection attempt or connection ended: what OpenSSL said when TLS failed
    /// (`TLSDiagnosis`: which check), else libmosquitto's text for `code`.
    private func failureText(_ code: Int32) -> String {
        // Read first: what follows may set errno. A connection the kernel gave up reports
        // ETIMEDOUT, or the last soft error it met on the way (a neighbour that stopped
        // answering: EHOSTUNREACH).
        let timedOut = code == Int32(MOSQ_ERR_ERRNO.rawValue) && [ETIMEDOUT, EHOSTUNREACH, ENETUNREACH].contains(errno)
        if timedOut, let bound = state.withLock({ $0.connected ? $0.linkTimeout : nil }) {
            let seconds = bound == bound.rounded() ? "\(Int(bound))" : "\(bound)"
            return Mosquitto.disconnectText(code, version: options.version)
                + " (nothing acknowledged by the broker's host for \(seconds) s: broker.linkTimeout)"
        }
        if let tlsReport {
            let log = state.withLock { $0.errorLog }
            let diagnosis = tlsReport.diagnosis(log: log)
            if code == Int32(MOSQ_ERR_TLS.rawValue) || diagnosis.alertReceived != nil || diagnosis.verifyResult != nil {
                return diagnosis.reason(broker: options.broker, tls: options.tls)
            }
        }
        return Mosquitto.disconnectText(code, version: options.version)
    }

    /// Has OpenSSL record why the handshake of a new TLS connection fails (`TLSReport`).
    /// The connection's SSL object exists once a connection attempt began; the broker's
    /// certificate is checked in a later round of the loop.
    private func watchHandshake() {
        guard let tlsReport, let ssl = mosquitto_ssl_get(handle.raw), ssl != tlsReport.watched else { return }
        bb_tls_watch(ssl, tlsReport.pointer)
        tlsReport.watched = ssl
    }

    /// Keeps libmosquitto's error lines (TLS failures are explained there) while not
    /// connected; off while connected, so no log line is formatted per message.
    private func captureErrorLog(_ on: Bool) {
        guard on else { return mosquitto_log_callback_set(handle.raw, nil) }
        mosquitto_log_callback_set(handle.raw) { _, context, level, text in
            guard level == MOSQ_LOG_ERR, let text else { return }
            let line = String(cString: text)
            MQTTClient.from(context).state.withLock { state in
                if state.errorLog.count < 8 { state.errorLog.append(line) }
            }
        }
    }

    /// Reports a lost connection, or a failed attempt whose reason differs from the last
    /// one, so an outage reads as one event rather than one per retry.
    private func noteDisconnected(reason: String) {
        let (report, reason) = state.withLock { state in
            var reason = reason
            if state.connected, let since = state.connectedAt {
                let short = WallClock.monotonic() - since < TakeOver.window
                state.lost = short ? .soon : .afterWhile
                state.shortConnections = short ? state.shortConnections + 1 : 0
                if state.shortConnections >= TakeOver.repeats {
                    reason += TakeOver.explanation(clientID: options.clientID, username: options.username ?? options.broker.username,
                                                   times: state.shortConnections)
                }
            }
            let report = state.connected || state.lastReason != reason
            state.disconnections += 1
            state.connected = false
            state.lastReason = reason
            return (report, reason)
        }
        if report { emit(.disconnected(reason: reason)) }
    }

    private func didReceive(_ message: mosquitto_message) {
        packetsRead.add(1, ordering: .relaxed)
        let topic = String(cString: message.topic)
        let payload: [UInt8] = if message.payloadlen > 0, let bytes = message.payload {
            Array(UnsafeRawBufferPointer(start: bytes, count: Int(message.payloadlen)))
        } else {
            []
        }
        let received = MQTTMessage(topic: topic, payload: payload, qos: Int(message.qos), retain: message.retain)
        guard let newest = newestStreams[topic] else { return emit(.message(received)) }
        if case .dropped = newest.continuation.yield(received) {
            state.withLock { $0.supersededMessages += 1 }
        }
    }

    private func finishStreams() {
        continuation.finish()
        for (_, newest) in newestStreams { newest.continuation.finish() }
    }

    private func emit(_ event: MQTTEvent) {
        if let sink { return sink.receive(event) }
        if case .dropped = continuation.yield(event) {
            state.withLock { $0.droppedEvents += 1 }
        }
    }

    private static func from(_ context: UnsafeMutableRawPointer?) -> MQTTClient {
        Unmanaged<MQTTClient>.fromOpaque(context!).takeUnretainedValue()
    }

    // MARK: - Set-up

    private static func configure(_ raw: OpaquePointer, with options: MQTTClientOptions) throws(MQTTError) {
        func check(_ operation: String, _ code: Int32, _ detail: String? = nil) throws(MQTTError) {
            guard code == Mosquitto.success else {
                let text = Mosquitto.errorText(code)
                throw MQTTError(operation: operation, code: code, message: detail.map { "\(text) (\($0))" } ?? text)
            }
        }
        try check("threaded_set", mosquitto_threaded_set(raw, true))
        let version = switch options.version {
        case .v311: MQTT_PROTOCOL_V311
        case .v5: MQTT_PROTOCOL_V5
        }
        try check("int_option", mosquitto_int_option(raw, MOSQ_OPT_PROTOCOL_VERSION, version), "protocol version")
        // Without it, Nagle's algorithm holds a small publish back until the broker acknowledges
        // the previous segment, which the broker delays (delayed ACK): tens of milliseconds
        // between an advertisement or a join and its message at a few thousand a second.
        try check("int_option", mosquitto_int_option(raw, MOSQ_OPT_TCP_NODELAY, 1), "TCP_NODELAY")
        if let will = options.will {
            let code = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set(raw, will.topic, Int32(bytes.count), bytes.baseAddress, Int32(will.qos), will.retain)
            }
            try check("will_set", code, "topic \"\(will.topic)\"")
        }
        let username = options.username ?? options.broker.username
        if username != nil || options.password != nil {
            try check("username_pw_set", mosquitto_username_pw_set(raw, username, options.password))
        }
        if options.usesTLS {
            let tls = options.tls ?? TLSConfig()
            // Without a CA of its own, trust the system's store.
            let caPath = tls.caPath ?? (tls.caFile == nil ? "/etc/ssl/certs" : nil)
            try check("tls_set", mosquitto_tls_set(raw, tls.caFile, caPath, tls.certFile, tls.keyFile, nil),
                      "CA \(tls.caFile ?? caPath ?? "-"), certificate \(tls.certFile ?? "-"), key \(tls.keyFile ?? "-")")
            if tls.insecure {
                try check("tls_insecure_set", mosquitto_tls_insecure_set(raw, true))
            }
        }
    }
}

/// The record the TLS info callback writes (`bb_tls_report`), owned by the client and
/// outliving its handle. Written and read only on the network thread.
private final class TLSReport: @unchecked Sendable {
    let pointer = UnsafeMutablePointer<bb_tls_report>.allocate(capacity: 1)
    /// The SSL object last watched (libmosquitto makes one per connection).
    var watched: UnsafeMutableRawPointer?

    init() { bb_tls_report_reset(pointer) }
    deinit { pointer.deallocate() }

    /// A new connection attempt: nothing recorded, its SSL object not watched yet (it may
    /// reuse the address of the last one).
    func reset() {
        bb_tls_report_reset(pointer)
        watched = nil
    }

    func diagnosis(log: [String]) -> TLSDiagnosis {
        let report = pointer.pointee
        let verify = report.verify_result == 0 ? nil : Int(report.verify_result)
        let alert = report.alert_received < 0 ? nil : Int(report.alert_received)
        return TLSDiagnosis(verifyResult: verify, verifyText: verify.map { String(cString: bb_tls_verify_text(Int($0))) },
                            alertReceived: alert,
                            alertReceivedText: alert.map { String(cString: bb_tls_alert_text(Int32($0))) },
                            log: log)
    }
}

/// The libmosquitto handle. libmosquitto serialises access to it internally once
/// `mosquitto_threaded_set(true)` is on; `MQTTClient.calls` guards its lifetime.
private struct Handle: @unchecked Sendable {
    let raw: OpaquePointer
}

private struct State {
    enum Phase {
        case idle, running
        /// `stop()` waits for acknowledgements; the network thread carries on as before.
        case draining
        /// The DISCONNECT is on its way; the network thread ends.
        case stopping, stopped

        var networkThreadEnds: Bool { self == .stopping || self == .stopped }
    }

    var phase = Phase.idle
    var connected = false
    /// When the broker last accepted the connection (monotonic seconds).
    var connectedAt: Double?
    /// Connections in a row the broker closed within `TakeOver.window` of accepting them.
    var shortConnections = 0
    /// Filter → QoS, subscribed again on every connection.
    var subscriptions: [String: Int] = [:]
    var acknowledgements = Acknowledgements()
    /// The reason last reported, so repeated failed attempts are reported once.
    var lastReason: String?
    /// Set by a refused CONNACK for the `on_disconnect` that follows.
    var refusal: String?
    var droppedEvents = 0
    var supersededMessages = 0
    var disconnections = 0
    /// Seconds before the next reconnection attempt.
    var delay: Double
    /// The node of a several-host URL tried last (an index of `broker.endpoints`).
    var endpoint = 0
    /// Failed attempts since the delay last doubled (it doubles once per round of the nodes).
    var attemptsInRound = 0
    /// How long the connection just lost had lived (`TakeOver.window`): one that lived longer
    /// moves to the next node at once (several nodes), one closed sooner waits out the delay.
    var lost: Lost?
    enum Lost { case soon, afterWhile }
    /// The link timeout on the current connection's socket (s), if any: said in the reason
    /// when the kernel gives the connection up.
    var linkTimeout: Double?
    /// The first connection attempt failed at once; the network thread begins by retrying.
    var connectOnStart = false
    /// libmosquitto's error lines since the connection attempt began (TLS failures).
    var errorLog: [String] = []
    /// Whether `on_disconnect` has reported the end of the current connection attempt.
    var attemptReported = false
    var threadFinished = false
    var threadWaiters: [CheckedContinuation<Void, Never>] = []
    var stopWaiters: [CheckedContinuation<Void, Never>] = []

    init(delay: Double) { self.delay = delay }
}

/// How a connection taken over by another client with the same client id shows on our side.
///
/// Mosquitto closes the older of two connections with one client id (and logs "Client X
/// already connected, closing old connection"); both clients reconnect, each knocking the
/// other off, about once a second. A broker may say so over MQTT 5 (DISCONNECT 0x8E, reported
/// as "session taken over"); Mosquitto 2.0.11 just closes the connection, over 5 too. What
/// we detect: the broker closing the connection within `window` seconds of accepting it,
/// `repeats` times in a row (a broker restarted that often reads the same).
enum TakeOver {
    static let window = 5.0
    static let repeats = 3

    static func explanation(clientID: String, username: String?, times: Int) -> String {
        let login = username.map { "; a broker with use_username_as_clientid (as provisioned) uses the user name \"\($0)\"" } ?? ""
        return "; the broker closed the connection \(times) times in a row within \(Int(window)) s of accepting it: "
            + "another client is probably connected with the same client id \"\(clientID)\"\(login); "
            + "give each client its own login and client id"
    }
}

/// Message ids of QoS > 0 publishes the broker has not acknowledged yet.
///
/// `on_publish` may run on the network thread before `mosquitto_publish` has returned the id
/// to its caller, so an acknowledgement for an id not yet registered is remembered in a
/// small ring; ids are 16-bit and reused only after 65535 publishes, far beyond the ring.
struct Acknowledgements {
    private var outstanding: Set<Int32> = []
    private var early = [Int32](repeating: 0, count: 256)
    private var next = 0

    var isEmpty: Bool { outstanding.isEmpty }
    var count: Int { outstanding.count }

    mutating func published(_ mid: Int32, awaitingAcknowledgement: Bool) {
        if let index = early.firstIndex(of: mid), mid != 0 {
            early[index] = 0
            return
        }
        if awaitingAcknowledgement { outstanding.insert(mid) }
    }

    mutating func acknowledged(_ mid: Int32) {
        if outstanding.remove(mid) != nil { return }
        early[next] = mid
        next = (next + 1) % early.count
    }
}

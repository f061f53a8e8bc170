import BeaconKit
public import Hummingbird
public import HummingbirdAuth
import Logging
public import NIOCore
import HTTPTypes
import ServiceLifecycle
import Synchronization
import LiveClock
import SystemCalls
import WebDisplay
public import Config
import History
import HistoryStore

/// The request context: a session holds the staff member's name once logged in; the
/// client's address is what login attempts are counted by.
public struct WebContext: SessionRequestContext, RemoteAddressRequestContext {
    public typealias Session = String
    public var coreContext: CoreRequestContextStorage
    public let sessions: SessionContext<String>
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        sessions = .init()
        remoteAddress = source.channel.remoteAddress
    }

    /// Whom login attempts are counted by: the IPv4 address, or the /64 an IPv6 address
    /// is in (one host is usually given a whole /64).
    var clientKey: String {
        guard let remoteAddress, let text = remoteAddress.ipAddress else { return "local" }
        guard case .v6 = remoteAddress else { return text }
        // The first four of the eight groups ("2001:db8::1": 2001:db8:0:0).
        let (head, tail): ([Substring], [Substring])
        if let gap = text.firstRange(of: "::") {
            (head, tail) = (text[..<gap.lowerBound].split(separator: ":"), text[gap.upperBound...].split(separator: ":"))
        } else {
            (head, tail) = (text.split(separator: ":"), [])
        }
        let groups = head + Array(repeating: "0", count: max(0, 8 - head.count - tail.count)) + tail
        return groups.prefix(4).joined(separator: ":") + "::/64"
    }
}

/// `beacon-web`'s HTTP side: the routes, who may see what, and the live streams.
///
/// Public: `/login`, `/assets/…` (the page's script and style, no data), `/healthz`.
/// Everything else needs a login: pages redirect to `/login`, data answers 401, and no
/// name, photo or zone is in any answer to a request without a session.
public enum WebApp {
    public struct Settings: Sendable {
        /// Cookies only over HTTPS (set when serving TLS).
        public var secureCookies = false
        /// How long a login lasts.
        public var sessionLength: Duration = .seconds(12 * 3600)
        /// Where the analytics page reads the history (beacon-history's file, opened
        /// read-only); `nil`: the page says there is none.
        public var history: HistoryConfig?
        /// How failed logins slow further attempts (per name, per client address).
        public var loginThrottle = LoginThrottle.Settings()

        public init() {}
    }

    public static func router(feed: FleetFeed, accounts: StaffAccounts, sessions: any PersistDriver,
                              settings: Settings = Settings()) -> Router<WebContext> {
        let router = Router(context: WebContext.self)
        router.add(middleware: SecurityHeaders())
        router.add(middleware: SessionMiddleware(
            storage: sessions,
            configuration: .init(sessionCookieParameters: .init(name: "beacon_web_session", secure: settings.secureCookies,
                                                               sameSite: .strict),
                                 defaultSessionExpiration: settings.sessionLength)))

        router.get("healthz") { _, _ in "ok\n" }
        router.get("assets/app.js") { _, _ in asset(Assets.script, type: "text/javascript; charset=utf-8") }
        router.get("assets/app.css") { _, _ in asset(Assets.style, type: "text/css; charset=utf-8") }
        let throttle = Mutex(LoginThrottle(settings: settings.loginThrottle))
        router.get("login") { request, _ in
            html(Assets.loginPage(failed: request.uri.queryParameters["failed"] != nil,
                                  next: SameOriginPath.orHome(request.uri.queryParameters["next"].map(String.init))))
        }
        router.post("login") { request, context -> Response in
            let body = try await request.body.collect(upTo: 16 * 1024)
            let form = (try? URLEncodedFormDecoder().decode(LoginForm.self, from: String(buffer: body)))
                ?? LoginForm()
            let name = form.username ?? ""
            let next = SameOriginPath.orHome(form.next)
            let client = context.clientKey
            // Refused before bcrypt: the same quick answer for every name, known or not.
            if let refusal = throttle.withLock({ $0.check(user: name, address: client, at: WallClock.monotonic()) }) {
                context.logger.notice("login refused: too many failed attempts",
                                      metadata: ["user": "\(name)", "client": "\(client)", "limit": "\(refusal.limit)",
                                                 "retryAfter": "\(refusal.retryAfter)"])
                var response = html(Assets.loginPage(failed: false, next: next, retryAfter: refusal.retryAfter))
                response.status = .tooManyRequests
                response.headers[.retryAfter] = "\(refusal.retryAfter)"
                return response
            }
            guard await accounts.verify(name: name, password: form.password ?? "") else {
                throttle.withLock { $0.failed(user: name, address: client, at: WallClock.monotonic()) }
                context.logger.notice("failed login", metadata: ["user": "\(name)", "client": "\(client)"])
                return .redirect(to: "/login?failed=1&next=" + PercentEncoding.encode(next), type: .normal)
            }
            throttle.withLock { $0.succeeded(user: name, address: client) }
            context.sessions.createSession(name, expiresIn: settings.sessionLength)
            return .redirect(to: next, type: .normal)
        }

        let staff = router.group().add(middleware: StaffOnly())
        staff.post("logout") { _, context -> Response in
            context.sessions.clearSession()
            return .redirect(to: "/login", type: .normal)
        }
        staff.get("/") { _, _ in
            html(feed.withState { Assets.indexPage($0, user: nil) })
        }
        staff.get("fleet") { _, _ in pageResponse(feed, .fleet) }
        staff.get("stores/:store/greeter") { _, context in pageResponse(feed, .greeter(store: try store(context))) }
        staff.get("stores/:store/floor") { _, context in pageResponse(feed, .floor(store: try store(context))) }
        staff.get("api/fleet") { _, _ in json(feed, .fleet) }
        staff.get("api/stores/:store/greeter") { _, context in json(feed, .greeter(store: try store(context))) }
        staff.get("api/stores/:store/floor") { _, context in json(feed, .floor(store: try store(context))) }
        staff.get("events/fleet") { _, _ in events(feed, .fleet) }
        staff.get("events/stores/:store/greeter") { _, context in events(feed, .greeter(store: try store(context))) }
        staff.get("events/stores/:store/floor") { _, context in events(feed, .floor(store: try store(context))) }
        let reader = settings.history.map(HistoryReader.init)
        staff.get("analytics") { request, _ in await analytics(request, feed: feed, history: reader, csv: false) }
        staff.get("analytics.csv") { request, _ in await analytics(request, feed: feed, history: reader, csv: true) }
        staff.get("photos/:store/:client") { _, context -> Response in
            let store = try store(context)
            let client = try context.parameters.require("client")
            guard let jpeg = feed.withState({ $0.photo(store: store, client: client) }) else {
                throw HTTPError(.notFound)
            }
            return Response(status: .ok,
                            headers: [.contentType: "image/jpeg", .cacheControl: "private, max-age=3600"],
                            body: .init(byteBuffer: ByteBuffer(bytes: jpeg)))
        }
        return router
    }

    // MARK: - Responses

    /// `/analytics` and `/analytics.csv`: `?range=day|week&date=YYYY-MM-DD`.
    static func analytics(_ request: Request, feed: FleetFeed, history reader: HistoryReader?, csv: Bool) async -> Response {
        let history = reader?.config
        let offset = history?.utcOffsetMinutes ?? 0
        let window = AnalyticsPage.Window(range: request.uri.queryParameters["range"].map(String.init),
                                          date: request.uri.queryParameters["date"].map(String.init),
                                          now: historyNow(), utcOffsetMinutes: offset)
        var stores: [AnalyticsPage.Store] = []
        var chain: HistoryFigures?
        var problem: String?
        if let reader, let history, history.postgres != nil || FileSystem.exists(history.database) {
            do {
                let database = try await reader.database()
                let visits = try await database.visits(store: nil, from: window.start, to: window.end)
                let figures = HistoryFigures.chain(visits: visits, from: window.start, to: window.end, now: historyNow(),
                                                   options: history.figureOptions)
                chain = figures.chain
                stores = feed.withState { state in
                    figures.stores.map { AnalyticsPage.Store(store: $0.store, name: state.storeName($0.store) ?? "Store \($0.store)",
                                                             figures: $0.figures) }
                }
            } catch {
                problem = "The history cannot be read: \(error)"
            }
        } else {
            problem = "No history here yet: beacon-history keeps it in \(history?.database ?? "history.database") (docs/history.md)."
        }
        if csv {
            let name = "beaconbridge-\(window.range.rawValue)-\(AnalyticsPage.Window.date(window.start, offset: offset)).csv"
            return Response(status: problem == nil ? .ok : .notFound,
                            headers: [.contentType: "text/csv; charset=utf-8", .cacheControl: "no-store",
                                      .contentDisposition: "attachment; filename=\"\(name)\""],
                            body: .init(byteBuffer: ByteBuffer(string: problem.map { $0 + "\n" } ?? AnalyticsPage.csv(stores: stores))))
        }
        return html(feed.withState {
            AnalyticsPage.page(stores: stores, chain: chain, window: window, offset: offset, nav: Assets.navigation($0),
                               problem: problem)
        })
    }

    static func store(_ context: WebContext) throws -> UInt16 {
        guard let text = context.parameters.get("store"), let store = UInt16(text), String(store) == text else {
            throw HTTPError(.notFound, message: "no such store")
        }
        return store
    }

    static func html(_ text: String) -> Response {
        Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                 body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func asset(_ text: String, type: String) -> Response {
        Response(status: .ok, headers: [.contentType: type, .cacheControl: "public, max-age=300"],
                 body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func pageResponse(_ feed: FleetFeed, _ page: FleetState.Page) -> Response {
        html(feed.withState { Assets.page(page, state: $0, json: $0.json(for: page, at: WallClock.now())) })
    }

    static func json(_ feed: FleetFeed, _ page: FleetState.Page) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                 body: .init(byteBuffer: ByteBuffer(string: feed.withState { $0.json(for: page, at: WallClock.now()) })))
    }

    /// Server-Sent Events: the page's JSON at once, then again after every change to it
    /// (and, for the fleet page, on every heartbeat); a comment on other heartbeats keeps
    /// proxies from closing the stream and notices a browser that went away.
    static func events(_ feed: FleetFeed, _ page: FleetState.Page) -> Response {
        let updates = feed.updates
        let (id, notices) = updates.subscribe(page)
        let body = ResponseBody { writer in
            try await withGracefulShutdownHandler {
                defer { updates.unsubscribe(id) }
                try await writer.write(ByteBuffer(string: "retry: 1000\n"))
                try await writer.write(event(feed.withState { $0.json(for: page, at: WallClock.now()) }))
                for await notice in notices {
                    if case .heartbeat = notice, page != .fleet {
                        try await writer.write(ByteBuffer(string: ": ping\n\n"))
                        continue
                    }
                    try await writer.write(event(feed.withState { $0.json(for: page, at: WallClock.now()) }))
                }
                try await writer.finish(nil)
            } onGracefulShutdown: {
                updates.unsubscribe(id)
            }
        }
        return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-store",
                                               HTTPField.Name("X-Accel-Buffering")!: "no"], body: body)
    }

    static func event(_ json: String) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeString("data: ")
        buffer.writeString(json)
        buffer.writeString("\n\n")
        return buffer
    }
}

/// Staff only: a request without a session gets a redirect to the login page (pages) or
/// 401 (data, streams, photos), and nothing else.
struct StaffOnly: RouterMiddleware {
    typealias Context = WebContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if context.sessions.session != nil { return try await next(request, context) }
        let path = request.uri.path
        let isData = path.hasPrefix("/api/") || path.hasPrefix("/events/") || path.hasPrefix("/photos/")
        if request.method == .get && !isData {
            return .redirect(to: "/login?next=" + PercentEncoding.encode(path), type: .normal)
        }
        return Response(status: .unauthorized, headers: [.contentType: "text/plain; charset=utf-8"],
                        body: .init(byteBuffer: ByteBuffer(string: "log in first\n")))
    }
}

/// What every answer carries: no framing, no sniffing, scripts and styles from this site only.
struct SecurityHeaders: RouterMiddleware {
    typealias Context = WebContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as HTTPError {
            response = Response(status: error.status, headers: [.contentType: "text/plain; charset=utf-8"],
                                body: .init(byteBuffer: ByteBuffer(string: (error.body ?? error.status.reasonPhrase) + "\n")))
        }
        response.headers[.contentSecurityPolicy] =
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return response
    }
}

/// The login form's fields.
struct LoginForm: Decodable {
    var username: String?
    var password: String?
    var next: String?
}

/// Where the analytics pages read the history. A chain's PostgreSQL is connected to once, at
/// the first page, and that client serves every page after (it reconnects by itself when
/// the server went away); a SQLite file is opened read-only for each page, which costs
/// little and finds a file beacon-history created after beacon-web started.
actor HistoryReader {
    nonisolated let config: HistoryConfig
    private var shared: (any HistoryKeeping)?

    init(_ config: HistoryConfig) { self.config = config }

    func database() async throws(HistoryStoreError) -> any HistoryKeeping {
        if let shared { return shared }
        let opened = try await HistoryStores.open(config, readOnly: true)
        guard config.postgres != nil else { return opened }
        // Another page connected while this one did: one client is kept.
        if let shared {
            await opened.close()
            return shared
        }
        shared = opened
        return opened
    }
}

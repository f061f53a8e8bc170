import BeaconKit
import Foundation

/// Debian's headless Chromium, driven over the DevTools protocol on a pipe
/// (`--remote-debugging-pipe`: the browser reads commands on fd 3 and answers on fd 4,
/// each message JSON ended by a NUL byte). Enough of the protocol to open pages, run a
/// script in them, wait for the DOM to show something, and take screenshots.
public final class Chromium: @unchecked Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    public let pid: pid_t
    public let stderrPath: String
    private let commands: Int32
    private let answers: Int32
    private let lock = NSLock()
    private var nextID = 0
    private var pending: [Int: CheckedContinuation<JSONValue, any Error>] = [:]
    private var closed = false

    /// The browser: `chromium` from PATH or /usr/bin; `nil` when not installed.
    public static var executable: String? { Programs.system("chromium") ?? Programs.system("chromium-browser") }

    /// Starts a headless browser with a profile in `directory`.
    public init(in directory: TemporaryDirectory) throws {
        guard let executable = Self.executable else {
            throw Failure("chromium is not installed: run scripts/install-deps")
        }
        stderrPath = directory.file("chromium.err")
        var toBrowser: [Int32] = [0, 0]
        var fromBrowser: [Int32] = [0, 0]
        guard pipe(&toBrowser) == 0, pipe(&fromBrowser) == 0 else { throw Failure("pipe: errno \(errno)") }
        // Not inherited by other children (posix_spawn's dup2 gives the browser its copies).
        for fd in toBrowser + fromBrowser { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let arguments = [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--remote-debugging-pipe", "--user-data-dir=" + directory.file("chromium-profile"),
                         "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                         "--disable-background-networking", "--disable-component-update", "--disable-sync",
                         "--mute-audio", "--hide-scrollbars", "--window-size=1280,860", "about:blank"]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stderrPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, toBrowser[0], 3)
        posix_spawn_file_actions_adddup2(&actions, fromBrowser[1], 4)
        // The test threads block SIGTERM and SIGINT; the browser must not inherit that.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        var cArguments = arguments.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, executable, &actions, &attributes, &cArguments, environ)
        close(toBrowser[0])
        close(fromBrowser[1])
        guard status == 0 else {
            close(toBrowser[1])
            close(fromBrowser[0])
            throw Failure("cannot start \(executable): error \(status)")
        }
        pid = child
        commands = toBrowser[1]
        answers = fromBrowser[0]
        let reader = Thread { [weak self] in self?.readAnswers() }
        reader.start()
    }

    /// The browser's output, for failure messages.
    public var diagnostics: String {
        "--- chromium (pid \(pid)) ---\n" + ((try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "").suffix(3000)
    }

    private func readAnswers() {
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(answers, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            buffer += chunk[..<n]
            while let end = buffer.firstIndex(of: 0) {
                let message = Array(buffer[..<end])
                buffer.removeSubrange(...end)
                guard let value = try? JSONParser(maxDepth: 256).parse(message),
                      let id = value["id"]?.numberValue else { continue }  // events are not used
                let continuation = lock.withLock { pending.removeValue(forKey: Int(id)) }
                if let error = value["error"] {
                    continuation?.resume(throwing: Failure("DevTools error: \(error.jsonText)"))
                } else {
                    continuation?.resume(returning: value["result"] ?? .null)
                }
            }
        }
        let waiting = lock.withLock {
            closed = true
            defer { pending = [:] }
            return Array(pending.values)
        }
        for continuation in waiting { continuation.resume(throwing: Failure("the browser closed the pipe")) }
    }

    /// Sends one DevTools command and waits for its answer.
    public func call(_ method: String, _ params: JSONObject = [:], session: String? = nil,
                     timeout: Double = 30) async throws -> JSONValue {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSONValue, any Error>) in
            let id: Int? = lock.withLock {
                if closed { return nil }
                nextID += 1
                pending[nextID] = continuation
                return nextID
            }
            guard let id else {
                continuation.resume(throwing: Failure("the browser is gone"))
                return
            }
            var message: JSONObject = ["id": .number(Double(id)), "method": .string(method), "params": .object(params)]
            if let session { message.members.append((key: "sessionId", value: .string(session))) }
            var bytes = Array(JSONValue.object(message).jsonText.utf8)
            bytes.append(0)
            let written = bytes.withUnsafeBytes { write(commands, $0.baseAddress, $0.count) }
            if written != bytes.count {
                lock.withLock { pending.removeValue(forKey: id) }?
                    .resume(throwing: Failure("cannot write to the browser (errno \(errno))"))
                return
            }
            Task { [weak self] in
                try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9))
                self?.lock.withLock { self?.pending.removeValue(forKey: id) }?
                    .resume(throwing: Failure("\(method): no answer within \(timeout) s"))
            }
        }
    }

    /// A new tab, in its own browser context (cookies included) when `isolated`.
    public func newPage(width: Int = 1280, height: Int = 860, isolated: Bool = false) async throws -> BrowserPage {
        var params: JSONObject = ["url": .string("about:blank")]
        if isolated {
            let context = try await call("Target.createBrowserContext")
            params.members.append((key: "browserContextId", value: context["browserContextId"] ?? .null))
        }
        let target = try await call("Target.createTarget", params)
        guard let targetID = target["targetId"]?.stringValue else { throw Failure("no targetId in \(target.jsonText)") }
        let attached = try await call("Target.attachToTarget", ["targetId": .string(targetID), "flatten": .bool(true)])
        guard let session = attached["sessionId"]?.stringValue else { throw Failure("no sessionId in \(attached.jsonText)") }
        let page = BrowserPage(browser: self, session: session)
        _ = try await page.call("Page.enable")
        _ = try await page.call("Runtime.enable")
        _ = try await page.call("Emulation.setDeviceMetricsOverride", [
            "width": .number(Double(width)), "height": .number(Double(height)), "deviceScaleFactor": .number(1), "mobile": .bool(false),
        ])
        return page
    }

    /// Closes the browser (gracefully, then by signal) and waits for it.
    public func stop() async {
        _ = try? await call("Browser.close", timeout: 5)
        var status: Int32 = 0
        for _ in 0..<100 {
            if waitpid(pid, &status, WNOHANG) == pid { break }
            try? await Task.sleep(nanoseconds: 50_000_000)
            if lock.withLock({ closed }) { kill(pid, SIGKILL) }
        }
        if waitpid(pid, &status, WNOHANG) == 0 {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
        }
        close(commands)
        close(answers)
    }
}

/// One tab of a `Chromium`.
public struct BrowserPage: Sendable {
    public let browser: Chromium
    public let session: String

    public func call(_ method: String, _ params: JSONObject = [:], timeout: Double = 30) async throws -> JSONValue {
        try await browser.call(method, params, session: session, timeout: timeout)
    }

    /// Loads `url` and waits until the document has loaded.
    public func navigate(_ url: String, timeout: Double = 30) async throws {
        let result = try await call("Page.navigate", ["url": .string(url)], timeout: timeout)
        if let error = result["errorText"]?.stringValue { throw Chromium.Failure("\(url): \(error)") }
        guard try await waitFor("document.readyState === 'complete' && location.href !== 'about:blank'",
                                timeout: timeout) != nil else {
            throw Chromium.Failure("\(url) did not finish loading within \(timeout) s")
        }
    }

    /// The value of a JavaScript expression (awaited when it is a promise).
    public func evaluate(_ expression: String) async throws -> JSONValue {
        let result = try await call("Runtime.evaluate", ["expression": .string(expression), "returnByValue": .bool(true),
                                                         "awaitPromise": .bool(true)])
        if let exception = result["exceptionDetails"] {
            throw Chromium.Failure("\(expression): \(exception["exception"]?["description"]?.stringValue ?? exception.jsonText)")
        }
        return result["result"]?["value"] ?? .null
    }

    /// What the page shows (its main element's text, or an expression's value), for failure messages.
    public func shown(_ expression: String = "document.getElementById('app').innerText") async -> String {
        guard let value = try? await evaluate(expression) else { return "(cannot read the page)" }
        return value.stringValue ?? value.jsonText
    }

    /// Evaluates `expression` until it is truthy (the DOM shows what the test waits
    /// for); its value, or `nil` after `timeout` seconds.
    public func waitFor(_ expression: String, timeout: Double = 20) async throws -> JSONValue? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let value = try await evaluate(expression)
            switch value {
            case .null, .bool(false), .number(0), .string(""): break
            default: return value
            }
            if Date() > deadline { return nil }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
    }

    /// The page as PNG (or JPEG with `quality`), optionally clipped to a rectangle in CSS pixels.
    public func screenshot(jpegQuality quality: Int? = nil, clip: (x: Double, y: Double, width: Double, height: Double)? = nil)
        async throws -> [UInt8] {
        var params: JSONObject = ["format": .string(quality == nil ? "png" : "jpeg"), "captureBeyondViewport": .bool(false)]
        if let quality { params.members.append((key: "quality", value: .number(Double(quality)))) }
        if let clip {
            params.members.append((key: "clip", value: .object(["x": .number(clip.x), "y": .number(clip.y),
                                                               "width": .number(clip.width), "height": .number(clip.height),
                                                               "scale": .number(1)])))
        }
        let result = try await call("Page.captureScreenshot", params)
        guard let data = result["data"]?.stringValue, let bytes = Data(base64Encoded: data).map({ [UInt8]($0) }) else {
            throw Chromium.Failure("no screenshot data")
        }
        return bytes
    }

    /// Saves a PNG screenshot into `directory` and returns its path.
    @discardableResult
    public func save(screenshot name: String, in directory: String) async throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = directory + "/" + name + ".png"
        try Data(try await screenshot()).write(to: URL(fileURLWithPath: path))
        return path
    }
}

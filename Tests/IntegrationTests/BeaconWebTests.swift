// Over 500 lines: one serialized suite on the same real parts (Mosquitto, the brain, gateways replaying captures, beacon-web, headless Chromium) whose helpers (users file, login, startWeb, http, publish, the captures) every case uses; its MARK sections are access, login guards, the browser and the greeter's page.
import BeaconKit
import Contract
import BrainCore
import Config
import Simulation
import Wire
import Foundation
import TestSupport
import Testing

/// `beacon-web` on real parts: Mosquitto, replaying gateways, the brain, customers' apps
/// (`beaconctl observe`), and Debian's headless Chromium looking at the pages.
@Suite("beacon-web: pages, login, live updates", .serialized)
struct BeaconWebTests {
    static let uuid = StoreSimulation.defaultUUID
    static let password = "correct horse battery staple"

    /// A users file with one account, `manager`, hashed by `beacon-web hash-password`.
    static func usersFile(in dir: TemporaryDirectory, cost: Int = 4) async throws -> String {
        let input = try dir.write("password.txt", password + "\n")
        let hasher = try startProgram("beacon-web", ["hash-password", "--cost", "\(cost)"], in: dir,
                                      stdin: FileHandle(forReadingAtPath: input))
        #expect(await hasher.waitForExit(timeout: 30) == 0, "\(hasher.diagnostics)")
        let hash = hasher.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(hash.hasPrefix(String(format: "$2b$%02d$", cost)) && !hash.contains(password))
        return try dir.write("users", "# staff of Main Street\nmanager:\(hash)\n")
    }

    /// Logs `page`, showing the login form, in as `manager`, as staff do.
    static func logIn(_ page: BrowserPage) async throws {
        _ = try await page.evaluate("""
            document.querySelector('[name=username]').value = 'manager';
            document.querySelector('[name=password]').value = '\(password)';
            document.querySelector('form.login').submit(); true
            """)
    }

    /// Starts `beacon-web` on a free port; its base URL once it listens.
    static func startWeb(config: String, in dir: TemporaryDirectory, extra: [String] = [],
                         cost: Int = 4) async throws -> (ChildProcess, String) {
        let users = try await usersFile(in: dir, cost: cost)
        let web = try startProgram("beacon-web", ["--config", config, "--users", users, "--port", "0",
                                                  "--client-id", "web-test"] + extra, in: dir)
        var url: String?
        _ = await eventually(timeout: 30) {
            url = web.stdoutLines.first { $0.hasPrefix("listening on ") }.map { String($0.dropFirst(13)) }
            return url != nil || !web.isRunning
        }
        guard let url else { throw TestFailure("beacon-web did not start listening\n\(web.diagnostics)") }
        return (web, url)
    }

    /// One HTTP exchange through curl (redirects not followed): status, headers, body.
    struct Exchange {
        var status: Int
        var headers: String
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    static func http(_ url: String, cookies: String? = nil, form: String? = nil, from address: String? = nil,
                     in dir: TemporaryDirectory) async throws -> Exchange {
        guard let curl = Programs.system("curl") else { throw TestFailure("curl is not installed: run scripts/install-deps") }
        let out = dir.file("curl-\(UUID().uuidString.prefix(8)).body")
        var arguments = ["-s", "-S", "-D", "-", "-o", out, "--max-time", "20"]
        if let address { arguments += ["--interface", address] }  // another loopback address: another client
        if url.hasPrefix("https:") { arguments.append("--insecure") }  // the test's own self-signed certificate
        if let cookies { arguments += ["-b", cookies, "-c", cookies] }
        if let form { arguments += ["--data-raw", form] }
        let process = try ChildProcess(curl, arguments + [url], in: dir, name: "curl")
        guard let exit = await process.waitForExit(timeout: 30) else { throw TestFailure("curl \(url)\n\(process.diagnostics)") }
        if exit != 0 { return Exchange(status: 0, headers: process.stderr, body: []) }  // no HTTP answer at all
        let headers = process.stdout
        let status = headers.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        let body = (try? Data(contentsOf: URL(fileURLWithPath: out))).map { [UInt8]($0) } ?? []
        return Exchange(status: status, headers: headers, body: body)
    }

    static func publish(_ broker: MosquittoBroker, _ topic: String, file: String? = nil, text: String? = nil,
                        in dir: TemporaryDirectory) async throws {
        let tool = try #require(Programs.system("mosquitto_pub"))
        var arguments = ["-h", "127.0.0.1", "-p", "\(broker.port)", "-r", "-q", "1", "-t", topic]
        if let file { arguments += ["-f", file] } else if let text { arguments += text.isEmpty ? ["-n"] : ["-m", text] }
        let process = try ChildProcess(tool, arguments, in: dir, name: "mosquitto_pub")
        #expect(await process.waitForExit(timeout: 10) == 0, "\(process.diagnostics)")
    }

    /// A small real JPEG: Chromium draws an avatar and photographs it.
    static func avatar(_ browser: Chromium, initials: String, colour: String) async throws -> [UInt8] {
        let page = try await browser.newPage(width: 96, height: 96)
        let svg = "<svg xmlns='http://www.w3.org/2000/svg' width='96' height='96'><rect width='96' height='96' fill='\(colour)'/>"
            + "<circle cx='48' cy='38' r='18' fill='%23fff8'/><rect x='18' y='62' width='60' height='40' rx='28' fill='%23fff8'/>"
            + "<text x='48' y='92' font-size='14' text-anchor='middle' fill='white' font-family='sans-serif'>\(initials)</text></svg>"
        try await page.navigate("data:image/svg+xml," + svg.replacingOccurrences(of: "#", with: "%23"))
        return try await page.screenshot(jpegQuality: 70, clip: (0, 0, 96, 96))
    }

    // MARK: - Access

    @Test("without a login nothing but the login page: no name, zone or photo in any answer")
    func staffOnly() async throws {
        let dir = try TemporaryDirectory("web-access")
        let broker = try await MosquittoBroker.start(in: dir)
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "door", "zone": "Entrance", "store": 100}"#],
                                    extra: #""stores": [{"major": 100, "name": "Main Street"}]"#)
        // The retained state of a store with Ana inside, with her photo.
        let photo: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0] + Array("a photo of Ana".utf8) + [0xFF, 0xD9]
        let join = try dir.write("join.json", JoinRequest(profile: ObserverProfile(name: "Ana", favorite: "flat white",
                                                                                    photo: photo)).json)
        try await Self.publish(broker, "beacons/100/1/observers/ana", file: join, in: dir)
        try await Self.publish(broker, "stores/100/roster", text: Roster(store: 100, name: "Main Street", customers: [
            .init(client: "ana", name: "Ana", favorite: "flat white", photo: "beacons/100/1/observers/ana",
                  beacon: BeaconRef(major: 100, minor: 1), since: CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!),
        ]).json(at: nil), in: dir)
        try await Self.publish(broker, "beacons/100/1/presence", text: """
            {"uuid":null,"major":100,"minor":1,"zone":"door","zoneName":"Entrance","gateways":[{"gateway":"door","zone":"Entrance","proximity":"near","rssiSmoothed":-60.0,"distance":1.0}],"proximity":"near","since":"2026-11-21T09:00:00.000Z"}
            """, in: dir)
        let (web, base) = try await Self.startWeb(config: config, in: dir)
        defer { Task { await web.stop() } }

        // Logged in, the greeter shows Ana in the Entrance, and her photo is served.
        let jar = dir.file("cookies")
        let login = try await Self.http(base + "/login", cookies: jar,
                                        form: "username=manager&password=correct+horse+battery+staple&next=%2Fstores%2F100%2Fgreeter",
                                        in: dir)
        #expect(login.status == 303 && login.headers.contains("Location: /stores/100/greeter"), "\(login.headers)")
        #expect(login.headers.contains("HttpOnly") && login.headers.contains("SameSite=Strict"))
        var greeter = try await Self.http(base + "/api/stores/100/greeter", cookies: jar, in: dir)
        _ = await eventually(timeout: 20) {
            greeter = (try? await Self.http(base + "/api/stores/100/greeter", cookies: jar, in: dir)) ?? greeter
            return greeter.text.contains("/photos/100/ana")
        }
        #expect(greeter.status == 200)
        #expect(greeter.text.contains(#""name":"Ana""#) && greeter.text.contains(#""zone":"Entrance""#), "\(greeter.text)")
        let photoPath = try #require(try JSONParser().parse(greeter.text)["customers"]?.arrayValue?.first?["photo"]?.stringValue)
        let served = try await Self.http(base + photoPath, cookies: jar, in: dir)
        #expect(served.status == 200 && served.body == photo)

        // Without the session cookie: every route answers with a redirect to the login or 401.
        let routes = ["/", "/fleet", "/stores/100/greeter", "/stores/100/floor", "/api/fleet", "/api/stores/100/greeter",
                      "/api/stores/100/floor", "/events/fleet", "/events/stores/100/greeter", "/events/stores/100/floor",
                      photoPath, "/photos/100/ana", "/stores/100/greeter?x=1", "/nonexistent"]
        for route in routes {
            let answer = try await Self.http(base + route, in: dir)
            #expect([303, 401, 404].contains(answer.status), "\(route): \(answer.headers)")
            if answer.status == 303 { #expect(answer.headers.contains("Location: /login"), "\(route)") }
            for secret in ["Ana", "flat white", "Entrance", "a photo of Ana"] {
                #expect(!answer.text.contains(secret) && !answer.headers.contains(secret), "\(route) leaks \(secret)")
            }
        }
        // A wrong password or a forged cookie gets nothing either.
        let wrongJar = dir.file("wrong-cookies")
        let wrong = try await Self.http(base + "/login", cookies: wrongJar, form: "username=manager&password=guess", in: dir)
        #expect(wrong.status == 303 && wrong.headers.contains("Location: /login?failed=1"), "\(wrong.headers)")
        #expect(!wrong.headers.lowercased().contains("set-cookie"))
        let forged = try dir.write("forged", "127.0.0.1\tFALSE\t/\tFALSE\t0\tbeacon_web_session\tAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n")
        #expect(try await Self.http(base + "/api/stores/100/greeter", cookies: forged, in: dir).status == 401)
        let login2 = try await Self.http(base + "/login", in: dir)
        #expect(login2.status == 200 && login2.text.contains("Staff login") && !login2.text.contains("Ana"))
        #expect(try await Self.http(base + "/healthz", in: dir).text == "ok\n")

        // The broker goes away: the pages say their data may be out of date, until it is back.
        func live(_ value: Bool) async -> Bool {
            await eventually(timeout: 40, interval: 0.2) {
                (try? await Self.http(base + "/api/stores/100/greeter", cookies: jar, in: dir))?.text
                    .contains(#""live":\#(value)"#) == true
            }
        }
        #expect(await live(true))
        await broker.kill()
        #expect(await live(false), "\(web.diagnostics)")
        try await broker.restart()
        #expect(await live(true), "\(web.diagnostics)")

        // Logging out ends the session.
        #expect(try await Self.http(base + "/logout", cookies: jar, form: "", in: dir).status == 303)
        #expect(try await Self.http(base + "/api/stores/100/greeter", cookies: jar, in: dir).status == 401)

        #expect(await web.stop() == 0, "SIGTERM ends beacon-web cleanly\n\(web.diagnostics)")
        await broker.stop()
    }

    @Test("with a certificate it serves HTTPS only, and the session cookie is Secure")
    func tls() async throws {
        let dir = try TemporaryDirectory("web-tls")
        guard let openssl = Programs.system("openssl") else {
            Issue.record("openssl is not installed: run scripts/install-deps")
            return
        }
        let make = try ChildProcess(openssl, ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                                              "-subj", "/CN=localhost", "-keyout", dir.file("key.pem"),
                                              "-out", dir.file("cert.pem")], in: dir, name: "openssl")
        #expect(await make.waitForExit(timeout: 60) == 0, "\(make.diagnostics)")
        let broker = try await MosquittoBroker.start(in: dir)
        let config = try writeFleet(dir, broker: broker, gateways: [])
        let (web, base) = try await Self.startWeb(config: config, in: dir,
                                                  extra: ["--tls-cert", dir.file("cert.pem"), "--tls-key", dir.file("key.pem")])
        #expect(base.hasPrefix("https://127.0.0.1:"), "\(base)")
        let jar = dir.file("cookies")
        let login = try await Self.http(base + "/login", cookies: jar,
                                        form: "username=manager&password=correct+horse+battery+staple", in: dir)
        #expect(login.status == 303 && login.headers.contains("; Secure"), "\(login.headers)")
        #expect(try await Self.http(base + "/api/fleet", cookies: jar, in: dir).status == 200)
        // Plain HTTP on the same port gets no page.
        let plain = try await Self.http(base.replacingOccurrences(of: "https:", with: "http:") + "/login", in: dir)
        #expect(plain.status != 200)
        #expect(await web.stop() == 0, "\(web.diagnostics)")
        await broker.stop()
    }

    @Test("bad usage and bad users files exit 2 with the reason")
    func badUsage() async throws {
        let dir = try TemporaryDirectory("web-usage")
        let config = try dir.write("fleet.json", #"{"gateways": []}"#)
        let plain = try dir.write("plain-users", "manager:secret\n")
        for (arguments, reason) in [
            (["--config", config], "--users"),
            (["--config", config, "--users", plain], "not a bcrypt hash"),
            (["--config", config, "--users", dir.file("missing")], "cannot read the users file"),
            (["--config", config, "--users", plain, "--tls-cert", "x.pem"], "--tls-cert and --tls-key go together"),
        ] {
            let web = try startProgram("beacon-web", arguments, in: dir)
            #expect(await web.waitForExit(timeout: 30) == 2, "\(arguments)\n\(web.diagnostics)")
            #expect(web.stderr.contains(reason), "\(arguments)\n\(web.diagnostics)")
        }
    }

    // MARK: - Login guards

    @Test("after a login only a path on this site is followed: tabs, newlines, encoded slashes and backslashes go home")
    func nextStaysHere() async throws {
        let dir = try TemporaryDirectory("web-next")
        let broker = try await MosquittoBroker.start(in: dir)
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "door", "store": 100}"#],
                                    extra: #""stores": [{"major": 100, "name": "Main Street"}]"#)
        let (web, base) = try await Self.startWeb(config: config, in: dir)
        defer { Task { await web.stop() } }

        // The issue's attack, as a link to the login page: the form carries "/" on, not the tab path.
        let page = try await Self.http(base + "/login?next=/%09/evil.example/", in: dir)
        #expect(page.status == 200 && page.text.contains(#"name="next" value="/">"#), "\(page.text)")
        #expect(!page.text.contains("evil.example"))
        let good = try await Self.http(base + "/login?next=/stores/100/floor", in: dir)
        #expect(good.text.contains(#"name="next" value="/stores/100/floor">"#))

        // Logging in with each: form-encoded as a browser would send them.
        for (next, location) in [
            ("%2F%09%2Fevil.example%2F", "/"), ("%2F%0A%2Fevil.example", "/"), ("%2F%0D%0A%2Fevil.example", "/"),
            ("%2F%2Fevil.example", "/"), ("%2F%5Cevil.example", "/"), ("%5C%5Cevil.example", "/"),
            ("%2F%252F%2Fevil.example", "/"), ("%2F%255Cevil.example", "/"), ("%2F%2509%2Fevil.example", "/"),
            ("https%3A%2F%2Fevil.example%2F", "/"), ("%20%2F%2Fevil.example", "/"),
            ("%2Fstores%2F100%2Fgreeter%3Fview%3Dtablet", "/stores/100/greeter?view=tablet"),
        ] {
            let jar = dir.file("cookies-\(UUID().uuidString.prefix(8))")
            let login = try await Self.http(base + "/login", cookies: jar,
                                            form: "username=manager&password=correct+horse+battery+staple&next=\(next)", in: dir)
            let sent = login.headers.split(separator: "\r\n").first { $0.lowercased().hasPrefix("location:") }
            #expect(login.status == 303 && sent == "Location: \(location)", "\(next): \(login.headers)")
        }
        #expect(await web.stop() == 0, "\(web.diagnostics)")
        await broker.stop()
    }

    @Test("guessing is slowed per name and per address: past 5 failures 429 with Retry-After, growing; a right password waits too")
    func guessingSlowed() async throws {
        let dir = try TemporaryDirectory("web-guessing")
        let broker = try await MosquittoBroker.start(in: dir)
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "door", "store": 100}"#],
                                    extra: #""stores": [{"major": 100, "name": "Main Street"}]"#)
        // A first wait of 5 s (10 s after one more failure), not the default 1 s: on a loaded
        // CI machine a few seconds can pass between two answers of one curl, and a wait that
        // ran out in between would read as no wait at all.
        let delay = 5
        let (web, base) = try await Self.startWeb(config: config, in: dir, extra: ["--login-delay", "\(delay)"])
        defer { Task { await web.stop() } }
        guard let curl = Programs.system("curl") else { throw TestFailure("curl is not installed: run scripts/install-deps") }
        let right = "correct+horse+battery+staple"
        /// Login attempts in one curl, back to back (the waits are seconds: a process
        /// start between attempts could outlast one): each answer's status, Retry-After
        /// and Location.
        func attempts(_ tries: [(user: String, password: String, from: String)]) async throws -> [String] {
            var arguments: [String] = []
            for attempt in tries {
                if !arguments.isEmpty { arguments.append("--next") }
                arguments += ["-s", "-o", "/dev/null", "--interface", attempt.from,
                              "-w", "%{http_code} %header{retry-after} %header{location}\\n",
                              "--data-raw", "username=\(attempt.user)&password=\(attempt.password)&next=%2Ffleet",
                              base + "/login"]
            }
            let process = try ChildProcess(curl, arguments, in: dir, name: "curl-logins")
            guard await process.waitForExit(timeout: 60) == 0 else { throw TestFailure(process.diagnostics) }
            return process.stdoutLines.map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let failed = "303  /login?failed=1&next=%2Ffleet"
        /// The seconds a 429 asks to wait, if `answer` is one.
        func retryAfter(_ answer: String?) -> Int? {
            guard let parts = answer?.split(separator: " "), parts.first == "429", parts.count == 2 else { return nil }
            return Int(parts[1])
        }
        /// `attempt` alone, again and again, until it is no longer refused for the wait (or
        /// `timeout` s passed): its last answer. A 429 changes nothing, so polling with it
        /// leaves the counts as they were.
        func onceTheWaitIsOver(_ attempt: (user: String, password: String, from: String), timeout: Double) async -> String {
            var answer = ""
            _ = await eventually(timeout: timeout, interval: 0.25) {
                answer = (try? await attempts([attempt]))?.first ?? ""
                return !answer.isEmpty && !answer.hasPrefix("429")
            }
            return answer
        }

        // Five wrong passwords are answered as ever, and the sixth; then the name waits 5 s,
        // even with the right password and from another address; another name does not.
        // Retry-After counts down (rounded up), so it is at most the wait.
        let first = try await attempts((1...6).map { ("manager", "guess\($0)", "127.0.0.1") }
            + [("manager", right, "127.0.0.1"), ("manager", right, "127.0.0.2"), ("ben", "guess", "127.0.0.2")])
        #expect(first.count == 9 && first.prefix(6).allSatisfy { $0 == failed } && first.last == failed, "\(first)")
        #expect(first.count == 9 && first[6...7].allSatisfy { retryAfter($0).map { (1...delay).contains($0) } == true },
                "\(first)")

        // Once the wait is over one more failure doubles it (10 s), for that name and for this
        // address, whatever the name. Each poll is that one try alone: a 429 changes nothing,
        // while a poll that also sent the right password could land just after the wait ran
        // out, log in and clear the name's count (the CI failures of 45584f8 and 47c45e1).
        let doubling = await onceTheWaitIsOver(("manager", "guess7", "127.0.0.1"), timeout: 30)
        #expect(doubling == failed, "\(doubling)")
        // More than the first wait is left, whatever the load.
        let second = try await attempts([("nobody-at-all", "guess", "127.0.0.1"), ("manager", right, "127.0.0.2")])
        #expect(second.count == 2
                && second.allSatisfy { retryAfter($0).map { (delay + 1...2 * delay).contains($0) } == true },
                "\(second)")

        // After the wait the right password gets in and clears the count: a wrong one then is
        // answered at once again.
        let welcome = await onceTheWaitIsOver(("manager", right, "127.0.0.1"), timeout: 40)
        #expect(welcome == "303  /fleet", "\(welcome)")
        let third = try await attempts([("manager", "guess8", "127.0.0.1")])
        #expect(third == [failed], "\(third)")
        #expect(web.stderr.contains("login refused: too many failed attempts"), "\(web.diagnostics)")
        #expect(await web.stop() == 0, "\(web.diagnostics)")
        await broker.stop()
    }

    /// bcrypt's cost 8 here, not the decoy's old fixed 10: a decoy of another cost than the
    /// real hashes would show as a ratio of 4 (or 1/4) between the medians.
    @Test("a known and an unknown name are refused in the same time (medians over 40 interleaved tries)")
    func sameTimeForEveryName() async throws {
        let dir = try TemporaryDirectory("web-timing")
        let broker = try await MosquittoBroker.start(in: dir)
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "door", "store": 100}"#],
                                    extra: #""stores": [{"major": 100, "name": "Main Street"}]"#)
        let (web, base) = try await Self.startWeb(config: config, in: dir, extra: ["--login-attempts", "1000"], cost: 8)
        defer { Task { await web.stop() } }
        guard let curl = Programs.system("curl") else { throw TestFailure("curl is not installed: run scripts/install-deps") }

        // One curl, one connection, the two kinds of try alternating (which goes first alternates too).
        let tries = 40
        var arguments: [String] = []
        for i in 0..<tries {
            let pair = ["manager", "nobody"]
            for user in i % 2 == 0 ? pair : pair.reversed() {
                if !arguments.isEmpty { arguments.append("--next") }
                arguments += ["-s", "-o", "/dev/null", "-w", "\(user) %{http_code} %{time_total}\\n",
                              "--data-raw", "username=\(user)&password=wrong\(i)", base + "/login"]
            }
        }
        let process = try ChildProcess(curl, arguments, in: dir, name: "curl-timing")
        #expect(await process.waitForExit(timeout: 120) == 0, "\(process.diagnostics)")
        var times: [String: [Double]] = [:]
        for line in process.stdoutLines {
            let parts = line.split(separator: " ")
            guard parts.count == 3, parts[1] == "303", let seconds = Double(parts[2]) else {
                Issue.record("unexpected answer: \(line)")
                continue
            }
            times[String(parts[0]), default: []].append(seconds)
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
        let known = try #require(times["manager"]), unknown = try #require(times["nobody"])
        #expect(known.count == tries && unknown.count == tries)
        let ratio = median(unknown) / median(known)
        let summary = "known: median \(median(known) * 1000) ms \(known.sorted().map { Int($0 * 1000) }); "
            + "unknown: median \(median(unknown) * 1000) ms \(unknown.sorted().map { Int($0 * 1000) })"
        print("login timing: \(summary)")
        #expect(ratio > 0.67 && ratio < 1.5, "\(summary)")
        // bcrypt is what takes the time (the comparison means something).
        #expect(median(known) > 0.002, "\(summary)")
        #expect(await web.stop() == 0, "\(web.diagnostics)")
        await broker.stop()
    }

    @Test("unreadable MQTT input is counted and shown on the fleet page, and logged at most once per 10 s")
    func malformedInput() async throws {
        let dir = try TemporaryDirectory("web-malformed")
        let broker = try await MosquittoBroker.start(in: dir)
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "door", "store": 100}"#],
                                    extra: #""stores": [{"major": 100, "name": "Main Street"}]"#)
        let (web, base) = try await Self.startWeb(config: config, in: dir)
        defer { Task { await web.stop() } }
        let jar = dir.file("cookies")
        #expect(try await Self.http(base + "/login", cookies: jar,
                                    form: "username=manager&password=correct+horse+battery+staple", in: dir).status == 303)

        // 200 broken health reports, then one broken presence report, as fast as mosquitto_pub sends them.
        let lines = try dir.write("bad.txt", (0..<200).map { "[\($0)" }.joined(separator: "\n") + "\n")
        let pub = try ChildProcess(try #require(Programs.system("mosquitto_pub")),
                                   ["-h", "127.0.0.1", "-p", "\(broker.port)", "-q", "1", "-t", "gateways/door/health",
                                    "-l"], in: dir, name: "mosquitto_pub", stdin: FileHandle(forReadingAtPath: lines))
        #expect(await pub.waitForExit(timeout: 30) == 0, "\(pub.diagnostics)")
        try await Self.publish(broker, "beacons/100/1/presence", text: "{", in: dir)
        var fleet = JSONValue.null
        #expect(await eventually(timeout: 20, interval: 0.2) {
            fleet = (try? await Self.http(base + "/api/fleet", cookies: jar, in: dir)).flatMap { try? JSONParser().parse($0.text) }
                ?? .null
            return fleet["malformed"] == .number(201)
        }, "\(fleet)")
        #expect(fleet["lastMalformed"]?["topic"] == .string("beacons/100/1/presence"))
        #expect(fleet["lastMalformed"]?["reason"] == .string("not a fleet presence report"))
        // The page draws it from its embedded data with the site's script.
        let page = try await Self.http(base + "/fleet", cookies: jar, in: dir)
        #expect(page.text.contains(#""malformed":201,"lastMalformed":{"#), "\(page.text)")
        #expect(try await Self.http(base + "/assets/app.js", in: dir).text.contains("unreadable messages"))
        let logged = (web.stdout + web.stderr).components(separatedBy: "ignored an unreadable message").count - 1
        #expect((1...3).contains(logged), "\(logged) lines for 201 messages\n\(web.diagnostics)")
        #expect(await web.stop() == 0, "\(web.diagnostics)")
        await broker.stop()
    }

    // MARK: - In a browser

    /// What one gateway of a small store hears for 20 s (replayed in a loop): Ana's beacon
    /// (100/1) at `ana` dBm and Ben's (100/2) at `ben`, four times a second each; and, at
    /// `till` dBm, the Eddystone-UID tag 00112233445566778899/aabbccddeeff, which also sends
    /// an unencrypted TLM frame once a second: 2950 mV, 21.5 °C, 1200 adverts, up 3600 s.
    static func capture(ana: Int8, ben: Int8, till: Int8? = nil) throws -> [UInt8] {
        let tag = EddystoneUID(txPower: -18, namespace: EddystoneNamespace(hex: "00112233445566778899")!,
                               instance: EddystoneInstance(hex: "aabbccddeeff")!)
        var writer = BtsnoopWriter(datalink: .h4)
        let start = CaptureTime(iso8601: "2026-11-21T09:00:00.000Z")!
        for i in 0..<80 {
            let t = Double(i) * 0.25, jitter = Int8((i * 7) % 5) - 2
            writer.appendEvent(advertisingEvent(IBeacon(uuid: uuid, major: 100, minor: 1, txPower: -59),
                                                address: 0xC0_00_00_64_00_01, rssi: ana + jitter), at: start + t)
            writer.appendEvent(advertisingEvent(IBeacon(uuid: uuid, major: 100, minor: 2, txPower: -59),
                                                address: 0xC0_00_00_64_00_02, rssi: ben + jitter), at: start + t + 0.1)
            if let till {
                // TLM (google/eddystone eddystone-tlm/tlm-plain.md): frame 0x20, version 0,
                // battery mV, temperature 8.8 °C, advert count, uptime in 0.1 s; big-endian.
                let tlm: [UInt8] = [0x02, 0x01, 0x06, 0x03, 0x03, 0xAA, 0xFE, 0x11, 0x16, 0xAA, 0xFE, 0x20, 0x00,
                                    0x0B, 0x86, 0x15, 0x80, 0x00, 0x00, 0x04, 0xB0, 0x00, 0x00, 0x8C, 0xA0]
                let address = BluetoothAddress(rawValue: 0xE0_00_00_00_00_01)
                writer.appendEvent(HCIEventBuilder.legacyReport([.init(address: address, data: AdvertisingData.eddystoneUID(tag),
                                                                       rssi: till + jitter)]), at: start + t + 0.2)
                if i % 4 == 3 {
                    writer.appendEvent(HCIEventBuilder.legacyReport([.init(address: address, data: tlm, rssi: till + jitter)]),
                                       at: start + t + 0.22)
                }
            }
        }
        return writer.bytes
    }

    /// Two gateways replaying a store where Ana (beacon 100/1) stands at the door and Ben
    /// (100/2) at the counter (each heard faintly by the other gateway too); the brain;
    /// the customers' apps; beacon-web; Chromium.
    @Test("a real browser shows the right people in the right zones, live, and updates when a customer leaves")
    func inTheBrowser() async throws {
        guard Chromium.executable != nil else {
            Issue.record("chromium is not installed: run scripts/install-deps")
            return
        }
        let dir = try TemporaryDirectory("web-browser")
        let shots = dir.file("screenshots")
        let broker = try await MosquittoBroker.start(in: dir)
        let door = try dir.write("door.log", bytes: try Self.capture(ana: -50, ben: -88))
        let counter = try dir.write("counter.log", bytes: try Self.capture(ana: -88, ben: -50))
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "door", "source": "btsnoop:\#(door)?loop", "zone": "Entrance", "store": 100, "position": {"x": 2.5, "y": 6}}"#,
            #"{"id": "counter", "source": "btsnoop:\#(counter)?loop", "zone": "Counter", "store": 100, "position": {"x": 15, "y": 3}}"#,
        ], extra: """
        "stores": [{"major": 100, "name": "Main Street", "floorPlan": {"width": 20, "height": 10}}],
        "beacons": [{"uuid": "\(Self.uuid)", "major": 100, "minor": 1, "name": "tag-1"},
                    {"uuid": "\(Self.uuid)", "major": 100, "minor": 2, "name": "tag-2"}],
        "homeAssistant": {"discovery": true}
        """, defaults: #"{"exitTimeout": 10, "healthInterval": 2}"#)
        var processes: [ChildProcess] = []
        let browser = try Chromium(in: dir)
        func failure() -> String {
            "screenshots: \(shots)\n" + processes.map(\.diagnostics).joined(separator: "\n") + "\n" + browser.diagnostics
        }
        do {
            for id in ["door", "counter"] {
                processes.append(try startProgram("beacon-gateway", ["--config", config, "--id", id], in: dir))
            }
            processes.append(try startProgram("beacon-brain", ["--config", config], in: dir))
            let (web, base) = try await Self.startWeb(config: config, in: dir)
            processes.append(web)
            let discovery = try await MosquittoSubscriber.start(broker: broker, filters: ["homeassistant/#"], in: dir)

            let photo = try dir.write("ana.jpg", bytes: try await Self.avatar(browser, initials: "ANA", colour: "#0b7a75"))
            var observers: [String: ChildProcess] = [:]
            for (client, name, drink, minor) in [("ana", "Ana", "flat white", 1), ("ben", "Ben", "chai latte", 2)] {
                let profile = try dir.write("\(client).json", #"{"name": "\#(name)", "favorite": "\#(drink)"}"#)
                var arguments = ["observe", "--broker", broker.url, "--client", client, "--major", "100",
                                 "--minor", "\(minor)", "--profile", profile]
                if client == "ana" { arguments += ["--photo", photo] }
                let observer = try startProgram("beaconctl", arguments, in: dir)
                observers[client] = observer
                processes.append(observer)
            }

            // Log in once, in the browser, as staff do.
            let greeter = try await browser.newPage(width: 1180, height: 820)
            try await greeter.navigate(base + "/stores/100/greeter")
            #expect(try await greeter.evaluate("location.pathname") == .string("/login"), "\(failure())")
            _ = try await greeter.evaluate("""
                document.querySelector('[name=username]').value = 'manager';
                document.querySelector('[name=password]').value = '\(Self.password)';
                document.querySelector('form.login').submit(); true
                """)
            let arrived = try await greeter.waitFor("location.pathname === '/stores/100/greeter' && document.readyState === 'complete'")
            #expect(arrived != nil, "\(failure())")

            // The greeter: both customers, newest first, each in the zone of the gateway that hears them best.
            let people = """
                JSON.stringify([...document.querySelectorAll('.customer')].map(c => [c.dataset.client,
                  c.querySelector('.name').textContent, c.querySelector('.drink').textContent, c.querySelector('.zone').textContent,
                  !!c.querySelector('img.photo') && c.querySelector('img.photo').naturalWidth]))
                """
            let both = try await greeter.waitFor("""
                (() => { const p = \(people); return p.includes('"Entrance"') && p.includes('"Counter"') && p.includes(',96]') ? p : ''; })()
                """, timeout: 60)
            try await greeter.save(screenshot: "greeter", in: shots)
            let shownGreeter = await greeter.shown(people)
            let list = try JSONParser().parse(try #require(both?.stringValue, "greeter never showed both: \(shownGreeter)\n\(failure())"))
            let rows = try #require(list.arrayValue)
            #expect(rows.count == 2)
            let ana = try #require(rows.first { $0.arrayValue?.first == .string("ana") }?.arrayValue)
            let ben = try #require(rows.first { $0.arrayValue?.first == .string("ben") }?.arrayValue)
            #expect(ana[1] == .string("Ana") && ana[2] == .string("☕ flat white") && ana[3] == .string("Entrance"))
            #expect(ana[4] == .number(96), "Ana's photo is shown")
            #expect(ben[1] == .string("Ben") && ben[3] == .string("Counter") && ben[4] == .bool(false))

            // The floor: gateways where the config puts them, each customer's dot in their zone.
            let floor = try await browser.newPage()
            try await floor.navigate(base + "/stores/100/floor")
            let dots = try await floor.waitFor("""
                (() => { const d = [...document.querySelectorAll('.dot')].map(n => n.dataset.beacon + '@' + n.dataset.zone + ':' + n.textContent).sort().join(' ');
                         return d === '100/1@door:Ana 100/2@counter:Ben' ? d : ''; })()
                """)
            let shownFloor = await floor.shown()
            #expect(dots != nil, "floor: \(shownFloor)\n\(failure())")
            #expect(try await floor.evaluate("document.querySelector('.gateway[data-id=door]').getAttribute('transform')")
                    == .string("translate(2.5,6)"))
            try await floor.save(screenshot: "floor", in: shots)

            // The fleet: both gateways up.
            let fleet = try await browser.newPage()
            try await fleet.navigate(base + "/fleet")
            let healthy = try await fleet.waitFor("""
                [...document.querySelectorAll('tr.gateway')].map(r => r.dataset.id + ':' + r.dataset.condition).join(' ') === 'door:ok counter:ok'
                """)
            let shownFleet = await fleet.shown()
            #expect(healthy != nil, "fleet: \(shownFleet)\n\(failure())")
            try await fleet.save(screenshot: "fleet", in: shots)

            // Home Assistant learns about Ben while he is in.
            let benConfig = "homeassistant/device_tracker/beaconbridge/customer_100_ben/config"
            #expect(await discovery.waitFor(timeout: 20) { $0.topic == benConfig && $0.text.contains(#""name":"Ben""#) } != nil)

            // Ben leaves (his app says so) and the counter gateway goes down: every page follows, live.
            let before = try await greeter.evaluate("Number(document.body.dataset.updates)")
            observers["ben"]?.signal(SIGINT)
            let counterGateway = processes[1]
            #expect(await counterGateway.stop() == 0, "\(failure())")
            // His tag is still heard (by the door): the card is held for the exit timeout (10 s), then goes.
            let left = try await greeter.waitFor("""
                (() => { const p = \(people); return !p.includes('"ben"') && p.includes('"ana"') ? p : ''; })()
                """, timeout: 40)
            let shownLeft = await greeter.shown(people)
            #expect(left != nil, "greeter still shows Ben: \(shownLeft)\n\(failure())")
            #expect(try await greeter.evaluate("location.pathname") == .string("/stores/100/greeter"), "no reload")
            #expect((try await greeter.evaluate("Number(document.body.dataset.updates)").numberValue ?? 0) > (before.numberValue ?? 0))
            // Ben's tag is still heard, now only by the door: it moves there, no longer labelled Ben.
            let gone = try await floor.waitFor("""
                [...document.querySelectorAll('.dot')].map(n => n.dataset.beacon + '@' + n.dataset.zone + ':' + n.textContent).sort()
                  .join(' ') === '100/1@door:Ana 100/2@door:tag-2'
                """)
            let shownGone = await floor.shown()
            #expect(gone != nil, "floor: \(shownGone)\n\(failure())")
            let offline = try await fleet.waitFor("""
                (() => { const r = document.querySelector('tr.gateway[data-id=counter]');
                         return r && r.dataset.condition === 'offline' && r.classList.contains('attention'); })()
                """)
            let shownOffline = await fleet.shown()
            #expect(offline != nil, "fleet: \(shownOffline)\n\(failure())")
            try await greeter.save(screenshot: "greeter-after", in: shots)
            try await floor.save(screenshot: "floor-after", in: shots)
            try await fleet.save(screenshot: "fleet-after", in: shots)
            #expect(await discovery.waitFor(timeout: 20) { $0.topic == benConfig && $0.payload.isEmpty } != nil,
                    "Ben's Home Assistant entity is removed when he leaves")

            // A browser without the login sees the login page and nobody's name.
            let stranger = try await browser.newPage(isolated: true)
            try await stranger.navigate(base + "/stores/100/greeter")
            #expect(try await stranger.evaluate("location.pathname") == .string("/login"))
            let strangerText = try await stranger.evaluate("document.documentElement.outerHTML").stringValue ?? ""
            #expect(!strangerText.contains("Ana") && !strangerText.contains("flat white"))

            await discovery.stop()
        } catch {
            Issue.record("\(error)\n\(failure())")
        }
        await browser.stop()
        for process in processes.reversed() { await process.stop() }
        await broker.stop()
        if FileManager.default.fileExists(atPath: shots) {
            // Kept as the test's artefacts when asked to (BEACONBRIDGE_KEEP_TEST_FILES=1 keeps the whole directory).
            if let target = Foundation.ProcessInfo.processInfo.environment["BEACONBRIDGE_SCREENSHOTS"] {
                try? FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
                for name in (try? FileManager.default.contentsOfDirectory(atPath: shots)) ?? [] {
                    try? FileManager.default.removeItem(atPath: target + "/" + name)
                    try? FileManager.default.copyItem(atPath: shots + "/" + name, toPath: target + "/" + name)
                }
            }
        }
    }
    // MARK: - The storefront greeter's shopkeeper

    /// What the counter gateway hears in a loop of 22 s: Ana's own tag (100/1) at the counter
    /// (-45 dBm at -59 dBm measured power: about 0.2 m, "immediate") four times a second for
    /// 14 s, then nothing for 8 s: a drop-out shorter than the exit timeout (10 s), long
    /// enough for the proximity roster to let her go (the gateway calls the silent tag
    /// `unknown` after 5 s, the roster waits `leaveAfter`, 1 s here).
    static func dropOutCapture() -> [UInt8] {
        var writer = BtsnoopWriter(datalink: .h4)
        // Dated now, as a live radio's reports are: the brain dates a visit in capture time.
        let start = CaptureTime(seconds: Date().timeIntervalSince1970.rounded(.down))
        for i in 0..<56 {
            let t = Double(i) * 0.25, jitter = Int8((i * 7) % 5) - 2
            writer.appendEvent(advertisingEvent(IBeacon(uuid: uuid, major: 100, minor: 1, txPower: -59),
                                                address: 0xC0_00_00_64_00_01, rssi: -45 + jitter), at: start + t)
        }
        // The loop's end: the capture's last record is 22 s after its first.
        writer.appendEvent(HCIEventBuilder.commandComplete(0x0C03), at: start + 22)
        return writer.bytes
    }

    /// Seed 002 (the storefront greeter): "let a shopkeeper know when a customer enters the
    /// store and provide the shopkeeper with a little bit of information about the customer",
    /// with "the "enter shop" trigger at "immediate" range and the "leave shop" trigger at
    /// "far"". Ana's tag is on the store's proximity roster (the greeter's way, no app); Ben's
    /// app joined his own tag, which is not in the store. With the shipped defaults
    /// (`brain.joins`), the real gateway, brain, `beaconctl observe`, beacon-web and Chromium:
    ///
    /// - Ana's card says "in store since" and "at Counter since", and stays the same card with
    ///   the same "in store since" through her tag's drop-outs, although the brain takes her
    ///   off the roster and puts her back each time;
    /// - Ben is listed apart, "not in range", never in a zone's colour, and leaves that list
    ///   at once when his join ends.
    @Test("the greeter page: in store and at the counter apart, a card steady through drop-outs, app users not in range apart")
    func shopkeeperSees() async throws {
        guard Chromium.executable != nil else {
            Issue.record("chromium is not installed: run scripts/install-deps")
            return
        }
        let dir = try TemporaryDirectory("web-shopkeeper")
        let broker = try await MosquittoBroker.start(in: dir)
        let capture = try dir.write("counter.log", bytes: Self.dropOutCapture())
        let config = try writeFleet(dir, broker: broker, gateways: [
            #"{"id": "counter", "source": "btsnoop:\#(capture)?loop", "zone": "Counter", "store": 100}"#,
        ], extra: """
        "stores": [{"major": 100, "name": "Main Street", "roster": {"from": "both", "leaveAfter": 1}}],
        "beacons": [{"uuid": "\(Self.uuid)", "major": 100, "minor": 1, "owner": "ana",
                     "profile": {"name": "Ana", "favorite": "latte"}},
                    {"uuid": "\(Self.uuid)", "major": 100, "minor": 2, "owner": "ben"}],
        "brain": {}
        """)
        var processes: [ChildProcess] = []
        let browser = try Chromium(in: dir)
        func failure() -> String { processes.map(\.diagnostics).joined(separator: "\n") + "\n" + browser.diagnostics }
        do {
            let roster = try await MosquittoSubscriber.start(broker: broker, filters: ["stores/100/customers/+"], in: dir)
            processes.append(try startProgram("beacon-brain", ["--config", config], in: dir))
            processes.append(try startProgram("beacon-gateway", ["--config", config, "--id", "counter"], in: dir))
            let (web, base) = try await Self.startWeb(config: config, in: dir)
            processes.append(web)
            let profile = try dir.write("ben.json", #"{"name": "Ben", "favorite": "chai"}"#)
            let ben = try startProgram("beaconctl", ["observe", "--broker", broker.url, "--client", "ben", "--major", "100",
                                                     "--minor", "2", "--profile", profile], in: dir)
            processes.append(ben)

            let page = try await browser.newPage(width: 1180, height: 820)
            try await page.navigate(base + "/stores/100/greeter")
            try await Self.logIn(page)
            let both = try await page.waitFor("""
                !!document.querySelector('.customers:not(.apart) .customer[data-client=ana] .zone')
                  && !!document.querySelector('.notinrange .customer[data-client=ben]')
                """, timeout: 60)
            let shown = await page.shown()
            try #require(both != nil, "Ana in the store and Ben apart: \(shown)\n\(failure())")
            // From now on, every state of the page the browser draws.
            _ = try await page.evaluate("""
                window.seen = [];
                const note = () => {
                  const a = document.querySelector('.customers:not(.apart) .customer[data-client=ana]');
                  const b = document.querySelector('.customer[data-client=ben]');
                  const line = (a ? 'ana@' + a.querySelector('.instore .since').dataset.since + (a.dataset.away ? '~away' : '')
                                  : 'ana-missing')
                    + ' ' + (b ? 'ben' + (b.closest('.apart') ? '-apart' : '-inside') + (b.dataset.away ? '~away' : '') : 'ben-gone');
                  if (window.seen[window.seen.length - 1] !== line) window.seen.push(line);
                };
                note();
                new MutationObserver(note).observe(document.getElementById('app'), { childList: true, subtree: true });
                true
                """)
            let ana = "document.querySelector('.customer[data-client=ana]').innerText"
            let text = try await page.evaluate(ana).stringValue ?? ""
            #expect(text.contains("Ana") && text.contains("latte"), "\(text)")
            #expect(text.contains("in store since ") && text.contains("at Counter since "), "\(text)")
            // Ben: "not in range", in the muted colour, not the zone's.
            let benCard = try await page.evaluate("""
                (() => { const b = document.querySelector('.customer[data-client=ben]');
                         return [b.innerText, !!b.querySelector('.zone'), getComputedStyle(b.querySelector('.nozone')).color,
                                 getComputedStyle(document.querySelector('.customer[data-client=ana] .zone')).color]; })()
                """).arrayValue ?? []
            #expect(benCard.first?.stringValue?.contains("not in range") == true, "\(benCard)")
            #expect(benCard.count == 4 && benCard[1] == .bool(false) && benCard[2] != benCard[3], "\(benCard)")

            // The brain takes Ana off the roster in a drop-out and puts her back.
            let off = await roster.waitFor(timeout: 60) { $0.topic == "stores/100/customers/ana" && $0.payload.isEmpty }
            try #require(off != nil, "no drop-out took Ana off the roster: \(roster.records)\n\(failure())")
            let mark = roster.records.count
            let back = await eventually(timeout: 30) {
                roster.records.dropFirst(mark).contains { $0.topic == "stores/100/customers/ana" && !$0.payload.isEmpty }
            }
            try #require(back, "Ana never came back on the roster: \(roster.records)\n\(failure())")
            let steadied = try await page.waitFor("""
                window.seen.some(l => l.includes('~away')) && !window.seen[window.seen.length - 1].includes('~away')
                """, timeout: 20)
            let seen = (try await page.evaluate("window.seen.join('\\n')").stringValue ?? "").split(separator: "\n").map(String.init)
            #expect(steadied != nil, "the page held Ana's card while she was off the roster: \(seen)")
            let sinces = Set(seen.compactMap { $0.split(separator: " ").first.flatMap { $0.hasPrefix("ana@") ? $0.dropFirst(4).split(separator: "~").first.map(String.init) : nil } })
            #expect(!seen.contains { $0.hasPrefix("ana-missing") }, "Ana's card never left: \(seen)")
            #expect(sinces.count == 1, "\"in store since\" never restarted: \(seen)")

            // Ben's app leaves: his card goes at once, not held.
            ben.signal(SIGINT)
            let gone = try await page.waitFor("!document.querySelector('.customer[data-client=ben]')", timeout: 20)
            let after = (try await page.evaluate("window.seen.join('\\n')").stringValue ?? "")
            #expect(gone != nil, "Ben is still listed: \(after)\n\(failure())")
            #expect(!after.contains("ben-apart~away") && !after.contains("ben-inside"), "\(after)")
            await roster.stop()
        } catch {
            Issue.record("\(error)\n\(failure())")
        }
        await browser.stop()
        for process in processes.reversed() { await process.stop() }
        await broker.stop()
    }
}

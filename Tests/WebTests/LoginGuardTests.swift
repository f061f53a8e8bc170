import Testing
import WebServer

@Suite("the login's guards: where it redirects, how it slows guessing")
struct LoginGuardTests {
    // What the form or the query string gives (already percent-decoded once).
    @Test("a path on this site is followed as it is", arguments: [
        "/", "/fleet", "/stores/100/greeter", "/stores/100/greeter?x=1&y=%20z", "/api/fleet?since=2026-11-27T09:00:00Z",
        "/photos/100/ana~1", "/a/b/../c", "/caf%C3%A9", "/x?next=//not-a-redirect",
    ])
    func followed(path: String) {
        #expect(SameOriginPath(path)?.text == path)
        #expect(SameOriginPath.orHome(path) == path)
    }

    @Test("anything else goes home", arguments: [
        // other hosts, written the ways browsers accept
        "//evil.example/", "/\\evil.example/", "\\\\evil.example", "/\t/evil.example/", "/\n/evil.example/",
        "/\r\n/evil.example/", "\t//evil.example/", " /evil", "/ /evil.example", "/\u{0B}/evil.example",
        "https://evil.example/", "http:/evil.example", "javascript:alert(1)", "evil.example", "",
        // encoded slashes, backslashes and control characters that a decoder would turn back into the above
        "/%2F/evil.example", "/%2f/evil.example", "/%5C/evil.example", "/%5c%5cevil.example", "/%09/evil.example/",
        "/%0d%0aSet-Cookie:x=1", "/%00", "/%7F",
        // broken escapes, fragments, anything outside ASCII
        "/%", "/%2", "/%zz", "/a#b", "/caf\u{E9}", "/\u{FF0F}\u{FF0F}evil.example", "/\u{2028}",
    ])
    func refused(next: String) {
        #expect(SameOriginPath(next) == nil, "\(next.debugDescription)")
        #expect(SameOriginPath.orHome(next) == "/")
    }

    @Test("a very long path is refused")
    func long() {
        #expect(SameOriginPath("/" + String(repeating: "a", count: SameOriginPath.maxLength - 1)) != nil)
        #expect(SameOriginPath("/" + String(repeating: "a", count: SameOriginPath.maxLength)) == nil)
        #expect(SameOriginPath.orHome(nil) == "/")
    }

    @Test("past the free failures a name waits 1, 2, 4 … s, at most maxDelay; known or not is the same")
    func perUser() {
        var throttle = LoginThrottle()
        let free = throttle.settings.freeFailures
        var now = 1000.0
        for i in 0..<free {
            #expect(throttle.check(user: "ana", address: "10.0.0.\(i)", at: now) == nil)
            throttle.failed(user: "ana", address: "10.0.0.\(i)", at: now)
        }
        // The 6th failure from yet another address: the name waits 1 s.
        #expect(throttle.check(user: "ana", address: "10.0.1.1", at: now) == nil)
        throttle.failed(user: "ana", address: "10.0.1.1", at: now)
        #expect(throttle.check(user: "ana", address: "10.0.1.2", at: now) == .init(retryAfter: 1, limit: "user"))
        #expect(throttle.check(user: "ben", address: "10.0.1.2", at: now) == nil, "another name is not held up")
        var expected = 1.0
        for _ in 0..<12 {
            now += expected
            #expect(throttle.check(user: "ana", address: "10.0.2.1", at: now) == nil)
            throttle.failed(user: "ana", address: "10.0.2.\(Int(expected) % 250)", at: now)
            expected = min(expected * 2, throttle.settings.maxDelay)
            #expect(throttle.check(user: "ana", address: "10.0.3.1", at: now)?.retryAfter == Int(expected))
            #expect(throttle.check(user: "ana", address: "10.0.3.1", at: now + expected - 0.5)?.retryAfter == 1)
        }
        #expect(expected == throttle.settings.maxDelay)
        // A right password ends it for that name.
        now += expected
        throttle.succeeded(user: "ana", address: "10.0.3.1")
        throttle.failed(user: "ana", address: "10.0.3.1", at: now)
        #expect(throttle.check(user: "ana", address: "10.0.3.9", at: now) == nil)
    }

    @Test("one address trying many names waits too")
    func perAddress() {
        var throttle = LoginThrottle()
        for i in 0...throttle.settings.freeFailures {
            throttle.failed(user: "guess-\(i)", address: "192.0.2.7", at: 50)
        }
        #expect(throttle.check(user: "someone-new", address: "192.0.2.7", at: 50) == .init(retryAfter: 1, limit: "address"))
        #expect(throttle.check(user: "someone-new", address: "192.0.2.8", at: 50) == nil)
        #expect(throttle.check(user: "someone-new", address: "192.0.2.7", at: 51) == nil)
    }

    @Test("a name quiet for forgetAfter starts afresh; the tables stay bounded")
    func forgetting() {
        var settings = LoginThrottle.Settings()
        settings.maxKeys = 100
        var throttle = LoginThrottle(settings: settings)
        for _ in 0..<settings.freeFailures { throttle.failed(user: "ana", address: "a", at: 10) }
        throttle.failed(user: "ana", address: "b", at: 10 + settings.forgetAfter)
        #expect(throttle.check(user: "ana", address: "c", at: 10 + settings.forgetAfter) == nil,
                "the old failures were forgotten: this is the first of a new count")
        // Ten thousand names from ten thousand addresses: the oldest are dropped, the newest kept.
        for i in 0..<10_000 {
            for _ in 0...settings.freeFailures { throttle.failed(user: "u\(i)", address: "x\(i)", at: 2000 + Double(i) / 1000) }
        }
        #expect(throttle.check(user: "u9999", address: "elsewhere", at: 2010) != nil)
        #expect(throttle.check(user: "u0", address: "elsewhere", at: 2010) == nil)
        #expect(throttle.trackedKeys <= 2 * settings.maxKeys)
    }

    @Test("unknown names are checked against a decoy of the cost the real hashes have", arguments: [
        (["ana": StaffAccountsTests.hash], 4),
        (["ana": "$2b$08$" + String(repeating: "a", count: 53), "ben": "$2b$08$" + String(repeating: "b", count: 53),
          "cy": "$2b$06$" + String(repeating: "c", count: 53)], 8),
        ([:], 12),
    ] as [([String: String], Int)])
    func decoyCost(hashes: [String: String], cost: Int) {
        #expect(StaffAccounts.decoyCost(for: hashes) == UInt8(cost))
        if !hashes.isEmpty, cost < 10 { #expect(StaffAccounts(hashes: hashes).decoyCost == UInt8(cost)) }
    }
}

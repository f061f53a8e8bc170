import BeaconKit
import Foundation
import SystemCalls
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The service manager's side of `Type=notify` and `WatchdogSec=`: what our executables send
/// to `$NOTIFY_SOCKET`, received on a socket the test owns, as systemd would receive it.
/// (Whether systemd then restarts a silent service is systemd's part; this machine's PID 1
/// is not systemd, see docs/REAL-RADIOS.md.)
@Suite("service manager notifications")
struct ServiceManagerTests {
    @Test("the gateway says READY=1, sends WATCHDOG=1 while scan, MQTT and timer loops run, none while stopped, STOPPING=1 on SIGTERM")
    func gatewayKeepAlives() async throws {
        let dir = try TemporaryDirectory("notify-gateway")
        let broker = try await MosquittoBroker.start(in: dir)
        let btvirt = try await BtvirtServer.start(in: dir)
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "lab", "source": "\#(btvirt.sourceURI)"}"#])
        let manager = try NotifySocket(in: dir)
        defer { manager.stop() }
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "lab"], in: dir,
                                       environment: manager.environment(watchdog: 2))

        #expect(await eventually(timeout: 20) { manager.count("READY=1") == 1 }, "\(manager.lines)\n\(gateway.diagnostics)")
        // Keep-alives only come while every loop goes round, the scan loop on btvirt included.
        #expect(await eventually(timeout: 20) {
            manager.lines.contains { $0.hasPrefix("STATUS=broker connected; source h4:unix:") && $0.contains(" running;") }
                && manager.count("WATCHDOG=1") >= 4
        }, "\(manager.lines)\n\(gateway.diagnostics)")
        #expect(manager.count("WATCHDOG=trigger") == 0, "\(manager.lines)")

        // A stopped process (the hang systemd's watchdog is for) sends nothing. Once the kernel
        // says all its threads are stopped, what it sent before is queued on the socket ahead of the test's
        // mark; counted when the mark has been read.
        gateway.signal(SIGSTOP)
        #expect(await eventually { processStopped(gateway.pid) }, "\(gateway.diagnostics)")
        #expect(await manager.mark("stopped"), "\(manager.lines)")
        let beforeSilence = manager.count("WATCHDOG=1")
        // The scenario itself: stopped for twice the watchdog interval (2 s), in which a
        // running gateway sends four keep-alives. What it sent would be ahead of the second mark.
        try await Task.sleep(nanoseconds: 4_000_000_000)
        #expect(await manager.mark("silence"), "\(manager.lines)")
        #expect(manager.count("WATCHDOG=1") == beforeSilence, "keep-alives from a stopped process: \(manager.lines)")
        gateway.signal(SIGCONT)
        #expect(await eventually(timeout: 10) { manager.count("WATCHDOG=1") > beforeSilence }, "\(gateway.diagnostics)")

        #expect(await gateway.stop() == 0, "\(gateway.diagnostics)")
        #expect(manager.count("STOPPING=1") == 1, "\(manager.lines)")
        #expect(manager.count("WATCHDOG=trigger") == 0, "\(manager.lines)")
        await btvirt.stop()
        await broker.stop()
    }

    /// The gateway's unit leaves AF_UNIX out of RestrictAddressFamilies=, so socket(AF_UNIX)
    /// fails there (EAFNOSUPPORT) and the notifications must go out on a socketpair's end.
    /// Here a preloaded library refuses socket(AF_UNIX) as that seccomp filter would.
    @Test("with socket(AF_UNIX) refused, as the gateway's unit refuses it, the gateway still says READY=1 and WATCHDOG=1")
    func gatewayWithoutUnixSockets() async throws {
        let dir = try TemporaryDirectory("notify-no-unix")
        let library = try await ShimBuilder.noUnixSockets.library()
        // The library does refuse Unix sockets (python3: scripts/install-deps installs it).
        let python = try #require(Programs.system("python3"), "python3 is not installed: scripts/install-deps installs it")
        let probe = try ChildProcess(python, ["-c", "import socket; socket.socket(socket.AF_UNIX)"],
                                     environment: ["LD_PRELOAD": library], in: dir, name: "python3")
        #expect(await probe.waitForExit(timeout: 30) == 1, "\(probe.diagnostics)")
        #expect(probe.stderr.contains("Address family not supported"), "\(probe.diagnostics)")

        let broker = try await MosquittoBroker.start(in: dir)
        let capture = try dir.write("door.log", bytes: StoreLoopTests.capture(rssi: -60))
        let config = try writeFleet(dir, broker: broker, gateways: [#"{"id": "door", "source": "btsnoop:\#(capture)?loop"}"#])
        let manager = try NotifySocket(in: dir)
        defer { manager.stop() }
        var environment = manager.environment(watchdog: 2)
        environment["LD_PRELOAD"] = library
        let gateway = try startProgram("beacon-gateway", ["--config", config, "--id", "door"], in: dir,
                                       environment: environment)
        #expect(await eventually(timeout: 20) {
            manager.count("READY=1") == 1 && manager.count("WATCHDOG=1") >= 3
                && manager.lines.contains { $0.hasPrefix("STATUS=broker connected;") }
        }, "\(manager.lines)\n\(gateway.diagnostics)")
        #expect(await gateway.stop() == 0, "\(gateway.diagnostics)")
        #expect(manager.count("STOPPING=1") == 1, "\(manager.lines)")
        await broker.stop()
    }

    @Test("the brain says READY=1, sends WATCHDOG=1 while its MQTT and core loops run, STOPPING=1 on SIGTERM")
    func brainKeepAlives() async throws {
        let dir = try TemporaryDirectory("notify-brain")
        let broker = try await MosquittoBroker.start(in: dir)
        let config = try writeFleet(dir, broker: broker, gateways: [])
        let manager = try NotifySocket(in: dir)
        defer { manager.stop() }
        let brain = try startProgram("beacon-brain", ["--config", config], in: dir,
                                     environment: manager.environment(watchdog: 2))
        #expect(await eventually(timeout: 20) {
            manager.count("READY=1") == 1 && manager.count("WATCHDOG=1") >= 3
                && manager.lines.contains { $0.hasPrefix("STATUS=broker connected;") }
        }, "\(manager.lines)\n\(brain.diagnostics)")
        #expect(await brain.stop() == 0, "\(brain.diagnostics)")
        #expect(manager.count("STOPPING=1") == 1, "\(manager.lines)")
        #expect(manager.count("WATCHDOG=trigger") == 0, "\(manager.lines)")
        await broker.stop()
    }

    @Test("a loop that stops going round makes the watchdog say which and ask systemd to act now")
    func hungLoopTriggers() async throws {
        let dir = try TemporaryDirectory("notify-hung")
        let manager = try NotifySocket(in: dir)
        defer { manager.stop() }
        let notifier = try #require(ServiceNotifier.from(environment: { manager.environment(watchdog: 0.2)[$0] },
                                                         pid: Int(getpid())))
        let scan = Heartbeat(), mqtt = Heartbeat()
        let watchdog = ServiceWatchdog(notifier: notifier, loops: [
            .init("scan") { scan.lastRound }, .init("mqtt") { mqtt.lastRound },
        ])
        // Both loops beat until the scan loop hangs; the MQTT loop carries on.
        let scanHangs = Task {
            for _ in 0..<10 {
                scan.beat()
                try? await Task.sleep(nanoseconds: 50_000_000)
            }
        }
        let mqttRuns = Task {
            while !Task.isCancelled {
                mqtt.beat()
                try? await Task.sleep(nanoseconds: 50_000_000)
            }
        }
        await watchdog.run(status: { "fine" }, failed: { Issue.record("notify failed: \($0)") })
        mqttRuns.cancel()
        await scanHangs.value
        #expect(await eventually(timeout: 5) { manager.count("WATCHDOG=trigger") == 1 }, "\(manager.lines)")
        #expect(manager.count("WATCHDOG=1") >= 1, "keep-alives while both loops ran: \(manager.lines)")
        let reason = manager.lines.last { $0.hasPrefix("STATUS=hung:") }
        #expect(reason?.contains("scan loop silent for") == true, "\(manager.lines)")
        #expect(reason?.contains("mqtt") == false, "\(manager.lines)")

        // A paused loop (a replay that ended) is not watched.
        scan.pause()
        #expect(watchdog.hungLoops(at: WallClock.monotonic() + 60).map(\.name) == ["mqtt"])
    }

    @Test("NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID are read as sd_notify and sd_watchdog_enabled read them")
    func environment() {
        let env = { (values: [String: String]) in { (name: String) in values[name] } }
        #expect(ServiceNotifier.from(environment: env([:]), pid: 10) == nil)
        #expect(ServiceNotifier.from(environment: env(["NOTIFY_SOCKET": "relative"]), pid: 10) == nil)
        #expect(ServiceNotifier.from(environment: env(["NOTIFY_SOCKET": "/run/systemd/notify"]), pid: 10)
            == ServiceNotifier(socket: "/run/systemd/notify"))
        #expect(ServiceNotifier.from(environment: env(["NOTIFY_SOCKET": "@abstract", "WATCHDOG_USEC": "5000000"]), pid: 10)
            == ServiceNotifier(socket: "@abstract", watchdogInterval: 5))
        #expect(ServiceNotifier.from(environment: env(["NOTIFY_SOCKET": "/n", "WATCHDOG_USEC": "5000000",
                                                       "WATCHDOG_PID": "11"]), pid: 10)?.watchdogInterval == nil)
        #expect(ServiceNotifier.from(environment: env(["NOTIFY_SOCKET": "/n", "WATCHDOG_USEC": "5000000",
                                                       "WATCHDOG_PID": "10"]), pid: 10)?.watchdogInterval == 5)
        #expect(ServiceNotifier.from(environment: env(["NOTIFY_SOCKET": "/n", "WATCHDOG_USEC": "x"]), pid: 10)?
            .watchdogInterval == nil)
    }
}

/// Whether every thread of process `pid` is stopped (state `T` in /proc/PID/task/TID/stat):
/// a group stop reaches the threads one by one, and any that still runs may still send.
func processStopped(_ pid: Int32) -> Bool {
    guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"), !tasks.isEmpty else { return false }
    return tasks.allSatisfy { task in
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return true }  // a thread that ended sends nothing
        return text[text.index(after: close)...].split(separator: " ").first == "T"
    }
}

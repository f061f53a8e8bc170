import Foundation
import SystemCalls
import TestSupport
import Testing

/// The one way BeaconBridge starts programs (`beaconctl`'s benchmarks, scores and
/// provisioning, and every test's `ChildProcess`): what a child starts with.
@Suite("SpawnedProcess: what a started program inherits")
struct SpawnedProcessTests {
    let sh = "/bin/sh"

    func run(_ script: String, environment: [String: String] = [:], stdin: SpawnedProcess.Input = .file("/dev/null"),
             in dir: TemporaryDirectory) throws -> (SpawnedProcess, out: String) {
        let out = dir.file("out-\(UUID().uuidString.prefix(6))")
        let process = try SpawnedProcess(sh, ["-c", script], environment: environment, stdin: stdin,
                                         stdoutPath: out, stderrPath: dir.file("err"))
        return (process, out)
    }

    @Test("a descriptor the parent holds open without close-on-exec is closed in the child")
    func descriptorsAreNotInherited() throws {
        let dir = try TemporaryDirectory("spawn")
        let held = open("/dev/null", O_RDONLY)  // no O_CLOEXEC, like libmosquitto's sockets
        try #require(held > 2)
        defer { close(held) }
        let (process, out) = try run("test -e /proc/$$/fd/\(held) && echo held || echo closed", in: dir)
        #expect(process.waitUntilEnded() == .exited(0))
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "closed\n")
    }

    @Test("a pipe as standard input: the child reads to its end (it holds no copy of the write end)")
    func pipeInput() async throws {
        let dir = try TemporaryDirectory("spawn")
        let pipe = Pipe()
        let (process, out) = try run("cat", stdin: .descriptor(pipe.fileHandleForReading.fileDescriptor), in: dir)
        pipe.fileHandleForWriting.write(Data("one line\n".utf8))
        try pipe.fileHandleForWriting.close()
        #expect(await process.wait(timeout: 60 * patience) == .exited(0))
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "one line\n")
    }

    @Test("SIGTERM reaches a child spawned from a thread that blocks it")
    func signalMaskIsCleared() async throws {
        let dir = try TemporaryDirectory("spawn")
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &blocked, &previous)
        let spawned = Result { try run("sleep 600", in: dir).0 }
        pthread_sigmask(SIG_SETMASK, &previous, nil)
        let process = try spawned.get()
        process.signal(SIGTERM)
        #expect(await process.wait(timeout: 30 * patience) == .signalled(SIGTERM))
    }

    @Test("environment additions, exit statuses and signals as the shell numbers them")
    func environmentAndStatus() async throws {
        let dir = try TemporaryDirectory("spawn")
        let (echo, out) = try run("echo \"$BEACONBRIDGE_SPAWN_CHECK\"; test -n \"$PATH\"", environment: ["BEACONBRIDGE_SPAWN_CHECK": "given"], in: dir)
        #expect(echo.waitUntilEnded() == .exited(0))
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "given\n")
        let (three, _) = try run("exit 3", in: dir)
        #expect(three.waitUntilEnded().status == 3)
        let (sleeper, _) = try run("sleep 600", in: dir)
        #expect(sleeper.isRunning)
        let ended = await sleeper.stop(grace: 30 * patience)
        #expect(ended == .signalled(SIGTERM) && ended?.status == 128 + SIGTERM)
        sleeper.signal(SIGKILL)  // ended and reaped: not sent to whatever has its PID now
        #expect(sleeper.poll() == .signalled(SIGTERM))
    }

    @Test("a program still running when its owner lets go is killed and reaped")
    func deinitKills() throws {
        let dir = try TemporaryDirectory("spawn")
        var pid: Int32 = 0
        do {
            let (process, _) = try run("sleep 600", in: dir)
            pid = process.pid
        }
        #expect(kill(pid, 0) == -1 && errno == ESRCH, "process \(pid) outlived its owner")
    }
}

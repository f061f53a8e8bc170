#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// A program started with `posix_spawn`, its output in files, stopped by its PID only.
///
/// The one way BeaconBridge starts another program: `beaconctl` (benchmarks, scores,
/// provisioning's `openssl`) and the tests' `ChildProcess` both use it.
/// - The child starts with no signal blocked and SIGTERM, SIGINT and SIGPIPE at their
///   default actions, whatever the spawning thread blocks or ignores: threads of a test
///   runner block SIGTERM, and a program started from one would never see the SIGTERM of
///   a graceful stop.
/// - It inherits only its standard input, output and error. Every other descriptor of the
///   parent is closed in the child: a broker started beside an in-process MQTT client must
///   not hold a copy of that client's socket, or closing the client would not close its
///   connection (and its will would never be sent).
/// - It is reaped here (`waitpid` on its PID only), so its PID cannot be reused while this
///   object can still signal it.
public final class SpawnedProcess: Sendable {
    /// How a process ended.
    public enum Termination: Sendable, Equatable {
        case exited(Int32)
        case signalled(Int32)

        /// From `waitpid`'s status: WIFEXITED, WEXITSTATUS and WTERMSIG spelled out (the
        /// macros are not imported).
        init(waitStatus raw: Int32) {
            self = raw & 0x7F == 0 ? .exited((raw >> 8) & 0xFF) : .signalled(raw & 0x7F)
        }

        /// The shell's number: the exit status, or 128 + the signal.
        public var status: Int32 {
            switch self {
            case .exited(let code): code
            case .signalled(let signal): 128 + signal
            }
        }
    }

    public let pid: Int32
    private let ended = Mutex<Termination?>(nil)

    /// Where a child's standard input comes from.
    public enum Input: Sendable {
        /// A file (`/dev/null` by default).
        case file(String)
        /// A descriptor of this process (the read end of a pipe, an open file), duplicated.
        case descriptor(Int32)
    }

    /// Starts `path` with `arguments`. `environment` adds to (or replaces entries of) this
    /// process's environment. Output and errors go to the files named, created or truncated.
    public init(_ path: String, _ arguments: [String], environment: [String: String] = [:],
                stdin: Input = .file("/dev/null"), stdoutPath: String, stderrPath: String) throws(SystemError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        switch stdin {
        case .file(let path): posix_spawn_file_actions_addopen(&actions, 0, path, O_RDONLY, 0)
        case .descriptor(let fd): posix_spawn_file_actions_adddup2(&actions, fd, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        Self.closeTheRest(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([path] + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        let envp = Self.environment(adding: environment).map { strdup($0) }
        defer { envp.forEach { free($0) } }
        var pid: Int32 = 0
        let code = (argv + [nil]).withUnsafeBufferPointer { arguments in
            (envp + [nil]).withUnsafeBufferPointer { environment in
                posix_spawn(&pid, path, &actions, &attributes,
                            UnsafeMutablePointer(mutating: arguments.baseAddress!),
                            UnsafeMutablePointer(mutating: environment.baseAddress!))
            }
        }
        guard code == 0 else { throw SystemError(call: "posix_spawn", errno: code, subject: path) }
        self.pid = pid
    }

    /// How it ended (reaping it), `nil` while it runs.
    public func poll() -> Termination? {
        ended.withLock { ended in
            if let ended { return ended }
            var raw: Int32 = 0
            guard waitpid(pid, &raw, WNOHANG) == pid else { return nil }
            ended = Termination(waitStatus: raw)
            return ended
        }
    }

    public var isRunning: Bool { poll() == nil }

    /// Sends `signal` to this process, unless it has ended and been reaped (its PID may
    /// then belong to another process).
    public func signal(_ signal: Int32) {
        ended.withLock { ended in
            if ended == nil { _ = kill(pid, signal) }
        }
    }

    /// Waits up to `timeout` seconds of monotonic time for the end; `nil` on timeout.
    public func wait(timeout: Double) async -> Termination? {
        let deadline = WallClock.monotonic() + timeout
        while WallClock.monotonic() < deadline {
            if let ended = poll() { return ended }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return poll()
    }

    /// Blocks the calling thread until the process ends (for short commands run to their
    /// end; others calling `poll` or `signal` meanwhile wait too).
    @discardableResult
    public func waitUntilEnded() -> Termination {
        ended.withLock { ended in
            if let ended { return ended }
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) == -1, errno == EINTR {}
            let end = Termination(waitStatus: raw)
            ended = end
            return end
        }
    }

    /// SIGTERM, then SIGKILL if it has not ended after `grace` seconds.
    @discardableResult
    public func stop(grace: Double = 5) async -> Termination? {
        if let ended = poll() { return ended }
        signal(SIGTERM)
        if let ended = await wait(timeout: grace) { return ended }
        signal(SIGKILL)
        return await wait(timeout: 5)
    }

    /// A process still running when its owner lets go is killed and reaped.
    deinit {
        ended.withLock { ended in
            guard ended == nil else { return }
            _ = kill(pid, SIGKILL)
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) == -1, errno == EINTR {}
        }
    }

    /// `KEY=value` lines: this process's environment with `adding` laid over it.
    private static func environment(adding: [String: String]) -> [String] {
        var lines: [String] = []
        var index = 0
        while let entry = environ[index] {
            let line = String(cString: entry)
            let key = line.split(separator: "=", maxSplits: 1).first.map(String.init) ?? line
            if adding[key] == nil { lines.append(line) }
            index += 1
        }
        return lines + adding.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
    }

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32

    /// glibc 2.34's `posix_spawn_file_actions_addclosefrom_np`, which Swift's Glibc module
    /// does not declare.
    private static let closeFrom: CloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            return nil
        }
        return unsafeBitCast(symbol, to: CloseFrom.self)
    }()

    /// Closes every descriptor above standard error in the child: with `closefrom` where
    /// the C library has it, else one close per descriptor open now (`/proc/self/fd`; a
    /// close of one that is gone by the spawn is ignored by glibc).
    private static func closeTheRest(_ actions: inout posix_spawn_file_actions_t) {
        if let closeFrom, closeFrom(&actions, 3) == 0 { return }
        guard let directory = opendir("/proc/self/fd") else { return }
        defer { closedir(directory) }
        let own = dirfd(directory)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let fd = Int32(name), fd > 2, fd != own { posix_spawn_file_actions_addclose(&actions, fd) }
        }
    }
}

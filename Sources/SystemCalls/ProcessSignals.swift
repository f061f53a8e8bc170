#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Signal dispositions every daemon sets at start.
public enum ProcessSignals {
    /// Gives SIGABRT back its default action: the process ends (with a core, where cores
    /// are kept).
    ///
    /// systemd's watchdog ends a service that stopped sending keep-alives with SIGABRT.
    /// Swift's runtime installs a handler for it (its backtracer, `SWIFT_BACKTRACE`) that
    /// prints "Program crashed: Aborted" and returns; after a SIGABRT the process raised
    /// itself (`abort()`) the C library then ends it, but one sent from outside is simply
    /// over and the hung process lives on, until the SIGKILL that systemd sends
    /// `TimeoutAbortSec=` later. Crashes (SIGSEGV, SIGILL, SIGTRAP from a runtime failure)
    /// keep the backtracer.
    public static func abortTerminates() throws(SystemError) {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = SIG_DFL
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        _ = try syscall("sigaction", subject: "SIGABRT") { sigaction(SIGABRT, &action, nil) }
    }
}

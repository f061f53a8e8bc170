// LD_PRELOAD library for profiling the services under valgrind 3.19 (Debian 12), which kills
// itself with SIGSEGV ("the 'impossible' happened") when a Swift program's main thread parks
// in libdispatch's `_dispatch_sigsuspend`: valgrind's rt_sigsuspend wrapper cleans the mask it
// is given in place (takes SIGKILL and SIGSTOP out of it), and libdispatch passes a mask that
// is a `static const`, in read-only memory. Here the mask is copied to the stack first; the
// system call is the same. Nothing else is changed.
//
// Use (docs/PERFORMANCE.md, section 11): valgrind hands its own LD_PRELOAD on to the program
// with this library in it, so the program under it is run as it is.
//   cc -shared -fPIC -O2 -o /tmp/valgrind_sigsuspend.so tools/valgrind-sigsuspend/valgrind_sigsuspend.c
//   strip --strip-debug -o /tmp/beacon-brain .build/release/beacon-brain   # valgrind 3.19 cannot read DWARF 5
//   LD_PRELOAD=/tmp/valgrind_sigsuspend.so valgrind --tool=callgrind /tmp/beacon-brain --config fleet.json
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, _NSIG / 8);
}

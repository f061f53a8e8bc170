// LD_PRELOAD library for tests: socket(AF_UNIX, ...) fails with EAFNOSUPPORT, as it does
// under a systemd unit whose RestrictAddressFamilies= leaves AF_UNIX out (the gateway's:
// deploy/systemd/beacon-gateway@.service). That seccomp filter stops socket() only, so
// socketpair() works here too. Every other family goes to the C library's socket().
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/socket.h>

int socket(int domain, int type, int protocol) {
    static int (*next)(int, int, int);
    if (domain == AF_UNIX) {
        errno = EAFNOSUPPORT;
        return -1;
    }
    if (!next) next = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
    return next(domain, type, protocol);
}

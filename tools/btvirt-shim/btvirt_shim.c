/*
 * btvirt_shim.c — an LD_PRELOAD library that lets BlueZ's controller emulator
 * (`btvirt -s`, Debian package bluez-test-tools) run on kernels without AF_ALG.
 *
 * Why it exists: every emulated controller btvirt creates calls bt_crypto_new()
 * (BlueZ src/shared/crypto.c), which opens `socket(PF_ALG, SOCK_SEQPACKET, 0)` and
 * binds it to "skcipher"/"ecb(aes)" and "hash"/"cmac(aes)". On a kernel built without
 * the AF_ALG crypto socket family (our build machines) that fails, and btvirt closes
 * each client connection the moment it is accepted. Advertising and scanning need no
 * crypto, so this library makes `socket(AF_ALG, …)` return a harmless AF_UNIX
 * SOCK_SEQPACKET socket and `bind` on such a socket succeed. Anything that would
 * really use the cipher (setsockopt(SOL_ALG), accept) still fails as before:
 * pairing and encryption do not work under this shim, and nothing pretends they do.
 *
 * Second job: when BTVIRT_SOCKET_DIR is set, AF_UNIX `bind` and `unlink` of paths
 * starting with "/tmp/bt-server-" are redirected to "$BTVIRT_SOCKET_DIR/bt-server-…",
 * so that several tests can each run their own btvirt in parallel without touching
 * the shared sockets in /tmp.
 *
 * Build: cc -shared -fPIC -O2 -o btvirt_shim.so btvirt_shim.c -ldl
 * Use:   LD_PRELOAD=$PWD/btvirt_shim.so BTVIRT_SOCKET_DIR=/tmp/mine btvirt -s
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef AF_ALG
#define AF_ALG 38
#endif

#define SERVER_PREFIX "/tmp/bt-server-"
#define MAX_TRACKED_FD 4096

/* Descriptors handed out in place of AF_ALG sockets: one bit each. */
static unsigned char alg_fds[MAX_TRACKED_FD / 8];

static int is_alg_fd(int fd)
{
	if (fd < 0 || fd >= MAX_TRACKED_FD)
		return 0;
	return (__atomic_load_n(&alg_fds[fd / 8], __ATOMIC_SEQ_CST) >> (fd % 8)) & 1;
}

static void mark_alg_fd(int fd, int on)
{
	if (fd < 0 || fd >= MAX_TRACKED_FD)
		return;
	unsigned char bit = (unsigned char)(1u << (fd % 8));
	if (on)
		__atomic_fetch_or(&alg_fds[fd / 8], bit, __ATOMIC_SEQ_CST);
	else
		__atomic_fetch_and(&alg_fds[fd / 8], (unsigned char)~bit, __ATOMIC_SEQ_CST);
}

static void *next_symbol(const char *name)
{
	void *symbol = dlsym(RTLD_NEXT, name);
	if (!symbol) {
		fprintf(stderr, "btvirt_shim: dlsym(%s) failed: %s\n", name, dlerror());
		abort();
	}
	return symbol;
}

/*
 * Rewrites `path` into `out` when it starts with SERVER_PREFIX and BTVIRT_SOCKET_DIR
 * is set. Returns 1 when rewritten, 0 when the path is to be used as is, -1 (errno
 * ENAMETOOLONG) when the rewritten path does not fit in `size` bytes.
 */
static int redirect_path(const char *path, char *out, size_t size)
{
	const char *dir = getenv("BTVIRT_SOCKET_DIR");
	if (!dir || !*dir || strncmp(path, SERVER_PREFIX, strlen(SERVER_PREFIX)) != 0)
		return 0;
	int n = snprintf(out, size, "%s/%s", dir, path + strlen("/tmp/"));
	if (n < 0 || (size_t)n >= size) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 1;
}

int socket(int domain, int type, int protocol)
{
	static int (*real_socket)(int, int, int);
	if (!real_socket)
		real_socket = (int (*)(int, int, int))next_symbol("socket");

	if (domain != AF_ALG) {
		int fd = real_socket(domain, type, protocol);
		/* A number reused after a close we did not see is no AF_ALG socket. */
		mark_alg_fd(fd, 0);
		return fd;
	}

	int flags = type & (SOCK_CLOEXEC | SOCK_NONBLOCK);
	int fd = real_socket(AF_UNIX, SOCK_SEQPACKET | flags, 0);
	if (fd >= 0)
		mark_alg_fd(fd, 1);
	return fd;
}

int bind(int fd, const struct sockaddr *address, socklen_t length)
{
	static int (*real_bind)(int, const struct sockaddr *, socklen_t);
	if (!real_bind)
		real_bind = (int (*)(int, const struct sockaddr *, socklen_t))next_symbol("bind");

	if (is_alg_fd(fd))
		return 0;

	if (address && address->sa_family == AF_UNIX && length > offsetof(struct sockaddr_un, sun_path)) {
		const struct sockaddr_un *unix_address = (const struct sockaddr_un *)address;
		char path[sizeof(unix_address->sun_path) + 1];
		size_t available = length - offsetof(struct sockaddr_un, sun_path);
		if (available > sizeof(unix_address->sun_path))
			available = sizeof(unix_address->sun_path);
		memcpy(path, unix_address->sun_path, available);
		path[available] = '\0';

		struct sockaddr_un redirected;
		memset(&redirected, 0, sizeof(redirected));
		redirected.sun_family = AF_UNIX;
		int status = redirect_path(path, redirected.sun_path, sizeof(redirected.sun_path));
		if (status < 0)
			return -1;
		if (status > 0)
			return real_bind(fd, (const struct sockaddr *)&redirected, sizeof(redirected));
	}
	return real_bind(fd, address, length);
}

int unlink(const char *path)
{
	static int (*real_unlink)(const char *);
	if (!real_unlink)
		real_unlink = (int (*)(const char *))next_symbol("unlink");

	char redirected[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int status = redirect_path(path, redirected, sizeof(redirected));
	if (status < 0)
		return -1;
	return real_unlink(status > 0 ? redirected : path);
}

int close(int fd)
{
	static int (*real_close)(int);
	if (!real_close)
		real_close = (int (*)(int))next_symbol("close");

	/* Forget the descriptor first: the number may be reused by the next open. */
	mark_alg_fd(fd, 0);
	return real_close(fd);
}

/* Fuzz target: the decoder of the messages between the server and its
 * workers (proto/wire.h): what a hostile session may write to its
 * control socket.
 *
 * Input: byte 0 is the mode, byte 1 the max_len, byte 2 the chunk size,
 * the rest the byte stream.
 *   mode & 3 == 0: wire_reader_step over a non-blocking socketpair, the
 *                  stream written chunk by chunk (byte 2; 0 = at once),
 *                  with the reader stepped after each chunk, as the
 *                  server's event loop does;
 *   mode & 3 == 1: the same over a pipe (read() instead of recvmsg);
 *   mode & 3 == 2: blocking wire_recv (the zygote's and sessions' side);
 *   mode & 3 == 3: the rest is a payload: wire_send, then the reader
 *                  must return exactly it (a round trip).
 * (Inputs over 64 KiB are skipped: run with -max_len=65536 or less.)
 *   mode & 4: chunks carry descriptors (SCM_RIGHTS, 1 to 6 of them by
 *             bits 5-7), more than WIRE_MAX_FDS included.
 * max_len is 1 << (byte 1 % 27) (from 1 byte to 64 MiB, the server uses
 * 16 MiB and 1 MiB), so every check_header branch is reachable.
 *
 * Checks: each message has len <= max_len, a NUL after its payload, at
 * most WIRE_MAX_FDS descriptors; errors are negative errnos; and no
 * descriptor leaks, whatever the peer sends (the lowest free descriptor
 * is the same before and after). */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../../proto/wire.h"
#include "fuzz.h"

static int lowest_free_fd(void)
{
	int fd = dup(0);
	FUZZ_CHECK(fd >= 0, "dup: %d", errno);
	close(fd);
	return fd;
}

static void check_msg(const struct wire_msg *m, uint32_t max_len)
{
	FUZZ_CHECK(m->len <= max_len && m->len <= WIRE_MAX_PAYLOAD, "len %u over %u", m->len, max_len);
	FUZZ_CHECK(m->data != NULL, "no data");
	FUZZ_CHECK(m->data[m->len] == 0, "payload not NUL-terminated");
	FUZZ_CHECK(m->nfds >= 0 && m->nfds <= WIRE_MAX_FDS, "nfds %d", m->nfds);
	for (int i = 0; i < m->nfds; i++)
		FUZZ_CHECK(fcntl(m->fds[i], F_GETFD) >= 0, "fd %d of the message is not open", m->fds[i]);
}

/* Writes one chunk, with nfds copies of /dev/null attached when asked. */
static void put_chunk(int fd, bool sock, const uint8_t *p, size_t n, int nfds)
{
	if (sock && nfds > 0 && n > 0) {
		int fds[8];
		union {
			char buf[CMSG_SPACE(sizeof(int) * 8)];
			struct cmsghdr align;
		} ctl;
		for (int i = 0; i < nfds; i++) {
			fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
			FUZZ_CHECK(fds[i] >= 0, "open /dev/null");
		}
		memset(&ctl, 0, sizeof ctl);
		struct iovec iov = { .iov_base = (void *)(uintptr_t)p, .iov_len = n };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
				     .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
		FUZZ_CHECK(w == (ssize_t)n, "sendmsg %zd of %zu: %d", w, n, errno);
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return;
	}
	while (n) {
		ssize_t w = write(fd, p, n);
		FUZZ_CHECK(w > 0, "write: %d", errno);
		p += w;
		n -= (size_t)w;
	}
}

/* Steps the reader until it needs more (0) or fails; returns the last
 * status. */
static int drain(struct wire_reader *r, int fd, uint32_t max_len, unsigned *nmsgs)
{
	for (;;) {
		struct wire_msg m;
		memset(&m, 0, sizeof m);
		int rc = wire_reader_step(r, fd, &m);
		if (rc == 1) {
			check_msg(&m, max_len);
			wire_msg_free(&m);
			++*nmsgs;
			continue;
		}
		FUZZ_CHECK(rc <= 0, "wire_reader_step returned %d", rc);
		return rc;
	}
}

static void run_reader(const uint8_t *s, size_t n, uint32_t max_len, int mode, size_t chunk)
{
	int sv[2];
	bool sock = (mode & 3) == 0;
	if (sock)
		FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	else
		FUZZ_CHECK(pipe2(sv, O_CLOEXEC) == 0, "pipe2");
	/* For a pipe: sv[0] reads; for a socketpair both ways work. */
	FUZZ_CHECK(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
	int rd = sv[0], wr = sv[1];
	int nfds = (mode & 4) ? 1 + ((mode >> 5) & 7) % 6 : 0;

	struct wire_reader r;
	wire_reader_init(&r, max_len);
	unsigned nmsgs = 0;
	int rc = 0;
	size_t off = 0;
	if (!chunk)
		chunk = n ? n : 1;
	if (!sock && chunk > 16384)
		chunk = 16384; /* under a pipe's 64 KiB */
	while (off < n && rc == 0) {
		size_t k = n - off < chunk ? n - off : chunk;
		/* Descriptors ride on the even chunks only, so some messages
		 * have none. */
		put_chunk(wr, sock, s + off, k, (off / chunk) % 2 == 0 ? nfds : 0);
		off += k;
		rc = drain(&r, rd, max_len, &nmsgs);
	}
	close(wr);
	if (rc == 0) {
		rc = drain(&r, rd, max_len, &nmsgs);
		/* At end of stream the reader must say so, not wait forever. */
		FUZZ_CHECK(rc < 0, "no end of stream after EOF (rc %d)", rc);
	}
	FUZZ_CHECK(rc == -EPIPE || rc == -EPROTO || rc == -EMSGSIZE || rc == -ENOMEM, "unexpected error %d", rc);
	wire_reader_free(&r);
	close(rd);
}

static void run_recv(const uint8_t *s, size_t n, uint32_t max_len, int mode)
{
	int sv[2];
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	int nfds = (mode & 4) ? 1 + ((mode >> 5) & 7) % 6 : 0;
	/* The whole stream fits the socket buffer (inputs are at most a few
	 * hundred KiB), so it can be written before reading. */
	if (n)
		put_chunk(sv[1], true, s, n, nfds);
	shutdown(sv[1], SHUT_WR);
	for (;;) {
		struct wire_msg m;
		int rc = wire_recv(sv[0], &m, max_len);
		if (rc < 0) {
			FUZZ_CHECK(rc == -EPIPE || rc == -EPROTO || rc == -EMSGSIZE || rc == -ENOMEM,
				   "unexpected error %d", rc);
			break;
		}
		FUZZ_CHECK(rc == 0, "wire_recv returned %d", rc);
		check_msg(&m, max_len);
		wire_msg_free(&m);
	}
	close(sv[0]);
	close(sv[1]);
}

static void run_roundtrip(const uint8_t *s, size_t n, uint32_t max_len, int mode)
{
	int sv[2];
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	FUZZ_CHECK(fcntl(sv[0], F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
	int fds[WIRE_MAX_FDS];
	int nfds = (mode & 4) ? 1 + ((mode >> 5) & 7) % WIRE_MAX_FDS : 0;
	for (int i = 0; i < nfds; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	uint32_t type = (uint32_t)mode >> 3;
	int rc = wire_send(sv[1], type, s, n, fds, nfds);
	FUZZ_CHECK(rc == 0, "wire_send: %d", rc);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	close(sv[1]);

	struct wire_reader r;
	struct wire_msg m;
	wire_reader_init(&r, max_len);
	rc = wire_reader_step(&r, sv[0], &m);
	if (n > max_len) {
		FUZZ_CHECK(rc == -EMSGSIZE, "%zu bytes over max_len %u: rc %d", n, max_len, rc);
	} else {
		FUZZ_CHECK(rc == 1, "round trip of %zu bytes: rc %d", n, rc);
		FUZZ_CHECK(m.type == type && m.len == n && (n == 0 || memcmp(m.data, s, n) == 0),
			   "round trip changed the message");
		FUZZ_CHECK(m.nfds == nfds, "sent %d descriptors, got %d", nfds, m.nfds);
		wire_msg_free(&m);
		rc = wire_reader_step(&r, sv[0], &m);
		FUZZ_CHECK(rc == -EPIPE, "after the message: rc %d", rc);
	}
	wire_reader_free(&r);
	close(sv[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Bounded so that a whole stream fits a socket's buffer. */
	if (size < 3 || size > (64u << 10))
		return 0;
	int mode = data[0];
	uint32_t max_len = 1u << (data[1] % 27);
	size_t chunk = data[2];
	const uint8_t *s = data + 3;
	size_t n = size - 3;

	int before = lowest_free_fd();
	switch (mode & 3) {
	case 0:
	case 1:
		run_reader(s, n, max_len, mode, chunk);
		break;
	case 2:
		run_recv(s, n, max_len, mode);
		break;
	default:
		run_roundtrip(s, n, max_len, mode);
		break;
	}
	int after = lowest_free_fd();
	FUZZ_CHECK(before == after, "descriptor leak: lowest free fd %d before, %d after", before, after);
	return 0;
}

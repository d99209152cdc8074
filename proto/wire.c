#include "wire.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../common/util.h"

static void put32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

/* The server's sockets are non-blocking: wait (bounded) until the peer
 * has read enough, so a large cell is sent whole.  A peer that stops reading
 * for 10 s is given up on. */
static int wait_writable(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLOUT };
	int r = poll(&p, 1, 10000);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (r == 0)
		return -ETIMEDOUT;
	return (p.revents & (POLLERR | POLLHUP)) && !(p.revents & POLLOUT) ? -EPIPE : 0;
}

static int send_all(int sock, const unsigned char *p, size_t len)
{
	while (len) {
		ssize_t n = send(sock, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				int r = wait_writable(sock);
				if (r < 0)
					return r;
				continue;
			}
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int wire_send(int sock, uint32_t type, const void *data, size_t len, const int *fds, int nfds)
{
	if (len > WIRE_MAX_PAYLOAD || nfds < 0 || nfds > WIRE_MAX_FDS)
		return -EMSGSIZE;
	unsigned char hdr[WIRE_HDR_BYTES];
	put32(hdr, WIRE_MAGIC);
	put32(hdr + 4, type);
	put32(hdr + 8, (uint32_t)len);

	/* The header and the body in one sendmsg: the reader finds the whole
	 * message at its first wake-up, rather than waking for the header and
	 * again for the body (the descriptors ride with the first byte). */
	struct iovec iov[2] = { { .iov_base = hdr, .iov_len = sizeof hdr }, { .iov_base = (void *)(uintptr_t)data, .iov_len = len } };
	union {
		char buf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
	if (nfds > 0) {
		memset(&ctl, 0, sizeof ctl);
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	ssize_t n;
	for (;;) {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		int r = wait_writable(sock);
		if (r < 0)
			return r;
	}
	/* What the first sendmsg left (a full buffer, a signal). */
	if ((size_t)n < sizeof hdr) {
		int r = send_all(sock, hdr + n, sizeof hdr - (size_t)n);
		if (r < 0)
			return r;
		n = 0;
	} else {
		n -= (ssize_t)sizeof hdr;
	}
	if ((size_t)n >= len)
		return 0; /* all of it (and no arithmetic on an empty body's NULL) */
	return send_all(sock, (const unsigned char *)data + n, len - (size_t)n);
}

/* Takes the descriptors of an SCM_RIGHTS message: at most WIRE_MAX_FDS are
 * kept in fds; any others are closed (a peer may send what we did not ask
 * for, and a descriptor left unclosed is a leak). */
static void collect_fds(struct msghdr *mh, int *fds, int *nfds)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < cnt; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (*nfds < WIRE_MAX_FDS)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
}

static int recv_all(int sock, unsigned char *p, size_t len)
{
	while (len) {
		ssize_t n = recv(sock, p, len, 0);
		if (n == 0)
			return -EPIPE;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int check_header(const unsigned char *hdr, uint32_t max_len, struct wire_msg *m)
{
	if (get32(hdr) != WIRE_MAGIC)
		return -EPROTO;
	m->type = get32(hdr + 4);
	m->len = get32(hdr + 8);
	if (m->len > max_len || m->len > WIRE_MAX_PAYLOAD)
		return -EMSGSIZE;
	m->data = xmalloc((size_t)m->len + 1);
	m->data[m->len] = 0;
	return 0;
}

int wire_recv(int sock, struct wire_msg *m, uint32_t max_len)
{
	memset(m, 0, sizeof *m);
	unsigned char hdr[WIRE_HDR_BYTES];
	union {
		char buf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = hdr, .iov_len = sizeof hdr };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf };
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return -EPIPE;
	if (n < 0)
		return -errno;
	collect_fds(&mh, m->fds, &m->nfds);
	int r = 0;
	if ((size_t)n < sizeof hdr)
		r = recv_all(sock, hdr + n, sizeof hdr - (size_t)n);
	if (r == 0)
		r = check_header(hdr, max_len, m);
	if (r == 0)
		r = recv_all(sock, m->data, m->len);
	if (r < 0)
		wire_msg_free(m);
	return r;
}

void wire_msg_free(struct wire_msg *m)
{
	if (!m)
		return;
	free(m->data);
	m->data = NULL;
	for (int i = 0; i < m->nfds; i++)
		if (m->fds[i] >= 0)
			close(m->fds[i]);
	m->nfds = 0;
}

void wire_reader_init(struct wire_reader *r, uint32_t max_len)
{
	memset(r, 0, sizeof *r);
	r->max_len = max_len;
}

static ssize_t read_fds(struct wire_reader *r, int fd, void *buf, size_t len)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b };
	ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0 && errno == ENOTSOCK)
		return read(fd, buf, len);
	if (n >= 0)
		collect_fds(&mh, r->fds, &r->nfds);
	return n;
}

/* The peer's next message must be one the reader's owner expects now. */
static int check_expected(const struct wire_reader *r)
{
	if (!r->expect)
		return 0;
	uint32_t type = get32(r->hdr + 4), len = get32(r->hdr + 8);
	for (size_t i = 0; i < r->n_expect; i++)
		if (r->expect[i].type == type)
			return len > r->expect[i].max_len ? -EMSGSIZE : r->nfds > r->expect[i].max_fds ? -EPROTO : 0;
	return -EPROTO;
}

int wire_reader_step(struct wire_reader *r, int fd, struct wire_msg *out)
{
	for (;;) {
		if (r->hdr_got < sizeof r->hdr) {
			ssize_t n = read_fds(r, fd, r->hdr + r->hdr_got, sizeof r->hdr - r->hdr_got);
			if (n == 0)
				return -EPIPE;
			if (n < 0)
				return (errno == EAGAIN || errno == EINTR) ? 0 : -errno;
			r->hdr_got += (size_t)n;
			if (r->hdr_got < sizeof r->hdr)
				continue;
			int rc = get32(r->hdr) != WIRE_MAGIC ? -EPROTO : check_expected(r);
			if (rc == 0)
				rc = check_header(r->hdr, r->max_len, &r->cur);
			if (rc < 0)
				return rc;
			r->body_got = 0;
		}
		if (r->body_got < r->cur.len) {
			ssize_t n = read_fds(r, fd, r->cur.data + r->body_got, r->cur.len - r->body_got);
			if (n == 0)
				return -EPIPE;
			if (n < 0)
				return (errno == EAGAIN || errno == EINTR) ? 0 : -errno;
			r->body_got += (size_t)n;
			continue;
		}
		/* Descriptors that came with the body count too. */
		if (check_expected(r) < 0)
			return -EPROTO;
		*out = r->cur;
		out->nfds = r->nfds;
		memcpy(out->fds, r->fds, sizeof r->fds);
		r->nfds = 0;
		memset(&r->cur, 0, sizeof r->cur);
		r->hdr_got = 0;
		r->body_got = 0;
		return 1;
	}
}

void wire_reader_free(struct wire_reader *r)
{
	free(r->cur.data);
	r->cur.data = NULL;
	r->hdr_got = 0;
	r->body_got = 0;
	for (int i = 0; i < r->nfds; i++)
		close(r->fds[i]);
	r->nfds = 0;
}

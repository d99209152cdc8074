#include "persist.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../common/hmac.h"
#include "../common/log.h"
#include "../common/userdir.h"
#include "../common/util.h"

#define KEY_LEN 32
/* The trailer: magic, the body's length, when it was made, the execution
 * count, then the tag.  v2 puts the key's id and a nonce before its tag, a
 * Poly1305 tag under a key used once (tag_begin); v1 (an HMAC-SHA256 tag,
 * no key id) is still read, so that a snapshot written by an older server
 * is restored. */
#define TRAILER1_MAGIC "PSMSNAP1"
#define TRAILER1_LEN (8 + 8 + 8 + 8 + HMAC_LEN)
#define TRAILER_MAGIC "PSMSNAP2"
#define KEYID_LEN 8
#define NONCE_LEN 16
#define TRAILER_LEN (8 + 8 + 8 + 8 + KEYID_LEN + NONCE_LEN + POLY1305_LEN)
/* The saver's first record, a short JSON summary (what could not be
 * pickled), read by the server for the next reply; a longer one is only
 * saved. */
#define SUMMARY_MAX (64u << 10)
#define SNAP_NAME "state.snap"
#define TMP_NAME ".state.tmp"
#define CHUNK (1u << 20)
/* Work done per wake-up of the event loop, so that a gigabyte-sized save
 * never keeps the server from answering other requests for long. */
#define BUDGET (8u << 20)

struct persist {
	const struct workspace *ws;
	bool on;
	char why[400];
	char key_path[PATH_MAX + 8];
	unsigned char key[KEY_LEN];
	/* What the trailer says of the key, so that a snapshot made with
	 * another key (another user, a new XDG_STATE_HOME) is told apart from
	 * one whose bytes were changed: a MAC of a fixed text, which tells
	 * nothing about the key itself. */
	unsigned char keyid[KEYID_LEN];
	uint64_t cap;
	uint64_t mem_cap; /* limits.memory_mb, in bytes */
	bool stream_only; /* every restore streamed (persist_stream_only) */
	uint64_t written_all; /* persist_written_all */
};

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t now_unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Reads the key, or makes one (random, mode 0600).  Its own mode is checked
 * too: a key that others can read proves nothing. */
static int load_key(struct persist *p, const struct userdir *ud, struct err *e)
{
	char *buf = NULL;
	size_t len = 0;
	int r = userdir_read(ud, "key", 4096, &buf, &len, e);
	if (r == 1) {
		unsigned char k[KEY_LEN];
		if (getrandom(k, sizeof k, 0) != (ssize_t)sizeof k)
			return err_set(e, -EIO, "no random bytes for a new key");
		r = userdir_write(ud, "key", k, sizeof k, e);
		memset(k, 0, sizeof k);
		if (r < 0)
			return r;
		/* Read back what is there: of two servers starting at once,
		 * both use the key that won the rename. */
		r = userdir_read(ud, "key", 4096, &buf, &len, e);
	}
	if (r < 0)
		return r;
	if (r == 1 || len != KEY_LEN) {
		free(buf);
		return err_set(e, -EINVAL, "%s/key is not a key of %d bytes: remove it (a new one is made)", ud->path, KEY_LEN);
	}
	memcpy(p->key, buf, KEY_LEN);
	memset(buf, 0, len);
	free(buf);
	struct stat st;
	if (fstatat(ud->fd, "key", &st, AT_SYMLINK_NOFOLLOW) < 0 || (st.st_mode & 077))
		return err_set(e, -EPERM, "%s/key is accessible to group or others: remove it (a new one is made)", ud->path);
	return 0;
}

struct persist *persist_new(const struct workspace *ws, const struct policy *pol)
{
	struct persist *p = xcalloc(1, sizeof *p);
	p->ws = ws;
	p->cap = (uint64_t)pol->limits.persist_mb << 20;
	p->mem_cap = pol->limits.memory_mb > 0 ? (uint64_t)pol->limits.memory_mb << 20 : UINT64_MAX / 2;
	if (!pol->limits.persist) {
		snprintf(p->why, sizeof p->why, "limits.persist is false");
		return p;
	}
	struct err e = { 0 };
	char dir[PATH_MAX];
	struct userdir ud = { .fd = -1 };
	if (userdir_state_path(dir, sizeof dir, &e) < 0 || userdir_open(&ud, dir, true, &e) < 0) {
		snprintf(p->why, sizeof p->why, "no private directory for the key: %.300s", e.msg);
		userdir_close(&ud);
		return p;
	}
	/* The key is secret as well as trusted: the directory is private. */
	struct stat st;
	if (fstat(ud.fd, &st) == 0 && (st.st_mode & 077))
		fchmod(ud.fd, st.st_mode & 0700);
	char real[PATH_MAX];
	if (!realpath(dir, real))
		snprintf(real, sizeof real, "%s", dir);
	/* Attack: a key the sandboxed code can read lets it sign a snapshot
	 * of its own making.  The jail shows ROOT, the workspace and the
	 * fs_read paths: the key must lie in none of them. */
	const char *seen = NULL;
	if (path_under(real, ws->root))
		seen = ws->root;
	else if (path_under(real, ws->abs))
		seen = ws->abs;
	for (size_t i = 0; !seen && pol->fs_read == FS_READ_LIST && i < pol->n_fs_read_paths; i++)
		if (pol->fs_read_paths[i][0] == '/' && path_under(real, pol->fs_read_paths[i]))
			seen = pol->fs_read_paths[i];
	if (seen) {
		snprintf(p->why, sizeof p->why,
			 "the key directory %.100s lies inside %.100s, which sandboxed code can read: set XDG_STATE_HOME to a directory outside the project",
			 real, seen);
		userdir_close(&ud);
		return p;
	}
	snprintf(p->key_path, sizeof p->key_path, "%s/key", dir);
	if (load_key(p, &ud, &e) < 0) {
		snprintf(p->why, sizeof p->why, "the key is refused: %.300s", e.msg);
		memset(p->key, 0, sizeof p->key);
		userdir_close(&ud);
		return p;
	}
	userdir_close(&ud);
	struct hmac *h = hmac_new(p->key, sizeof p->key);
	unsigned char id[HMAC_LEN];
	static const char text[] = "python-sandbox-mcp key id";
	if (h)
		hmac_update(h, text, sizeof text);
	if (!h || hmac_final(h, id) < 0) {
		hmac_free(h);
		snprintf(p->why, sizeof p->why, "the key cannot be used (libcrypto failed)");
		return p;
	}
	hmac_free(h);
	memcpy(p->keyid, id, KEYID_LEN);
	p->on = true;
	return p;
}

void persist_free(struct persist *p)
{
	if (!p)
		return;
	memset(p->key, 0, sizeof p->key);
	free(p);
}

bool persist_on(const struct persist *p)
{
	return p && p->on;
}

const char *persist_why_off(const struct persist *p)
{
	return p ? p->why : "out of memory";
}

const char *persist_key_path(const struct persist *p)
{
	return p ? p->key_path : "";
}

/* The tag covers, before the bytes, what they are for: a snapshot copied
 * from another session or another workspace (or sent by an older format)
 * does not verify.  v1: HMAC-SHA256 under the key.  v2: Poly1305 under a
 * key of its own, HMAC-SHA256(key, nonce), the nonce random for each
 * snapshot and kept in its trailer: a one-time authenticator, so a
 * gigabyte's tag costs about 0.1 s of CPU instead of 0.5 s (the restore
 * waits for it).  A planted snapshot that reuses another's nonce reuses a
 * key that tagged one message: a forgery still has a chance of about
 * 2^-100 (Poly1305's bound), and the header it covers differs anyway. */
static struct hmac *tag_begin(const struct persist *p, int version, const char *name, uint64_t len, uint64_t created,
			      uint64_t cells, const unsigned char nonce[NONCE_LEN])
{
	struct hmac *h;
	if (version == 1) {
		h = hmac_new(p->key, sizeof p->key);
	} else {
		static const char kd[] = "python-sandbox-mcp snapshot v2 one-time key";
		unsigned char otk[HMAC_LEN];
		struct hmac *k = hmac_new(p->key, sizeof p->key);
		if (k) {
			hmac_update(k, kd, sizeof kd);
			hmac_update(k, nonce, NONCE_LEN);
		}
		int r = k ? hmac_final(k, otk) : -ENOMEM;
		hmac_free(k);
		h = r == 0 ? poly1305_new(otk) : NULL;
		memset(otk, 0, sizeof otk);
	}
	if (!h)
		return NULL;
	const char *domain = version == 1 ? "python-sandbox-mcp snapshot v1" : "python-sandbox-mcp snapshot v2";
	unsigned char nums[24];
	put64(nums, len);
	put64(nums + 8, created);
	put64(nums + 16, cells);
	hmac_update(h, domain, strlen(domain) + 1);
	hmac_update(h, p->ws->abs, strlen(p->ws->abs) + 1);
	hmac_update(h, name, strlen(name) + 1);
	hmac_update(h, nums, sizeof nums);
	return h;
}

/* The session's directory, created private; no symlink is followed on the
 * way (a cell can plant one at .sessions or .sessions/NAME). */
static int session_dir(const struct persist *p, const char *name, bool create, struct err *e)
{
	char rel[128];
	snprintf(rel, sizeof rel, ".sessions/%s", name);
	if (create) {
		int r = ws_mkdirs(p->ws, rel, e);
		if (r < 0)
			return r;
		int top = ws_openat(p->ws, ".sessions", O_RDONLY | O_DIRECTORY, 0);
		if (top >= 0) {
			fchmod(top, 0700);
			close(top);
		}
	}
	int fd = ws_openat(p->ws, rel, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return ws_openat_err(e, fd, rel);
	if (create)
		fchmod(fd, 0700);
	return fd;
}

static int write_all(int fd, const unsigned char *b, size_t n)
{
	while (n) {
		ssize_t k = write(fd, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EIO;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

/* ---------------------------------------------------------------- saving */

struct psave {
	struct persist *p;
	struct loop *loop;
	char name[80];
	int in, dir, out;
	unsigned char hdr[PERSIST_SAVE_HEADER];
	size_t hdr_got;
	uint64_t total, got, created;
	uint32_t cells;
	unsigned char nonce[NONCE_LEN];
	/* The summary record at the head of the body: its length (8 bytes,
	 * gathered in lenb), then its text, kept when it is short. */
	unsigned char lenb[8];
	uint64_t sum_len;
	char *summary;
	struct hmac *h;
	unsigned char *buf;
	double t0;
	psave_done_fn done;
	void *arg;
};

static void psave_close(struct psave *s, bool keep_tmp)
{
	if (s->in >= 0) {
		loop_unwatch(s->loop, s->in);
		close(s->in);
	}
	if (s->out >= 0)
		close(s->out);
	if (s->dir >= 0) {
		if (!keep_tmp)
			unlinkat(s->dir, TMP_NAME, 0);
		close(s->dir);
	}
	hmac_free(s->h);
	free(s->summary);
	free(s->buf);
	free(s);
}

static void psave_end(struct psave *s, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void psave_end(struct psave *s, int status, const char *fmt, ...)
{
	struct psave_result r = { .status = status, .bytes = s->total ? s->total : s->got };
	r.ms = loop_now_ms() - s->t0;
	/* The summary is the saver's word, whole or not at all. */
	if (s->summary && s->got >= 8 + s->sum_len)
		r.summary = s->summary;
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r.msg, sizeof r.msg, fmt, ap);
		va_end(ap);
	}
	psave_done_fn done = s->done;
	void *arg = s->arg;
	/* The callback may start the next save: this one is gone first, its
	 * summary lives until the callback returns. */
	char *summary = s->summary;
	s->summary = NULL;
	psave_close(s, status == 0);
	done(arg, &r);
	free(summary);
}

static void psave_finish(struct psave *s)
{
	unsigned char t[TRAILER_LEN];
	memcpy(t, TRAILER_MAGIC, 8);
	put64(t + 8, s->total);
	put64(t + 16, s->created);
	put64(t + 24, s->cells);
	memcpy(t + 32, s->p->keyid, KEYID_LEN);
	memcpy(t + 32 + KEYID_LEN, s->nonce, NONCE_LEN);
	unsigned char tag[HMAC_LEN];
	if (hmac_final(s->h, tag) < 0) {
		psave_end(s, -EIO, "the tag could not be computed");
		return;
	}
	memcpy(t + 32 + KEYID_LEN + NONCE_LEN, tag, POLY1305_LEN);
	int r = write_all(s->out, t, sizeof t);
	/* Whole on disk before it replaces the previous snapshot: a crash of
	 * the machine after the rename must not leave a snapshot whose pages
	 * never reached the disk (the tag would then refuse it). */
	if (r == 0 && fdatasync(s->out) < 0 && errno != EINVAL)
		r = -errno;
	if (r == 0 && close(s->out) < 0)
		r = -errno;
	s->out = -1;
	/* The rename is the commit: until it happens the previous snapshot
	 * stays whole, whatever kills the saver or the server. */
	if (r == 0 && renameat(s->dir, TMP_NAME, s->dir, SNAP_NAME) < 0)
		r = -errno;
	if (r < 0) {
		psave_end(s, r, "cannot write the snapshot: %s", strerror(-r));
		return;
	}
	psave_end(s, 0, NULL);
}

/* Keeps the bytes of the body's first record (the summary) as they pass. */
static void psave_peek(struct psave *s, const unsigned char *b, size_t n)
{
	uint64_t at = s->got;
	while (n && at < 8) {
		s->lenb[at++] = *b++;
		n--;
		if (at == 8) {
			s->sum_len = get64(s->lenb);
			if (s->sum_len <= SUMMARY_MAX)
				s->summary = xcalloc(1, s->sum_len + 1);
		}
	}
	if (!s->summary || !n || at >= 8 + s->sum_len)
		return;
	uint64_t want = 8 + s->sum_len - at;
	memcpy(s->summary + (at - 8), b, n < want ? n : (size_t)want);
}

static void psave_event(void *arg, int fd, short revents)
{
	struct psave *s = arg;
	size_t budget = BUDGET;
	while (budget) {
		if (s->hdr_got < sizeof s->hdr) {
			ssize_t n = read(fd, s->hdr + s->hdr_got, sizeof s->hdr - s->hdr_got);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				return;
			if (n <= 0) {
				psave_end(s, -EPIPE, "the saver ended before it sent anything");
				return;
			}
			s->hdr_got += (size_t)n;
			if (s->hdr_got < sizeof s->hdr)
				continue;
			if (memcmp(s->hdr, PERSIST_SAVE_MAGIC, 8) != 0) {
				psave_end(s, -EPROTO, "the saver's stream has no header");
				return;
			}
			s->total = get64(s->hdr + 8);
			if (s->total > s->p->cap) {
				psave_end(s, -EFBIG, "the state is %llu bytes, over limits.persist_mb",
					  (unsigned long long)s->total);
				return;
			}
			if (getrandom(s->nonce, sizeof s->nonce, 0) != (ssize_t)sizeof s->nonce) {
				psave_end(s, -EIO, "no random bytes for the snapshot's nonce");
				return;
			}
			s->h = tag_begin(s->p, 2, s->name, s->total, s->created, s->cells, s->nonce);
			if (!s->h) {
				psave_end(s, -ENOMEM, "out of memory");
				return;
			}
			continue;
		}
		ssize_t n = read(fd, s->buf, CHUNK);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n < 0) {
			psave_end(s, -errno, "reading the saver: %s", strerror(errno));
			return;
		}
		if (n == 0) {
			if (s->got != s->total) {
				/* Killed mid-way, or a short stream: the previous
				 * snapshot stays. */
				psave_end(s, -EPIPE, "the saver stopped after %llu of %llu bytes",
					  (unsigned long long)s->got, (unsigned long long)s->total);
				return;
			}
			psave_finish(s);
			return;
		}
		/* Attack: a saver that sends more than it announced, to grow
		 * the file past the cap. */
		if ((uint64_t)n > s->total - s->got) {
			psave_end(s, -EPROTO, "the saver sent more than it announced");
			return;
		}
		if (s->got < 8 + SUMMARY_MAX)
			psave_peek(s, s->buf, (size_t)n);
		hmac_update(s->h, s->buf, (size_t)n);
		int r = write_all(s->out, s->buf, (size_t)n);
		if (r < 0) {
			psave_end(s, r, "cannot write the snapshot: %s", strerror(-r));
			return;
		}
		s->got += (uint64_t)n;
		s->p->written_all += (uint64_t)n;
		budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
		if (s->got == s->total) {
			/* Whole: done without waiting for the end of the stream,
			 * which a process the saver forked can hold open. */
			psave_finish(s);
			return;
		}
	}
}

struct psave *psave_start(struct persist *p, struct loop *l, const char *name, uint32_t cells, int fd,
			  psave_done_fn done, void *arg, struct err *e)
{
	if (!persist_on(p)) {
		close(fd);
		err_set(e, -ENOTSUP, "saving is off");
		return NULL;
	}
	struct psave *s = xcalloc(1, sizeof *s);
	s->p = p;
	s->loop = l;
	s->in = fd;
	s->out = -1;
	s->cells = cells;
	s->created = now_unix_ms();
	s->t0 = loop_now_ms();
	s->done = done;
	s->arg = arg;
	snprintf(s->name, sizeof s->name, "%s", name);
	s->dir = session_dir(p, name, true, e);
	s->buf = xmalloc(CHUNK);
	int fl = fcntl(fd, F_GETFL);
	if (s->dir < 0 || fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		if (s->dir >= 0)
			err_sys(e, -errno, "the saver's pipe");
		s->in = -1;
		close(fd);
		psave_close(s, false);
		return NULL;
	}
	/* A temporary file left by a save that was cut short goes first;
	 * O_EXCL and O_NOFOLLOW: whatever the code planted under that name
	 * is not written through. */
	unlinkat(s->dir, TMP_NAME, 0);
	s->out = openat(s->dir, TMP_NAME, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->out < 0) {
		err_set(e, -errno, "cannot create workspace/.sessions/%s/%s: %s", name, TMP_NAME, strerror(errno));
		close(fd);
		s->in = -1;
		psave_close(s, false);
		return NULL;
	}
	loop_watch(l, fd, POLLIN, psave_event, s);
	return s;
}

uint64_t psave_written(const struct psave *s)
{
	return s ? s->got : 0;
}

uint64_t persist_written_all(const struct persist *p)
{
	return p ? p->written_all : 0;
}

uint64_t psave_total(const struct psave *s)
{
	return s ? s->total : 0;
}

void psave_abandon(struct psave *s)
{
	if (s)
		psave_close(s, false);
}

int persist_discard(struct persist *p, const char *name)
{
	struct err e = { 0 };
	int d = session_dir(p, name, false, &e);
	if (d < 0)
		return d == -ENOENT ? 0 : d;
	int r = unlinkat(d, SNAP_NAME, 0) < 0 && errno != ENOENT ? -errno : 0;
	unlinkat(d, TMP_NAME, 0);
	close(d);
	return r;
}

bool persist_has(struct persist *p, const char *name)
{
	struct err e = { 0 };
	int d = persist_on(p) ? session_dir(p, name, false, &e) : -1;
	if (d < 0)
		return false;
	struct stat st;
	bool there = fstatat(d, SNAP_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0;
	close(d);
	return there;
}

/* ---------------------------------------------------------------- restoring */

/* The chunks read and hashed ahead of the pipe, in a ring: while the
 * session drains the pipe, the server reads and hashes the next ones (two
 * CPUs work at once).  At most this many: the pipe's capacity in chunks,
 * and two more (one being filled, one in hand). */
#define RING_MAX 8

struct prestore {
	struct persist *p;
	struct loop *loop;
	char name[80];
	int dir, in, out;
	int version;     /* of the trailer, and so of the body's layout */
	uint64_t total, sent, created, cells;
	unsigned char tag[HMAC_LEN];
	size_t tag_len;
	unsigned char nonce[NONCE_LEN];
	struct hmac *h;
	/* ring: nring chunks of CHUNK bytes, page-aligned, mapped for this
	 * restore alone.  front is the one being put into the pipe, at offset
	 * off; filled of them, from front on, hold bytes read and hashed. */
	unsigned char *ring;
	int nring, front, filled;
	size_t len[RING_MAX], off;
	/* With vmsplice the pipe holds the ring's pages themselves, not a
	 * copy: chunk i may be filled again only once the session has read
	 * past ends[i], the pipe's count (piped) after its last byte. */
	uint64_t ends[RING_MAX], piped;
	bool copy;         /* vmsplice refused: plain writes (a copy) */
	unsigned char verdict; /* 'Y' or 'N' once the tag is judged, else 0 */
	/* Direct (prestore_start): the session reads the file itself under
	 * the server's lease; it says on out (a socket) how far it has read,
	 * 8-byte offsets, and gets the verdict there. */
	bool lease, direct;
	uint64_t progress, dropped;
	unsigned char pbuf[8];
	size_t pgot;
	bool *resident; /* per CHUNK: whole in the page cache at the start */
	size_t nchunks;
	double t0;
	unsigned waits;    /* wake-ups that found the pipe full */
	prestore_done_fn done;
	void *arg;
};

/* Refuses the snapshot: says why and, unless keep, removes it, so the next
 * start does not trip over it again. */
static int refuse(struct prestore *r, struct err *e, int code, bool keep, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int refuse(struct prestore *r, struct err *e, int code, bool keep, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char m[600];
	vsnprintf(m, sizeof m, fmt, ap);
	va_end(ap);
	if (r->dir >= 0 && !keep)
		unlinkat(r->dir, SNAP_NAME, 0);
	prestore_free(r);
	return err_set(e, code, "%s", m);
}

/* Reads and checks the trailer of a snapshot of size bytes: v2, or v1 from
 * an older server. */
static int read_trailer(struct prestore *r, off_t size, struct err *e)
{
	unsigned char t[TRAILER_LEN];
	size_t tl = TRAILER_LEN;
	if (size < TRAILER1_LEN)
		return refuse(r, e, -EBADMSG, false, "the snapshot is too short to be one the server wrote");
	if (size < TRAILER_LEN || pread(r->in, t, TRAILER_LEN, size - TRAILER_LEN) != TRAILER_LEN ||
	    memcmp(t, TRAILER_MAGIC, 8) != 0) {
		tl = TRAILER1_LEN;
		if (pread(r->in, t, TRAILER1_LEN, size - TRAILER1_LEN) != TRAILER1_LEN)
			return refuse(r, e, -EIO, false, "the snapshot cannot be read");
		if (memcmp(t, TRAILER1_MAGIC, 8) != 0)
			return refuse(r, e, -EBADMSG, false, "the snapshot was not written by the server (no valid trailer)");
	}
	r->version = tl == TRAILER_LEN ? 2 : 1;
	r->total = get64(t + 8);
	r->created = get64(t + 16);
	r->cells = get64(t + 24);
	r->tag_len = r->version == 2 ? POLY1305_LEN : HMAC_LEN;
	memcpy(r->tag, t + tl - r->tag_len, r->tag_len);
	if (r->version == 2)
		memcpy(r->nonce, t + 32 + KEYID_LEN, NONCE_LEN);
	if (r->total != (uint64_t)size - tl || r->cells > 1000000000u)
		return refuse(r, e, -EBADMSG, false, "the snapshot was not written by the server (no valid trailer)");
	/* Another key made it: not an attack, and nothing this server can
	 * check.  It stays (the next save of the session replaces it). */
	if (r->version == 2 && memcmp(t + 32, r->p->keyid, KEYID_LEN) != 0)
		return refuse(r, e, -EKEYREJECTED, true, "saved with another key: not restored");
	return 0;
}

static void on_sigio(int sig)
{
	(void)sig;
}

/* A read lease on the snapshot, which lets the session take the bytes from
 * the file itself (prestore_start) with the same guarantee as the stream:
 * what it loads is what the tag covered.  The kernel grants it only while
 * nobody has the file open for writing (a descriptor or a shared writable
 * mapping kept from before, by a cell of any session, included); while it
 * is held, whoever opens the file for writing or truncates it waits in
 * open(2) or truncate(2) until the server lets go, and the server sees the
 * attempt (F_GETLEASE) and does not vouch for the bytes.  Only on the
 * local filesystems the server knows, where every writer goes through this
 * kernel (a network filesystem's other clients would not). */
static bool take_lease(int fd)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0)
		return false;
	switch ((unsigned long)sf.f_type) {
	case 0xEF53UL:     /* ext2, ext3, ext4 */
	case 0x58465342UL: /* xfs */
	case 0x9123683EUL: /* btrfs */
	case 0x01021994UL: /* tmpfs */
		break;
	default:
		return false;
	}
	/* The kernel tells a lease's owner of a break with SIGIO, whose
	 * default ends the process.  Attack: a cell that opens the snapshot
	 * for writing in a loop while it is restored would kill the server.
	 * The owner is cleared once the lease is taken (no signal at all) and,
	 * for the instant between the two calls, SIGIO does nothing (a
	 * handler, so that programs the server starts get the default). */
	static bool handled;
	if (!handled) {
		struct sigaction sa = { .sa_handler = on_sigio, .sa_flags = SA_RESTART };
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGIO, &sa, NULL) < 0)
			return false;
		handled = true;
	}
	if (fcntl(fd, F_SETLEASE, F_RDLCK) < 0)
		return false;
	if (fcntl(fd, F_SETOWN, 0) < 0) {
		fcntl(fd, F_SETLEASE, F_UNLCK);
		return false;
	}
	return true;
}

/* Whether the lease still stands unbroken: nobody opened the file for
 * writing or truncated it since it was taken. */
static bool lease_held(int fd)
{
	return fcntl(fd, F_GETLEASE) == F_RDLCK;
}

void persist_stream_only(struct persist *p)
{
	p->stream_only = true;
}

int prestore_open(struct persist *p, const char *name, struct prestore **out, struct err *e)
{
	*out = NULL;
	if (!persist_on(p))
		return 0;
	struct prestore *r = xcalloc(1, sizeof *r);
	r->p = p;
	r->in = r->out = -1;
	snprintf(r->name, sizeof r->name, "%s", name);
	struct err de = { 0 };
	r->dir = session_dir(p, name, false, &de);
	if (r->dir == -ENOENT) {
		r->dir = -1;
		prestore_free(r);
		return 0;
	}
	if (r->dir < 0) {
		r->dir = -1;
		return refuse(r, e, -EPERM, false, "workspace/.sessions/%s is not a plain directory (%s)", name, de.msg);
	}
	r->in = openat(r->dir, SNAP_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (r->in < 0) {
		int err = errno;
		if (err == ENOENT) {
			prestore_free(r);
			return 0;
		}
		r->in = -1;
		/* Attack: a symlink to a file elsewhere (a snapshot of another
		 * project, or a file to leak through the restore). */
		if (err == ELOOP)
			return refuse(r, e, -ELOOP, false, "the snapshot is a symlink, which the server never writes");
		return refuse(r, e, -err, false, "the snapshot cannot be opened (%s)", strerror(err));
	}
	struct stat st;
	if (fstat(r->in, &st) < 0 || !S_ISREG(st.st_mode))
		return refuse(r, e, -EINVAL, false, "the snapshot is not a regular file");
	/* Attack: a FIFO would hang the server's reads; cleared now that we
	 * know it is a regular file. */
	fcntl(r->in, F_SETFL, O_RDONLY);
	/* Before a byte is read: the size and the trailer judged below are
	 * then what the session takes. */
	r->lease = !p->stream_only && take_lease(r->in);
	if (r->lease && fstat(r->in, &st) < 0)
		return refuse(r, e, -EIO, true, "the snapshot cannot be read (%s)", strerror(errno));
	/* Judged before a byte is read.  Attack: a planted sparse file of
	 * 2 GiB with a well-formed trailer made the server hash zeros for
	 * 4.9 s of CPU while the call waited.  A real snapshot over the cap
	 * (the cap was lowered since) stays on disk for a server with the
	 * old cap, until the next save replaces it. */
	if ((uint64_t)st.st_size > p->cap + TRAILER_LEN)
		return refuse(r, e, -EFBIG, true,
			      "it is %.0f MB, over limits.persist_mb (%.0f MB): not restored (raise persist_mb to restore it; the next save replaces it)",
			      (double)st.st_size / 1048576.0, (double)p->cap / 1048576.0);
	/* A state larger than a session may hold cannot come back: the session
	 * ran out of memory reading it, the call said only "Cannot allocate
	 * memory", and the next save, of the fresh session, replaced the
	 * snapshot.  Judged by its size too, before a byte is read; the file
	 * stays for a server with more memory_mb, until the next save. */
	if ((uint64_t)st.st_size > p->mem_cap + TRAILER_LEN)
		return refuse(r, e, -EFBIG, true,
			      "it is %.0f MB, more than limits.memory_mb (%.0f MB) lets the session hold: not restored (raise memory_mb to restore it; the next save replaces it)",
			      (double)st.st_size / 1048576.0, (double)p->mem_cap / 1048576.0);
	int rc = read_trailer(r, st.st_size, e);
	if (rc < 0)
		return rc;
	r->h = tag_begin(p, r->version, name, r->total, r->created, r->cells, r->nonce);
	if (!r->h)
		return refuse(r, e, -ENOMEM, true, "out of memory");
	/* One sequential pass: a larger read-ahead window from the start. */
	posix_fadvise(r->in, 0, 0, POSIX_FADV_SEQUENTIAL);
	*out = r;
	return 1;
}

uint64_t prestore_bytes(const struct prestore *r)
{
	return r->total;
}

uint32_t prestore_cells(const struct prestore *r)
{
	return (uint32_t)r->cells;
}

int prestore_format(const struct prestore *r)
{
	return r->version;
}

double prestore_age_s(const struct prestore *r)
{
	uint64_t now = now_unix_ms();
	return now > r->created ? (double)(now - r->created) / 1000.0 : 0.0;
}

double prestore_ms(const struct prestore *r)
{
	return loop_now_ms() - r->t0;
}

static void prestore_end(struct prestore *r, int verdict)
{
	prestore_done_fn done = r->done;
	void *arg = r->arg;
	/* The session's socket stays open until prestore_free (the end of
	 * the call): a last word it sends after the verdict is not an error
	 * of the restore. */
	if (r->out >= 0) {
		loop_unwatch(r->loop, r->out);
		if (!r->direct) {
			close(r->out);
			r->out = -1;
		}
	}
	if (verdict == 0 && r->dir >= 0)
		unlinkat(r->dir, SNAP_NAME, 0);
	r->done = NULL;
	done(arg, verdict);
}

/* Reads want bytes at off in full: a short count only at the end. */
static ssize_t pread_full(int fd, unsigned char *b, size_t want, uint64_t off)
{
	size_t got = 0;
	while (got < want) {
		ssize_t n = pread(fd, b + got, want - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Whether chunk i of the ring may be filled again: with vmsplice its pages
 * are in the pipe until the session has read them, so only once the
 * session's reads are past its last byte (what the pipe still holds is
 * FIONREAD).  Attack: a chunk refilled while the session had yet to read
 * it would hand the session bytes the tag of this stream never covered
 * (the next chunk's, or a changed file's), behind a good verdict. */
static bool chunk_free(struct prestore *r, int i)
{
	if (r->copy || r->ends[i] == 0)
		return true;
	int unread = 0;
	if (ioctl(r->out, FIONREAD, &unread) < 0 || unread < 0)
		return false;
	return r->ends[i] <= r->piped - (uint64_t)unread;
}

/* Reads the want bytes at offset sent into b (a chunk of the ring): a
 * short count only at the end of the file.  What the page cache did not
 * hold already (RWF_NOWAIT could not read it) is read, then dropped from
 * the cache: the session is about to fault in as much fresh memory for the
 * state, and it gets these pages back at once.  Measured on the test
 * machine (a VM whose free memory goes back to its host, so that a page
 * free for long costs the host a fault when touched again): a cold 1 GiB
 * restore took 1.9 times cat's read of the file with the pages dropped
 * behind, 5 to 14 times without (both with huge pages at the session,
 * which made it worse still and are not used), and the cache would only
 * have held a second copy of the session's state.  A file the cache held
 * already stays there. */
static ssize_t read_chunk(struct prestore *r, unsigned char *b, size_t want)
{
	struct iovec v = { .iov_base = b, .iov_len = want };
	ssize_t n = preadv2(r->in, &v, 1, (off_t)r->sent, RWF_NOWAIT);
	if (n == (ssize_t)want)
		return n;
	size_t done = n > 0 ? (size_t)n : 0;
	ssize_t rest = pread_full(r->in, b + done, want - done, r->sent + done);
	if (rest < 0)
		return -1;
	posix_fadvise(r->in, (off_t)(r->sent + done), rest, POSIX_FADV_DONTNEED);
	return (ssize_t)(done + (size_t)rest);
}

/* Reads and hashes the next chunk behind the ones in hand: 1, 0 at the
 * end of the snapshot, 2 when no chunk of the ring is free yet (the
 * session has not read them), -1 when the file came up short (shortened
 * under us: what was sent cannot verify). */
static int fill(struct prestore *r)
{
	if (r->sent >= r->total)
		return 0;
	int i = (r->front + r->filled) % r->nring;
	if (r->filled == r->nring || !chunk_free(r, i))
		return 2;
	unsigned char *b = r->ring + (size_t)i * CHUNK;
	uint64_t want = r->total - r->sent;
	ssize_t n = read_chunk(r, b, want < CHUNK ? (size_t)want : CHUNK);
	if (n <= 0)
		return -1;
	hmac_update(r->h, b, (size_t)n);
	r->len[i] = (size_t)n;
	r->sent += (uint64_t)n;
	r->filled++;
	return 1;
}

/* Puts the rest of the front chunk into the pipe: its pages themselves
 * (vmsplice: the session's read is then the only copy), or a copy. */
static ssize_t put(struct prestore *r, int fd)
{
	unsigned char *b = r->ring + (size_t)r->front * CHUNK + r->off;
	size_t n = r->len[r->front] - r->off;
	if (!r->copy) {
		struct iovec v = { .iov_base = b, .iov_len = n };
		ssize_t w = vmsplice(fd, &v, 1, SPLICE_F_NONBLOCK);
		if (w >= 0 || (errno != EINVAL && errno != ENOSYS && errno != EPERM))
			return w;
		log_debug("restore: vmsplice refused (%s): copying", strerror(errno));
		r->copy = true;
	}
	return write(fd, b, n);
}

/* The verdict no, on the pipe or (direct) the socket, and the end. */
static void refuse_stream(struct prestore *r, int fd)
{
	unsigned char v = 'N';
	if ((r->direct ? send(fd, &v, 1, MSG_NOSIGNAL) : write(fd, &v, 1)) < 0)
		log_debug("restore: the session stopped reading");
	prestore_end(r, 0);
}

static void prestore_event(void *arg, int fd, short revents)
{
	struct prestore *r = arg;
	size_t budget = BUDGET;
	(void)revents;
	while (budget) {
		if (r->filled == 0) {
			int f = fill(r);
			if (f < 0) {
				refuse_stream(r, fd);
				return;
			}
			if (f == 2) {
				/* Cannot be with the ring sized from the pipe's
				 * capacity (what the session has not read spans
				 * fewer chunks than the ring has); were it so, the
				 * pipe is not empty and the next wake-up retries. */
				r->waits++;
				return;
			}
			if (f == 0) {
				/* Everything sent: the verdict is the last byte.
				 * The session reads exactly total bytes, so no byte
				 * of the file can pose as the verdict.  Judged
				 * once: the pipe may be full (the session has yet
				 * to read the last chunk), and the next wake-up
				 * only writes it.  Attack: finishing the MAC twice
				 * crashed the server (a NULL call in libcrypto)
				 * whenever the last chunk filled the pipe, which a
				 * snapshot planted by a cell, cut to a whole number
				 * of MiB, did every time. */
				if (!r->verdict) {
					unsigned char tag[HMAC_LEN];
					bool good = hmac_final(r->h, tag) == 0 && mac_equal(tag, r->tag, r->tag_len);
					r->verdict = good ? 'Y' : 'N';
				}
				bool ok = r->verdict == 'Y';
				ssize_t w = write(fd, &r->verdict, 1);
				if (w < 0 && errno == EAGAIN)
					return;
				log_debug("restore: %llu bytes streamed in %.0f ms (%s, %u waits on a full pipe)",
					  (unsigned long long)r->total, loop_now_ms() - r->t0, r->copy ? "copied" : "vmsplice", r->waits);
				prestore_end(r, w == 1 ? (ok ? 1 : 0) : -EPIPE);
				return;
			}
		}
		ssize_t w = put(r, fd);
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			/* The pipe is full: the next chunk meanwhile. */
			r->waits++;
			if (fill(r) < 0)
				refuse_stream(r, fd);
			return;
		}
		if (w <= 0) {
			prestore_end(r, -EPIPE);
			return;
		}
		r->off += (size_t)w;
		r->piped += (uint64_t)w;
		if (r->off == r->len[r->front]) {
			r->ends[r->front] = r->piped;
			r->front = (r->front + 1) % r->nring;
			r->filled--;
			r->off = 0;
		}
		budget = (size_t)w >= budget ? 0 : budget - (size_t)w;
	}
}

/* ------------------------------------------------------ restoring, direct */

static int start_stream(struct prestore *r, struct loop *l);

/* Drops from the page cache what both the server (hashed) and the session
 * (taken, by its word) are done with, of the chunks the cache did not hold
 * before (read_chunk says why): whole chunks, and the last one at the end. */
static void drop_behind(struct prestore *r)
{
	uint64_t to = r->progress < r->sent ? r->progress : r->sent;
	if (to < r->total)
		to -= to % CHUNK;
	for (; r->dropped < to; r->dropped += CHUNK) {
		size_t ci = (size_t)(r->dropped / CHUNK);
		if (ci < r->nchunks && !r->resident[ci])
			posix_fadvise(r->in, (off_t)r->dropped, CHUNK, POSIX_FADV_DONTNEED);
	}
}

static void direct_verdict(struct prestore *r, int fd)
{
	unsigned char tag[HMAC_LEN];
	bool good = hmac_final(r->h, tag) == 0 && mac_equal(tag, r->tag, r->tag_len);
	/* Attack: a process that opened the snapshot for writing while the
	 * session took it (held in open(2) by the lease, or let through when
	 * the kernel's lease-break-time ran out) would have the session load
	 * bytes the tag never covered.  Judged after the session's last word,
	 * so that its reads are all behind this check. */
	bool held = lease_held(r->in);
	unsigned char v = good && held ? 'Y' : 'N';
	ssize_t w = send(fd, &v, 1, MSG_NOSIGNAL);
	/* Whoever waits to write the file may go on now. */
	fcntl(r->in, F_SETLEASE, F_UNLCK);
	log_debug("restore: %llu bytes read directly in %.0f ms (%s)", (unsigned long long)r->total, loop_now_ms() - r->t0,
		  !held ? "opened for writing meanwhile" : good ? "good" : "bad tag");
	/* A write attempt is no proof the bytes changed: the file stays, and
	 * the next call tries again (its tag judges it then). */
	prestore_end(r, w != 1 ? -EPIPE : !held ? -EBUSY : good ? 1 : 0);
}

static void direct_event(void *arg, int fd, short revents)
{
	struct prestore *r = arg;
	(void)revents;
	/* How far the session has taken the file.  Its word only decides
	 * what the server drops from the page cache behind both: the tag
	 * covers the whole file whatever it says.  One read per wake-up.
	 * Attack: a session that writes offsets without end would keep the
	 * loop reading them and answer no other request. */
	unsigned char in[512];
	ssize_t got = read(fd, in, sizeof in);
	if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
		prestore_end(r, -EPIPE);
		return;
	}
	for (ssize_t i = 0; i < got; i++) {
		r->pbuf[r->pgot++] = in[i];
		if (r->pgot == sizeof r->pbuf) {
			uint64_t v = get64(r->pbuf);
			r->pgot = 0;
			if (v > r->total)
				v = r->total;
			if (v > r->progress)
				r->progress = v;
		}
	}
	/* The server reads ahead of the session (its reads bring the pages
	 * in from the disk, sequentially), as fast as one wake-up's budget
	 * allows. */
	size_t budget = BUDGET;
	while (budget && r->sent < r->total) {
		uint64_t want = r->total - r->sent < CHUNK ? r->total - r->sent : CHUNK;
		ssize_t n = pread_full(r->in, r->ring, (size_t)want, r->sent);
		if (n != (ssize_t)want) {
			refuse_stream(r, fd); /* shortened under us: nothing to vouch for */
			return;
		}
		hmac_update(r->h, r->ring, (size_t)n);
		r->sent += (uint64_t)n;
		budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
	}
	drop_behind(r);
	if (r->sent == r->total && r->progress == r->total) {
		direct_verdict(r, fd);
		return;
	}
	/* More is ready than one wake-up may do: the socket's room to write
	 * wakes the loop again at once, after the other requests. */
	loop_watch(r->loop, fd, r->sent < r->total ? POLLIN | POLLOUT : POLLIN, direct_event, r);
}

/* Which chunks the page cache held whole before the restore: those stay
 * there, the others are dropped behind the reads (read_chunk says why). */
static void note_resident(struct prestore *r)
{
	r->nchunks = (size_t)((r->total + CHUNK - 1) / CHUNK);
	r->resident = xcalloc(r->nchunks ? r->nchunks : 1, sizeof *r->resident);
	if (!r->total)
		return;
	long pg = sysconf(_SC_PAGESIZE);
	size_t pages = (size_t)((r->total + (uint64_t)pg - 1) / (uint64_t)pg);
	void *m = mmap(NULL, (size_t)r->total, PROT_READ, MAP_SHARED, r->in, 0);
	unsigned char *vec = m == MAP_FAILED ? NULL : malloc(pages);
	if (vec && mincore(m, (size_t)r->total, vec) == 0) {
		size_t per = CHUNK / (size_t)pg;
		for (size_t c = 0; c < r->nchunks; c++) {
			bool all = true;
			for (size_t i = c * per; i < (c + 1) * per && i < pages; i++)
				all = all && (vec[i] & 1);
			r->resident[c] = all;
		}
	}
	free(vec);
	if (m != MAP_FAILED)
		munmap(m, (size_t)r->total);
}

/* The session's own descriptor of the file (another open of it: the lease
 * belongs to the server's) and its end of the socket.  -errno when that
 * cannot be had; the caller streams then. */
static int start_direct(struct prestore *r, int fds[2])
{
	struct stat a, b;
	int f = openat(r->dir, SNAP_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (f < 0)
		return -errno;
	/* Attack: the name swapped for another file between the two opens. */
	if (fstat(f, &b) < 0 || fstat(r->in, &a) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
		close(f);
		return -ESTALE;
	}
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
		int err = errno;
		close(f);
		return -err;
	}
	int fl = fcntl(sp[0], F_GETFL);
	void *ring = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fl < 0 || fcntl(sp[0], F_SETFL, fl | O_NONBLOCK) < 0 || ring == MAP_FAILED) {
		int err = errno;
		if (ring != MAP_FAILED)
			munmap(ring, CHUNK);
		close(f);
		close(sp[0]);
		close(sp[1]);
		return -err;
	}
	note_resident(r);
	r->ring = ring;
	r->nring = 1;
	r->direct = true;
	r->out = sp[0];
	fds[0] = f;
	fds[1] = sp[1];
	return 2;
}

bool prestore_direct(const struct prestore *r)
{
	return r->direct;
}

int prestore_start(struct prestore *r, struct loop *l, prestore_done_fn done, void *arg, int fds[2])
{
	r->loop = l;
	r->done = done;
	r->arg = arg;
	r->t0 = loop_now_ms();
	if (r->lease) {
		int n = start_direct(r, fds);
		if (n == 2) {
			/* Reading from the start, not from the session's first
			 * word (8 MiB in): a cold file then comes in from the
			 * disk through the server's sequential reads while the
			 * session is still being started.  Measured on the test
			 * machine, a cold 10 MB restore took twice as long
			 * waiting for that word (15 ms against 7). */
			loop_watch(l, r->out, POLLIN | POLLOUT, direct_event, r);
			return n;
		}
		log_debug("restore: the file cannot be handed over (%s): streamed", strerror(-n));
		fcntl(r->in, F_SETLEASE, F_UNLCK);
		r->lease = false;
	}
	int fd = start_stream(r, l);
	if (fd < 0)
		return fd;
	fds[0] = fd;
	return 1;
}

static int start_stream(struct prestore *r, struct loop *l)
{
	int pp[2];
	if (pipe2(pp, O_CLOEXEC) < 0)
		return -errno;
	/* Fewer wake-ups for a large state (best effort: capped by
	 * /proc/sys/fs/pipe-max-size). */
	fcntl(pp[1], F_SETPIPE_SZ, 1 << 20);
	int cap = fcntl(pp[1], F_GETPIPE_SZ);
	int fl = fcntl(pp[1], F_GETFL);
	if (cap <= 0 || fl < 0 || fcntl(pp[1], F_SETFL, fl | O_NONBLOCK) < 0) {
		int err = errno;
		close(pp[0]);
		close(pp[1]);
		return -err;
	}
	/* What the session has not read yet (at most cap bytes: vmsplice puts
	 * at most a page in each slot of the pipe) overlaps at most
	 * ceil(cap / CHUNK) + 1 chunks; one more is always free to fill.  A
	 * pipe too large for the ring copies. */
	r->nring = (cap + (int)CHUNK - 1) / (int)CHUNK + 2;
	if (r->nring > RING_MAX) {
		r->nring = RING_MAX;
		r->copy = true;
	}
	/* Mapped for this restore alone and unmapped after it, never memory
	 * the server reuses: the pipe may hold its pages after the server is
	 * done (a session that has not read them yet, or that tee'd them into
	 * a pipe of its own).  Attack: a ring in the heap, freed and reused
	 * for another session's state or the key while the pipe still pointed
	 * at it, would let this session read them.  All a session that tees
	 * the pipe can see of the ring is this snapshot's own bytes, which it
	 * is sent anyway. */
	void *ring = mmap(NULL, (size_t)r->nring * CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ring == MAP_FAILED) {
		int err = errno;
		close(pp[0]);
		close(pp[1]);
		return -err;
	}
	r->ring = ring;
	r->out = pp[1];
	loop_watch(l, pp[1], POLLOUT, prestore_event, r);
	return pp[0];
}

void prestore_free(struct prestore *r)
{
	if (!r)
		return;
	if (r->out >= 0) {
		loop_unwatch(r->loop, r->out);
		close(r->out);
	}
	if (r->in >= 0)
		close(r->in);
	if (r->dir >= 0)
		close(r->dir);
	hmac_free(r->h);
	if (r->ring)
		munmap(r->ring, (size_t)r->nring * CHUNK);
	free(r->resident);
	free(r);
}

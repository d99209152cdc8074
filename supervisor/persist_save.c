/* Saved sessions: a save, the saver's stream pumped into a temporary file
 * under the session's directory, tagged, then renamed over the last one. */
#include "persist.h"
#include "persist_format.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../common/hmac.h"
#include "../common/util.h"

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
			s->h = persist_tag_begin(s->p, 2, s->name, s->total, s->created, s->cells, s->nonce);
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
	s->dir = persist_session_dir(p, name, true, e);
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

uint64_t psave_total(const struct psave *s)
{
	return s ? s->total : 0;
}

void psave_abandon(struct psave *s)
{
	if (s)
		psave_close(s, false);
}

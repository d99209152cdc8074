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
#include <sys/stat.h>
#include <unistd.h>

#include "../common/hmac.h"
#include "../common/log.h"
#include "../common/util.h"

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
	uint64_t wrote;    /* bytes written to disk */
	/* A save in pieces (persist.h): the table it may take 'S' pieces
	 * from (a copy), the one it builds, the pieces file and where the
	 * next new piece goes in it; the piece header being read, and the
	 * 'N' piece being received (bytes left, its tag so far). */
	bool pieces, full, sum_lost, drop_table;
	struct ptable *base, *nt;
	size_t nt_cap;
	int pfd;
	uint64_t gen, pos;
	unsigned char ph[21];
	size_t ph_got;
	uint32_t pleft;
	struct pentry cur;
	struct hmac *pmac;
};

static void psave_close(struct psave *s, bool keep_tmp)
{
	if (s->in >= 0) {
		loop_unwatch(s->loop, s->in);
		close(s->in);
	}
	if (s->out >= 0)
		close(s->out);
	if (s->pfd >= 0) {
		/* A save that did not end whole takes back what it wrote: a
		 * new file goes, an old one is cut back to what the last save
		 * names (a full disk gets its space back). */
		if (!keep_tmp && s->full && s->dir >= 0) {
			char nm[40];
			pieces_name(s->gen, nm, sizeof nm);
			unlinkat(s->dir, nm, 0);
		} else if (!keep_tmp && s->base && ftruncate(s->pfd, (off_t)s->base->end) < 0) {
			log_debug("session %s: cannot cut its pieces file back: %s", s->name, strerror(errno));
		}
		close(s->pfd);
	}
	hmac_free(s->pmac);
	ptable_free(s->base);
	ptable_free(s->nt);
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
	struct psave_result r = { .status = status, .bytes = s->total ? s->total : s->got, .written = s->wrote,
				  .drop_table = s->drop_table };
	memcpy(r.nonce, s->nonce, NONCE_LEN);
	r.ms = loop_now_ms() - s->t0;
	/* The summary is the saver's word, whole or not at all. */
	if (s->summary && s->got >= 8 + s->sum_len && !s->sum_lost)
		r.summary = s->summary;
	if (status == 0 && s->pieces) {
		r.table = s->nt;
		s->nt = NULL;
	}
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

/* Ends the temporary file with the trailer (magic, the length of what it
 * tags, the tag of h) and puts it in place of the last snapshot: 0 or
 * -errno, with psave_end called either way. */
static int psave_commit(struct psave *s, const char *magic, uint64_t len, struct hmac *h)
{
	unsigned char t[TRAILER_LEN];
	memcpy(t, magic, 8);
	put64(t + 8, len);
	put64(t + 16, s->created);
	put64(t + 24, s->cells);
	memcpy(t + 32, s->p->keyid, KEYID_LEN);
	memcpy(t + 32 + KEYID_LEN, s->nonce, NONCE_LEN);
	unsigned char tag[HMAC_LEN];
	if (hmac_final(h, tag) < 0) {
		psave_end(s, -EIO, "the tag could not be computed");
		return -EIO;
	}
	memcpy(t + 32 + KEYID_LEN + NONCE_LEN, tag, POLY1305_LEN);
	int r = write_full(s->out, t, sizeof t);
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
	if (r < 0)
		psave_end(s, r, "cannot write the snapshot: %s", strerror(-r));
	else
		unlinkat(s->dir, JOURNAL_NAME, 0); /* it went with the snapshot before */
	return r;
}

static void psave_finish(struct psave *s)
{
	if (psave_commit(s, TRAILER_MAGIC, s->total, s->h) < 0)
		return;
	/* A whole snapshot names no pieces: those of an earlier save go. */
	pieces_drop(s->dir, 0);
	psave_end(s, 0, NULL);
}

/* A save in pieces is whole: the new pieces on disk first, then the
 * manifest naming them in place of the last snapshot; a new pieces file
 * replaces the old ones only once the manifest naming it is in place. */
static void pieces_finish(struct psave *s)
{
	struct ptable *t = s->nt;
	struct stat st;
	if (fdatasync(s->pfd) < 0 && errno != EINVAL) {
		psave_end(s, -errno, "cannot write the snapshot's pieces: %s", strerror(errno));
		return;
	}
	if (fstat(s->pfd, &st) < 0) {
		psave_end(s, -errno, "cannot read back the snapshot's pieces: %s", strerror(errno));
		return;
	}
	t->gen = s->gen;
	t->dev = st.st_dev;
	t->ino = st.st_ino;
	t->end = (uint64_t)st.st_size > s->pos ? (uint64_t)st.st_size : s->pos;
	t->body = s->total;
	size_t mlen;
	unsigned char *m = ptable_encode(t, &mlen);
	struct hmac *h = persist_tag_begin(s->p, TAG_MANIFEST, s->name, mlen, s->created, s->cells, s->nonce);
	int r = h ? write_full(s->out, m, mlen) : -ENOMEM;
	if (h)
		hmac_update(h, m, mlen);
	free(m);
	s->wrote += mlen;
	if (r < 0) {
		hmac_free(h);
		psave_end(s, r, "cannot write the snapshot: %s", strerror(-r));
		return;
	}
	r = psave_commit(s, TRAILER3_MAGIC, mlen, h);
	hmac_free(h);
	if (r < 0)
		return;
	if (s->full)
		pieces_drop(s->dir, s->gen);
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

/* The header is in (magic, length): a save in pieces opens its pieces
 * file.  With the table of the last save, the new pieces go after the
 * ones it names in the same file, so long as that file is still the one
 * the server wrote (else the save is whole, and a piece the saver names
 * fails it); without, into a new file. */
static int pieces_open(struct psave *s)
{
	char nm[40];
	struct stat st;
	if (s->base) {
		pieces_name(s->base->gen, nm, sizeof nm);
		s->pfd = openat(s->dir, nm, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		/* Attack: a cell that swaps or cuts the pieces file (it may
		 * write .sessions) so that the next save names pieces that
		 * are gone.  Only a restore could tell, too late. */
		if (s->pfd >= 0 && fstat(s->pfd, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == s->base->dev &&
		    st.st_ino == s->base->ino && (uint64_t)st.st_size >= s->base->end) {
			s->gen = s->base->gen;
			s->pos = s->base->end; /* past it: only what a failed save left */
			return 0;
		}
		log_info("session %s: its pieces file changed since the last save: this save is whole", s->name);
		if (s->pfd >= 0)
			close(s->pfd);
		ptable_free(s->base);
		s->base = NULL;
		s->drop_table = true;
	}
	s->full = true;
	s->gen = pieces_next_gen(s->dir, 0);
	pieces_name(s->gen, nm, sizeof nm);
	s->pfd = openat(s->dir, nm, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->pfd < 0)
		return -errno;
	s->pos = 0;
	return 0;
}

/* Reads the 16-byte header: 1 when it is in, 0 when more is to come,
 * -1 when the save ended. */
static int psave_header(struct psave *s, int fd)
{
	ssize_t n = read(fd, s->hdr + s->hdr_got, sizeof s->hdr - s->hdr_got);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		psave_end(s, -EPIPE, "the saver ended before it sent anything");
		return -1;
	}
	s->hdr_got += (size_t)n;
	if (s->hdr_got < sizeof s->hdr)
		return 0;
	s->pieces = memcmp(s->hdr, PERSIST_PIECES_MAGIC, 8) == 0;
	if (!s->pieces && memcmp(s->hdr, PERSIST_SAVE_MAGIC, 8) != 0) {
		psave_end(s, -EPROTO, "the saver's stream has no header");
		return -1;
	}
	s->total = get64(s->hdr + 8);
	if (s->total > s->p->cap) {
		psave_end(s, -EFBIG, "the state is %llu bytes, over limits.persist_mb", (unsigned long long)s->total);
		return -1;
	}
	if (getrandom(s->nonce, sizeof s->nonce, 0) != (ssize_t)sizeof s->nonce) {
		psave_end(s, -EIO, "no random bytes for the snapshot's nonce");
		return -1;
	}
	if (s->pieces) {
		int r = pieces_open(s);
		if (r < 0) {
			psave_end(s, r, "cannot create the snapshot's pieces file: %s", strerror(-r));
			return -1;
		}
		s->nt = xcalloc(1, sizeof *s->nt);
		return 1;
	}
	s->h = persist_tag_begin(s->p, 2, s->name, s->total, s->created, s->cells, s->nonce);
	if (!s->h) {
		psave_end(s, -ENOMEM, "out of memory");
		return -1;
	}
	return 1;
}

static void nt_add(struct psave *s, const struct pentry *e)
{
	struct ptable *t = s->nt;
	if (t->n == s->nt_cap) {
		s->nt_cap = s->nt_cap ? 2 * s->nt_cap : 64;
		t->v = xrealloc(t->v, s->nt_cap * sizeof *t->v);
	}
	t->v[t->n++] = *e;
	t->live += e->len;
}

/* A piece header is in: an 'S' piece is taken from the last save's table,
 * an 'N' one starts.  false when the save ended. */
static bool piece_begin(struct psave *s)
{
	unsigned char kind = s->ph[0];
	uint32_t len = (uint32_t)s->ph[1] | (uint32_t)s->ph[2] << 8 | (uint32_t)s->ph[3] << 16 | (uint32_t)s->ph[4] << 24;
	s->ph_got = 0;
	if (len == 0 || len > PIECE_MAX || len > s->total - s->got) {
		psave_end(s, -EPROTO, "the saver sent a piece of %u bytes where at most %llu were left", len,
			  (unsigned long long)(s->total - s->got));
		return false;
	}
	if (s->nt->n >= pieces_max(s->total)) {
		psave_end(s, -EPROTO, "the saver cut the state into more than %llu pieces",
			  (unsigned long long)pieces_max(s->total));
		return false;
	}
	/* The summary is read from the bytes sent: a piece named instead
	 * leaves a hole in it, and then there is none. */
	if (s->got < 8 + (s->summary ? s->sum_len : SUMMARY_MAX) && kind != 'N')
		s->sum_lost = true;
	if (kind == 'S') {
		const struct pentry *e = ptable_find(s->base, s->ph + 5, len);
		if (!e) {
			/* The saver was offered a table this save could not
			 * take (or it lies): the next one is offered none. */
			s->drop_table = true;
			psave_end(s, -EPROTO, "the saver named a piece of the last save that the server does not hold");
			return false;
		}
		nt_add(s, e);
		s->got += len;
		return true;
	}
	if (kind != 'N') {
		psave_end(s, -EPROTO, "the saver sent a piece of an unknown kind (%u)", kind);
		return false;
	}
	struct pentry *c = &s->cur;
	*c = (struct pentry){ .off = s->pos, .len = len };
	memcpy(c->label, s->ph + 5, 16);
	/* Its own one-time key: the save's nonce with the piece's number
	 * mixed in (1 on: 0 is the manifest's). */
	memcpy(c->nonce, s->nonce, NONCE_LEN);
	put64(c->nonce + 8, get64(s->nonce + 8) ^ (uint64_t)(s->nt->n + 1));
	s->pmac = persist_tag_begin(s->p, TAG_PIECE, s->name, len, 0, 0, c->nonce);
	if (!s->pmac) {
		psave_end(s, -ENOMEM, "out of memory");
		return false;
	}
	s->pleft = len;
	return true;
}

/* Reads up to want bytes of a save in pieces into b: > 0 the count; 0
 * nothing yet (the budget of this wake-up ends); -1 the save ended (the
 * stream stopped short, whatever was announced). */
static ssize_t pieces_read(struct psave *s, int fd, void *b, size_t want, size_t *budget)
{
	ssize_t n = read(fd, b, want);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		*budget = 0;
		return 0;
	}
	if (n <= 0) {
		psave_end(s, n < 0 ? -errno : -EPIPE, "the saver stopped after %llu of %llu bytes", (unsigned long long)s->got,
			  (unsigned long long)s->total);
		return -1;
	}
	return n;
}

/* The body of a save in pieces; false when the save ended. */
static bool pieces_step(struct psave *s, int fd, size_t *budget)
{
	if (s->pleft == 0) {
		if (s->got == s->total) {
			pieces_finish(s);
			return false;
		}
		ssize_t n = pieces_read(s, fd, s->ph + s->ph_got, sizeof s->ph - s->ph_got, budget);
		if (n <= 0)
			return n == 0;
		s->ph_got += (size_t)n;
		return s->ph_got < sizeof s->ph || piece_begin(s);
	}
	ssize_t n = pieces_read(s, fd, s->buf, s->pleft < CHUNK ? s->pleft : CHUNK, budget);
	if (n <= 0)
		return n == 0;
	if (s->got < 8 + SUMMARY_MAX && !s->sum_lost)
		psave_peek(s, s->buf, (size_t)n);
	hmac_update(s->pmac, s->buf, (size_t)n);
	for (ssize_t at = 0; at < n;) {
		ssize_t w = pwrite(s->pfd, s->buf + at, (size_t)(n - at), (off_t)(s->pos + (uint64_t)at));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int err = w < 0 ? errno : EIO;
			psave_end(s, -err, "cannot write the snapshot's pieces: %s", strerror(err));
			return false;
		}
		at += w;
	}
	s->pos += (uint64_t)n;
	s->wrote += (uint64_t)n;
	s->p->written_all += (uint64_t)n;
	s->got += (uint64_t)n;
	s->pleft -= (uint32_t)n;
	*budget = (size_t)n >= *budget ? 0 : *budget - (size_t)n;
	if (s->pleft == 0) {
		unsigned char tag[HMAC_LEN];
		if (hmac_final(s->pmac, tag) < 0) {
			psave_end(s, -EIO, "the tag could not be computed");
			return false;
		}
		memcpy(s->cur.tag, tag, POLY1305_LEN);
		hmac_free(s->pmac);
		s->pmac = NULL;
		nt_add(s, &s->cur);
	}
	return true;
}

static void psave_event(void *arg, int fd, short revents)
{
	struct psave *s = arg;
	size_t budget = BUDGET;
	(void)revents;
	while (budget) {
		if (s->hdr_got < sizeof s->hdr) {
			int h = psave_header(s, fd);
			if (h <= 0)
				return;
			continue;
		}
		if (s->pieces) {
			if (!pieces_step(s, fd, &budget))
				return;
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
		int r = write_full(s->out, s->buf, (size_t)n);
		if (r < 0) {
			psave_end(s, r, "cannot write the snapshot: %s", strerror(-r));
			return;
		}
		s->got += (uint64_t)n;
		s->wrote += (uint64_t)n;
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
			  const struct ptable *base, psave_done_fn done, void *arg, struct err *e)
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
	s->pfd = -1;
	s->base = ptable_dup(base);
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
	return s ? s->wrote : 0;
}

uint64_t psave_received(const struct psave *s)
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

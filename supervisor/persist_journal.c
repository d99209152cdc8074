/* Journals: the cells logged since a snapshot, saved instead of the state
 * when nothing but such cells ran since it (persist.h says why).
 *
 * workspace/.sessions/NAME/journal, all little-endian:
 *   "PSMJRNL1", the snapshot's nonce (16), its execution count (8), the
 *   number of cells (4), then per cell: its number (4), how it ended (4),
 *   whether its digest is whole (1), its duration in microseconds (8), the
 *   digest (32), the lengths of its code and of the text shown (4 + 4),
 *   the code, the text;
 * then the trailer: when it was made (8), a nonce (16), the tag (16) and
 * "PSMJEND1".  The tag is Poly1305 under a one-time key of the nonce
 * (persist_tag_begin's TAG_JOURNAL), over the workspace, the session's
 * name, the length, the time and the snapshot's count, then the body.
 *
 * The file lies where sandboxed code can write: everything read from it
 * is bounded before it is believed, and nothing of it is parsed before
 * its tag holds. */
#include "persist.h"
#include "persist_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/util.h"

#define J_MAGIC "PSMJRNL1"
#define J_END "PSMJEND1"
#define J_HEAD (8 + 16 + 8 + 4)
#define J_ENTRY (4 + 4 + 1 + 8 + 32 + 4 + 4)
#define J_TRAILER (8 + NONCE_LEN + POLY1305_LEN + 8)

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void journal_cells_free(struct journal_cell *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].code);
		free(v[i].shown);
	}
	free(v);
}

/* The tag of body[0..len) made at created with nonce, into tag. */
static int journal_tag(const struct persist *p, const char *name, const unsigned char *body, size_t len, uint64_t created,
		       uint32_t snap_cells, const unsigned char nonce[NONCE_LEN], unsigned char tag[HMAC_LEN])
{
	struct hmac *h = persist_tag_begin(p, TAG_JOURNAL, name, len, created, snap_cells, nonce);
	if (!h)
		return -ENOMEM;
	hmac_update(h, body, len);
	int r = hmac_final(h, tag);
	hmac_free(h);
	return r < 0 ? -EIO : 0;
}

int pjournal_write(struct persist *p, const char *name, const unsigned char snap_nonce[16], uint32_t snap_cells,
		   const struct journal_cell *v, size_t n, size_t *bytes, struct err *e)
{
	if (!persist_on(p))
		return err_set(e, -EINVAL, "saving is off");
	if (n == 0 || n > JOURNAL_MAX_CELLS)
		return err_set(e, -EINVAL, "a journal of %zu cells", n);
	size_t len = J_HEAD;
	for (size_t i = 0; i < n; i++)
		len += J_ENTRY + strlen(v[i].code) + (v[i].shown ? strnlen(v[i].shown, JOURNAL_SHOWN_MAX) : 0);
	if (len + J_TRAILER > JOURNAL_MAX_BYTES)
		return err_set(e, -EFBIG, "the journal would take %zu bytes", len + J_TRAILER);
	unsigned char *b = xmalloc(len + J_TRAILER), *q = b;
	memcpy(q, J_MAGIC, 8);
	memcpy(q + 8, snap_nonce, 16);
	put64(q + 24, snap_cells);
	put32(q + 32, (uint32_t)n);
	q += J_HEAD;
	for (size_t i = 0; i < n; i++) {
		size_t cl = strlen(v[i].code), sl = v[i].shown ? strnlen(v[i].shown, JOURNAL_SHOWN_MAX) : 0;
		put32(q, (uint32_t)v[i].cell);
		put32(q + 4, (uint32_t)v[i].status);
		q[8] = v[i].whole;
		put64(q + 9, v[i].ms > 0 ? (uint64_t)(v[i].ms * 1000.0) : 0);
		memcpy(q + 17, v[i].digest, 32);
		put32(q + 49, (uint32_t)cl);
		put32(q + 53, (uint32_t)sl);
		memcpy(q + J_ENTRY, v[i].code, cl);
		if (sl)
			memcpy(q + J_ENTRY + cl, v[i].shown, sl);
		q += J_ENTRY + cl + sl;
	}
	uint64_t created = now_unix_ms();
	unsigned char nonce[NONCE_LEN], tag[HMAC_LEN];
	int r = getrandom(nonce, sizeof nonce, 0) == (ssize_t)sizeof nonce ? 0 : -EIO;
	if (r == 0)
		r = journal_tag(p, name, b, len, created, snap_cells, nonce, tag);
	if (r < 0) {
		free(b);
		return err_set(e, r, "the journal's tag could not be made");
	}
	put64(q, created);
	memcpy(q + 8, nonce, NONCE_LEN);
	memcpy(q + 8 + NONCE_LEN, tag, POLY1305_LEN);
	memcpy(q + 8 + NONCE_LEN + POLY1305_LEN, J_END, 8);
	int dir = persist_session_dir(p, name, false, e);
	if (dir < 0) {
		free(b);
		return dir;
	}
	/* A temporary file, whole on disk before it is renamed into place:
	 * whatever ends the server meanwhile, the journal before it (or none)
	 * stays whole.  Never through a symlink a cell planted there. */
	unlinkat(dir, JOURNAL_TMP, 0);
	int fd = openat(dir, JOURNAL_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	r = fd < 0 ? -errno : write_full(fd, b, len + J_TRAILER);
	if (r == 0 && fdatasync(fd) < 0 && errno != EINVAL)
		r = -errno;
	if (fd >= 0 && close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(dir, JOURNAL_TMP, dir, JOURNAL_NAME) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dir, JOURNAL_TMP, 0);
		err_set(e, r, "cannot write the journal: %s", strerror(-r));
	} else {
		*bytes = len + J_TRAILER;
		p->written_all += *bytes; /* the server's bytes, no call's growth */
	}
	close(dir);
	free(b);
	return r;
}

/* Parses an authenticated body: -EBADMSG when it does not hold together. */
static int parse(const unsigned char *b, size_t len, struct journal_cell **out, size_t *nout)
{
	uint32_t n = get32(b + 32);
	if (n == 0 || n > JOURNAL_MAX_CELLS)
		return -EBADMSG;
	struct journal_cell *v = xcalloc(n, sizeof *v);
	size_t at = J_HEAD;
	int last = -1;
	for (uint32_t i = 0; i < n; i++) {
		if (len - at < J_ENTRY)
			goto bad;
		const unsigned char *q = b + at;
		uint32_t cl = get32(q + 49), sl = get32(q + 53);
		if (cl > len - at - J_ENTRY || sl > JOURNAL_SHOWN_MAX || sl > len - at - J_ENTRY - cl)
			goto bad;
		v[i].cell = (int)get32(q);
		v[i].status = (int)get32(q + 4);
		v[i].whole = q[8] != 0;
		v[i].ms = (double)get64(q + 9) / 1000.0;
		memcpy(v[i].digest, q + 17, 32);
		v[i].code = xmalloc(cl + 1);
		memcpy(v[i].code, q + J_ENTRY, cl);
		v[i].code[cl] = '\0';
		if (sl) {
			v[i].shown = xmalloc(sl + 1);
			memcpy(v[i].shown, q + J_ENTRY + cl, sl);
			v[i].shown[sl] = '\0';
		}
		/* Cells in order, numbers a session can have, code without a
		 * NUL (it goes to the session as text). */
		if (v[i].cell <= last || v[i].cell > 1000000000 || v[i].status < 0 || v[i].status > 64 ||
		    memchr(q + J_ENTRY, 0, cl) || !(v[i].ms < 86400000.0))
			goto bad;
		last = v[i].cell;
		at += J_ENTRY + cl + sl;
	}
	if (at != len)
		goto bad;
	*out = v;
	*nout = n;
	return 0;
bad:
	journal_cells_free(v, n);
	return -EBADMSG;
}

int pjournal_read(struct persist *p, const char *name, const unsigned char snap_nonce[16], uint32_t snap_cells,
		  struct journal_cell **v, size_t *n, struct err *e)
{
	*v = NULL;
	*n = 0;
	struct err de = { 0 };
	int dir = persist_on(p) ? persist_session_dir(p, name, false, &de) : -1;
	if (dir < 0)
		return 0;
	int r = 0;
	unsigned char *b = NULL;
	int fd = openat(dir, JOURNAL_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0) {
		/* None (the usual case), or a symlink, which the server never
		 * writes. */
		r = errno == ENOENT ? 0 : err_set(e, -EBADMSG, "it is not a file the server wrote (%s)", strerror(errno));
		goto out;
	}
	/* Judged by its size before a byte is read.  Attack: a FIFO or a
	 * file of gigabytes planted as the journal, to hold the server or
	 * fill its memory. */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)(J_HEAD + J_TRAILER) ||
	    (size_t)st.st_size > JOURNAL_MAX_BYTES) {
		r = err_set(e, -EBADMSG, "it is not a journal the server wrote (its type or size)");
		goto out;
	}
	size_t size = (size_t)st.st_size;
	b = xmalloc(size);
	if (pread(fd, b, size, 0) != (ssize_t)size) {
		r = err_set(e, -EIO, "it cannot be read");
		goto out;
	}
	size_t len = size - J_TRAILER;
	const unsigned char *t = b + len;
	if (memcmp(b, J_MAGIC, 8) != 0 || memcmp(t + 8 + NONCE_LEN + POLY1305_LEN, J_END, 8) != 0) {
		r = err_set(e, -EBADMSG, "it is not a journal the server wrote");
		goto out;
	}
	unsigned char tag[HMAC_LEN];
	/* Its tag covers the snapshot it names: a journal of another snapshot
	 * fails here too, unless it names that snapshot, as below. */
	if (journal_tag(p, name, b, len, get64(t), (uint32_t)get64(b + 24), t + 8, tag) < 0 ||
	    !mac_equal(tag, t + 8 + NONCE_LEN, POLY1305_LEN)) {
		r = err_set(e, -EBADMSG, "its bytes do not match the tag the server wrote with them");
		goto out;
	}
	/* The server's own, written after another snapshot (the server
	 * ended between a snapshot's rename and the removal of the journal
	 * before it): no cell of it follows this state. */
	if (memcmp(b + 8, snap_nonce, 16) != 0 || get64(b + 24) != snap_cells) {
		unlinkat(dir, JOURNAL_NAME, 0);
		r = 0;
		goto out;
	}
	r = parse(b, len, v, n) < 0 ? err_set(e, -EBADMSG, "it does not hold together") : 1;
out:
	if (r < 0)
		unlinkat(dir, JOURNAL_NAME, 0);
	if (fd >= 0)
		close(fd);
	close(dir);
	free(b);
	return r;
}

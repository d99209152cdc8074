/* Saved sessions: a restore, the snapshot checked against its tag while
 * the session reads it, streamed through a pipe or read from the file
 * itself under the server's lease. */
#include "persist.h"
#include "persist_format.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../common/hmac.h"
#include "../common/log.h"
#include "../common/util.h"

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
	/* v3, in pieces: the manifest (authenticated), the pieces file, the
	 * next piece to read.  Each piece is checked against its own tag as
	 * it is read, before a byte of it goes into the pipe. */
	struct ptable *pt;
	int pfd;
	size_t pk;
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
	bool v3 = false;
	if (size >= TRAILER_LEN && pread(r->in, t, TRAILER_LEN, size - TRAILER_LEN) == TRAILER_LEN)
		v3 = memcmp(t, TRAILER3_MAGIC, 8) == 0;
	if (!v3 && (size < TRAILER_LEN || memcmp(t, TRAILER_MAGIC, 8) != 0)) {
		tl = TRAILER1_LEN;
		if (pread(r->in, t, TRAILER1_LEN, size - TRAILER1_LEN) != TRAILER1_LEN)
			return refuse(r, e, -EIO, false, "the snapshot cannot be read");
		if (memcmp(t, TRAILER1_MAGIC, 8) != 0)
			return refuse(r, e, -EBADMSG, false, "the snapshot was not written by the server (no valid trailer)");
	}
	r->version = v3 ? 3 : tl == TRAILER_LEN ? 2 : 1;
	r->total = get64(t + 8);
	r->created = get64(t + 16);
	r->cells = get64(t + 24);
	r->tag_len = r->version >= 2 ? POLY1305_LEN : HMAC_LEN;
	memcpy(r->tag, t + tl - r->tag_len, r->tag_len);
	if (r->version >= 2)
		memcpy(r->nonce, t + 32 + KEYID_LEN, NONCE_LEN);
	if (r->total != (uint64_t)size - tl || r->cells > 1000000000u)
		return refuse(r, e, -EBADMSG, false, "the snapshot was not written by the server (no valid trailer)");
	/* Another key made it: not an attack, and nothing this server can
	 * check.  It stays (the next save of the session replaces it). */
	if (r->version >= 2 && memcmp(t + 32, r->p->keyid, KEYID_LEN) != 0)
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

static ssize_t pread_full(int fd, unsigned char *b, size_t want, uint64_t off);

/* A snapshot in pieces (v3): its manifest read whole and checked against
 * the trailer's tag before anything of it is believed, then its pieces
 * file opened.  Streamed, never read directly: the session would read
 * pieces the server had not checked yet. */
static int open_pieces(struct prestore *r, struct prestore **out, struct err *e)
{
	struct persist *p = r->p;
	if (r->lease) {
		fcntl(r->in, F_SETLEASE, F_UNLCK);
		r->lease = false;
	}
	/* Attack: a planted manifest that claims to be huge, to have the
	 * server read it into memory and hash it: bounded first by the most
	 * pieces of a state it would restore (under persist_mb and under
	 * memory_mb: 3.9 MB at the defaults). */
	uint64_t most = p->cap < p->mem_cap ? p->cap : p->mem_cap;
	if (r->total > MANIFEST_HEAD + MANIFEST_ENTRY * pieces_max(most))
		return refuse(r, e, -EBADMSG, false, "the snapshot was not written by the server (its manifest is too long)");
	unsigned char *m = xmalloc(r->total ? r->total : 1);
	unsigned char tag[HMAC_LEN];
	struct hmac *h = persist_tag_begin(p, TAG_MANIFEST, r->name, r->total, r->created, r->cells, r->nonce);
	bool good = h && pread_full(r->in, m, r->total, 0) == (ssize_t)r->total;
	if (good)
		hmac_update(h, m, r->total);
	good = good && hmac_final(h, tag) == 0 && mac_equal(tag, r->tag, POLY1305_LEN);
	hmac_free(h);
	if (!good) {
		free(m);
		return refuse(r, e, -EBADMSG, false, "its manifest does not match the tag the server wrote with it (changed or planted by something other than the server)");
	}
	struct err de = { 0 };
	r->pt = ptable_decode(m, r->total, UINT64_MAX, &de);
	free(m);
	if (!r->pt)
		return refuse(r, e, -EBADMSG, false, "%s", de.msg);
	uint64_t body = r->pt->body;
	if (body > p->cap)
		return refuse(r, e, -EFBIG, true,
			      "it is %.0f MB, over limits.persist_mb (%.0f MB): not restored (raise persist_mb to restore it; the next save replaces it)",
			      (double)body / 1048576.0, (double)p->cap / 1048576.0);
	if (body > p->mem_cap)
		return refuse(r, e, -EFBIG, true,
			      "it is %.0f MB, more than limits.memory_mb (%.0f MB) lets the session hold: not restored (raise memory_mb to restore it; the next save replaces it)",
			      (double)body / 1048576.0, (double)p->mem_cap / 1048576.0);
	char nm[40];
	pieces_name(r->pt->gen, nm, sizeof nm);
	r->pfd = openat(r->dir, nm, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (r->pfd < 0) {
		int err = errno;
		return refuse(r, e, -err, false, "its pieces file (%s) %s", nm,
			      err == ENOENT ? "is missing" : err == ELOOP ? "is a symlink, which the server never writes" : strerror(err));
	}
	/* Attack: a FIFO in its place would hang the server's reads. */
	if (fstat(r->pfd, &st) < 0 || !S_ISREG(st.st_mode))
		return refuse(r, e, -EINVAL, false, "its pieces file (%s) is not a regular file", nm);
	fcntl(r->pfd, F_SETFL, O_RDONLY);
	if ((uint64_t)st.st_size < r->pt->end)
		return refuse(r, e, -EBADMSG, false, "its pieces file (%s) was cut short", nm);
	r->pt->dev = st.st_dev;
	r->pt->ino = st.st_ino;
	r->pt->end = (uint64_t)st.st_size;
	r->total = body;
	posix_fadvise(r->pfd, 0, 0, POSIX_FADV_SEQUENTIAL);
	*out = r;
	return 1;
}

int prestore_open(struct persist *p, const char *name, struct prestore **out, struct err *e)
{
	*out = NULL;
	if (!persist_on(p))
		return 0;
	struct prestore *r = xcalloc(1, sizeof *r);
	r->p = p;
	r->in = r->out = r->pfd = -1;
	snprintf(r->name, sizeof r->name, "%s", name);
	struct err de = { 0 };
	r->dir = persist_session_dir(p, name, false, &de);
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
	if (r->version == 3)
		return open_pieces(r, out, e);
	r->h = persist_tag_begin(p, r->version, name, r->total, r->created, r->cells, r->nonce);
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

const unsigned char *prestore_nonce(const struct prestore *r)
{
	return r->nonce;
}

uint32_t prestore_cells(const struct prestore *r)
{
	return (uint32_t)r->cells;
}

int prestore_format(const struct prestore *r)
{
	return r->version >= 2 ? 2 : 1; /* v3's pieces make a v2 body */
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
	ssize_t n;
	if (r->pt) {
		/* The next piece, checked against its own tag before it goes
		 * into the pipe.  Attack: pieces swapped, changed or cut in
		 * the file (a cell may write .sessions). */
		const struct pentry *pe = &r->pt->v[r->pk];
		n = pread_full(r->pfd, b, pe->len, pe->off);
		unsigned char tag[HMAC_LEN];
		struct hmac *h = persist_tag_begin(r->p, TAG_PIECE, r->name, pe->len, 0, 0, pe->nonce);
		bool good = h && n == (ssize_t)pe->len;
		if (good)
			hmac_update(h, b, pe->len);
		good = good && hmac_final(h, tag) == 0 && mac_equal(tag, pe->tag, POLY1305_LEN);
		hmac_free(h);
		if (!good)
			return -1;
		r->pk++;
	} else {
		uint64_t want = r->total - r->sent;
		n = read_chunk(r, b, want < CHUNK ? (size_t)want : CHUNK);
		if (n <= 0)
			return -1;
		hmac_update(r->h, b, (size_t)n);
	}
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
					/* In pieces: each was checked as it was read. */
					unsigned char tag[HMAC_LEN];
					bool good = r->pt || (hmac_final(r->h, tag) == 0 && mac_equal(tag, r->tag, r->tag_len));
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
	if (r->pfd >= 0)
		close(r->pfd);
	ptable_free(r->pt);
	if (r->dir >= 0)
		close(r->dir);
	hmac_free(r->h);
	if (r->ring)
		munmap(r->ring, (size_t)r->nring * CHUNK);
	free(r->resident);
	free(r);
}

struct ptable *prestore_table(struct prestore *r)
{
	if (!r || !r->pt || r->verdict != 'Y')
		return NULL;
	struct ptable *t = r->pt;
	r->pt = NULL;
	return t;
}

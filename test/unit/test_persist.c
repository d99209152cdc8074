/* Saved sessions, the trusted side (supervisor/persist.c): a save streamed
 * in becomes a v2 snapshot that restores with a good verdict; a snapshot of
 * the previous format (v1, HMAC-SHA256) still restores; one made with
 * another key is refused as such and left in place; a changed byte gets a
 * bad verdict and the file goes; one over persist_mb is refused by its size
 * and left in place; the saver's summary record reaches the caller; a
 * state of many chunks (more than the ring the server streams it from)
 * reaches a slow reader byte for byte, and a change to its file, before
 * the stream or while it runs, gets a bad verdict.  Read directly, under
 * the server's lease: the session's reads of the file get a good verdict,
 * a changed byte a bad one; a process that opens the file for writing
 * meanwhile, held off by the lease or not, gets the restore refused (the
 * file kept) without ending the server by SIGIO; a file open for writing
 * from before is streamed; a session that hangs up ends the restore. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/hmac.h"
#include "../../policy/policy.h"
#include "../../rpc/loop.h"
#include "../../supervisor/persist.h"
#include "ws_fixture.h"

static struct fx *f;
static struct policy *pol;
static struct persist *p;
static struct loop *loop;
static char snap[512];

static const char SUMMARY[] = "{\"unsaved\": [[\"fh\", \"TypeError: cannot pickle\"]], \"unsaved_count\": 1}";
static const char STATE[] = "the pickled state, in any bytes the saver likes";

static void put64(unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

/* The body a saver sends after its header: the summary record, then the
 * state. */
static size_t body(unsigned char *out)
{
	size_t n = 0;
	put64(out, sizeof SUMMARY - 1);
	n += 8;
	memcpy(out + n, SUMMARY, sizeof SUMMARY - 1);
	n += sizeof SUMMARY - 1;
	memcpy(out + n, STATE, sizeof STATE - 1);
	return n + sizeof STATE - 1;
}

static struct psave_result saved;
static char saved_summary[512];

static void save_done(void *arg, const struct psave_result *r)
{
	saved = *r;
	snprintf(saved_summary, sizeof saved_summary, "%s", r->summary ? r->summary : "");
	saved.summary = NULL;
	loop_stop(loop);
}

/* Streams a save of session "default" through the real psave. */
static void save_one(void)
{
	int pp[2];
	assert_int_equal(pipe(pp), 0);
	unsigned char b[512], h[16];
	size_t n = body(b);
	memcpy(h, PERSIST_SAVE_MAGIC, 8);
	put64(h + 8, n);
	assert_int_equal(write(pp[1], h, sizeof h), (ssize_t)sizeof h);
	assert_int_equal(write(pp[1], b, n), (ssize_t)n);
	struct err e = { 0 };
	struct psave *s = psave_start(p, loop, "default", 3, pp[0], NULL, save_done, NULL, &e);
	assert_non_null(s);
	loop_run(loop);
	close(pp[1]);
	assert_int_equal(saved.status, 0);
}

static int verdict_of;

static void restore_done(void *arg, int verdict)
{
	verdict_of = verdict;
	loop_stop(loop);
}

/* Opens and streams the snapshot; the bytes the session would read and the
 * verdict byte after them. */
static int restore(unsigned char *got, size_t cap, size_t *len, char *verdict, int *format)
{
	struct prestore *r = NULL;
	struct err e = { 0 };
	int rc = prestore_open(p, "default", &r, &e);
	if (rc <= 0)
		return rc;
	*format = prestore_format(r);
	size_t total = prestore_bytes(r);
	assert_true(total + 1 <= cap);
	int fds[2];
	assert_int_equal(prestore_start(r, loop, restore_done, NULL, fds), 1);
	int fd = fds[0];
	loop_run(loop);
	size_t n = 0;
	while (n < total + 1) {
		ssize_t k = read(fd, got + n, total + 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	close(fd);
	prestore_free(r);
	*len = n ? n - 1 : 0;
	*verdict = n ? (char)got[n - 1] : 0;
	return 1;
}

static int setup(void **state)
{
	struct err e = { 0 };
	f = fx_new("persist");
	char xdg[128];
	snprintf(xdg, sizeof xdg, "%s/state", f->tmp);
	assert_int_equal(mkdir(xdg, 0700), 0);
	setenv("XDG_STATE_HOME", xdg, 1);
	assert_int_equal(policy_builtin(&pol, &e), 0);
	pol->limits.persist = true;
	pol->limits.persist_mb = 1;
	p = persist_new(&f->ws, pol);
	assert_true(persist_on(p));
	persist_stream_only(p);
	loop = loop_new();
	wpath(f, snap, sizeof snap, ".sessions/default/state.snap");
	return 0;
}

static int teardown(void **state)
{
	loop_free(loop);
	persist_free(p);
	policy_free(pol);
	fx_free(f);
	return 0;
}

static void test_a_save_restores_with_a_good_verdict(void **state)
{
	save_one();
	assert_string_equal(saved_summary, SUMMARY);
	unsigned char got[1024], want[512];
	size_t n, wn = body(want);
	char v;
	int format;
	assert_int_equal(restore(got, sizeof got, &n, &v, &format), 1);
	assert_int_equal(format, 2);
	assert_int_equal(n, wn);
	assert_memory_equal(got, want, wn);
	assert_int_equal(v, 'Y');
	assert_int_equal(verdict_of, 1);
}

/* The key's id in a v2 trailer (72 bytes: magic, length, time, cells,
 * key id, nonce, tag) stands for another key. */
static void test_another_key_is_refused_as_such_and_kept(void **state)
{
	save_one();
	int fd = open(snap, O_RDWR);
	off_t size = lseek(fd, 0, SEEK_END);
	unsigned char x;
	assert_int_equal(pread(fd, &x, 1, size - 72 + 32), 1);
	x ^= 0xff;
	assert_int_equal(pwrite(fd, &x, 1, size - 72 + 32), 1);
	close(fd);
	struct prestore *r = NULL;
	struct err e = { 0 };
	assert_int_equal(prestore_open(p, "default", &r, &e), -EKEYREJECTED);
	assert_non_null(strstr(e.msg, "saved with another key: not restored"));
	assert_int_equal(access(snap, F_OK), 0);
}

static void test_a_changed_byte_gets_a_bad_verdict_and_goes(void **state)
{
	save_one();
	int fd = open(snap, O_RDWR);
	unsigned char x;
	assert_int_equal(pread(fd, &x, 1, 20), 1);
	x ^= 1;
	assert_int_equal(pwrite(fd, &x, 1, 20), 1);
	close(fd);
	unsigned char got[1024];
	size_t n;
	char v;
	int format;
	assert_int_equal(restore(got, sizeof got, &n, &v, &format), 1);
	assert_int_equal(v, 'N');
	assert_int_equal(verdict_of, 0);
	assert_int_equal(access(snap, F_OK), -1);
}

/* A snapshot written by the previous version: HMAC-SHA256 under the key,
 * trailer PSMSNAP1 (magic, length, time, cells, 32-byte tag). */
static void test_a_v1_snapshot_still_restores(void **state)
{
	unsigned char b[512];
	size_t n = body(b) - 8 - (sizeof SUMMARY - 1); /* v1 had no summary */
	memmove(b, b + 8 + sizeof SUMMARY - 1, n);
	char keyp[256];
	snprintf(keyp, sizeof keyp, "%s/state/python-sandbox-mcp/key", f->tmp);
	unsigned char key[32];
	int kfd = open(keyp, O_RDONLY);
	assert_int_equal(read(kfd, key, sizeof key), 32);
	close(kfd);
	unsigned char nums[24];
	put64(nums, n);
	put64(nums + 8, 1700000000000ull);
	put64(nums + 16, 2);
	struct hmac *h = hmac_new(key, sizeof key);
	static const char domain[] = "python-sandbox-mcp snapshot v1";
	hmac_update(h, domain, sizeof domain);
	hmac_update(h, f->ws.abs, strlen(f->ws.abs) + 1);
	hmac_update(h, "default", 8);
	hmac_update(h, nums, sizeof nums);
	hmac_update(h, b, n);
	unsigned char t[64];
	memcpy(t, "PSMSNAP1", 8);
	memcpy(t + 8, nums, 24);
	assert_int_equal(hmac_final(h, t + 32), 0);
	hmac_free(h);
	char dir[512];
	wpath(f, dir, sizeof dir, ".sessions");
	mkdir(dir, 0700);
	wpath(f, dir, sizeof dir, ".sessions/default");
	mkdir(dir, 0700);
	int fd = open(snap, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_int_equal(write(fd, b, n), (ssize_t)n);
	assert_int_equal(write(fd, t, sizeof t), (ssize_t)sizeof t);
	close(fd);
	unsigned char got[1024];
	size_t gn;
	char v;
	int format;
	assert_int_equal(restore(got, sizeof got, &gn, &v, &format), 1);
	assert_int_equal(format, 1);
	assert_int_equal(gn, n);
	assert_memory_equal(got, b, n);
	assert_int_equal(v, 'Y');
}

/* A saved snapshot grown to size: refused by its size before anything is
 * read, with the reason `says`, and left for the next save. */
static void assert_refused_by_size(off_t size, const char *says)
{
	save_one();
	assert_int_equal(truncate(snap, size), 0);
	struct prestore *r = NULL;
	struct err e = { 0 };
	assert_int_equal(prestore_open(p, "default", &r, &e), -EFBIG);
	assert_non_null(strstr(e.msg, says));
	assert_int_equal(access(snap, F_OK), 0);
}

/* Over persist_mb (1 MB here) by its size. */
static void test_over_the_cap_is_refused_by_its_size(void **state)
{
	assert_refused_by_size(3 << 20, "over limits.persist_mb (1 MB)");
}

/* More than memory_mb by its size (64 MB here, the least a policy allows):
 * it could not be read into the session, so it is refused before anything
 * is read, and left. */
static void test_over_memory_is_refused_by_its_size(void **state)
{
	persist_free(p);
	pol->limits.persist_mb = 256;
	pol->limits.memory_mb = 64;
	p = persist_new(&f->ws, pol);
	assert_refused_by_size(80 << 20, "more than limits.memory_mb (64 MB)");
}

/* ---- a state of many chunks: the ring of chunks the server streams from
 * is reused while a slow session reads, so every byte must still be the
 * one the tag covered. */

#define BIG (9u << 20) /* over 1 MiB chunks x a ring of 3 to 8, not a multiple */
static size_t big = BIG; /* the state's length in this test */

static unsigned char big_byte(size_t i)
{
	uint32_t x = (uint32_t)i * 2654435761u;
	return (unsigned char)(x >> 24 ^ x >> 13 ^ i);
}

static int setup_big(void **state)
{
	setup(state);
	persist_free(p);
	pol->limits.persist_mb = 16;
	p = persist_new(&f->ws, pol);
	assert_true(persist_on(p));
	persist_stream_only(p);
	return 0;
}

/* The same, restored the way the server prefers where it can take a lease
 * (the test's files are on a local filesystem): read directly. */
static int setup_direct(void **state)
{
	setup_big(state);
	persist_free(p);
	p = persist_new(&f->ws, pol);
	assert_true(persist_on(p));
	return 0;
}

/* The saver's side of a save of BIG bytes of state, from a child (more
 * than a pipe holds). */
static void save_big(void)
{
	int pp[2];
	assert_int_equal(pipe(pp), 0);
	pid_t w = fork();
	assert_true(w >= 0);
	if (w == 0) {
		close(pp[0]);
		unsigned char h[24];
		memcpy(h, PERSIST_SAVE_MAGIC, 8);
		put64(h + 8, 8 + big);
		put64(h + 16, 0); /* an empty summary */
		if (write(pp[1], h, sizeof h) != (ssize_t)sizeof h)
			_exit(1);
		static unsigned char b[BIG];
		for (size_t i = 0; i < big; i++)
			b[i] = big_byte(i);
		for (size_t off = 0; off < big;) {
			ssize_t k = write(pp[1], b + off, big - off);
			if (k <= 0)
				_exit(1);
			off += (size_t)k;
		}
		_exit(0);
	}
	close(pp[1]);
	struct err e = { 0 };
	assert_non_null(psave_start(p, loop, "default", 3, pp[0], NULL, save_done, NULL, &e));
	loop_run(loop);
	int st;
	assert_int_equal(waitpid(w, &st, 0), w);
	assert_int_equal(saved.status, 0);
}

enum { READ_SLOWLY, CHANGE_AHEAD, CUT_AHEAD, PAUSE_AT_END };

/* The session's side, in a child that reads slowly (the pipe stays full,
 * the server's ring wraps many times): 0 when every byte is the one saved
 * and the verdict 'Y', 1 when the verdict is 'N' or the stream ends short,
 * 2 when a byte differs behind a 'Y'.  CHANGE_AHEAD and CUT_AHEAD change
 * the file once 2 MiB are read (a hostile cell writing the workspace
 * while the state streams): a byte 7 MiB in, or the file cut at 5 MiB. */
static int read_big(int fd, int how)
{
	static unsigned char b[64 << 10];
	size_t at = 0, want = 8 + big;
	bool bad = false;
	while (at < want) {
		size_t n = want - at < sizeof b ? want - at : sizeof b;
		ssize_t k = read(fd, b, n);
		if (k <= 0)
			return 1;
		for (ssize_t i = 0; i < k; i++) {
			size_t pos = at + (size_t)i;
			unsigned char expect = pos < 8 ? 0 : big_byte(pos - 8);
			if (b[i] != expect)
				bad = true;
		}
		at += (size_t)k;
		if (at >= (2u << 20) && at - (size_t)k < (2u << 20) && how != READ_SLOWLY) {
			if (how == CHANGE_AHEAD) {
				int sf = open(snap, O_WRONLY);
				unsigned char x = (unsigned char)~big_byte(7u << 20);
				if (sf < 0 || pwrite(sf, &x, 1, 8 + (7 << 20)) != 1)
					return 3;
				close(sf);
			} else if (truncate(snap, 5 << 20) != 0) {
				return 3;
			}
		}
		if (at < (3u << 20))
			usleep(2000);
		/* The last chunk then fills the pipe: the verdict waits. */
		if (how == PAUSE_AT_END && at == want - (1u << 20))
			usleep(300000);
	}
	char v;
	if (read(fd, &v, 1) != 1 || v != 'Y')
		return 1;
	return bad ? 2 : 0;
}

static int restore_big(int how)
{
	/* Cold, as after a reboot: the server reads it from the disk (and
	 * drops it from the cache behind itself). */
	int sf = open(snap, O_RDONLY);
	assert_true(sf >= 0);
	assert_int_equal(fsync(sf), 0);
	assert_int_equal(posix_fadvise(sf, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(sf);
	struct prestore *r = NULL;
	struct err e = { 0 };
	assert_int_equal(prestore_open(p, "default", &r, &e), 1);
	assert_int_equal(prestore_bytes(r), 8 + big);
	int fds[2];
	assert_int_equal(prestore_start(r, loop, restore_done, NULL, fds), 1);
	int fd = fds[0];
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		/* Only the read end: the server's write end (in this copy of
		 * it) would keep the pipe from ever ending. */
		if (dup2(fd, 100) != 100 || close_range(3, 99, 0) != 0 || close_range(101, ~0u, 0) != 0)
			_exit(4);
		_exit(read_big(100, how));
	}
	close(fd);
	verdict_of = -99;
	loop_run(loop);
	prestore_free(r);
	int st;
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* A state of a whole number of chunks, read by a session that pauses
 * before the last one: the verdict finds the pipe full and is written at
 * the next wake-up (the MAC was finished twice, and the server crashed). */
static void test_the_verdict_waits_for_a_full_pipe(void **state)
{
	big = (4u << 20) - 8;
	save_big();
	assert_int_equal(restore_big(PAUSE_AT_END), 0);
	assert_int_equal(verdict_of, 1);
	big = BIG;
}

static void test_many_chunks_reach_a_slow_reader_byte_for_byte(void **state)
{
	save_big();
	assert_int_equal(restore_big(READ_SLOWLY), 0);
	assert_int_equal(verdict_of, 1);
}

/* A byte of the last chunk changed on disk after the save. */
static void change_last_chunk(void)
{
	int fd = open(snap, O_RDWR);
	unsigned char x = (unsigned char)~big_byte(BIG - 3);
	assert_int_equal(pwrite(fd, &x, 1, 8 + BIG - 3), 1);
	close(fd);
}

static void test_a_change_in_the_last_chunk_gets_a_bad_verdict(void **state)
{
	save_big();
	change_last_chunk();
	assert_int_equal(restore_big(READ_SLOWLY), 1);
	assert_int_equal(verdict_of, 0);
	assert_int_equal(access(snap, F_OK), -1);
}

static void test_a_file_changed_while_it_streams_gets_a_bad_verdict(void **state)
{
	save_big();
	assert_int_equal(restore_big(CHANGE_AHEAD), 1);
	assert_int_equal(verdict_of, 0);
}

static void test_a_file_cut_while_it_streams_gets_a_bad_verdict(void **state)
{
	save_big();
	assert_int_equal(restore_big(CUT_AHEAD), 1);
	assert_int_equal(verdict_of, 0);
}

/* ------------------------------------------------------------- direct */

enum { DIRECT_PLAIN, DIRECT_WRITER_WAITS, DIRECT_WRITER_TRIES, DIRECT_HANG_UP };

static int send_off(int sock, uint64_t off)
{
	unsigned char b[8];
	put64(b, off);
	return write(sock, b, sizeof b) == (ssize_t)sizeof b ? 0 : -1;
}

/* A process that opens the snapshot for writing while the session takes
 * it (a cell of another session): DIRECT_WRITER_WAITS opens it as a program
 * would and is held in open(2) until the server lets go, then changes a
 * byte; DIRECT_WRITER_TRIES opens it without blocking, and must be told the
 * file is leased (EWOULDBLOCK). */
static pid_t writer(int how)
{
	pid_t w = fork();
	assert_true(w >= 0);
	if (w)
		return w;
	if (how == DIRECT_WRITER_TRIES) {
		int sf = open(snap, O_WRONLY | O_NONBLOCK);
		_exit(sf < 0 && errno == EWOULDBLOCK ? 0 : 5);
	}
	int sf = open(snap, O_WRONLY);
	unsigned char x = (unsigned char)~big_byte(7u << 20);
	_exit(sf >= 0 && pwrite(sf, &x, 1, 8 + (7 << 20)) == 1 ? 0 : 5);
}

/* The session's side of a direct restore, in a child: reads the body from
 * the file 1 MiB at a time, the last piece on its own, saying on the socket
 * after each how far it has read (as the bootstrap does), then waits for
 * the verdict.  0
 * when every byte is the one saved and the verdict 'Y', 1 when it is 'N',
 * 2 when a byte differs behind a 'Y'. */
static int read_direct(int file, int sock, int how)
{
	static unsigned char b[1 << 20];
	size_t at = 0, want = 8 + big;
	bool bad = false;
	pid_t w = -1;
	while (at < want) {
		size_t n = want - at < sizeof b ? want - at : sizeof b;
		ssize_t k = pread(file, b, n, (off_t)at);
		if (k <= 0)
			return 3;
		for (ssize_t i = 0; i < k; i++) {
			size_t pos = at + (size_t)i;
			if (b[i] != (pos < 8 ? 0 : big_byte(pos - 8)))
				bad = true;
		}
		at += (size_t)k;
		if (send_off(sock, at) < 0)
			return 3;
		if (at == (2u << 20) && (how == DIRECT_WRITER_WAITS || how == DIRECT_WRITER_TRIES)) {
			w = writer(how);
			usleep(200000); /* the writer is in open(2) by now */
		}
		if (at == (2u << 20) && how == DIRECT_HANG_UP)
			return 4;
	}
	char v = 0;
	if (read(sock, &v, 1) != 1)
		return 3;
	if (w > 0) {
		int st;
		if (waitpid(w, &st, 0) != w || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 6;
	}
	return v != 'Y' ? 1 : bad ? 2 : 0;
}

static int restore_direct(int how)
{
	struct prestore *r = NULL;
	struct err e = { 0 };
	assert_int_equal(prestore_open(p, "default", &r, &e), 1);
	int fds[2];
	assert_int_equal(prestore_start(r, loop, restore_done, NULL, fds), 2);
	assert_true(prestore_direct(r));
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		if (dup2(fds[0], 100) != 100 || dup2(fds[1], 101) != 101 || close_range(3, 99, 0) != 0 ||
		    close_range(102, ~0u, 0) != 0)
			_exit(4);
		_exit(read_direct(100, 101, how));
	}
	close(fds[0]);
	close(fds[1]);
	verdict_of = -99;
	loop_run(loop);
	prestore_free(r);
	int st;
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static void test_a_direct_restore_reads_the_file_byte_for_byte(void **state)
{
	save_big();
	assert_int_equal(restore_direct(DIRECT_PLAIN), 0);
	assert_int_equal(verdict_of, 1);
}

static void test_a_changed_byte_gets_a_bad_verdict_when_read_directly(void **state)
{
	save_big();
	change_last_chunk();
	assert_int_equal(restore_direct(DIRECT_PLAIN), 1);
	assert_int_equal(verdict_of, 0);
	assert_int_equal(access(snap, F_OK), -1);
}

/* The writer waits in open(2) until the verdict, so the session read the
 * saved bytes; yet the server does not vouch for a file someone opened to
 * write (past the kernel's lease-break-time it would have been let
 * through).  The file stays for the next call to judge by its tag, which
 * then fails: the writer changed it once let go.  The test process is the
 * server here: a lease break's SIGIO must not end it. */
static void test_a_writer_during_a_direct_restore_is_not_vouched_for(void **state)
{
	save_big();
	assert_int_equal(restore_direct(DIRECT_WRITER_WAITS), 1);
	assert_int_equal(verdict_of, -EBUSY);
	assert_int_equal(access(snap, F_OK), 0);
	assert_int_equal(restore_direct(DIRECT_PLAIN), 1);
	assert_int_equal(verdict_of, 0);
}

static void test_a_writer_that_does_not_wait_is_told_of_the_lease(void **state)
{
	save_big();
	assert_int_equal(restore_direct(DIRECT_WRITER_TRIES), 1);
	assert_int_equal(verdict_of, -EBUSY);
	assert_int_equal(restore_direct(DIRECT_PLAIN), 0);
	assert_int_equal(verdict_of, 1);
}

/* A descriptor open for writing from before (a cell that kept one): no
 * lease can be had, and the state is streamed from the server's copy. */
static void test_a_file_open_for_writing_is_streamed_not_read_directly(void **state)
{
	save_big();
	int keep = open(snap, O_WRONLY);
	assert_true(keep >= 0);
	/* restore_big asserts that it streams. */
	assert_int_equal(restore_big(READ_SLOWLY), 0);
	assert_int_equal(verdict_of, 1);
	close(keep);
	assert_int_equal(restore_direct(DIRECT_PLAIN), 0);
}

static void test_a_session_that_hangs_up_ends_the_restore(void **state)
{
	save_big();
	assert_int_equal(restore_direct(DIRECT_HANG_UP), 4);
	assert_int_equal(verdict_of, -EPIPE);
	assert_int_equal(access(snap, F_OK), 0);
}

/* The MACs against published vectors (RFC 4231 case 2 for HMAC-SHA256,
 * RFC 8439 section 2.5.2 for Poly1305), each key used more often than
 * hmac.c keeps keyed contexts for, and each keyed context copied several
 * times: a copy (the kept keyed state) gives what a fresh context gives. */
static void test_macs_match_the_published_vectors_fresh_and_kept(void **state)
{
	(void)state;
	static const unsigned char want[HMAC_LEN] = {
		0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
		0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43,
	};
	static const char msg[] = "what do ya want for nothing?";
	unsigned char out[HMAC_LEN], first[6][HMAC_LEN];
	for (int round = 0; round < 3; round++) {
		struct hmac *h = hmac_new((const unsigned char *)"Jefe", 4);
		assert_non_null(h);
		hmac_update(h, msg, 10);
		hmac_update(h, msg + 10, sizeof msg - 1 - 10);
		assert_int_equal(hmac_final(h, out), 0);
		hmac_free(h);
		assert_memory_equal(out, want, HMAC_LEN);
		/* Six more keys, past what is kept: each the same every time. */
		for (int k = 0; k < 6; k++) {
			unsigned char key[40];
			memset(key, 'a' + k, sizeof key);
			h = hmac_new(key, (size_t)(8 + 4 * k));
			assert_non_null(h);
			hmac_update(h, msg, sizeof msg - 1);
			assert_int_equal(hmac_final(h, out), 0);
			hmac_free(h);
			if (round == 0)
				memcpy(first[k], out, HMAC_LEN);
			assert_memory_equal(out, first[k], HMAC_LEN);
			if (k > 0)
				assert_memory_not_equal(first[k], first[k - 1], HMAC_LEN);
		}
	}
	static const unsigned char pkey[POLY1305_KEY_LEN] = {
		0x85, 0xd6, 0xbe, 0x78, 0x57, 0x55, 0x6d, 0x33, 0x7f, 0x44, 0x52, 0xfe, 0x42, 0xd5, 0x06, 0xa8,
		0x01, 0x03, 0x80, 0x8a, 0xfb, 0x0d, 0xb2, 0xfd, 0x4a, 0xbf, 0xf6, 0xaf, 0x41, 0x49, 0xf5, 0x1b,
	};
	static const unsigned char ptag[POLY1305_LEN] = {
		0xa8, 0x06, 0x1d, 0xc1, 0x30, 0x51, 0x36, 0xc6, 0xc2, 0x2b, 0x8b, 0xaf, 0x0c, 0x01, 0x27, 0xa9,
	};
	static const char pmsg[] = "Cryptographic Forum Research Group";
	for (int round = 0; round < 2; round++) {
		struct hmac *h = poly1305_new(pkey);
		assert_non_null(h);
		assert_int_equal(hmac_len(h), POLY1305_LEN);
		hmac_update(h, pmsg, sizeof pmsg - 1);
		assert_int_equal(hmac_final(h, out), 0);
		hmac_free(h);
		assert_memory_equal(out, ptag, POLY1305_LEN);
	}
}

/* ---------------------------------------------------------------- journals */

static char jpath[512];

static struct journal_cell jcells[2] = {
	{ .cell = 4, .status = 1, .whole = true, .ms = 12.5, .code = "x += 1", .shown = "2" },
	{ .cell = 5, .status = 2, .whole = false, .ms = 3.0, .code = "raise ValueError('no')", .shown = NULL },
};

static void journal_one(void)
{
	save_one();
	for (int i = 0; i < 2; i++)
		memset(jcells[i].digest, 0x30 + i, sizeof jcells[i].digest);
	size_t bytes = 0;
	struct err e = { 0 };
	assert_int_equal(pjournal_write(p, "default", saved.nonce, 3, jcells, 2, &bytes, &e), 0);
	wpath(f, jpath, sizeof jpath, ".sessions/default/journal");
	struct stat st;
	assert_int_equal(stat(jpath, &st), 0);
	assert_int_equal((size_t)st.st_size, bytes);
	assert_int_equal(st.st_mode & 0777, 0600);
}

static int read_back(const unsigned char nonce[16], uint32_t cells, struct journal_cell **v, size_t *n, struct err *e)
{
	return pjournal_read(p, "default", nonce, cells, v, n, e);
}

static void test_a_journal_reads_back_cell_for_cell(void **state)
{
	journal_one();
	struct journal_cell *v = NULL;
	size_t n = 0;
	struct err e = { 0 };
	assert_int_equal(read_back(saved.nonce, 3, &v, &n, &e), 1);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(v[i].cell, jcells[i].cell);
		assert_int_equal(v[i].status, jcells[i].status);
		assert_int_equal(v[i].whole, jcells[i].whole);
		assert_true(v[i].ms == jcells[i].ms);
		assert_memory_equal(v[i].digest, jcells[i].digest, 32);
		assert_string_equal(v[i].code, jcells[i].code);
	}
	assert_string_equal(v[0].shown, "2");
	assert_null(v[1].shown);
	journal_cells_free(v, n);
}

/* Attack: sandboxed code can write under .sessions.  Every byte of the
 * journal, changed, gets it refused and removed: no cell of it runs. */
static void test_every_changed_byte_of_a_journal_is_refused(void **state)
{
	journal_one();
	int fd = open(jpath, O_RDONLY);
	unsigned char b[4096];
	ssize_t len = read(fd, b, sizeof b);
	close(fd);
	assert_true(len > 100 && len < (ssize_t)sizeof b);
	for (ssize_t i = 0; i < len; i++) {
		b[i] ^= 0x01;
		fd = open(jpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		assert_int_equal(write(fd, b, (size_t)len), len);
		close(fd);
		b[i] ^= 0x01;
		struct journal_cell *v = NULL;
		size_t n = 7;
		struct err e = { 0 };
		assert_int_equal(read_back(saved.nonce, 3, &v, &n, &e), -EBADMSG);
		assert_null(v);
		assert_int_equal(n, 0);
		assert_int_equal(access(jpath, F_OK), -1);
	}
}

/* A journal of another snapshot (another nonce, another count) follows no
 * state here: none, and it goes. */
static void test_a_journal_of_another_snapshot_is_not_read(void **state)
{
	journal_one();
	unsigned char other[16];
	memcpy(other, saved.nonce, 16);
	other[0] ^= 1;
	struct journal_cell *v = NULL;
	size_t n = 0;
	struct err e = { 0 };
	assert_int_equal(read_back(other, 3, &v, &n, &e), 0);
	assert_int_equal(access(jpath, F_OK), -1);
	journal_one();
	assert_int_equal(read_back(saved.nonce, 4, &v, &n, &e), 0);
	assert_null(v);
}

/* Attack: a FIFO, a symlink or a file of a gigabyte planted as the
 * journal, to hold the server, send it elsewhere or fill its memory:
 * refused by its type or size before a byte is read. */
static void test_a_planted_fifo_symlink_or_huge_journal_is_refused(void **state)
{
	save_one();
	wpath(f, jpath, sizeof jpath, ".sessions/default/journal");
	struct journal_cell *v = NULL;
	size_t n = 0;
	struct err e = { 0 };
	assert_int_equal(mkfifo(jpath, 0600), 0);
	assert_int_equal(read_back(saved.nonce, 3, &v, &n, &e), -EBADMSG);
	assert_int_equal(access(jpath, F_OK), -1);
	assert_int_equal(symlink(snap, jpath), 0);
	assert_int_equal(read_back(saved.nonce, 3, &v, &n, &e), -EBADMSG);
	assert_int_equal(access(snap, F_OK), 0);
	unlink(jpath);
	int fd = open(jpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_int_equal(ftruncate(fd, (off_t)1 << 30), 0);
	close(fd);
	assert_int_equal(read_back(saved.nonce, 3, &v, &n, &e), -EBADMSG);
	assert_non_null(strstr(e.msg, "size"));
	assert_int_equal(access(jpath, F_OK), -1);
}

/* A whole save replaces the snapshot the journal followed: the journal
 * goes with it; a reset's discard removes both. */
static void test_a_whole_save_and_a_discard_remove_the_journal(void **state)
{
	journal_one();
	save_one();
	assert_int_equal(access(jpath, F_OK), -1);
	journal_one();
	assert_int_equal(persist_discard(p, "default"), 0);
	assert_int_equal(access(jpath, F_OK), -1);
	assert_int_equal(access(snap, F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_macs_match_the_published_vectors_fresh_and_kept),
		cmocka_unit_test_setup_teardown(test_a_save_restores_with_a_good_verdict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_another_key_is_refused_as_such_and_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_changed_byte_gets_a_bad_verdict_and_goes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_v1_snapshot_still_restores, setup, teardown),
		cmocka_unit_test_setup_teardown(test_over_the_cap_is_refused_by_its_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_over_memory_is_refused_by_its_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_journal_reads_back_cell_for_cell, setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_changed_byte_of_a_journal_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_journal_of_another_snapshot_is_not_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_planted_fifo_symlink_or_huge_journal_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_whole_save_and_a_discard_remove_the_journal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_chunks_reach_a_slow_reader_byte_for_byte, setup_big, teardown),
		cmocka_unit_test_setup_teardown(test_a_change_in_the_last_chunk_gets_a_bad_verdict, setup_big, teardown),
		cmocka_unit_test_setup_teardown(test_the_verdict_waits_for_a_full_pipe, setup_big, teardown),
		cmocka_unit_test_setup_teardown(test_a_file_changed_while_it_streams_gets_a_bad_verdict, setup_big, teardown),
		cmocka_unit_test_setup_teardown(test_a_file_cut_while_it_streams_gets_a_bad_verdict, setup_big, teardown),
		cmocka_unit_test_setup_teardown(test_a_direct_restore_reads_the_file_byte_for_byte, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_a_changed_byte_gets_a_bad_verdict_when_read_directly, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_a_writer_during_a_direct_restore_is_not_vouched_for, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_a_writer_that_does_not_wait_is_told_of_the_lease, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_a_file_open_for_writing_is_streamed_not_read_directly, setup_direct, teardown),
		cmocka_unit_test_setup_teardown(test_a_session_that_hangs_up_ends_the_restore, setup_direct, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

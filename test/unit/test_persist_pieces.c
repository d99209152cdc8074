/* Saved sessions in pieces (supervisor/persist.h), the trusted side: a save
 * sent in pieces restores byte for byte, streamed to a slow reader; a
 * second save that names the pieces it keeps writes only the new ones,
 * and restores as the new state; a restore hands back the table, so the
 * save after a restart names pieces too.  Against a hostile saver: a piece
 * named that the server does not hold, more pieces than the state's
 * length allows, a piece longer than it, fail the save and the last
 * snapshot stays.  Against a changed disk: a changed byte in a piece gets a
 * bad verdict before the piece reaches the session; a changed manifest, a
 * missing or cut pieces file are refused when opened; a pieces file
 * swapped since the last save makes the next save whole. */
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
#include "../../supervisor/persist_format.h"
#include "ws_fixture.h"

static struct fx *f;
static struct policy *pol;
static struct persist *p;
static struct loop *loop;
static char snap[512], pieces1[512], pieces2[512];

/* The body: an empty summary record (8 bytes), then STATE bytes. */
#define STATE ((5u << 20) + 12345)
#define BODY (8 + STATE)
#define NPIECES ((BODY + PIECE_MAX - 1) / PIECE_MAX)

/* The body's byte i in version v: version 1 changes the third piece. */
static unsigned char body_byte(size_t i, int v)
{
	if (i < 8)
		return 0;
	uint32_t x = (uint32_t)i * 2654435761u;
	unsigned char b = (unsigned char)(x >> 24 ^ x >> 13 ^ i);
	return v == 1 && i / PIECE_MAX == 2 ? (unsigned char)~b : b;
}

static void put32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

/* A label for piece k of version v: what a saver's digest would say. */
static void label_of(unsigned char l[16], size_t k, int v)
{
	memset(l, 0, 16);
	put64(l, k + 1);
	l[8] = (unsigned char)(v == 1 && k == 2 ? 1 : 0);
}

static struct psave_result saved;
static struct ptable *table; /* the last good save's, kept as the supervisor does */

static void save_done(void *arg, const struct psave_result *r)
{
	saved = *r;
	saved.summary = NULL;
	saved.table = NULL;
	if (r->status == 0) {
		ptable_free(table);
		table = r->table;
	}
	loop_stop(loop);
}

/* How a test saver sends its pieces. */
enum how {
	ALL_NEW,        /* every piece sent */
	NAME_KEPT,      /* the pieces version 0 had, named ('S'); the changed one sent */
	NAME_UNHELD,    /* one piece named with a label the server never wrote */
	TOO_MANY,       /* the state in pieces of 1 KiB: over the bound */
	OVERLONG,       /* a piece longer than what is left of the state */
};

static void send_all(int fd, const void *b, size_t n)
{
	const unsigned char *c = b;
	while (n) {
		ssize_t k = write(fd, c, n);
		if (k <= 0)
			_exit(1);
		c += k;
		n -= (size_t)k;
	}
}

static void saver(int fd, int v, enum how how)
{
	unsigned char h[16], ph[21];
	memcpy(h, PERSIST_PIECES_MAGIC, 8);
	put64(h + 8, BODY);
	send_all(fd, h, sizeof h);
	static unsigned char b[PIECE_MAX];
	size_t step = how == TOO_MANY ? 1024 : PIECE_MAX;
	for (size_t off = 0, k = 0; off < BODY; off += step, k++) {
		size_t n = BODY - off < step ? BODY - off : step;
		bool name = (how == NAME_KEPT && k != 0 && k != 2) || (how == NAME_UNHELD && k == 3);
		ph[0] = name ? 'S' : 'N';
		put32(ph + 1, (uint32_t)(how == OVERLONG && k == NPIECES - 1 ? n + 1 : n));
		label_of(ph + 5, k, v);
		if (how == NAME_UNHELD && k == 3)
			ph[20] = 0x77;
		send_all(fd, ph, sizeof ph);
		if (name)
			continue;
		for (size_t i = 0; i < n; i++)
			b[i] = body_byte(off + i, v);
		send_all(fd, b, n);
	}
}

/* A save through the real psave, from a saver in a child; its status. */
static int save(int v, enum how how)
{
	int pp[2];
	assert_int_equal(pipe(pp), 0);
	pid_t w = fork();
	assert_true(w >= 0);
	if (w == 0) {
		close(pp[0]);
		saver(pp[1], v, how);
		_exit(0);
	}
	close(pp[1]);
	struct err e = { 0 };
	assert_non_null(psave_start(p, loop, "default", 3, pp[0], table, save_done, NULL, &e));
	loop_run(loop);
	kill(w, SIGKILL);
	int st;
	assert_int_equal(waitpid(w, &st, 0), w);
	return saved.status;
}

static int verdict_of;

static void restore_done(void *arg, int verdict)
{
	verdict_of = verdict;
	loop_stop(loop);
}

/* The session's side, slow at first: 0 when every byte is version v's
 * and the verdict 'Y'; 1 when the stream ends short or says 'N'; 2 when a
 * byte differs behind a 'Y'. */
static int read_body(int fd, int v)
{
	static unsigned char b[64 << 10];
	size_t at = 0;
	bool bad = false;
	while (at < BODY) {
		size_t n = BODY - at < sizeof b ? BODY - at : sizeof b;
		ssize_t k = read(fd, b, n);
		if (k <= 0)
			return 1;
		for (ssize_t i = 0; i < k; i++)
			if (b[i] != body_byte(at + (size_t)i, v))
				bad = true;
		at += (size_t)k;
		if (at < (2u << 20))
			usleep(2000);
	}
	char c;
	if (read(fd, &c, 1) != 1 || c != 'Y')
		return 1;
	return bad ? 2 : 0;
}

/* Opens and streams the snapshot to a reader child: its verdict as
 * read_body says it, or -errno when the snapshot is refused at open (e). */
static int restore(int v, struct err *e, struct ptable **got)
{
	struct prestore *r = NULL;
	int rc = prestore_open(p, "default", &r, e);
	if (rc <= 0)
		return rc < 0 ? rc : -ENOENT;
	assert_int_equal(prestore_bytes(r), BODY);
	assert_int_equal(prestore_format(r), 2);
	assert_false(prestore_direct(r));
	int fds[2];
	assert_int_equal(prestore_start(r, loop, restore_done, NULL, fds), 1);
	pid_t c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		if (dup2(fds[0], 100) != 100 || close_range(3, 99, 0) != 0 || close_range(101, ~0u, 0) != 0)
			_exit(4);
		_exit(read_body(100, v));
	}
	close(fds[0]);
	verdict_of = -99;
	loop_run(loop);
	if (got)
		*got = prestore_table(r);
	prestore_free(r);
	int st;
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static off_t size_of(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? st.st_size : -1;
}

static int setup(void **state)
{
	struct err e = { 0 };
	f = fx_new("pieces");
	char xdg[128];
	snprintf(xdg, sizeof xdg, "%s/state", f->tmp);
	assert_int_equal(mkdir(xdg, 0700), 0);
	setenv("XDG_STATE_HOME", xdg, 1);
	assert_int_equal(policy_builtin(&pol, &e), 0);
	pol->limits.persist = true;
	pol->limits.persist_mb = 16;
	p = persist_new(&f->ws, pol);
	assert_true(persist_on(p));
	loop = loop_new();
	wpath(f, snap, sizeof snap, ".sessions/default/state.snap");
	wpath(f, pieces1, sizeof pieces1, ".sessions/default/pieces.1");
	wpath(f, pieces2, sizeof pieces2, ".sessions/default/pieces.2");
	table = NULL;
	return 0;
}

static int teardown(void **state)
{
	ptable_free(table);
	table = NULL;
	loop_free(loop);
	persist_free(p);
	policy_free(pol);
	fx_free(f);
	return 0;
}

static void test_a_save_in_pieces_restores_byte_for_byte(void **state)
{
	assert_int_equal(save(0, ALL_NEW), 0);
	assert_non_null(table);
	assert_int_equal(size_of(pieces1), BODY);
	assert_true(saved.written >= BODY && saved.written < BODY + 4096);
	char t[8];
	int fd = open(snap, O_RDONLY);
	assert_int_equal(pread(fd, t, 8, size_of(snap) - (8 + 8 + 8 + 8 + 8 + 16 + 16)), 8);
	close(fd);
	assert_memory_equal(t, "PSMSNAP3", 8);
	struct err e = { 0 };
	assert_int_equal(restore(0, &e, NULL), 0);
	assert_int_equal(verdict_of, 1);
}

/* What the issue of saving in pieces is for: a second save that changed
 * one piece of six writes that one (and the first, which it always
 * sends), and restores as the new state. */
static void test_a_save_that_names_what_it_kept_writes_only_the_rest(void **state)
{
	assert_int_equal(save(0, ALL_NEW), 0);
	char *known = ptable_known_hex(table);
	assert_non_null(known);
	/* The last piece (12,361 bytes) is under PIECE_KNOWN_MIN: not offered. */
	assert_int_equal(strlen(known), 32 * (NPIECES - 1));
	free(known);
	assert_int_equal(save(1, NAME_KEPT), 0);
	assert_true(saved.written < 2 * PIECE_MAX + 4096);
	assert_int_equal(size_of(pieces1), BODY + 2 * PIECE_MAX);
	struct err e = { 0 };
	struct ptable *t = NULL;
	assert_int_equal(restore(1, &e, &t), 0);
	assert_int_equal(verdict_of, 1);
	/* After a restart the restore's table serves the next save. */
	assert_non_null(t);
	ptable_free(table);
	table = t;
	assert_int_equal(save(1, NAME_KEPT), 0);
	assert_true(saved.written < 2 * PIECE_MAX + 4096);
	assert_int_equal(restore(1, &e, NULL), 0);
}

static void test_a_piece_the_server_does_not_hold_fails_the_save(void **state)
{
	assert_int_equal(save(0, ALL_NEW), 0);
	assert_int_equal(save(1, NAME_UNHELD), -EPROTO);
	assert_true(saved.drop_table);
	assert_non_null(strstr(saved.msg, "does not hold"));
	/* The last snapshot stays, whole, and its file was cut back. */
	assert_int_equal(size_of(pieces1), BODY);
	struct err e = { 0 };
	assert_int_equal(restore(0, &e, NULL), 0);
	/* With no table, a named piece is never taken. */
	ptable_free(table);
	table = NULL;
	assert_int_equal(save(1, NAME_KEPT), -EPROTO);
}

static void test_pieces_past_the_bounds_fail_the_save(void **state)
{
	assert_int_equal(save(0, TOO_MANY), -EPROTO);
	assert_non_null(strstr(saved.msg, "pieces"));
	assert_int_equal(access(pieces1, F_OK), -1); /* a new file that failed goes */
	assert_int_equal(save(0, OVERLONG), -EPROTO);
	assert_int_equal(access(snap, F_OK), -1);
}

static void flip(const char *path, off_t at)
{
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	unsigned char x;
	assert_int_equal(pread(fd, &x, 1, at), 1);
	x = (unsigned char)~x;
	assert_int_equal(pwrite(fd, &x, 1, at), 1);
	close(fd);
}

static void test_a_changed_piece_gets_a_bad_verdict(void **state)
{
	assert_int_equal(save(0, ALL_NEW), 0);
	flip(pieces1, 4 * PIECE_MAX + 17);
	struct err e = { 0 };
	assert_int_equal(restore(0, &e, NULL), 1);
	assert_int_equal(verdict_of, 0);
	assert_int_equal(access(snap, F_OK), -1);
}

static void test_a_changed_manifest_or_pieces_file_is_refused_at_open(void **state)
{
	struct err e = { 0 };
	assert_int_equal(save(0, ALL_NEW), 0);
	flip(snap, 30);
	assert_int_equal(restore(0, &e, NULL), -EBADMSG);
	assert_non_null(strstr(e.msg, "manifest does not match the tag the server wrote with it (changed or planted"));

	/* Each save below with no table: a new file each time. */
	e = (struct err){ 0 };
	ptable_free(table);
	table = NULL;
	assert_int_equal(save(0, ALL_NEW), 0);
	assert_int_equal(truncate(pieces2, BODY - 1), 0);
	assert_int_equal(restore(0, &e, NULL), -EBADMSG);
	assert_non_null(strstr(e.msg, "cut short"));

	e = (struct err){ 0 };
	ptable_free(table);
	table = NULL;
	assert_int_equal(save(0, ALL_NEW), 0);
	char p3[512];
	wpath(f, p3, sizeof p3, ".sessions/default/pieces.3");
	assert_int_equal(unlink(p3), 0);
	assert_int_equal(restore(0, &e, NULL), -ENOENT);
	assert_non_null(strstr(e.msg, "is missing"));
}

/* The pieces file swapped for a copy since the last save (a cell may write
 * .sessions): the table no longer describes it, the save is whole, in a
 * new file, and the old one goes. */
static void test_a_pieces_file_swapped_since_makes_the_save_whole(void **state)
{
	assert_int_equal(save(0, ALL_NEW), 0);
	char cp[2200];
	snprintf(cp, sizeof cp, "cp %s %s.x && mv %s.x %s", pieces1, pieces1, pieces1, pieces1);
	assert_int_equal(system(cp), 0);
	assert_int_equal(save(1, NAME_KEPT), -EPROTO);
	assert_true(saved.drop_table);
	ptable_free(table);
	table = NULL;
	assert_int_equal(save(1, ALL_NEW), 0);
	assert_int_equal(access(pieces1, F_OK), -1);
	assert_int_equal(size_of(pieces2), BODY);
	struct err e = { 0 };
	assert_int_equal(restore(1, &e, NULL), 0);
}

/* A manifest planted longer than any state the server would restore
 * could need (a real trailer, its length changed to match a sparse file):
 * refused by its length before it is read or hashed. */
static void test_a_planted_long_manifest_is_refused_unread(void **state)
{
	assert_int_equal(save(0, ALL_NEW), 0);
	unsigned char t[TRAILER_LEN];
	int fd = open(snap, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, t, sizeof t, size_of(snap) - TRAILER_LEN), (ssize_t)sizeof t);
	uint64_t big = 1u << 20; /* the bound here: 24 + 60 * 516 bytes */
	put64(t + 8, big);
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(ftruncate(fd, (off_t)big), 0);
	assert_int_equal(pwrite(fd, t, sizeof t, (off_t)big), (ssize_t)sizeof t);
	close(fd);
	struct prestore *r = NULL;
	struct err e = { 0 };
	assert_int_equal(prestore_open(p, "default", &r, &e), -EBADMSG);
	assert_non_null(strstr(e.msg, "manifest is too long"));
}

/* A pieces file mostly dead (more dead bytes than live ones, and 64 MiB):
 * the next save is offered no label, so it writes a new file whole. */
static void test_a_mostly_dead_file_offers_no_label(void **state)
{
	struct pentry e[2] = { { .off = 0, .len = PIECE_MAX }, { .off = PIECE_MAX, .len = PIECE_MAX } };
	struct ptable t = { .gen = 1, .end = 2 * PIECE_MAX, .live = 2 * PIECE_MAX, .body = 2 * PIECE_MAX, .n = 2, .v = e };
	char *hex = ptable_known_hex(&t);
	assert_non_null(hex);
	assert_int_equal(strlen(hex), 64);
	free(hex);
	t.end = t.live + t.live + (64u << 20);
	hex = ptable_known_hex(&t);
	assert_non_null(hex);
	free(hex);
	t.end++;
	assert_null(ptable_known_hex(&t));
	assert_null(ptable_known_hex(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_save_in_pieces_restores_byte_for_byte, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_save_that_names_what_it_kept_writes_only_the_rest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_piece_the_server_does_not_hold_fails_the_save, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pieces_past_the_bounds_fail_the_save, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_changed_piece_gets_a_bad_verdict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_changed_manifest_or_pieces_file_is_refused_at_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_pieces_file_swapped_since_makes_the_save_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_planted_long_manifest_is_refused_unread, setup, teardown),
		cmocka_unit_test(test_a_mostly_dead_file_offers_no_label),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

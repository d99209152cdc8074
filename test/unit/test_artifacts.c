/* Unit tests of files/artifacts.c: the walk (nested dirs, hidden names,
 * exclusions, patterns, symlinks listed but never followed, limits), the
 * diff of two snapshots, and SHA-256. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../files/artifacts.h"
#include "ws_fixture.h"

static void mk(const struct fx *f, const char *rel, const char *content)
{
	char p[512];
	snprintf(p, sizeof p, "%s/%s", f->ws.abs, rel);
	/* mkdir -p of the parent */
	for (char *s = p + strlen(f->ws.abs) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	if (content) {
		FILE *fp = fopen(p, "w");
		assert_non_null(fp);
		fputs(content, fp);
		fclose(fp);
	} else {
		mkdir(p, 0755);
	}
}

static int setup(void **state)
{
	struct fx *f = fx_new("art");
	char p[512];

	mk(f, "outputs/plot.png", "png");
	mk(f, "outputs/table.csv", "a,b\n1,2\n");
	mk(f, "a/b/c/deep.txt", "deep");
	mk(f, "a.txt", "top");
	mk(f, ".hidden", "h");
	mk(f, ".logs/out.log", "log");
	mk(f, "dir/.hid/x", "x");
	mk(f, "empty", NULL);
	/* Symlinks to a directory and a file outside: listed, not followed. */
	wpath(f, p, sizeof p, "link_dir");
	assert_int_equal(symlink(f->outside, p), 0);
	wpath(f, p, sizeof p, "outputs/link_file");
	char t[256];
	snprintf(t, sizeof t, "%s/secret", f->outside);
	assert_int_equal(symlink(t, p), 0);
	/* A FIFO: not an artifact, and must not hang anything. */
	wpath(f, p, sizeof p, "outputs/fifo");
	assert_int_equal(mkfifo(p, 0644), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx_free(*state);
	return 0;
}

static void expect(const struct art_list *l, const char *const *want)
{
	size_t n = 0;
	while (want[n])
		n++;
	if (l->n != n) {
		for (size_t i = 0; i < l->n; i++)
			print_message("  got %s\n", l->v[i].rel);
		fail_msg("%zu entries, wanted %zu", l->n, n);
	}
	for (size_t i = 0; i < n; i++)
		assert_string_equal(l->v[i].rel, want[i]);
}

static const struct art_entry *find(const struct art_list *l, const char *rel)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].rel, rel) == 0)
			return &l->v[i];
	fail_msg("%s not listed", rel);
	abort();
}

static void test_scan_default(void **state)
{
	struct fx *f = *state;
	struct art_list l;
	struct err e = { 0 };
	struct art_scan_opts o = { 0 };

	if (art_scan(&f->ws, &o, &l, &e) < 0)
		fail_msg("art_scan: %s", e.msg);
	static const char *const want[] = { "a.txt", "a/b/c/deep.txt", "link_dir", "outputs/link_file",
					    "outputs/plot.png", "outputs/table.csv", NULL };
	expect(&l, want);
	assert_false(l.truncated);
	const struct art_entry *en = find(&l, "link_dir");
	assert_true(en->is_symlink);
	assert_int_equal(en->bytes, (off_t)strlen(f->outside)); /* the link itself */
	en = find(&l, "outputs/plot.png");
	assert_false(en->is_symlink);
	assert_int_equal(en->bytes, 3);
	assert_true(en->mtime.tv_sec > 0);
	art_list_free(&l);
	art_list_free(&l); /* harmless twice */

	/* NULL opts = defaults. */
	assert_int_equal(art_scan(&f->ws, NULL, &l, &e), 0);
	expect(&l, want);
	art_list_free(&l);
}

static void test_scan_hidden_exclude(void **state)
{
	struct fx *f = *state;
	struct art_list l;
	struct err e = { 0 };
	static const char *const excl[] = { ".logs", NULL };
	struct art_scan_opts o = { .include_hidden = true };

	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	static const char *const want[] = { ".hidden", ".logs/out.log", "a.txt", "a/b/c/deep.txt", "dir/.hid/x",
					    "link_dir", "outputs/link_file", "outputs/plot.png", "outputs/table.csv", NULL };
	expect(&l, want);
	art_list_free(&l);

	o.exclude = excl;
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	static const char *const want2[] = { ".hidden", "a.txt", "a/b/c/deep.txt", "dir/.hid/x", "link_dir",
					     "outputs/link_file", "outputs/plot.png", "outputs/table.csv", NULL };
	expect(&l, want2);
	art_list_free(&l);
}

static void test_scan_pattern_subdir(void **state)
{
	struct fx *f = *state;
	struct art_list l;
	struct err e = { 0 };
	struct art_scan_opts o = { .pattern = "*.png" };

	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	static const char *const png[] = { "outputs/plot.png", NULL };
	expect(&l, png);
	art_list_free(&l);

	o.pattern = "link_*";
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	static const char *const links[] = { "link_dir", "outputs/link_file", NULL };
	expect(&l, links);
	art_list_free(&l);

	o.pattern = NULL;
	o.subdir = "a";
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	static const char *const a[] = { "a/b/c/deep.txt", NULL };
	expect(&l, a);
	art_list_free(&l);

	o.subdir = "./outputs//";
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	static const char *const outs[] = { "outputs/link_file", "outputs/plot.png", "outputs/table.csv", NULL };
	expect(&l, outs);
	art_list_free(&l);

	/* A symlinked directory as the subdir is refused, not followed. */
	o.subdir = "link_dir";
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), -ELOOP);
	assert_non_null(strstr(e.msg, "symlink"));
	assert_int_equal(l.n, 0);
	art_list_free(&l);
	o.subdir = "missing";
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), -ENOENT);
	art_list_free(&l);
	o.subdir = "a.txt";
	assert_true(art_scan(&f->ws, &o, &l, &e) < 0);
	art_list_free(&l);
	o.subdir = "empty";
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	assert_int_equal(l.n, 0);
	art_list_free(&l);
}

static void test_scan_limits(void **state)
{
	struct fx *f = *state;
	struct art_list l;
	struct err e = { 0 };
	struct art_scan_opts o = { .max_entries = 2 };

	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	assert_int_equal(l.n, 2);
	assert_true(l.truncated);
	assert_true(strcmp(l.v[0].rel, l.v[1].rel) < 0);
	art_list_free(&l);

	/* Deeper than ART_MAX_DEPTH: not entered, flagged. */
	char rel[ART_MAX_DEPTH * 2 + 32] = "";
	for (int i = 0; i < ART_MAX_DEPTH + 2; i++)
		strcat(rel, "d/");
	strcat(rel, "bottom.txt");
	mk(f, rel, "x");
	o = (struct art_scan_opts){ .subdir = "d" };
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	assert_true(l.truncated);
	assert_int_equal(l.n, 0);
	art_list_free(&l);
}

/* The loop's budget (art_budget_begin): every walk of the thread stops
 * once it has read n entries between them, and says so; under it, what
 * would read a file's bytes is refused; without one nothing is. */
static void test_budget(void **state)
{
	struct fx *f = *state;
	struct art_list l;
	struct err e = { 0 };
	struct art_scan_opts o = { .include_hidden = true };
	size_t seen = 0;

	/* Unbounded: only counts (the fixture's 12 names, the FIFO too). */
	art_budget_begin(0, 0);
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	assert_false(art_budget_refuse());
	assert_false(art_budget_end(&seen));
	size_t all = l.n;
	assert_true(seen >= all);
	art_list_free(&l);

	/* Room for them all: the same list, nothing spent. */
	art_budget_begin(seen, 1000);
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	assert_false(art_budget_end(NULL));
	assert_int_equal(l.n, all);
	art_list_free(&l);

	/* One entry short: stopped, and said. */
	art_budget_begin(seen - 1, 1000);
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	assert_true(art_budget_end(NULL));
	assert_true(l.truncated);
	art_list_free(&l);

	/* Shared by the walks: a usage walk after the scan finds it spent. */
	art_budget_begin(seen, 1000);
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	struct art_usage u = { 0 };
	art_ws_dir_usage(&f->ws, "outputs", 0, &u);
	assert_true(art_budget_end(NULL));
	art_list_free(&l);

	/* Past its time: stopped at the first entry read after it. */
	art_budget_begin(100000, 0);
	usleep(1000);
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	assert_true(art_budget_end(&seen));
	assert_int_equal(l.n, 0);
	art_list_free(&l);

	/* A read of a file's bytes under a budget: refused, and spent. */
	art_budget_begin(100000, 1000);
	assert_true(art_budget_refuse());
	assert_true(art_budget_end(NULL));
	/* Ended: nothing bounds the thread's walks any more. */
	assert_false(art_budget_refuse());
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	assert_int_equal(l.n, all);
	art_list_free(&l);
}

struct changes {
	char created[8][64], modified[8][64];
	int nc, nm;
};

static void collect(const struct art_entry *en, enum art_change c, void *arg)
{
	struct changes *ch = arg;
	if (c == ART_CREATED && ch->nc < 8)
		snprintf(ch->created[ch->nc++], 64, "%s", en->rel);
	else if (c == ART_MODIFIED && ch->nm < 8)
		snprintf(ch->modified[ch->nm++], 64, "%s", en->rel);
}

static void test_diff(void **state)
{
	struct fx *f = *state;
	struct art_list before, after;
	struct err e = { 0 };
	struct changes ch = { 0 };
	char p[512], q[512];
	struct stat st;

	assert_int_equal(art_scan(&f->ws, NULL, &before, &e), 0);
	mk(f, "outputs/new.png", "new");       /* created */
	mk(f, "zzz_last.txt", "z");            /* created, sorts after everything */
	mk(f, "a.txt", "top, longer");         /* modified: size */
	wpath(f, p, sizeof p, "outputs/table.csv");
	struct timespec ts[2] = { { 1000, 0 }, { 1000, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0); /* modified: mtime only */
	/* modified: same size and mtime, but a new inode renamed over it */
	wpath(f, p, sizeof p, "outputs/plot.png");
	assert_int_equal(stat(p, &st), 0);
	wpath(f, q, sizeof q, "outputs/plot.tmp");
	FILE *fp = fopen(q, "w");
	fputs("PNG", fp);
	fclose(fp);
	struct timespec same[2] = { st.st_atim, st.st_mtim };
	assert_int_equal(utimensat(AT_FDCWD, q, same, 0), 0);
	assert_int_equal(rename(q, p), 0);
	wpath(f, p, sizeof p, "a/b/c/deep.txt");
	assert_int_equal(unlink(p), 0);         /* deleted: not reported */
	assert_int_equal(art_scan(&f->ws, NULL, &after, &e), 0);

	art_diff(&before, &after, collect, &ch);
	assert_int_equal(ch.nc, 2);
	assert_string_equal(ch.created[0], "outputs/new.png");
	assert_string_equal(ch.created[1], "zzz_last.txt");
	assert_int_equal(ch.nm, 3);
	assert_string_equal(ch.modified[0], "a.txt");
	assert_string_equal(ch.modified[1], "outputs/plot.png");
	assert_string_equal(ch.modified[2], "outputs/table.csv");

	/* Nothing changed: nothing reported; empty before: all created. */
	memset(&ch, 0, sizeof ch);
	art_diff(&after, &after, collect, &ch);
	assert_int_equal(ch.nc + ch.nm, 0);
	struct art_list empty = { 0 };
	art_diff(&empty, &after, collect, &ch);
	assert_int_equal(ch.nc, (int)after.n);
	assert_int_equal(ch.nm, 0);
	art_list_free(&before);
	art_list_free(&after);
}

static void test_sha256(void **state)
{
	struct fx *f = *state;
	struct err e = { 0 };
	char hex[65];

	mk(f, "abc.txt", "abc");
	mk(f, "empty.txt", "");
	assert_int_equal(art_sha256(&f->ws, "abc.txt", 1 << 20, hex, NULL, &e), 0);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	assert_int_equal(art_sha256(&f->ws, "empty.txt", 0, hex, NULL, &e), 0);
	assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	/* Larger than one read buffer. */
	char *big = malloc(100000);
	assert_non_null(big);
	memset(big, 'a', 99999);
	big[99999] = '\0';
	mk(f, "big.txt", big);
	free(big);
	off_t cost = 0;
	assert_int_equal(art_sha256(&f->ws, "big.txt", 1 << 20, hex, &cost, &e), 0);
	assert_int_equal(strlen(hex), 64);
	assert_int_equal(cost, 99999);
	/* Over the budget: no hash, and nothing read. */
	assert_int_equal(art_sha256(&f->ws, "big.txt", 99998, hex, &cost, &e), -EFBIG);
	assert_string_equal(hex, "");
	assert_int_equal(cost, 0);
	/* A sparse file costs its apparent size: 1 GiB of holes is refused
	 * by a 1 MiB budget before a byte is read. */
	char sp[512];
	wpath(f, sp, sizeof sp, "sparse.bin");
	int sfd = open(sp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(sfd >= 0);
	assert_int_equal(ftruncate(sfd, 1L << 30), 0);
	close(sfd);
	assert_int_equal(art_sha256(&f->ws, "sparse.bin", 1 << 20, hex, &cost, &e), -EFBIG);
	assert_int_equal(cost, 0);
	/* Symlinks and FIFOs are refused, never followed or waited on. */
	assert_int_equal(art_sha256(&f->ws, "outputs/link_file", 1 << 20, hex, NULL, &e), -ELOOP);
	assert_string_equal(hex, "");
	assert_int_equal(art_sha256(&f->ws, "outputs/fifo", 1 << 20, hex, NULL, &e), -EINVAL);
	assert_int_equal(art_sha256(&f->ws, "nope", 1 << 20, hex, NULL, &e), -ENOENT);
}

/* The disk usage counts allocated blocks, hidden directories included, and
 * stops at its entry budget, which it says (unseen). */
static void test_disk_usage(void **state)
{
	struct fx *f = *state;
	struct err e = { 0 };
	struct art_usage before, after;

	assert_int_equal(art_disk_usage(&f->ws, 0, &before, &e), 0);
	assert_int_equal(before.unseen, 0);
	char p[512];
	wpath(f, p, sizeof p, ".logs");
	mkdir(p, 0755);
	wpath(f, p, sizeof p, ".logs/big.log");
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	static char chunk[1 << 20];
	memset(chunk, 'x', sizeof chunk);
	assert_int_equal(write(fd, chunk, sizeof chunk), (ssize_t)sizeof chunk);
	fsync(fd);
	/* A sparse tail costs nothing on disk, its size when charged. */
	assert_int_equal(ftruncate(fd, 1L << 30), 0);
	close(fd);
	assert_int_equal(art_disk_usage(&f->ws, 0, &after, &e), 0);
	assert_int_equal(after.unseen, 0);
	assert_true(after.blocks >= before.blocks + (1u << 20));
	assert_true(after.blocks < before.blocks + (8u << 20));
	assert_true(after.charged >= before.charged + (1ull << 30));
	assert_int_equal(art_disk_usage(&f->ws, 1, &after, &e), 0);
	assert_int_equal(after.unseen, ART_UNSEEN_ENTRIES);
	char why[600];
	art_unseen_text(after.unseen, "workspace", after.where, why, sizeof why);
	if (!strstr(why, "more entries than the server walks (first at workspace/"))
		fail_msg("%s", why);
}

/* What the walks cannot see is said, never taken as nothing.
 * Attack: 3 x 100 MB under 70 nested directories, with max_workspace_mb
 * 20, ended ok: the walks skipped depth 64 and beyond, counted as zero. */
static void test_unseen(void **state)
{
	struct fx *f = *state;
	struct err e = { 0 };
	struct art_usage u;
	char p[2048];
	size_t n = (size_t)snprintf(p, sizeof p, "%s", f->ws.abs);
	for (int i = 0; i < 70; i++) {
		n += (size_t)snprintf(p + n, sizeof p - n, "/d");
		assert_int_equal(mkdir(p, 0755), 0);
	}
	snprintf(p + n, sizeof p - n, "/deep.bin");
	put(p, "hidden far down");
	assert_int_equal(art_disk_usage(&f->ws, 0, &u, &e), 0);
	assert_int_equal(u.unseen, ART_UNSEEN_DEPTH);
	char why[600];
	art_unseen_text(u.unseen, "workspace", u.where, why, sizeof why);
	if (!strstr(why, "directories nested deeper than 64 levels (first at workspace/d/d/"))
		fail_msg("%s", why);

	struct art_scan_opts o = { .include_hidden = true };
	struct art_list l;
	assert_int_equal(art_scan(&f->ws, &o, &l, &e), 0);
	assert_true(l.truncated);
	assert_int_equal(l.unseen, ART_UNSEEN_DEPTH);
	art_list_free(&l);

	/* Unreadable: only a server without CAP_DAC_OVERRIDE is refused. */
	if (geteuid() != 0) {
		wpath(f, p, sizeof p, "locked");
		assert_int_equal(mkdir(p, 0755), 0);
		wpath(f, p, sizeof p, "locked/x");
		put(p, "x");
		wpath(f, p, sizeof p, "locked");
		chmod(p, 0);
		assert_int_equal(art_ws_dir_usage(&f->ws, "", 0, &u), 0);
		assert_true(u.unseen & ART_UNSEEN_UNREADABLE);
		chmod(p, 0755);
	}
}

/* The fs_write directories outside the workspace count once each: not
 * one beneath the workspace or beneath another listed one, and the
 * workspace is left out of one that holds it. */
static void test_outside_dirs(void **state)
{
	struct fx *f = *state;
	char a[256], b[256], in_ws[256];
	snprintf(a, sizeof a, "%s/results", f->root);
	snprintf(b, sizeof b, "%s/results/sub", f->root);
	snprintf(in_ws, sizeof in_ws, "%s/outputs", f->ws.abs);
	mkdir(a, 0755);
	mkdir(b, 0755);
	const char *fsw[] = { f->ws.abs, b, a, in_ws, f->root };
	char **v = art_outside_dirs(&f->ws, "/tmp/scratch-x", fsw, 3);
	assert_string_equal(v[0], "/tmp/scratch-x");
	assert_string_equal(v[1], a);
	assert_null(v[2]);
	art_dirs_free(v);

	/* ROOT holds the workspace: the workspace is counted apart. */
	char big[256];
	snprintf(big, sizeof big, "%s/results/r.bin", f->root);
	int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 300L << 20), 0);
	close(fd);
	wpath(f, big, sizeof big, "w.bin");
	fd = open(big, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_int_equal(ftruncate(fd, 100L << 20), 0);
	close(fd);
	struct art_usage u;
	art_limit_measure(&f->ws, NULL, fsw + 4, 1, &u);
	assert_int_equal(u.unseen, 0);
	assert_true(u.charged >= (400ull << 20));
	assert_true(u.charged < (401ull << 20));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_scan_default, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_hidden_exclude, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_pattern_subdir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(test_diff, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sha256, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disk_usage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unseen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_outside_dirs, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of files/wsnote.c: a walk watches every directory it lists,
 * any change after that is counted, and what it cannot follow (procfs,
 * too many directories) makes the walk not stand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../files/artifacts.h"
#include "../../files/wsnote.h"
#include "tmptree.h"

static char root[64];

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof root, "/tmp/psm-wsnote-XXXXXX");
	assert_non_null(mkdtemp(root));
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tmp_tree_remove(root);
	return 0;
}

static void put(const char *rel, const char *data)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", root, rel);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(data, f);
	fclose(f);
}

static void dir(const char *rel)
{
	char p[256];
	snprintf(p, sizeof p, "%s/%s", root, rel);
	assert_int_equal(mkdir(p, 0755), 0);
}

/* One watched walk of the tree: whether it stands. */
static bool walk(struct wsnote *n, const char *top)
{
	struct art_usage u;
	wsnote_walk_begin(n);
	art_dir_usage(top, NULL, 0, &u);
	return wsnote_walk_end();
}

/* Every directory is watched before it is listed; each kind of change
 * after the walk is counted, in a directory at any depth. */
static void test_changes_counted(void **state)
{
	(void)state;
	dir("a");
	dir("a/b");
	put("a/b/f", "1");
	struct wsnote *n = wsnote_new();
	assert_non_null(n);
	unsigned long long e = wsnote_events(n);
	assert_true(walk(n, root));
	assert_int_equal(wsnote_watched(n), 3);
	assert_int_equal(wsnote_events(n), e);
	assert_true(walk(n, root)); /* watched already: no change, none added */
	assert_int_equal(wsnote_watched(n), 3);
	assert_int_equal(wsnote_events(n), e);

	char p[256];
	snprintf(p, sizeof p, "%s/a/b/f", root);
	put("a/b/f", "2"); /* written in place */
	assert_true(wsnote_events(n) > e);
	e = wsnote_events(n);
	assert_int_equal(truncate(p, 0), 0);
	assert_true(wsnote_events(n) > e);
	e = wsnote_events(n);
	assert_int_equal(utimes(p, NULL), 0);
	assert_true(wsnote_events(n) > e);
	e = wsnote_events(n);
	assert_int_equal(chmod(p, 0600), 0);
	assert_true(wsnote_events(n) > e);
	e = wsnote_events(n);
	dir("a/b/c");
	assert_true(wsnote_events(n) > e);
	e = wsnote_events(n);
	char q[256];
	snprintf(q, sizeof q, "%s/g", root);
	assert_int_equal(rename(p, q), 0);
	assert_true(wsnote_events(n) > e);
	wsnote_free(n);
}

/* A watched directory deleted: its parent's watch counts the change, and
 * the kernel's dropped watch is forgotten. */
static void test_deleted_forgotten(void **state)
{
	(void)state;
	dir("a");
	struct wsnote *n = wsnote_new();
	assert_true(walk(n, root));
	assert_int_equal(wsnote_watched(n), 2);
	unsigned long long e = wsnote_events(n);
	char p[256];
	snprintf(p, sizeof p, "%s/a", root);
	assert_int_equal(rmdir(p), 0);
	assert_true(wsnote_events(n) > e);
	assert_int_equal(wsnote_watched(n), 1);
	wsnote_free(n);
}

/* What inotify does not report, and why the walk after a call is always
 * taken whole (wsnote.h): a store through a shared mapping of a file. */
static void test_mapped_store_unseen(void **state)
{
	(void)state;
	put("m", "12345678");
	struct wsnote *n = wsnote_new();
	char p[256];
	snprintf(p, sizeof p, "%s/m", root);
	int fd = open(p, O_RDWR);
	assert_true(fd >= 0);
	char *m = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(m != MAP_FAILED);
	close(fd);
	assert_true(walk(n, root));
	unsigned long long e = wsnote_events(n);
	m[0] = 'x';
	assert_int_equal(msync(m, 8, MS_SYNC), 0);
	assert_int_equal(wsnote_events(n), e);
	munmap(m, 8);
	wsnote_free(n);
}

/* A file system whose changes no event names (procfs here, as NFS or
 * FUSE would be): the walk does not stand, and none does after it. */
static void test_not_local(void **state)
{
	(void)state;
	struct wsnote *n = wsnote_new();
	assert_false(walk(n, "/proc/self/fdinfo"));
	assert_false(walk(n, root));
	wsnote_free(n);
}

/* More directories than WSNOTE_MAX: the walk does not stand. */
static void test_bounded(void **state)
{
	(void)state;
	for (int i = 0; i < WSNOTE_MAX + 1; i++) {
		char rel[32];
		snprintf(rel, sizeof rel, "d%d", i);
		dir(rel);
	}
	struct wsnote *n = wsnote_new();
	assert_false(walk(n, root));
	assert_true(wsnote_watched(n) <= WSNOTE_MAX);
	wsnote_free(n);
}

/* Many directories watched, half of them deleted, new ones made: the
 * tables of watches (found by inode and by watch number) keep exactly
 * the directories there are, through the kernel's dropped watches. */
static void test_churn(void **state)
{
	(void)state;
	enum { N = 3000 };
	for (int i = 0; i < N; i++) {
		char rel[32];
		snprintf(rel, sizeof rel, "d%d", i);
		dir(rel);
	}
	struct wsnote *n = wsnote_new();
	assert_true(walk(n, root));
	assert_int_equal(wsnote_watched(n), N + 1);
	for (int i = 0; i < N; i += 2) {
		char p[256];
		snprintf(p, sizeof p, "%s/d%d", root, i);
		assert_int_equal(rmdir(p), 0);
	}
	assert_int_equal(wsnote_watched(n), N / 2 + 1);
	assert_true(walk(n, root));
	assert_int_equal(wsnote_watched(n), N / 2 + 1);
	/* New directories, some of them on the inode numbers just freed. */
	for (int i = 0; i < N; i += 2) {
		char rel[32];
		snprintf(rel, sizeof rel, "e%d", i);
		dir(rel);
	}
	assert_true(walk(n, root));
	assert_int_equal(wsnote_watched(n), N + 1);
	unsigned long long e = wsnote_events(n);
	put("e0/f", "x");
	assert_true(wsnote_events(n) > e);
	e = wsnote_events(n);
	put("d1/f", "x");
	assert_true(wsnote_events(n) > e);
	wsnote_free(n);
}

/* Walks outside wsnote_walk_begin watch nothing. */
static void test_unwatched(void **state)
{
	(void)state;
	dir("a");
	struct wsnote *n = wsnote_new();
	struct art_usage u;
	art_dir_usage(root, NULL, 0, &u);
	assert_int_equal(wsnote_watched(n), 0);
	assert_false(wsnote_walk_end());
	wsnote_free(n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_changes_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deleted_forgotten, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mapped_store_unseen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_local, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unwatched, setup, teardown),
		cmocka_unit_test_setup_teardown(test_churn, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

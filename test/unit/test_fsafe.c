/* Unit tests of files/fsafe.c: path mapping tables, and the attacks that
 * sandboxed code can stage in the workspace (planted symlinks to files and
 * directories outside, FIFOs, hard links), each run twice: with openat2
 * and with the O_NOFOLLOW walk used on kernels without it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../files/fsafe.h"
#include "ws_fixture.h"

static char *slurp(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "test_fsafe: timed out (a FIFO hung the server?)\n";
	if (write(2, m, sizeof m - 1) < 0) {
	}
	_exit(3);
}

static int setup_common(void **state, bool openat2)
{
	struct fx *f = fx_new("fsafe");
	ws_set_openat2(openat2);
	signal(SIGALRM, on_alarm);
	alarm(20);
	*state = f;
	return 0;
}

static int setup_openat2(void **state)
{
	return setup_common(state, true);
}

static int setup_walk(void **state)
{
	return setup_common(state, false);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	alarm(0);
	ws_set_openat2(true);
	fx_free(f);
	return 0;
}

/* ---- ws_open ---------------------------------------------------------- */

static void test_open(void **state)
{
	struct fx *f = *state;
	struct stat st;
	char p[512];

	assert_string_equal(f->ws.display, "workspace");
	assert_non_null(strstr(f->ws.abs, "/root/workspace"));
	assert_int_equal(f->ws.abs[0], '/');
	wpath(f, p, sizeof p, "outputs");
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));

	/* Outside root: display is the absolute path; mkdir -p of the path. */
	struct workspace w2;
	struct err e = { 0 };
	snprintf(p, sizeof p, "%s/elsewhere/deep/ws", f->tmp);
	if (ws_open(&w2, f->root, p, &e) < 0)
		fail_msg("ws_open: %s", e.msg);
	assert_string_equal(w2.display, w2.abs);
	char d[600];
	assert_int_equal(ws_display_path(&w2, "outputs/a.png", d, sizeof d), 0);
	snprintf(p, sizeof p, "%s/outputs/a.png", w2.abs);
	assert_string_equal(d, p);
	ws_close(&w2);
	ws_close(&w2); /* harmless twice */

	/* Workspace == root: display "." and display paths without prefix. */
	assert_int_equal(ws_open(&w2, f->root, f->root, &e), 0);
	assert_string_equal(w2.display, ".");
	assert_int_equal(ws_display_path(&w2, "outputs/a.png", d, sizeof d), 0);
	assert_string_equal(d, "outputs/a.png");
	ws_close(&w2);

	/* Errors. */
	snprintf(p, sizeof p, "%s/missing-root", f->tmp);
	assert_int_equal(ws_open(&w2, p, "workspace", &e), -ENOENT);
	assert_non_null(strstr(e.msg, "missing-root"));
	assert_int_equal(ws_open(&w2, "/", "/", &e), -EINVAL);
	ws_close(&w2);
	snprintf(p, sizeof p, "%s/secret", f->outside);
	assert_true(ws_open(&w2, f->root, p, &e) < 0);
	ws_close(&w2);
}

/* ---- ws_relpath ------------------------------------------------------- */

static void test_relpath(void **state)
{
	struct fx *f = *state;
	char abs_a[512], abs_ws[512], out[PATH_MAX];
	struct err e = { 0 };

	snprintf(abs_a, sizeof abs_a, "%s/a", f->ws.abs);
	snprintf(abs_ws, sizeof abs_ws, "%s/../workspace//outputs/./p.png", f->ws.abs);
	const struct {
		const char *in;
		int rc;
		const char *out;
	} tab[] = {
		{ "workspace/a", 0, "a" },
		{ "./workspace/../workspace/a", 0, "a" },
		{ abs_a, 0, "a" },
		{ abs_ws, 0, "outputs/p.png" },
		{ "workspace", 0, "" },
		{ "workspace/", 0, "" },
		{ "workspace/.", 0, "" },
		{ "workspace//outputs/./plot.png", 0, "outputs/plot.png" },
		{ "workspace/a/../../workspace/b", 0, "b" },
		{ "workspace/a/b/../c", 0, "a/c" },
		{ "../x", -EXDEV, NULL },
		{ "/etc/passwd", -EXDEV, NULL },
		{ "workspace/../../x", -EXDEV, NULL },
		{ "workspace/..", -EXDEV, NULL },
		{ "workspacex/a", -EXDEV, NULL }, /* a prefix of the name is not the workspace */
		{ ".", -EXDEV, NULL },
		{ "/", -EXDEV, NULL },
		{ "/..", -EXDEV, NULL },
		{ "other/a", -EXDEV, NULL },
		{ "", -EINVAL, NULL },
	};
	for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
		strcpy(out, "unchanged");
		err_clear(&e);
		int rc = ws_relpath(&f->ws, tab[i].in, out, sizeof out, &e);
		if (rc != tab[i].rc)
			fail_msg("ws_relpath(\"%s\") = %d (%s), wanted %d", tab[i].in, rc, e.msg, tab[i].rc);
		if (rc == 0 && strcmp(out, tab[i].out) != 0)
			fail_msg("ws_relpath(\"%s\") = \"%s\", wanted \"%s\"", tab[i].in, out, tab[i].out);
		if (rc == -EXDEV && !strstr(e.msg, "outside the workspace"))
			fail_msg("ws_relpath(\"%s\"): message \"%s\" does not say why", tab[i].in, e.msg);
	}
	/* The message gives the form to use. */
	ws_relpath(&f->ws, "/etc/passwd", out, sizeof out, &e);
	assert_non_null(strstr(e.msg, "workspace/outputs/plot.png"));
	/* Too small an output buffer. */
	char small[4];
	assert_int_equal(ws_relpath(&f->ws, "workspace/outputs/x.png", small, sizeof small, &e), -ENAMETOOLONG);
	/* An over-long path is refused, not truncated. */
	char *lng = malloc(PATH_MAX + 10);
	assert_non_null(lng);
	memset(lng, 'a', PATH_MAX + 9);
	lng[PATH_MAX + 9] = '\0';
	assert_int_equal(ws_relpath(&f->ws, lng, out, sizeof out, &e), -ENAMETOOLONG);
	free(lng);

	char d[256];
	assert_int_equal(ws_display_path(&f->ws, "outputs/a.png", d, sizeof d), 0);
	assert_string_equal(d, "workspace/outputs/a.png");
	assert_int_equal(ws_display_path(&f->ws, "", d, sizeof d), 0);
	assert_string_equal(d, "workspace");
	assert_int_equal(ws_display_path(&f->ws, "outputs/a.png", d, 8), -ENAMETOOLONG);
}

/* ---- attacks ---------------------------------------------------------- */

static void test_symlink_to_outside_file(void **state)
{
	struct fx *f = *state;
	char p[512], target[512];
	struct err e = { 0 };
	unsigned char *buf = (unsigned char *)"x";
	size_t len = 1;

	snprintf(target, sizeof target, "%s/secret", f->outside);
	wpath(f, p, sizeof p, "outputs/plot.png");
	assert_int_equal(symlink(target, p), 0);

	assert_int_equal(ws_openat(&f->ws, "outputs/plot.png", O_RDONLY, 0), -ELOOP);
	assert_int_equal(ws_openat(&f->ws, "outputs/plot.png", O_PATH, 0), -ELOOP);
	assert_int_equal(ws_openat(&f->ws, "outputs/plot.png", O_WRONLY | O_CREAT, 0644), -ELOOP);
	assert_int_equal(ws_read_file(&f->ws, "outputs/plot.png", 1 << 20, &buf, &len, &e), -ELOOP);
	assert_null(buf);
	assert_int_equal(len, 0);
	assert_non_null(strstr(e.msg, "symlink"));

	/* A relative symlink that stays inside is refused too: no symlink is
	 * ever followed. */
	wpath(f, p, sizeof p, "outputs/rel");
	assert_int_equal(symlink("../outputs", p), 0);
	assert_int_equal(ws_openat(&f->ws, "outputs/rel", O_RDONLY | O_DIRECTORY, 0), -ELOOP);
	/* Escapes in rel itself. */
	assert_int_equal(ws_openat(&f->ws, "../outside/secret", O_RDONLY, 0), -EXDEV);
	assert_int_equal(ws_openat(&f->ws, "outputs/../../outside/secret", O_RDONLY, 0), -EXDEV);
	assert_int_equal(ws_openat(&f->ws, target, O_RDONLY, 0), -EXDEV);
}

static void test_symlinked_dir_in_path(void **state)
{
	struct fx *f = *state;
	char p[512], q[512];
	struct err e = { 0 };

	wpath(f, p, sizeof p, "outputs/sub");
	assert_int_equal(symlink(f->outside, p), 0);
	assert_int_equal(ws_openat(&f->ws, "outputs/sub/secret", O_RDONLY, 0), -ELOOP);
	assert_int_equal(ws_openat(&f->ws, "outputs/sub", O_RDONLY | O_DIRECTORY, 0), -ELOOP);
	assert_int_equal(ws_openat(&f->ws, "outputs/sub/new", O_WRONLY | O_CREAT | O_EXCL, 0644), -ELOOP);

	/* Writing through it: refused, and nothing appears outside. */
	assert_int_equal(ws_write_file(&f->ws, "outputs/sub/new.txt", "x", 1, &e), -ELOOP);
	assert_non_null(strstr(e.msg, "symlink"));
	snprintf(q, sizeof q, "%s/new.txt", f->outside);
	assert_int_equal(access(q, F_OK), -1);
	assert_int_equal(ws_mkdirs(&f->ws, "outputs/sub/deeper", &e), -ELOOP);
	snprintf(q, sizeof q, "%s/deeper", f->outside);
	assert_int_equal(access(q, F_OK), -1);

	/* The workspace itself replaced by... nothing: a file where a
	 * directory should be. */
	wpath(f, p, sizeof p, "afile");
	put(p, "x");
	assert_int_equal(ws_mkdirs(&f->ws, "afile/b", &e), -ENOTDIR);
	assert_int_equal(ws_openat(&f->ws, "afile/b", O_RDONLY, 0), -ENOTDIR);
}

static void test_write_over_planted_symlink(void **state)
{
	struct fx *f = *state;
	char p[512], target[512];
	struct err e = { 0 };
	struct stat st;

	snprintf(target, sizeof target, "%s/secret", f->outside);
	wpath(f, p, sizeof p, "outputs/output_summary.json");
	assert_int_equal(symlink(target, p), 0);
	if (ws_write_file(&f->ws, "outputs/output_summary.json", "{\"ok\":true}", 11, &e) < 0)
		fail_msg("ws_write_file: %s", e.msg);
	assert_string_equal(slurp(target), "SECRET");
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_string_equal(slurp(p), "{\"ok\":true}");

	/* A dangling symlink to a file that does not exist yet outside. */
	char t2[512];
	snprintf(t2, sizeof t2, "%s/created-by-attack", f->outside);
	wpath(f, p, sizeof p, "outputs/log.txt");
	assert_int_equal(symlink(t2, p), 0);
	assert_int_equal(ws_write_file(&f->ws, "outputs/log.txt", "hello", 5, &e), 0);
	assert_int_equal(access(t2, F_OK), -1);
	assert_string_equal(slurp(p), "hello");

	/* And ws_openat O_CREAT refuses the dangling symlink rather than
	 * creating the outside file. */
	wpath(f, p, sizeof p, "dangling");
	assert_int_equal(symlink(t2, p), 0);
	assert_int_equal(ws_openat(&f->ws, "dangling", O_WRONLY | O_CREAT, 0644), -ELOOP);
	assert_int_equal(access(t2, F_OK), -1);
}

static void test_fifo(void **state)
{
	struct fx *f = *state;
	char p[512];
	struct err e = { 0 };
	unsigned char *buf;
	size_t len;

	wpath(f, p, sizeof p, "outputs/plot.png");
	assert_int_equal(mkfifo(p, 0644), 0);
	/* Without O_NONBLOCK these opens would block forever (alarm fires). */
	assert_int_equal(ws_openat(&f->ws, "outputs/plot.png", O_RDONLY, 0), -EINVAL);
	int rc = ws_openat(&f->ws, "outputs/plot.png", O_WRONLY, 0);
	assert_true(rc == -EINVAL || rc == -ENXIO);
	assert_int_equal(ws_read_file(&f->ws, "outputs/plot.png", 1 << 20, &buf, &len, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "FIFO"));
	/* Writing replaces it. */
	assert_int_equal(ws_write_file(&f->ws, "outputs/plot.png", "png", 3, &e), 0);
	assert_int_equal(ws_read_file(&f->ws, "outputs/plot.png", 1 << 20, &buf, &len, &e), 0);
	assert_int_equal(len, 3);
	free(buf);
}

/* Decision: regular files with more than one hard link are refused for
 * every open (a link can reach a file outside the workspace), and writes
 * always replace the name with a new inode. */
static void test_hard_link(void **state)
{
	struct fx *f = *state;
	char p[512], target[512];
	struct err e = { 0 };
	unsigned char *buf;
	size_t len;

	snprintf(target, sizeof target, "%s/secret", f->outside);
	wpath(f, p, sizeof p, "outputs/stolen.txt");
	if (link(target, p) < 0)
		skip(); /* e.g. fs.protected_hardlinks with another owner */
	assert_int_equal(ws_openat(&f->ws, "outputs/stolen.txt", O_RDONLY, 0), -EMLINK);
	assert_int_equal(ws_read_file(&f->ws, "outputs/stolen.txt", 1 << 20, &buf, &len, &e), -EMLINK);
	assert_non_null(strstr(e.msg, "hard link"));
	/* O_TRUNC happens only after the check: the outside file survives. */
	assert_int_equal(ws_openat(&f->ws, "outputs/stolen.txt", O_WRONLY | O_TRUNC, 0), -EMLINK);
	assert_int_equal(ws_openat(&f->ws, "outputs/stolen.txt", O_WRONLY | O_APPEND | O_CREAT, 0644), -EMLINK);
	assert_string_equal(slurp(target), "SECRET");
	assert_int_equal(ws_write_file(&f->ws, "outputs/stolen.txt", "mine", 4, &e), 0);
	assert_string_equal(slurp(target), "SECRET");
	assert_string_equal(slurp(p), "mine");
}

/* ---- normal use ------------------------------------------------------- */

static void test_write_read(void **state)
{
	struct fx *f = *state;
	struct err e = { 0 };
	unsigned char *buf;
	size_t len;
	char p[512];

	if (ws_write_file(&f->ws, "a/b/c.txt", "hello", 5, &e) < 0)
		fail_msg("ws_write_file: %s", e.msg);
	assert_int_equal(ws_read_file(&f->ws, "a/b/c.txt", 100, &buf, &len, &e), 0);
	assert_int_equal(len, 5);
	assert_string_equal((char *)buf, "hello");
	free(buf);
	/* Overwrite, empty content. */
	assert_int_equal(ws_write_file(&f->ws, "a/b/c.txt", "", 0, &e), 0);
	assert_int_equal(ws_read_file(&f->ws, "a/b/c.txt", 100, &buf, &len, &e), 0);
	assert_int_equal(len, 0);
	assert_int_equal(buf[0], '\0');
	free(buf);
	/* Size cap. */
	char big[300];
	memset(big, 'x', sizeof big);
	assert_int_equal(ws_write_file(&f->ws, "big", big, sizeof big, &e), 0);
	assert_int_equal(ws_read_file(&f->ws, "big", 299, &buf, &len, &e), -EFBIG);
	assert_non_null(strstr(e.msg, "300 bytes"));
	assert_int_equal(ws_read_file(&f->ws, "big", 300, &buf, &len, &e), 0);
	assert_int_equal(len, 300);
	free(buf);
	assert_int_equal(ws_read_file(&f->ws, "big", SIZE_MAX, &buf, &len, &e), 0);
	free(buf);
	/* Missing file, directory. */
	assert_int_equal(ws_read_file(&f->ws, "nope", 100, &buf, &len, &e), -ENOENT);
	assert_non_null(strstr(e.msg, "does not exist"));
	assert_int_equal(ws_read_file(&f->ws, "a", 100, &buf, &len, &e), -EISDIR);
	/* Writing onto a directory, or to no name. */
	assert_true(ws_write_file(&f->ws, "a/b", "x", 1, &e) < 0);
	assert_int_equal(ws_write_file(&f->ws, "a/", "x", 1, &e), -EINVAL);
	assert_int_equal(ws_write_file(&f->ws, "", "x", 1, &e), -EINVAL);
	assert_int_equal(ws_write_file(&f->ws, "../escape", "x", 1, &e), -EXDEV);
	/* No temporary file is left behind. */
	wpath(f, p, sizeof p, "a/b");
	DIR *d = opendir(p);
	assert_non_null(d);
	struct dirent *de;
	while ((de = readdir(d)))
		assert_null(strstr(de->d_name, ".psm-"));
	closedir(d);

	/* Directories open with O_DIRECTORY; O_NONBLOCK is cleared unless
	 * asked for. */
	int fd = ws_openat(&f->ws, "", O_RDONLY | O_DIRECTORY, 0);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(ws_openat(&f->ws, "outputs", O_RDONLY, 0), -EISDIR);
	fd = ws_openat(&f->ws, "big", O_RDONLY, 0);
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	/* O_TRUNC on a plain file still truncates. */
	fd = ws_openat(&f->ws, "big", O_WRONLY | O_TRUNC, 0);
	assert_true(fd >= 0);
	close(fd);
	wpath(f, p, sizeof p, "big");
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, 0);
	/* ws_mkdirs is idempotent. */
	assert_int_equal(ws_mkdirs(&f->ws, "x/y/z", &e), 0);
	assert_int_equal(ws_mkdirs(&f->ws, "./x//y/z/", &e), 0);
	assert_int_equal(ws_mkdirs(&f->ws, "", &e), 0);
	assert_int_equal(ws_mkdirs(&f->ws, "x/../y", &e), -EXDEV);

	ws_openat_err(&e, -EMLINK, "outputs/a");
	assert_non_null(strstr(e.msg, "outputs/a"));
	ws_openat_err(&e, -EACCES, "outputs/a");
	assert_non_null(strstr(e.msg, "Permission denied"));
}

int main(void)
{
#define BOTH(t) cmocka_unit_test_setup_teardown(t, setup_openat2, teardown), \
		cmocka_unit_test_setup_teardown(t, setup_walk, teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open, setup_openat2, teardown),
		cmocka_unit_test_setup_teardown(test_relpath, setup_openat2, teardown),
		BOTH(test_symlink_to_outside_file),
		BOTH(test_symlinked_dir_in_path),
		BOTH(test_write_over_planted_symlink),
		BOTH(test_fifo),
		BOTH(test_hard_link),
		BOTH(test_write_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

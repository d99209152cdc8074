/* Unit tests of common/userdir.c: the user's own config directory, believed
 * only when nobody else could have written it.  Each test works in a fresh
 * directory under /tmp; the effects are checked with stat/lstat from here. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../common/userdir.h"
#include "tmptree.h"

struct t {
	char tmp[64];
	char dir[128]; /* tmp/a/b/python-sandbox-mcp: parents missing at first */
};

static int setup(void **state)
{
	struct t *t = calloc(1, sizeof *t);
	snprintf(t->tmp, sizeof t->tmp, "/tmp/psm-userdir-XXXXXX");
	if (!t || !mkdtemp(t->tmp))
		return -1;
	snprintf(t->dir, sizeof t->dir, "%s/a/b/python-sandbox-mcp", t->tmp);
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct t *t = *state;
	tmp_tree_remove(t->tmp);
	free(t);
	return 0;
}

static void test_config_path(void **state)
{
	char p[PATH_MAX];
	struct err e = { 0 };
	char *old_x = getenv("XDG_CONFIG_HOME") ? strdup(getenv("XDG_CONFIG_HOME")) : NULL;
	char *old_h = getenv("HOME") ? strdup(getenv("HOME")) : NULL;

	setenv("XDG_CONFIG_HOME", "/x/cfg", 1);
	assert_int_equal(userdir_config_path(p, sizeof p, &e), 0);
	assert_string_equal(p, "/x/cfg/python-sandbox-mcp");
	/* A relative XDG_CONFIG_HOME is ignored (the XDG spec): it would name
	 * a directory inside whatever project the server started in. */
	setenv("XDG_CONFIG_HOME", "rel/cfg", 1);
	setenv("HOME", "/home/someone", 1);
	assert_int_equal(userdir_config_path(p, sizeof p, &e), 0);
	assert_string_equal(p, "/home/someone/.config/python-sandbox-mcp");
	unsetenv("XDG_CONFIG_HOME");
	assert_int_equal(userdir_config_path(p, sizeof p, &e), 0);
	assert_string_equal(p, "/home/someone/.config/python-sandbox-mcp");

	if (old_x)
		setenv("XDG_CONFIG_HOME", old_x, 1);
	if (old_h)
		setenv("HOME", old_h, 1);
	else
		unsetenv("HOME");
	free(old_x);
	free(old_h);
}

static void test_create_write_read(void **state)
{
	struct t *t = *state;
	struct userdir ud;
	struct err e = { 0 };
	struct stat st;
	char *buf;
	size_t len;
	char p[256];

	assert_int_equal(userdir_open(&ud, t->dir, false, &e), 1); /* missing */
	assert_int_equal(ud.fd, -1);
	mode_t old = umask(0);
	int rc = userdir_open(&ud, t->dir, true, &e);
	umask(old);
	assert_int_equal(rc, 0);
	assert_int_equal(stat(t->dir, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	snprintf(p, sizeof p, "%s/a", t->tmp);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);

	assert_int_equal(userdir_read(&ud, "f", 100, &buf, &len, &e), 1);
	assert_null(buf);
	old = umask(0);
	rc = userdir_write(&ud, "f", "hello\n", 6, &e);
	umask(old);
	assert_int_equal(rc, 0);
	snprintf(p, sizeof p, "%s/f", t->dir);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(userdir_read(&ud, "f", 100, &buf, &len, &e), 0);
	assert_int_equal(len, 6);
	assert_string_equal(buf, "hello\n");
	free(buf);
	/* Replaced, not appended; no temporary file left behind. */
	assert_int_equal(userdir_write(&ud, "f", "x", 1, &e), 0);
	assert_int_equal(userdir_read(&ud, "f", 100, &buf, &len, &e), 0);
	assert_string_equal(buf, "x");
	free(buf);
	rc = 0;
	int dfd = dup(ud.fd);
	DIR *d = fdopendir(dfd);
	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d));)
		if (de->d_name[0] != '.' || strstr(de->d_name, ".tmp"))
			rc += strcmp(de->d_name, "f") != 0;
	closedir(d);
	assert_int_equal(rc, 0);

	/* Over the cap. */
	assert_int_equal(userdir_read(&ud, "f", 0, &buf, &len, &e), -EFBIG);

	assert_int_equal(userdir_unlink(&ud, "f", &e), 0);
	assert_int_equal(lstat(p, &st), -1);
	assert_int_equal(userdir_unlink(&ud, "f", &e), 0); /* already gone */
	userdir_close(&ud);
	assert_int_equal(ud.fd, -1);
}

static void test_refusals(void **state)
{
	struct t *t = *state;
	struct userdir ud;
	struct err e = { 0 };
	char *buf;
	size_t len;
	char p[256], real[256];

	/* The directory as a symlink to one that is fine in itself. */
	snprintf(real, sizeof real, "%s/real", t->tmp);
	assert_int_equal(mkdir(real, 0700), 0);
	snprintf(p, sizeof p, "%s/link", t->tmp);
	assert_int_equal(symlink(real, p), 0);
	assert_int_equal(userdir_open(&ud, p, false, &e), -ELOOP);
	assert_non_null(strstr(e.msg, "symlink"));
	assert_int_equal(ud.fd, -1);

	/* Writable by others: anyone could plant an approval there. */
	assert_int_equal(chmod(real, 0770), 0);
	assert_int_equal(userdir_open(&ud, real, false, &e), -EPERM);
	assert_non_null(strstr(e.msg, "writable by other users"));
	assert_non_null(strstr(e.msg, "chmod go-w"));
	assert_int_equal(chmod(real, 0700), 0);
	assert_int_equal(userdir_open(&ud, real, false, &e), 0);

	/* The file: a symlink, group-writable, a FIFO, a directory. */
	snprintf(p, sizeof p, "%s/target", t->tmp);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs("planted\n", f);
	fclose(f);
	snprintf(real, sizeof real, "%s/real/f", t->tmp);
	assert_int_equal(symlink(p, real), 0);
	assert_int_equal(userdir_read(&ud, "f", 100, &buf, &len, &e), -ELOOP);
	assert_null(buf);
	assert_non_null(strstr(e.msg, "symlink"));
	/* Writing replaces the link itself; the target is untouched. */
	assert_int_equal(userdir_write(&ud, "f", "mine\n", 5, &e), 0);
	assert_int_equal(userdir_read(&ud, "f", 100, &buf, &len, &e), 0);
	assert_string_equal(buf, "mine\n");
	free(buf);
	f = fopen(p, "r");
	char line[32] = "";
	assert_non_null(fgets(line, sizeof line, f));
	fclose(f);
	assert_string_equal(line, "planted\n");

	assert_int_equal(chmod(real, 0620), 0);
	assert_int_equal(userdir_read(&ud, "f", 100, &buf, &len, &e), -EPERM);
	assert_non_null(strstr(e.msg, "writable by other users"));
	assert_int_equal(unlink(real), 0);
	assert_int_equal(mkfifo(real, 0600), 0);
	assert_int_equal(userdir_read(&ud, "f", 100, &buf, &len, &e), -EINVAL); /* and no hang */
	assert_non_null(strstr(e.msg, "not a regular file"));
	assert_int_equal(unlink(real), 0);

	/* Another owner (only root can make one here). */
	if (geteuid() == 0) {
		assert_int_equal(userdir_write(&ud, "f", "x", 1, &e), 0);
		assert_int_equal(chown(real, 65534, 65534), 0);
		assert_int_equal(userdir_read(&ud, "f", 100, &buf, &len, &e), -EPERM);
		assert_non_null(strstr(e.msg, "belongs to uid 65534"));
		snprintf(p, sizeof p, "%s/real", t->tmp);
		assert_int_equal(chown(p, 65534, 65534), 0);
		userdir_close(&ud);
		assert_int_equal(userdir_open(&ud, p, false, &e), -EPERM);
		assert_int_equal(chown(p, 0, 0), 0);
	}
	userdir_close(&ud);
	assert_int_equal(userdir_open(&ud, "relative/dir", false, &e), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_path),
		cmocka_unit_test_setup_teardown(test_create_write_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of common/pstat.c: /proc/PID/stat parsed after the last ')',
 * whatever the command name holds (the process chooses it), and lines that
 * stop short refused rather than read as zeros. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/pstat.h"

/* Fields 3 to 52 of a line (after "PID (NAME) "), numbered so that each
 * field's value tells where it was read from. */
static void line(char *buf, size_t n, const char *name, int last)
{
	int k = snprintf(buf, n, "4242 (%s) S", name);
	for (int f = 4; f <= last; f++)
		k += snprintf(buf + k, n - (size_t)k, " %d", f == 16 ? -16 : f * 10);
	snprintf(buf + k, n - (size_t)k, "\n");
}

static void test_fields(void **state)
{
	(void)state;
	char buf[1024];
	struct pstat ps;
	line(buf, sizeof buf, "python3", 52);
	assert_int_equal(pstat_parse(buf, &ps), 0);
	assert_int_equal(ps.state, 'S');
	assert_int_equal(ps.ppid, 40);
	assert_int_equal(ps.flags, 90);
	assert_int_equal(ps.minflt, 100);
	assert_int_equal(ps.cmajflt, 130);
	assert_int_equal(ps.utime, 140);
	assert_int_equal(ps.stime, 150);
	assert_int_equal(ps.cutime, -16);
	assert_int_equal(ps.cstime, 170);
	assert_int_equal(ps.num_threads, 200);
	assert_int_equal(ps.start, 220);
	assert_int_equal(ps.rss, 240);
	assert_int_equal(ps.exit_code, 520);
}

/* Attack: a name made to look like the fields ("x) Z 1 1 ...") would make
 * a parser that counts from the left read a zombie, or the parent 1. */
static void test_hostile_name(void **state)
{
	(void)state;
	char buf[1024];
	struct pstat ps;
	line(buf, sizeof buf, "x) Z 1 (", 52);
	assert_int_equal(pstat_parse(buf, &ps), 0);
	assert_int_equal(ps.state, 'S');
	assert_int_equal(ps.ppid, 40);
	line(buf, sizeof buf, ")))", 52);
	assert_int_equal(pstat_parse(buf, &ps), 0);
	assert_int_equal(ps.start, 220);
}

/* A line that ends before the start time, or has no name, or a field
 * that is no number: refused, never read as zeros. */
static void test_short_and_bad(void **state)
{
	(void)state;
	char buf[1024];
	struct pstat ps;
	line(buf, sizeof buf, "a", 21);
	assert_int_equal(pstat_parse(buf, &ps), -EINVAL);
	line(buf, sizeof buf, "a", 22);
	assert_int_equal(pstat_parse(buf, &ps), 0);
	assert_int_equal(ps.exit_code, -1); /* an old kernel's line stops before 52 */
	assert_int_equal(pstat_parse("4242 python3 S 1 2 3", &ps), -EINVAL);
	assert_int_equal(pstat_parse("", &ps), -EINVAL);
	assert_int_equal(pstat_parse("1 (a)", &ps), -EINVAL);
	assert_int_equal(pstat_parse("1 (a) S x 2", &ps), -EINVAL);
}

/* The real kernel's file: this process, and a zombie child's exit code. */
static void test_real(void **state)
{
	(void)state;
	struct pstat ps;
	assert_int_equal(prctl(PR_SET_NAME, "a) Z 1 (b", 0, 0, 0), 0);
	assert_int_equal(pstat_read(-1, "/proc/self/stat", &ps), 0);
	assert_int_equal(ps.ppid, getppid());
	assert_int_equal(ps.state, 'R');
	assert_int_equal(ps.num_threads, 1);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(7);
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(pstat_read(-1, path, &ps), 0);
		if (ps.state == 'Z')
			break;
		usleep(1000);
	}
	assert_int_equal(ps.state, 'Z');
	assert_int_equal(ps.ppid, getpid());
	assert_true(WIFEXITED(ps.exit_code) && WEXITSTATUS(ps.exit_code) == 7);
	waitpid(pid, NULL, 0);
	assert_int_equal(pstat_read(-1, path, &ps), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fields),
		cmocka_unit_test(test_hostile_name),
		cmocka_unit_test(test_short_and_bad),
		cmocka_unit_test(test_real),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

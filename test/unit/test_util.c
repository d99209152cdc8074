/* Unit tests of common/util.c: the out-of-memory rule and the cleanup
 * helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/escape.h"
#include "../../common/util.h"

#ifdef __SANITIZE_ADDRESS__
/* An impossible allocation returns NULL here as in release builds, so the
 * test sees our rule at work, not AddressSanitizer's report. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}
#endif

/* Runs fn in a child with stderr on a pipe; returns the wait status and
 * what it wrote. */
static int in_child(void (*fn)(void), char *err, size_t errsz)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(p[1], STDERR_FILENO);
		fn();
		_exit(0);
	}
	close(p[1]);
	/* All of it: a sanitizer build writes its own report first. */
	size_t got = 0;
	ssize_t n;
	while (got < errsz - 1 && (n = read(p[0], err + got, errsz - 1 - got)) > 0)
		got += (size_t)n;
	err[got] = '\0';
	close(p[0]);
	int ws;
	assert_int_equal(waitpid(pid, &ws, 0), pid);
	return ws;
}

static void huge_malloc(void)
{
	volatile size_t n = SIZE_MAX / 2;
	char *p = xmalloc(n);
	p[0] = 1; /* never reached */
}

static void huge_array(void)
{
	(void)xreallocarray(NULL, SIZE_MAX / 4, 8); /* the product overflows */
}

/* Out of memory ends the process with status 1 and one line, never a NULL
 * the caller could forget to check. */
static void test_die_oom(void **state)
{
	char err[16384];
	(void)state;
	int ws = in_child(huge_malloc, err, sizeof err);
	assert_true(WIFEXITED(ws));
	assert_int_equal(WEXITSTATUS(ws), 1);
	/* (A sanitizer build may warn first.) */
	assert_non_null(strstr(err, "python-sandbox-mcp: out of memory\n"));
	ws = in_child(huge_array, err, sizeof err);
	assert_true(WIFEXITED(ws));
	assert_int_equal(WEXITSTATUS(ws), 1);
}

static int closed_fd = -1;

static void scope_with_cleanups(void)
{
	cleanup_free char *a = xstrdup("freed at the end of the scope");
	cleanup_fd int fd = open("/dev/null", O_RDONLY);
	closed_fd = fd;
	(void)a;
}

static void test_cleanup(void **state)
{
	(void)state;
	scope_with_cleanups();
	assert_true(closed_fd >= 0);
	assert_int_equal(fcntl(closed_fd, F_GETFD), -1); /* closed */

	cleanup_free char *owned = xasprintf("%s-%d", "x", 7);
	char *taken = steal_pointer(&owned);
	assert_null(owned);
	assert_string_equal(taken, "x-7");
	free(taken);

	int fd = open("/dev/null", O_RDONLY);
	int moved = steal_fd(&fd);
	assert_int_equal(fd, -1);
	close(moved);

	static const int arr[7] = { 0 };
	assert_int_equal(N_ELEMENTS(arr), 7);
}

/* Untrusted bytes in messages: control bytes, non-ASCII and the backslash
 * escaped; cut with "..." at max or when the buffer is full, keeping as
 * much as fits (a small buffer still shows the first bytes). */
static void test_escape(void **state)
{
	char b[64];
	(void)state;
	assert_string_equal(esc_bytes(b, sizeof b, "a\nb\\c\x1b", 6, 40), "a\\x0ab\\x5cc\\x1b");
	assert_string_equal(esc_bytes(b, sizeof b, "abcdef", 6, 3), "abc...");
	assert_string_equal(esc_bytes(b, 8, "abcdef", 6, 40), "abcd...");
	assert_string_equal(esc_bytes(b, 7, "\x01\x02", 2, 40), "...");
	assert_string_equal(esc_bytes(b, 8, "\x01\x02", 2, 40), "\\x01...");
	assert_string_equal(esc_bytes(b, 3, "abcdef", 6, 40), "");
	assert_string_equal(esc_bytes(b, sizeof b, "", 0, 40), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_die_oom),
		cmocka_unit_test(test_cleanup),
		cmocka_unit_test(test_escape),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

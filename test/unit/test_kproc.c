/* kproc_dying: the kernel's word that a process is ending before its
 * pidfd says so, on real child processes. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../supervisor/kproc.h"

static pid_t child(int *pidfd)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (;;)
			pause();
	}
	*pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	assert_true(*pidfd >= 0);
	return pid;
}

/* Its state letter in /proc/PID/stat. */
static char state_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

static void wait_state(pid_t pid, char want)
{
	for (int i = 0; i < 2000 && state_of(pid) != want; i++) {
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
	}
	assert_int_equal(state_of(pid), want);
}

/* Alive, asleep or stopped (as a frozen copy is): not dying. */
static void test_alive_is_not_dying(void **state)
{
	(void)state;
	int fd, sig = 99;
	pid_t pid = child(&fd);
	wait_state(pid, 'S');
	assert_false(kproc_dying(fd, pid, &sig));
	assert_int_equal(sig, 0);
	kill(pid, SIGSTOP);
	wait_state(pid, 'T');
	assert_false(kproc_dying(fd, pid, &sig));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(fd);
}

/* Killed a moment ago, stopped (a frozen copy killed from outside):
 * dying at once, whether its exit is still under way or done; and after
 * it is reaped. */
static void test_killed_is_dying_at_once(void **state)
{
	(void)state;
	int fd, sig;
	pid_t pid = child(&fd);
	kill(pid, SIGSTOP);
	wait_state(pid, 'T');
	kill(pid, SIGKILL);
	assert_true(kproc_dying(fd, pid, &sig));
	waitpid(pid, NULL, 0);
	assert_true(kproc_dying(fd, pid, &sig));
	close(fd);
}

/* A descriptor that is no pidfd, and no pid: nothing said. */
static void test_no_pidfd(void **state)
{
	(void)state;
	int p[2], sig;
	assert_int_equal(pipe(p), 0);
	assert_false(kproc_dying(p[0], 0, &sig));
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alive_is_not_dying),
		cmocka_unit_test(test_killed_is_dying_at_once),
		cmocka_unit_test(test_no_pidfd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

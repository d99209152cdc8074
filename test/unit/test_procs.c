/* Unit tests of interp/procs.c against real processes: the escapes that
 * user code can try to outlive its call (a new process group, a new
 * session, a double fork that orphans the process, a fork loop), what is
 * kept, and the mode that leaves the reaping to the caller.  The test
 * process is a child subreaper, as a session is. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <signal.h>
#include <stdbool.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../interp/procs.h"

static bool alive(pid_t pid)
{
	return kill(pid, 0) == 0;
}

static bool no_children_left(void)
{
	return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

static void read_pids(int fd, pid_t *pids, int n)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(read(fd, &pids[i], sizeof pids[i]), (ssize_t)sizeof pids[i]);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static void test_nothing_to_end(void **state)
{
	(void)state;
	assert_int_equal(procs_end_below(getpid(), NULL, 0, true), 0);
}

/* A: own process group; B, A's child: own session, forks C and exits, so C
 * is an orphan (reparented to us) in a session of its own. */
static void test_new_group_new_session_double_fork(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t a = fork();
	assert_true(a >= 0);
	if (a == 0) {
		setpgid(0, 0);
		if (fork() == 0) {
			setsid();
			if (fork() == 0) {
				pid_t me = getpid();
				if (write(p[1], &me, sizeof me) < 0)
					_exit(1);
				for (;;)
					pause();
			}
			_exit(0);
		}
		pid_t me = getpid();
		if (write(p[1], &me, sizeof me) < 0)
			_exit(1);
		for (;;)
			pause();
	}
	pid_t pids[2];
	read_pids(p[0], pids, 2);
	pid_t c = pids[0] == a ? pids[1] : pids[0];
	sleep_ms(20); /* B has exited: C is now ours */
	assert_true(alive(a) && alive(c));
	assert_true(getpgid(c) != getpgrp() && getsid(c) != getsid(0));
	int n = procs_end_below(getpid(), NULL, 0, true);
	assert_true(n >= 2);
	assert_false(alive(a));
	assert_false(alive(c));
	assert_true(no_children_left());
	close(p[0]);
	close(p[1]);
}

static void test_kept_child_and_its_subtree_survive(void **state)
{
	(void)state;
	pid_t k = fork();
	if (k == 0) {
		if (fork() == 0)
			for (;;)
				pause();
		for (;;)
			pause();
	}
	pid_t l = fork();
	if (l == 0)
		for (;;)
			pause();
	assert_true(k > 0 && l > 0);
	sleep_ms(20);
	assert_int_equal(procs_end_below(getpid(), &k, 1, true), 1);
	assert_false(alive(l));
	assert_true(alive(k));
	/* The kept one's child was not touched either. */
	assert_int_equal(procs_end_below(getpid(), &k, 1, true), 0);
	kill(k, SIGKILL);
	assert_int_equal(waitpid(k, NULL, 0), k);
	/* Its child, orphaned, comes to us: the next call ends it. */
	sleep_ms(20);
	assert_int_equal(procs_end_below(getpid(), NULL, 0, true), 1);
	assert_true(no_children_left());
}

static unsigned long long now_ticks(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	unsigned long long ns = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
	return ns / (1000000000ull / (unsigned long long)sysconf(_SC_CLK_TCK));
}

/* A process's start, in clock ticks after boot (/proc/PID/stat, field 22). */
static unsigned long long start_tick(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *q = strrchr(buf, ')');
	unsigned long long t = 0;
	assert_non_null(q);
	assert_int_equal(sscanf(q + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &t), 1);
	return t;
}

/* The zygote's sweep with a list made earlier: K is kept; after the list,
 * K forks C (a checkpoint) and dies, so C comes to us, unnamed by the
 * list.  Born after it, C is not judged by it; O, an orphan older than the
 * list, is. */
static void test_born_after_the_list_is_not_judged_by_it(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t o = fork();
	if (o == 0)
		for (;;)
			pause();
	sleep_ms(30); /* a clock tick is 10 ms */
	unsigned long long listed = now_ticks();
	pid_t k = fork();
	if (k == 0) {
		sleep_ms(30);
		pid_t c = fork();
		if (c == 0)
			for (;;)
				pause();
		assert_int_equal(write(p[1], &c, sizeof c), (ssize_t)sizeof c);
		_exit(0);
	}
	pid_t c;
	read_pids(p[0], &c, 1);
	assert_int_equal(waitpid(k, NULL, 0), k);
	sleep_ms(20);
	assert_int_equal(procs_end_below_by(getpid(), &k, 1, true, listed), 1);
	assert_false(alive(o));
	assert_true(alive(c));
	/* A list made in its own tick does not judge it either (a
	 * checkpoint forked within milliseconds of the list); one made a
	 * tick later does. */
	unsigned long long born = start_tick(c);
	assert_int_equal(procs_end_below_by(getpid(), NULL, 0, true, born), 0);
	assert_true(alive(c));
	assert_int_equal(procs_end_below_by(getpid(), NULL, 0, true, born + 1), 1);
	assert_true(no_children_left());
	close(p[0]);
	close(p[1]);
}

/* A process that forks as fast as it can while it is being ended: each
 * child forks in turn, so the tree grows in width and depth (up to 2^10
 * processes; sessions have RLIMIT_NPROC besides). */
static void test_fork_loop_cannot_outrun(void **state)
{
	(void)state;
	pid_t f = fork();
	if (f == 0) {
		for (int i = 0; i < 10; i++)
			if (fork() < 0)
				break;
		for (;;)
			pause();
	}
	assert_true(f > 0);
	sleep_ms(5);
	int n = procs_end_below(getpid(), NULL, 0, true);
	assert_true(n >= 1);
	assert_true(no_children_left());
}

/* Without reaping (the zygote's mode: its SIGCHLD loop reports exits), the
 * processes are killed and left for the caller to wait for. */
static void test_without_reaping(void **state)
{
	(void)state;
	pid_t c = fork();
	if (c == 0)
		for (;;)
			pause();
	assert_true(c > 0);
	assert_int_equal(procs_end_below(getpid(), NULL, 0, false), 1);
	int st = 0;
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

static void *spin_forever(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* A child whose first thread ends with the raw exit system call (that
 * thread alone) while another runs on: /proc shows the process as a zombie
 * (the first thread's state).  It is listed as alive, stopped, killed and
 * counted, both ways; a true zombie beside it is neither listed nor
 * counted without reaping.  Before, both sweeps passed it over and it
 * ran on. */
static pid_t headless_child(void)
{
	pid_t c = fork();
	if (c == 0) {
		pthread_t t;
		if (pthread_create(&t, NULL, spin_forever, NULL) != 0)
			_exit(3);
		syscall(SYS_exit, 0);
	}
	assert_true(c > 0);
	/* Until the kernel shows its first thread as exited. */
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)c);
	for (int i = 0; i < 2000; i++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
		if (f)
			fclose(f);
		buf[n] = '\0';
		const char *close = strrchr(buf, ')');
		if (close && close[1] == ' ' && close[2] == 'Z')
			break;
		sleep_ms(1);
	}
	return c;
}

static void test_a_process_whose_first_thread_exited(void **state)
{
	(void)state;
	pid_t zombie = fork();
	if (zombie == 0)
		_exit(0);
	assert_true(zombie > 0);
	pid_t c = headless_child();
	sleep_ms(20);
	pid_t *below = NULL;
	size_t n = 0;
	assert_int_equal(procs_list_below("/proc", getpid(), NULL, 0, &below, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(below[0], c);
	free(below);
	assert_int_equal(procs_end_below(getpid(), NULL, 0, false), 1);
	int st = 0;
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_int_equal(waitpid(zombie, &st, 0), zombie);

	c = headless_child();
	assert_int_equal(procs_end_below(getpid(), NULL, 0, true), 1);
	assert_false(alive(c));
	assert_true(no_children_left());
}

/* The procfs of a pid namespace whose processes have all ended (the
 * zygote died): it lists no process, which is an answer (nothing below),
 * never a fault.  Sorting or searching the empty table crashed the server
 * under UndefinedBehaviorSanitizer (a null array handed to qsort). */
static void test_an_empty_procfs(void **state)
{
	(void)state;
	char dir[] = "/tmp/psm-procs-XXXXXX";
	assert_non_null(mkdtemp(dir));
	pid_t *below = (pid_t *)1;
	size_t n = 7;
	assert_int_equal(procs_list_below(dir, 1, NULL, 0, &below, &n), 0);
	assert_int_equal(n, 0);
	assert_null(below);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	/* As a session: orphans below us come to us. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		return 1;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nothing_to_end),
		cmocka_unit_test(test_new_group_new_session_double_fork),
		cmocka_unit_test(test_kept_child_and_its_subtree_survive),
		cmocka_unit_test(test_born_after_the_list_is_not_judged_by_it),
		cmocka_unit_test(test_fork_loop_cannot_outrun),
		cmocka_unit_test(test_without_reaping),
		cmocka_unit_test(test_a_process_whose_first_thread_exited),
		cmocka_unit_test(test_an_empty_procfs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The watchdog's interval (supervisor/watch.c, watch_next_ms): how far
 * apart the looks at a running call's processes may be, given what the last
 * look found.  The bound it keeps: memory filled at the machine's fastest
 * rate on every CPU between two looks never passes the limit by more than
 * the tolerance (a tenth of the limit, at least 64 MB). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../supervisor/watch.h"

#define MB (1ull << 20)

static double fill_per_ms(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return WATCH_FILL_BYTES_PER_S_PER_CPU * (double)(cpus > 0 ? cpus : 1) / 1000.0;
}

/* Far below a large limit: the longest interval. */
static void test_far_below(void **state)
{
	(void)state;
	struct footprint u = { .tasks = 2, .total = 100 * MB };
	assert_true(watch_next_ms(&u, 1ull << 40, 64) == WATCH_MAX_INTERVAL_MS);
}

/* At the limit: no later than the tolerance takes to fill; past it: the
 * shortest. */
static void test_at_the_limit(void **state)
{
	(void)state;
	struct footprint u = { .tasks = 2, .total = 2048 * MB };
	double ms = watch_next_ms(&u, 2048 * MB, 64);
	assert_true(ms >= WATCH_NEAR_MS && ms * fill_per_ms() <= 2048.0 * MB / 10 + 1.0);
	u.total = 4096 * MB;
	assert_true(watch_next_ms(&u, 2048 * MB, 64) == WATCH_NEAR_MS);
}

/* More than half of max_processes: the shortest, however much memory is
 * free (a fork loop is not measured in bytes). */
static void test_many_tasks(void **state)
{
	(void)state;
	struct footprint u = { .tasks = 33, .total = 0 };
	assert_true(watch_next_ms(&u, 1ull << 40, 64) == WATCH_INTERVAL_MS);
	u.tasks = 32;
	assert_true(watch_next_ms(&u, 1ull << 40, 64) > WATCH_INTERVAL_MS);
}

/* Between the bounds: filling at the fastest rate until the next look ends
 * within the tolerance of the limit, and more use never means a later look. */
static void test_the_bound_holds(void **state)
{
	(void)state;
	uint64_t limits[] = { 256 * MB, 2048 * MB, 8192 * MB, 65536 * MB };
	for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
		uint64_t limit = limits[i];
		uint64_t tol = limit / 10 > 64 * MB ? limit / 10 : 64 * MB;
		double prev = WATCH_MAX_INTERVAL_MS + 1;
		for (uint64_t used = 0; used <= limit + tol; used += limit / 64) {
			struct footprint u = { .tasks = 1, .total = used };
			double ms = watch_next_ms(&u, limit, 64);
			assert_true(ms >= WATCH_NEAR_MS && ms <= WATCH_MAX_INTERVAL_MS);
			assert_true(ms <= prev);
			prev = ms;
			if (ms > WATCH_NEAR_MS)
				assert_true((double)used + ms * fill_per_ms() <= (double)(limit + tol) + 1.0);
		}
	}
}

/* The idle looks of the freeze (watch_idle), against real processes: one
 * blocked in a read is idle at the second look; one that computes never
 * is, and the look says whether it waits for the CPU of the caller (the
 * freeze then gives it that CPU instead of waiting). */
static pid_t child(int cpu, bool spin, int *wfd)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (cpu >= 0) {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			sched_setaffinity(0, sizeof set, &set);
		}
		char c;
		if (spin)
			for (volatile unsigned long i = 0;; i++)
				;
		_exit(read(p[0], &c, 1) == 1 ? 0 : 1);
	}
	close(p[0]);
	*wfd = p[1];
	return pid;
}

static void end_child(pid_t pid, int wfd)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(wfd);
}

static void pin_self(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	assert_int_equal(sched_setaffinity(0, sizeof set, &set), 0);
}

static void test_idle_blocked(void **state)
{
	(void)state;
	int wfd;
	pid_t pid = child(-1, false, &wfd);
	struct watch_look look = { 0 };
	int r = 0;
	/* Asleep in its read once it got there: two looks in a row agree. */
	for (int i = 0; i < 2000 && r != 1; i++) {
		r = watch_idle(pid, &look);
		if (r != 1)
			usleep(1000);
	}
	assert_int_equal(r, 1);
	assert_false(look.here);
	end_child(pid, wfd);
}

static void test_idle_preempted_here(void **state)
{
	(void)state;
	/* The CPUs this test may use (a container may allow only some). */
	cpu_set_t allowed;
	assert_int_equal(sched_getaffinity(0, sizeof allowed, &allowed), 0);
	int first = -1, second = -1;
	for (int c = 0; c < CPU_SETSIZE && second < 0; c++)
		if (CPU_ISSET(c, &allowed)) {
			if (first < 0)
				first = c;
			else
				second = c;
		}
	assert_true(first >= 0);
	int wfd;
	/* Both on one CPU: while this thread runs, the child waits for it. */
	pin_self(first);
	pid_t pid = child(first, true, &wfd);
	struct watch_look look = { 0 };
	bool here = false;
	for (int i = 0; i < 200 && !here; i++) {
		assert_int_equal(watch_idle(pid, &look), 0);
		assert_false(look.valid); /* busy: no pair starts */
		here = look.here;
		if (!here)
			sched_yield(); /* let it start its loop */
	}
	assert_true(here);
	end_child(pid, wfd);
	if (second >= 0) {
		/* Computing on another CPU: busy, but nothing to give it. */
		pid = child(second, true, &wfd);
		usleep(20000);
		for (int i = 0; i < 20; i++) {
			assert_int_equal(watch_idle(pid, &look), 0);
			assert_false(look.valid);
			assert_false(look.here);
		}
		end_child(pid, wfd);
	}
	sched_setaffinity(0, sizeof allowed, &allowed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_far_below),
		cmocka_unit_test(test_at_the_limit),
		cmocka_unit_test(test_many_tasks),
		cmocka_unit_test(test_the_bound_holds),
		cmocka_unit_test(test_idle_blocked),
		cmocka_unit_test(test_idle_preempted_here),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_far_below),
		cmocka_unit_test(test_at_the_limit),
		cmocka_unit_test(test_many_tasks),
		cmocka_unit_test(test_the_bound_holds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

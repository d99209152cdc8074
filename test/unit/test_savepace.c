/* Unit tests of supervisor/savepace.c: how long a saved session rests
 * before its state is saved, and the timer that waits for it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../../supervisor/savepace.h"

static void test_delay_priced_by_the_last_save(void **state)
{
	(void)state;
	struct save_pace p = { 0 };
	/* No save yet: the shortest rest. */
	assert_true(save_pace_delay(&p) == SAVE_IDLE_MIN_MS);
	/* A cheap save (a small state): still the shortest rest. */
	save_pace_saved(&p, 40);
	assert_true(save_pace_delay(&p) == SAVE_IDLE_MIN_MS);
	/* A save of 1.6 s (a gigabyte): five times that, 8 s. */
	save_pace_saved(&p, 1600);
	assert_true(save_pace_delay(&p) == 8000.0);
	/* Never past the bound a SIGKILL's loss is promised within. */
	save_pace_saved(&p, 60000);
	assert_true(save_pace_delay(&p) == SAVE_IDLE_MAX_MS);
	/* A clock that went backwards, or nonsense: the shortest rest. */
	save_pace_saved(&p, -5);
	assert_true(save_pace_delay(&p) == SAVE_IDLE_MIN_MS);
	p.last_save_ms = __builtin_nan("");
	assert_true(save_pace_delay(&p) == SAVE_IDLE_MIN_MS);
	/* A save cut short after 1.5 s cost at least that: 7.5 s; a shorter
	 * cut does not lower it. */
	save_pace_saved(&p, 100);
	save_pace_cut(&p, 1500);
	assert_true(save_pace_delay(&p) == 7500.0);
	save_pace_cut(&p, 200);
	assert_true(save_pace_delay(&p) == 7500.0);
}

static void on_fire(void *arg)
{
	(void)arg;
}

/* Arming again moves the save back (one timer, never two); a cancel leaves
 * none, and is safe to repeat. */
static void test_arm_moves_back(void **state)
{
	(void)state;
	struct loop *l = loop_new();
	assert_non_null(l);
	struct save_pace p = { 0 };
	save_pace_arm(&p, l, on_fire, &p);
	uint64_t first = p.timer;
	assert_true(first != 0);
	save_pace_arm(&p, l, on_fire, &p);
	assert_true(p.timer != 0 && p.timer != first);
	save_pace_fired(&p);
	assert_true(p.timer == 0);
	save_pace_arm(&p, l, on_fire, &p);
	save_pace_cancel(&p, l);
	assert_true(p.timer == 0);
	save_pace_cancel(&p, l);
	loop_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delay_priced_by_the_last_save),
		cmocka_unit_test(test_arm_moves_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

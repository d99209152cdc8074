/* Unit tests of supervisor/callstatus.c: the one table of call statuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <string.h>

#include "../../supervisor/callstatus.h"

/* wait(2) statuses built by hand: a death by signal, a plain exit. */
#define BY_SIGNAL(sig) (sig)
#define BY_EXIT(code) ((code) << 8)

static void test_exit_codes(void **state)
{
	(void)state;
	assert_int_equal(call_status_exit_code(CALL_OK, 0, false), 0);
	assert_int_equal(call_status_exit_code(CALL_ERROR, 0, false), 1);
	assert_int_equal(call_status_exit_code(CALL_TIMEOUT, BY_SIGNAL(SIGKILL), true), 124);
	assert_int_equal(call_status_exit_code(CALL_CANCELLED, BY_SIGNAL(SIGKILL), true), 130);
	assert_int_equal(call_status_exit_code(CALL_MEMORY, BY_SIGNAL(SIGKILL), true), 137);
	/* The workspace limit reads like the kernel's file size limit. */
	assert_int_equal(call_status_exit_code(CALL_LIMITS, BY_SIGNAL(SIGKILL), true), 128 + SIGXFSZ);
	/* A crash reports how the process ended. */
	assert_int_equal(call_status_exit_code(CALL_CRASHED, BY_SIGNAL(SIGSEGV), true), 128 + SIGSEGV);
	assert_int_equal(call_status_exit_code(CALL_CRASHED, BY_SIGNAL(SIGSYS), true), 159);
	assert_int_equal(call_status_exit_code(CALL_CRASHED, BY_EXIT(3), true), 3);
	assert_int_equal(call_status_exit_code(CALL_CRASHED, BY_EXIT(0), true), 1);
	assert_int_equal(call_status_exit_code(CALL_CRASHED, 0, false), 128 + SIGKILL);
}

static void test_rollback_rule(void **state)
{
	(void)state;
	assert_false(call_status_table[CALL_OK].rolls_back);
	assert_false(call_status_table[CALL_ERROR].rolls_back);
	for (int s = CALL_TIMEOUT; s <= CALL_LIMITS; s++)
		assert_true(call_status_table[s].rolls_back);
}

/* The names a reply shows: one per status and per state, none empty. */
static void test_names(void **state)
{
	(void)state;
	for (int s = CALL_OK; s < CALL_STATUS_COUNT; s++)
		assert_true(call_status_name((enum call_status)s)[0] != '\0');
	assert_string_equal(call_status_name(CALL_OK), "ok");
	assert_string_equal(call_state_name(STATE_ROLLED_BACK), "rolled_back");
}


/* Python's faulthandler report at the end of a crashed call's stderr: its
 * range, the frames without the bootstrap's, the line that was running. */
static void test_fault_report(void **state)
{
	(void)state;
	const char *text =
		"user line\n"
		"Fatal Python error: Segmentation fault\n\n"
		"Current thread 0x00007ff3a7e1e000 (most recent call first):\n"
		"  File \"/usr/lib/python3/dist-packages/numpy/core/fromnumeric.py\", line 88 in _wrapreduction\n"
		"  File \"<cell 3>\", line 4 in f\n"
		"  File \"<cell 3>\", line 5 in <module>\n"
		"  File \"<psm-bootstrap>\", line 587 in _run_cell\n\n"
		"Extension modules: numpy.core._multiarray_umath (total: 1)\n"
		"after\n";
	char frames[512], where[256];
	size_t a, z;
	assert_true(call_fault_report(text, &a, &z, frames, sizeof frames, where, sizeof where));
	assert_int_equal(a, strlen("user line\n"));
	assert_string_equal(text + z, "after\n");
	assert_string_equal(frames,
			    "  File \"/usr/lib/python3/dist-packages/numpy/core/fromnumeric.py\", line 88 in _wrapreduction\n"
			    "  File \"<cell 3>\", line 4 in f\n"
			    "  File \"<cell 3>\", line 5 in <module>\n");
	assert_string_equal(where, "_wrapreduction (core/fromnumeric.py, line 88), called from <cell 3> line 4 in f");
	/* The cell's own line, when it is the innermost. */
	assert_true(call_fault_report("Fatal Python error: Aborted\n\nStack (most recent call first):\n  File \"<cell 1>\", line 2 in <module>\n",
				      &a, &z, frames, sizeof frames, where, sizeof where));
	assert_string_equal(where, "<cell 1> line 2 in <module>");
	assert_false(call_fault_report("no report here\n", &a, &z, frames, sizeof frames, where, sizeof where));
	assert_string_equal(call_signal_name(SIGSEGV), "SIGSEGV");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exit_codes),
		cmocka_unit_test(test_rollback_rule),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_fault_report),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests of supervisor/verdict.c: the one rule that says whether a
 * claim replaces a call's verdict, as a table written out by hand from
 * what each place of the supervisor did before the rule was one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../../supervisor/supervisor.h"
#include "../../supervisor/verdict.h"

#define BY_SIGNAL(sig) (sig)
#define BY_EXIT(code) ((code) << 8)

enum { P = CALL_PENDING, OK = CALL_OK, ER = CALL_ERROR, TO = CALL_TIMEOUT, CA = CALL_CANCELLED,
       CR = CALL_CRASHED, ME = CALL_MEMORY, LI = CALL_LIMITS };

/* The status after claim k (row) over the status in the column: every
 * precedence pair.  The columns: pending, ok, error, timeout, cancelled,
 * crashed, memory, limits. */
static const int after[V_CLAIM_COUNT][CALL_STATUS_COUNT] = {
	/*                          P   OK  ER  TO  CA  CR  ME  LI */
	/* A result comes only to a call not decided: one that was
	 * cancelled or stopped meanwhile keeps its verdict. */
	[V_SAID_OK] = { OK, OK, ER, TO, CA, CR, ME, LI },
	[V_SAID_ERROR] = { ER, OK, ER, TO, CA, CR, ME, LI },
	[V_SAID_MEMORY] = { ME, OK, ER, TO, CA, CR, ME, LI },
	/* The server's stops also replace the call's own result (ok,
	 * error) until the session is frozen: a cell that writes its own
	 * "ok" and runs on is still timed and watched. */
	[V_TIMEOUT] = { TO, TO, TO, TO, CA, CR, ME, LI },
	[V_WORKSPACE] = { LI, LI, LI, TO, CA, CR, ME, LI },
	[V_MEMORY] = { ME, ME, ME, TO, CA, CR, ME, LI },
	[V_PROCESSES] = { CR, CR, CR, TO, CA, CR, ME, LI },
	/* A cancellation decides only a call not decided yet. */
	[V_CANCEL] = { CA, OK, ER, TO, CA, CR, ME, LI },
	/* A death: a crash, unless something decided the call first. */
	[V_DIED_ROLLED_BACK] = { CR, OK, ER, TO, CA, CR, ME, LI },
	[V_DIED_NEW] = { CR, OK, ER, TO, CA, CR, ME, LI },
	/* Dead (or broken) before it was frozen: its own result falls. */
	[V_DIED_AWAKE] = { P, P, P, TO, CA, CR, ME, LI },
	[V_BROKE] = { P, P, P, TO, CA, CR, ME, LI },
	/* Ends the call, whatever it had. */
	[V_FAILED] = { ER, ER, ER, ER, ER, ER, ER, ER },
	[V_LOST] = { CR, CR, CR, CR, CR, CR, CR, CR },
	[V_STATE] = { P, OK, ER, TO, CA, CR, ME, LI },
};

static struct verdict at(int status)
{
	/* A call with its own result has a state (kept); one decided by
	 * the server or not decided has none yet. */
	return (struct verdict){ .status = (enum call_status)status,
				 .exit_code = call_status_exit_code((enum call_status)status, 0, false),
				 .state = verdict_from_result((enum call_status)status) ? STATE_KEPT : STATE_PENDING };
}

static void test_precedence_table(void **state)
{
	(void)state;
	for (int k = 0; k < V_CLAIM_COUNT; k++)
		for (int st = 0; st < CALL_STATUS_COUNT; st++) {
			struct verdict_change ch = verdict_decide(at(st), (enum verdict_claim)k, NULL);
			if ((int)ch.v.status != after[k][st])
				fail_msg("claim %s over %s: %s, expected %s", verdict_claim_name((enum verdict_claim)k),
					 call_status_name((enum call_status)st), call_status_name(ch.v.status),
					 call_status_name((enum call_status)after[k][st]));
			/* "replaces" says exactly that the claim changed the status
			 * (a claim of the status the call has replaces it too:
			 * said memory over pending, a second failure). */
			bool changed = (int)ch.v.status != st;
			if (changed && !ch.replaces)
				fail_msg("claim %s over %s changed it without replacing", verdict_claim_name((enum verdict_claim)k),
					 call_status_name((enum call_status)st));
		}
}

/* What a claim that replaces does to the exit code and the state. */
static void test_exit_and_state(void **state)
{
	(void)state;
	struct verdict_change ch = verdict_decide(at(P), V_SAID_OK, NULL);
	assert_true(ch.replaces);
	assert_int_equal(ch.v.exit_code, 0);
	assert_int_equal(ch.v.state, STATE_KEPT);
	ch = verdict_decide(at(P), V_SAID_ERROR, &(struct verdict_facts){ .forked = true });
	assert_int_equal(ch.v.exit_code, 1);
	assert_int_equal(ch.v.state, STATE_FORKED); /* the first call of a copy */
	/* MemoryError rolls back: no state yet, its process is ended next. */
	ch = verdict_decide(at(P), V_SAID_MEMORY, NULL);
	assert_int_equal(ch.v.exit_code, 137);
	assert_int_equal(ch.v.state, STATE_PENDING);

	/* A stop over the call's own result: the result and its state fall. */
	ch = verdict_decide(at(OK), V_TIMEOUT, NULL);
	assert_true(ch.replaces);
	assert_true(ch.drops_result);
	assert_false(ch.over_limit);
	assert_int_equal(ch.v.exit_code, 124);
	assert_int_equal(ch.v.state, STATE_PENDING);
	ch = verdict_decide(at(ER), V_WORKSPACE, NULL);
	assert_int_equal(ch.v.exit_code, 128 + SIGXFSZ);
	assert_false(ch.over_limit); /* the workspace is not the watchdog's */
	ch = verdict_decide(at(OK), V_MEMORY, NULL);
	assert_true(ch.over_limit);
	assert_int_equal(ch.v.exit_code, 137);
	ch = verdict_decide(at(P), V_PROCESSES, NULL);
	assert_true(ch.over_limit);
	assert_int_equal(ch.v.exit_code, 128 + SIGKILL);
	/* ... and one that does not replace drops nothing. */
	ch = verdict_decide(at(CA), V_MEMORY, NULL);
	assert_false(ch.replaces || ch.drops_result || ch.over_limit);
	assert_int_equal(ch.v.exit_code, 130);

	ch = verdict_decide(at(P), V_CANCEL, NULL);
	assert_int_equal(ch.v.exit_code, 130);
	assert_int_equal(ch.v.state, STATE_PENDING);

	/* A protocol break drops a result that came after a stop too (the
	 * status stays); a death before the freeze drops only its own. */
	ch = verdict_decide(at(TO), V_BROKE, NULL);
	assert_true(ch.drops_result);
	assert_false(ch.replaces);
	ch = verdict_decide(at(TO), V_DIED_AWAKE, NULL);
	assert_false(ch.drops_result);
	ch = verdict_decide(at(OK), V_DIED_AWAKE, NULL);
	assert_true(ch.drops_result);
	assert_int_equal(ch.v.state, STATE_PENDING);
	assert_int_equal(ch.v.exit_code, 0); /* until the death decides it */

	ch = verdict_decide(at(TO), V_FAILED, NULL);
	assert_int_equal(ch.v.exit_code, 1);
	assert_int_equal(ch.v.state, STATE_NEW);
	ch = verdict_decide(at(OK), V_LOST, NULL);
	assert_int_equal(ch.v.state, STATE_NEW);
	ch = verdict_decide(at(TO), V_STATE, &(struct verdict_facts){ .state = STATE_RESTORED });
	assert_false(ch.replaces);
	assert_int_equal(ch.v.status, CALL_TIMEOUT);
	assert_int_equal(ch.v.state, STATE_RESTORED);
}

/* The death of the process: the exit code of whatever status stands, from
 * how it ended; the state from what is left. */
static void test_death(void **state)
{
	(void)state;
	struct verdict_facts segv = { .wstatus = BY_SIGNAL(SIGSEGV), .wstatus_known = true };
	struct verdict_change ch = verdict_decide(at(P), V_DIED_ROLLED_BACK, &segv);
	assert_true(ch.replaces);
	assert_int_equal(ch.v.status, CALL_CRASHED);
	assert_int_equal(ch.v.exit_code, 128 + SIGSEGV);
	assert_int_equal(ch.v.state, STATE_ROLLED_BACK);
	struct verdict_facts exit3 = { .wstatus = BY_EXIT(3), .wstatus_known = true };
	ch = verdict_decide(at(P), V_DIED_NEW, &exit3);
	assert_int_equal(ch.v.exit_code, 3);
	assert_int_equal(ch.v.state, STATE_NEW);
	/* Unknown: as if by SIGKILL. */
	ch = verdict_decide(at(P), V_DIED_NEW, NULL);
	assert_int_equal(ch.v.exit_code, 128 + SIGKILL);
	/* A timeout stands over the SIGKILL that carries it out. */
	struct verdict_facts kill = { .wstatus = BY_SIGNAL(SIGKILL), .wstatus_known = true };
	ch = verdict_decide(at(TO), V_DIED_ROLLED_BACK, &kill);
	assert_false(ch.replaces);
	assert_int_equal(ch.v.status, CALL_TIMEOUT);
	assert_int_equal(ch.v.exit_code, 124);
	assert_int_equal(ch.v.state, STATE_ROLLED_BACK);
	/* Over max_processes: a crash whose code is how it really ended. */
	ch = verdict_decide(at(CR), V_DIED_ROLLED_BACK, &exit3);
	assert_int_equal(ch.v.exit_code, 3);
}

/* Claims in the orders they meet in: each sequence ends as the rule says,
 * whichever came first. */
static void test_sequences(void **state)
{
	(void)state;
	struct verdict_facts kill = { .wstatus = BY_SIGNAL(SIGKILL), .wstatus_known = true };
	struct {
		enum verdict_claim a, b, c;
		enum call_status status;
		int exit_code;
		enum call_state st;
	} seq[] = {
		/* "ok", then the clock runs out before the freeze, then the kill. */
		{ V_SAID_OK, V_TIMEOUT, V_DIED_ROLLED_BACK, CALL_TIMEOUT, 124, STATE_ROLLED_BACK },
		/* Timed out first: the result that comes after does not stand. */
		{ V_TIMEOUT, V_SAID_OK, V_DIED_ROLLED_BACK, CALL_TIMEOUT, 124, STATE_ROLLED_BACK },
		/* Cancelled, then a limit: the cancellation stands. */
		{ V_CANCEL, V_MEMORY, V_DIED_ROLLED_BACK, CALL_CANCELLED, 130, STATE_ROLLED_BACK },
		/* A limit, then the cancellation: the limit stands. */
		{ V_WORKSPACE, V_CANCEL, V_DIED_NEW, CALL_LIMITS, 153, STATE_NEW },
		/* "ok", then a cancel: the result stands until the process
		 * dies awake, then the death is a crash (the cancel does not
		 * reach a call with its own result). */
		{ V_SAID_OK, V_CANCEL, V_DIED_AWAKE, CALL_PENDING, 0, STATE_PENDING },
		/* "ok", then a protocol break, then its death: a crash. */
		{ V_SAID_OK, V_BROKE, V_DIED_ROLLED_BACK, CALL_CRASHED, 137, STATE_ROLLED_BACK },
		/* MemoryError said, then the watchdog's processes: said first. */
		{ V_SAID_MEMORY, V_PROCESSES, V_DIED_ROLLED_BACK, CALL_MEMORY, 137, STATE_ROLLED_BACK },
		/* The watchdog's memory, then the result: the limit stands. */
		{ V_MEMORY, V_SAID_ERROR, V_DIED_ROLLED_BACK, CALL_MEMORY, 137, STATE_ROLLED_BACK },
	};
	for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
		struct verdict v = { 0 };
		enum verdict_claim ks[] = { seq[i].a, seq[i].b, seq[i].c };
		for (int j = 0; j < 3; j++)
			v = verdict_decide(v, ks[j], &kill).v;
		if (v.status != seq[i].status || v.exit_code != seq[i].exit_code || v.state != seq[i].st)
			fail_msg("%s, %s, %s: %s exit %d %s; expected %s exit %d %s", verdict_claim_name(seq[i].a),
				 verdict_claim_name(seq[i].b), verdict_claim_name(seq[i].c), call_status_name(v.status),
				 v.exit_code, call_state_name(v.state), call_status_name(seq[i].status), seq[i].exit_code,
				 call_state_name(seq[i].st));
	}
}

/* run_verdict writes what verdict_decide says, drops the result that no
 * longer stands, and marks the watchdog's verdict. */
static void test_run_verdict(void **state)
{
	(void)state;
	struct run r = { 0 };
	run_take_result(&r, calloc(1, sizeof(struct cell_result)));
	assert_true(run_verdict(&r, V_SAID_OK, NULL));
	assert_int_equal(r.state, STATE_KEPT);
	assert_non_null(r.result);
	assert_false(run_verdict(&r, V_CANCEL, NULL));
	assert_int_equal(r.status, CALL_OK);
	assert_true(run_verdict(&r, V_MEMORY, NULL));
	assert_null(r.result);
	assert_true(r.over_limit);
	assert_int_equal(r.status, CALL_MEMORY);
	assert_int_equal(r.exit_code, 137);
	assert_int_equal(r.state, STATE_PENDING);
	/* A result after the verdict is kept for the reply, not its status. */
	run_take_result(&r, calloc(1, sizeof(struct cell_result)));
	assert_false(run_verdict(&r, V_SAID_OK, NULL));
	assert_int_equal(r.status, CALL_MEMORY);
	assert_false(run_verdict(&r, V_BROKE, NULL));
	assert_null(r.result);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_precedence_table),
		cmocka_unit_test(test_exit_and_state),
		cmocka_unit_test(test_death),
		cmocka_unit_test(test_sequences),
		cmocka_unit_test(test_run_verdict),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

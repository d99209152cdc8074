/* A call's verdict: its status, exit code and state, decided in one place.
 * Many things may claim to end a call (its own result, the timeout, a
 * limit of the watchdog, a cancellation, the death of its process...),
 * often several for the same call, in any order.  verdict_decide is the
 * one rule that says whether a claim replaces the verdict the call has and
 * what the call's verdict becomes: a pure function of facts, tested by
 * its table (test/unit/test_verdict.c).  run_verdict applies it to a run:
 * the only code that writes a run's status, exit code or state.
 *
 * The rule, by how far each claim reaches:
 *  - the session's own result, a cancellation, the death of the process:
 *    only a call not decided yet (pending);
 *  - the server's stops (timeout, workspace, memory, processes): also a
 *    call that has its own result ("ok", "error") but is not frozen yet:
 *    that result no longer stands (it is dropped, the state is pending);
 *  - a call that cannot run, a cell run again whose copy is gone: any
 *    verdict (the call ends here, without a process). */
#ifndef SUPERVISOR_VERDICT_H
#define SUPERVISOR_VERDICT_H

#include <stdbool.h>

#include "callstatus.h"

struct run;

enum verdict_claim {
	V_SAID_OK,        /* the session's result: the cell ran */
	V_SAID_ERROR,     /* ... the cell raised */
	V_SAID_MEMORY,    /* ... MemoryError: rolls back (its process is ended) */
	V_TIMEOUT,        /* the call's clock ran out */
	V_WORKSPACE,      /* the workspace outgrew max_workspace_mb */
	V_MEMORY,         /* the watchdog: the processes' memory over memory_mb */
	V_PROCESSES,      /* the watchdog: over max_processes (a SIGKILL, a crash) */
	V_CANCEL,         /* the agent cancelled the call */
	V_DIED_ROLLED_BACK, /* the process died; its checkpoint takes its place */
	V_DIED_NEW,       /* the process died with its state: a new one comes */
	V_DIED_AWAKE,     /* the process died before it was frozen: its own result falls */
	V_BROKE,          /* it broke its protocol: its result (if any) falls */
	V_FAILED,         /* the call could not run: an error, in a new session */
	V_LOST,           /* a cell run again: its process died with every copy */
	V_STATE,          /* only the state, decided from the server's own knowledge (a restore) */
	V_CLAIM_COUNT
};

/* What a call's verdict is (0: pending, pending). */
struct verdict {
	enum call_status status;
	int exit_code;
	enum call_state state;
};

/* What comes with a claim. */
struct verdict_facts {
	bool forked;         /* the first call of a copy: a kept state is "forked" */
	int wstatus;         /* V_DIED_*: how the process ended (wait(2)) */
	bool wstatus_known;
	enum call_state state; /* V_STATE: the state */
};

struct verdict_change {
	bool replaces;       /* the claim's status replaced the call's */
	bool drops_result;   /* the session's own result no longer stands */
	bool over_limit;     /* the watchdog decided it (denied_by limits) */
	struct verdict v;    /* the call's verdict after the claim */
};

/* Whether claim k replaces the verdict `now`, and what the verdict
 * becomes (the same when nothing changes).  Pure. */
struct verdict_change verdict_decide(struct verdict now, enum verdict_claim k, const struct verdict_facts *f);

/* A status that came from the call's own result ("ok", "error"): a later
 * stop of the server replaces it until the session is frozen. */
bool verdict_from_result(enum call_status s);

/* The session's result, decoded, is the run's (res owned; one it held
 * before is freed). */
struct cell_result;
void run_take_result(struct run *c, struct cell_result *res);

const char *verdict_claim_name(enum verdict_claim k);

/* Applies claim k to run c (verdict_decide): its status, exit code and
 * state, the result dropped when it no longer stands, over_limit.  f may
 * be NULL (no facts: forked false, death not known).  True when the
 * claim's status replaced the call's. */
bool run_verdict(struct run *c, enum verdict_claim k, const struct verdict_facts *f);

#endif

/* A call's verdict (verdict.h): the one "may this claim replace it" rule,
 * and the one writer of a run's status, exit code and state. */
#include "verdict.h"

#include <stddef.h>

#include "supervisor.h"

/* How far a claim reaches: which verdicts it may replace. */
enum reach {
	REACH_NONE,    /* none: it leaves the status alone */
	REACH_PENDING, /* a call not decided yet */
	REACH_OWN,     /* ... or one whose status is its own result's, not frozen yet */
	REACH_ANY,     /* any: the call ends here */
	REACH_OWN_ONLY, /* only its own result's, which falls (back to pending) */
};

static const struct {
	const char *name;
	enum call_status status; /* the status it claims */
	enum reach reach;
	bool drops;              /* when it replaces: the session's result falls with it */
} claims[V_CLAIM_COUNT] = {
	[V_SAID_OK] = { "said ok", CALL_OK, REACH_PENDING, false },
	[V_SAID_ERROR] = { "said error", CALL_ERROR, REACH_PENDING, false },
	[V_SAID_MEMORY] = { "said memory", CALL_MEMORY, REACH_PENDING, false },
	[V_TIMEOUT] = { "timeout", CALL_TIMEOUT, REACH_OWN, true },
	[V_WORKSPACE] = { "workspace", CALL_LIMITS, REACH_OWN, true },
	[V_MEMORY] = { "memory", CALL_MEMORY, REACH_OWN, true },
	/* Ended by SIGKILL, as its death will say: decided now, so nothing
	 * the process sends meanwhile stands. */
	[V_PROCESSES] = { "processes", CALL_CRASHED, REACH_OWN, true },
	[V_CANCEL] = { "cancel", CALL_CANCELLED, REACH_PENDING, false },
	[V_DIED_ROLLED_BACK] = { "died, rolled back", CALL_CRASHED, REACH_PENDING, false },
	[V_DIED_NEW] = { "died, new", CALL_CRASHED, REACH_PENDING, false },
	[V_DIED_AWAKE] = { "died awake", CALL_PENDING, REACH_OWN_ONLY, true },
	[V_BROKE] = { "broke", CALL_PENDING, REACH_OWN_ONLY, true },
	[V_FAILED] = { "failed", CALL_ERROR, REACH_ANY, false },
	[V_LOST] = { "lost", CALL_CRASHED, REACH_ANY, false },
	[V_STATE] = { "state", CALL_PENDING, REACH_NONE, false },
};

bool verdict_from_result(enum call_status s)
{
	return s == CALL_OK || s == CALL_ERROR;
}

const char *verdict_claim_name(enum verdict_claim k)
{
	return (unsigned)k < V_CLAIM_COUNT ? claims[k].name : "?";
}

static bool reaches(enum reach r, enum call_status now)
{
	switch (r) {
	case REACH_PENDING:
		return now == CALL_PENDING;
	case REACH_OWN:
		return now == CALL_PENDING || verdict_from_result(now);
	case REACH_OWN_ONLY:
		return verdict_from_result(now);
	case REACH_ANY:
		return true;
	case REACH_NONE:
		break;
	}
	return false;
}

struct verdict_change verdict_decide(struct verdict now, enum verdict_claim k, const struct verdict_facts *f)
{
	static const struct verdict_facts none = { 0 };
	if (!f)
		f = &none;
	struct verdict_change ch = { .v = now };
	if ((unsigned)k >= V_CLAIM_COUNT)
		return ch;
	bool own = verdict_from_result(now.status);
	ch.replaces = reaches(claims[k].reach, now.status);
	/* A protocol break drops whatever result came, standing or not. */
	ch.drops_result = k == V_BROKE || (ch.replaces && claims[k].drops);
	if (ch.replaces) {
		ch.v.status = claims[k].status;
		/* A result that falls takes its state with it. */
		if (claims[k].drops && own)
			ch.v.state = STATE_PENDING;
		/* A status that falls back to pending keeps the exit code
		 * until the death that follows decides it. */
		if (ch.v.status != CALL_PENDING && k != V_LOST)
			ch.v.exit_code = call_status_exit_code(ch.v.status, 0, false);
		ch.over_limit = k == V_MEMORY || k == V_PROCESSES;
	}
	switch (k) {
	case V_SAID_OK:
	case V_SAID_ERROR:
		if (ch.replaces)
			ch.v.state = f->forked ? STATE_FORKED : STATE_KEPT;
		break;
	case V_DIED_ROLLED_BACK:
	case V_DIED_NEW:
		/* The exit code of whatever status stands, from the death;
		 * the state from what is left of the process. */
		ch.v.exit_code = call_status_exit_code(ch.v.status, f->wstatus, f->wstatus_known);
		ch.v.state = k == V_DIED_NEW ? STATE_NEW : STATE_ROLLED_BACK;
		break;
	case V_FAILED:
	case V_LOST:
		ch.v.state = STATE_NEW;
		break;
	case V_STATE:
		ch.v.state = f->state;
		break;
	default:
		break;
	}
	return ch;
}

bool run_verdict(struct run *c, enum verdict_claim k, const struct verdict_facts *f)
{
	struct verdict_change ch =
		verdict_decide((struct verdict){ .status = c->status, .exit_code = c->exit_code, .state = c->state }, k, f);
	if (ch.drops_result) {
		result_destroy(c->result);
		c->result = NULL;
	}
	if (ch.over_limit)
		c->over_limit = true;
	c->status = ch.v.status;
	c->exit_code = ch.v.exit_code;
	c->state = ch.v.state;
	return ch.replaces;
}

void run_take_result(struct run *c, struct cell_result *res)
{
	result_destroy(c->result);
	c->result = res;
}

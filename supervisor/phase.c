/* The session's phase: "what may this session send now?"  One row per
 * phase (phases[]): its name for the log, the messages it accepts with
 * their sizes; set_expect is the one way into a phase.  Also the other
 * lifecycle marks entered in one place (set_due, hello_awaited,
 * session_broke).  Low in the supervisor: every room enters phases, and
 * this file calls none of them.  The messages themselves are read and
 * handed on by state.c. */
#include "private.h"

/* When a row's message is accepted, besides the phase. */
/* LOADING: the call carries a saved state, and the session has not said
 * yet that it is loaded (W_RESTORED, once). */
enum accept_when { ALWAYS, HELLO_DUE, NOT_STARTED, LOADING };
/* A result's size: bounded by the policy's output limit (result_max). */
#define RESULT_MAX 0

/* The session's states, one row each (enum phase): its name for the log,
 * what the session may send in it (each message with its largest body and
 * how many descriptors come with it), and its deadline: the timer that
 * ends the state when the session says nothing (phase_deadline_missing
 * checks it is armed; the tests and the zygote's fuzzer call it after
 * every event).  set_expect arms no timer.  Each timer has one file that arms
 * and cancels it, whoever asks: the call's deadline and progress call.c,
 * the checkpoint owed checkpoint.c (arm_due_timer), the copy's pidfd
 * fork.c, the looks at a live process process.c (look_arm: the memory
 * watchdog's and the freeze's), the saver's watchdog saved.c, the
 * zygote's restart and sweep zstart.c.  These timers outlive a phase (a
 * call's deadline spans running to freezing), which is why they are not
 * the phase's to arm.  Anything else a session sends ends it as a crash
 * (violation).  Sizes are tight per type: a result is bounded by
 * the policy's output limit (the bootstrap caps the repr it sends), an
 * image by the 256 KiB a reply may carry.
 * Attack: one 16 MB result frame parsed into a JSON tree grew the server by
 * hundreds of MB for good. */
static const struct phase_row {
	const char *name;
	struct {
		uint32_t type, max_len;
		int max_fds;
		enum accept_when when;
	} accepts[4];
	enum deadline {
		D_NONE, /* it sends nothing: no wait */
		D_CALL, /* the call's deadline (call.c: timeout_fired; THUMBS_MS for a thumbnail) */
		D_DUE,  /* the checkpoint owed, RESUME_MS (checkpoint.c: due_expired) */
		D_FORK, /* the copy's pidfd, RESUME_MS (fork.c: fork_expired) */
		D_ANY,  /* one of them: whatever the freeze ends (a call, a checkpoint, a copy) */
	} deadline;
} phases[] = {
	[P_NONE] = { "none", { { 0 } }, D_NONE },
	[P_IDLE] = { "idle", { { 0 } }, D_NONE },
	[P_RUNNING] = { "running",
			/* a new process's hello: its seccomp gate's listener */
			{ { W_HELLO, 256, 1, HELLO_DUE }, { W_STARTED, 0, 0, NOT_STARTED }, { W_RESTORED, 0, 0, LOADING },
			  { W_RESULT, RESULT_MAX, 0, ALWAYS } },
			D_CALL },
	/* its pidfd, and the saver's pipe (saved sessions) */
	[P_CHECKPOINTING] = { "checkpointing", { { W_CHECKPOINT, 256, 2, ALWAYS } }, D_DUE },
	[P_SCANNING] = { "scanning", { { 0 } }, D_CALL },
	[P_THUMB] = { "thumbnail", { { W_THUMB_DATA, 256 * 1024, 0, ALWAYS } }, D_CALL },
	[P_FREEZING] = { "freezing", { { 0 } }, D_ANY },
	[P_RESUMING] = { "resuming", { { W_HELLO, 256, 0, ALWAYS } }, D_DUE },
	[P_RESUMED] = { "resumed", { { W_CHECKPOINT, 256, 2, ALWAYS } }, D_DUE },
	[P_FORKING] = { "forking", { { W_FORKED, 256, 1, ALWAYS } }, D_FORK },
};

/* True when the session waits on its live process in a phase whose
 * deadline is not armed: a wait with no end, a session (and every call
 * queued for it) held for good.  A process whose end is asked or known
 * waits on the zygote's report instead (under zlink's timer). */
bool phase_deadline_missing(const struct session *s)
{
	if (s->life != L_BORN && s->life != L_BORN_DOOMED && s->life != L_LIVE && s->life != L_LIVE_DOOMED)
		return false;
	switch (phases[s->phase].deadline) {
	case D_NONE:
		return false;
	case D_CALL:
		return !s->timeout_timer;
	case D_DUE:
		return !s->due_timer;
	case D_FORK:
		return !s->fork_timer;
	case D_ANY:
		return !s->timeout_timer && !s->due_timer && !s->fork_timer;
	}
	return false;
}

const char *phase_name(enum phase ph)
{
	return (size_t)ph < N_ELEMENTS(phases) && phases[ph].name ? phases[ph].name : "?";
}

static uint32_t result_max(const struct sup *sup)
{
	return result_frame_max(sup->cfg.policy->limits.max_output_chars);
}

/* Enters phase ph: what the session may send from now on is its row. */
void set_expect(struct sup *sup, struct session *s, enum phase ph)
{
	if (s->phase != ph)
		log_debug("session %s: %s -> %s", s->name, phase_name(s->phase), phase_name(ph));
	s->phase = ph;
	size_t n = 0;
	for (size_t i = 0; i < N_ELEMENTS(phases[ph].accepts) && phases[ph].accepts[i].type; i++) {
		const __typeof__(phases[ph].accepts[0]) *a = &phases[ph].accepts[i];
		if ((a->when == HELLO_DUE && !s->hello_due) || (a->when == NOT_STARTED && !(s->cur && !s->cur->started)) ||
		    (a->when == LOADING && !(s->cur && s->cur == s->restore_call && !s->restore_said)))
			continue;
		s->expect[n++] = (struct wire_expect){ a->type, a->type == W_RESULT ? result_max(sup) : a->max_len, a->max_fds };
	}
	s->rd.expect = s->expect;
	s->rd.n_expect = n;
}

/* The checkpoint the session owes (enum ckpt_due), entered here only; the
 * room that owes it arms its timer (checkpoint.c: arm_due_timer). */
void set_due(struct session *s, enum ckpt_due due)
{
	s->ckpt_due = due;
}

/* A new process: its hello is due (set_expect accepts it then). */
void hello_awaited(struct session *s)
{
	s->hello_due = true;
}

/* ... and no longer: it said hello, or the cell started (W_STARTED). */
void hello_heard(struct session *s)
{
	s->hello_due = false;
}

/* The protocol break said by the next reply (broke), set and said here. */
void session_broke(struct session *s, const char *what)
{
	snprintf(s->broke, sizeof s->broke, "%s", what);
}

void broke_none(struct session *s)
{
	s->broke[0] = '\0';
}

/* A death: "what does the end of a session's process leave?"  The
 * handler of the death event the outbox's drain performs (death_handle):
 * what the process sent before it died, read first, then its call's
 * verdict, the rollback to its copy, or a session with no process.  Above
 * the rooms it calls (checkpoint.c, fork.c, call.c, process.c), which post
 * the death (process.c: session_reported_dead, session_gone) and never
 * handle it. */
#include "private.h"

static void session_dead(struct sup *sup, struct session *s, int wstatus, bool status_known);

/* What the process wrote on its control socket before it died, read before
 * its death is handled (the zygote's report, or its own end, may overtake
 * it): a result, a checkpoint, a copy's pidfd. */
static void session_last_words(struct session *s)
{
	if (s->ctrl >= 0)
		ctrl_event(s, s->ctrl, POLLIN);
}

/* The outbox's drain: the death posted (session_reported_dead,
 * session_gone), unless the process went otherwise meanwhile (a reset:
 * session_no_process).  What the process sent before it died is delivered
 * first, by the same handler as on the loop; then its death. */
void death_handle(struct sup *sup, struct session *s)
{
	int wstatus;
	bool known;
	if (s->life != L_ENDED)
		return;
	session_last_words(s);
	if (death_take(s, &wstatus, &known))
		session_dead(sup, s, wstatus, known);
}

/* The session's process is gone (what it sent before is read: death_handle,
 * the one caller).  Its call, its copy, its timers and its queue. */
static void session_dead(struct sup *sup, struct session *s, int wstatus, bool status_known)
{
	struct run *c = s->cur;
	/* Gone on its own (a crash): nothing left to measure, and the
	 * checkpoint that may take its place must not be measured instead. */
	if (c)
		usage_end(&c->usage, s->hpid, s->pidfd, s->ckpt_hpid);
	/* A result does not end a call: the session must still be seen
	 * asleep and frozen (verdict.h; P_IDLE once it is).  Dead
	 * before that, the call crashed: its result no longer stands, and its
	 * state is the one rolled back to.  (Ended by the server after the
	 * freeze, as a replayed cell whose status changed is, it stands.)
	 * Attack: a cell writes an "ok" result frame of its own and goes on
	 * running; killed then (from outside, or by itself), the reply said
	 * "ok" beside "rolled_back". */
	if (c && s->phase != P_IDLE)
		run_verdict(c, V_DIED_AWAKE, NULL);
	/* (The looks at it ended when its end came: L_ENDED drops them.) */
	if (s->fork_child)
		fork_failed(sup, s, "its process ended");
	if (sup->cfg.policy->limits.checkpoint && roll_back(sup, s, wstatus, status_known))
		return;
	quiet_abandon_save(sup, s);
	save_state_died(s);
	/* Lost from outside: the zygote died, or the copy to roll back to was
	 * killed before the session died.  The next call looks for the saved
	 * state again (restore_begin) and says what was lost (lost_outcome). */
	const char *outside = sup->zdied[0] ? sup->zdied : NULL;
	char why[400];
	if (!outside && s->copy_lost[0]) {
		snprintf(why, sizeof why, "the copy of the session's state kept to roll back to was %s (%s), "
			 "and then the session's process ended, so there was no state to go back to",
			 s->copy_given_up ? "given up during the call" : "killed from outside", s->copy_lost);
		outside = why;
	}
	int held = s->cells - (c && c->cell == s->cells && c->cell > 0 ? 1 : 0);
	if (outside && held > 0 && !s->lost[0]) {
		state_lost(s, outside, held);
	}
	copy_lost_none(s);
	copy_retakes_none(s);
	session_no_process(sup, s);
	cancel_timers(sup, s);
	cancel_due_timer(sup, s); /* its fork timer went with fork_failed */
	/* Said to the next call that runs, also one that was already waiting
	 * for the process (sent again to the new one): without this, a call
	 * waiting for a resumed copy that never took its checkpoint started a
	 * new interpreter, and its reply said nothing of the state lost. */
	if (s->broke[0] && !(c && c->started)) {
		char note[600];
		snprintf(note, sizeof note,
			 "after the previous call the session's process broke its protocol with the server (%s), so it was "
			 "ended as a crash; no copy of an earlier state was left, so this call starts a new interpreter",
			 s->broke);
		note_next(s, note);
	}
	if (!c && sup->zbroke[0])
		note_next(s, sup->zbroke);
	/* The zygote broke its protocol: the call (run again in a new
	 * process, or ended with the old one) says why. */
	if (c && sup->zbroke[0])
		add_note(c, sup->zbroke);
	broke_none(s);
	forks_waiting(sup, s);
	if (!c || requeue_unstarted(sup, s)) {
		post_start(sup, s); /* queued calls start in a new process */
		return;
	}
	if (c) {
		/* Without a checkpoint the state died with the process. */
		decide_on_death(c, wstatus, status_known, false);
		if (outside) {
			char note[700];
			snprintf(note, sizeof note,
				 "%s; this call's process ended with it, so the session's state (variables, imports) was lost; "
				 "the next call in session %s brings back its last saved state if there is one, else starts a new interpreter",
				 outside, s->name);
			add_note(c, note);
		} else if (!c->note && s->restore_call != c) {
			/* The call that carried a saved state: restore_outcome says
			 * what became of it (the snapshot stays on disk). */
			char note[300];
			snprintf(note, sizeof note,
				 "the session's process ended, so its state (variables, imports) was lost; "
				 "the next call in session %s starts a new interpreter%s", s->name,
				 sup->cfg.policy->limits.checkpoint ? "" : " (limits.checkpoint is false)");
			set_note(c, note); /* it had none */
		}
		finish_cur(sup, s);
	}
}

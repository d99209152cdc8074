/* The freeze: "is the call over?"  A call is over once its process is
 * frozen and settled.  The words, as the code uses them:
 *   freeze   stop the session with SIGSTOP, once it is seen asleep at two
 *            looks with no CPU time used in between (begin_freeze);
 *   quiet    frozen, and the kernel's lists of children show nothing the
 *            call left: the call is over without the zygote (check_quiet);
 *   settle   otherwise the zygote ends what is below the frozen session
 *            but its checkpoint, and what was orphaned to it (W_SETTLE,
 *            send_settle); its answer, or the quiet, is settled();
 *   dying    the checkpoint a new one replaced, killed and still exiting
 *            (process.c: drop_checkpoint), neither a leftover nor
 *            counted against the limits;
 *   sweep    after a process's exit, what the zygote ends of its other
 *            children (zstart.c: send_sweep);
 *   hurry    a call waits for a checkpoint under way: the session cuts its
 *            pre-copy short (W_HURRY, supervisor.c: sup_submit). */
#include "private.h"

#include <sched.h>

static void try_freeze(void *arg);
static void check_quiet(void *arg);
static void send_settle(struct sup *sup, struct session *s);

/* How many times one freeze gives its CPU to a session found runnable
 * there (try_freeze). */
#define FREEZE_YIELDS 3

/* All the session had to say is in: freeze it, then have the zygote end
 * what the call left running below it.  Only then is the call over (the
 * call's timer, or the due timer of a checkpoint owed, runs meanwhile).  The process must be
 * seen asleep first, at two looks with no CPU time used in between (every
 * thread blocked in the kernel), so a cell that sends a made-up result and
 * keeps computing runs out its time instead. */
void begin_freeze(struct sup *sup, struct session *s)
{
	set_expect(sup, s, P_FREEZING);
	s->idle_tries = 0;
	s->yield_tries = 0;
	try_freeze(s);
}

static void try_freeze(void *arg)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	look_fired(s, LOOK_IDLE);
	if (s->phase != P_FREEZING)
		return;
	bool pair = s->look.valid; /* this look completes a pair */
	int idle = s->hpid > 0 ? watch_idle(s->hpid, &s->look) : -ESRCH;
	if (idle < 0)
		return; /* gone: its exit report follows */
	if (idle == 0) {
		/* Asleep at the first look of a pair: the second look at once
		 * (the next turn of the loop), which is enough to tell a thread
		 * that ran in between.  Busy, or a pair that saw it run: a new
		 * pair after a wait (0.1 ms, doubling up to 20 ms).  The two
		 * looks of a pair are never that wait apart: a process that
		 * woke more often than the wait was never seen asleep twice,
		 * and a call that had ended ran into its timeout, losing its
		 * state (any Python thread left in the session does: waiting
		 * for the interpreter's lock, it wakes every 5 ms; so does a
		 * signal timer). */
		bool first = s->look.valid && !pair;
		if (!first && s->look.here && s->yield_tries < FREEZE_YIELDS) {
			/* Runnable on this very CPU: the server's own wake-up
			 * (the reply it read) put it there, between its reply
			 * and its next read.  Giving it the CPU lets it get to
			 * that read at once; waiting 0.1 ms for it cost every
			 * such call that much, and the CPU's sleep besides.
			 * Only when to look changes, never what a pair must
			 * see: at most FREEZE_YIELDS per freeze, then the
			 * waits below. */
			s->yield_tries++;
			sched_yield();
			look_arm(sup, s, LOOK_IDLE, 0, try_freeze);
			return;
		}
		double ms = first ? 0 : 0.1 * (double)(1 << (s->idle_tries < 8 ? s->idle_tries : 8));
		if (!first) {
			s->look.valid = false;
			s->idle_tries++;
		}
		look_arm(sup, s, LOOK_IDLE, ms < WATCH_MS ? ms : WATCH_MS, try_freeze);
		return;
	}
	if (pidfd_signal(s->pidfd, SIGSTOP) < 0)
		return;
	/* What it holds now is what the call leaves: counted once more
	 * before the reply can say it was kept, once the quiet check says
	 * whether anything is below it (check_quiet, final_look: a look at
	 * the session alone then, its children lists read already). */
	s->quiet_tries = 0;
	check_quiet(s);
}

/* Frozen: the sweep ends what the call left below the session and what
 * was orphaned to the zygote.  When the kernel's lists of children say
 * there is nothing of either (the cell started no process: most calls),
 * the call is over without the zygote's round trip.  Judged only once
 * every thread of the session is stopped, so no fork is under way; any
 * doubt (a child, an orphan, a spawn not yet reported, a kernel without
 * the lists) sends the sweep. */
static void check_quiet(void *arg)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	look_fired(s, LOOK_IDLE);
	if (s->phase != P_FREEZING)
		return;
	pid_t known[2 * 512];
	size_t n = 0;
	bool doubt = sup->zhpid <= 0 || s->hpid <= 0 || sup->settle_test;
	for (struct session *o = sup->sessions; o && !doubt; o = o->next) {
		if (!proc_alive(o))
			continue;
		if (!proc_known(o) || n + 2 > sizeof known / sizeof known[0])
			doubt = true;
		if (o->hpid > 0)
			known[n++] = o->hpid;
		if (o->ckpt_hpid > 0)
			known[n++] = o->ckpt_hpid;
	}
	/* The checkpoint it replaced, killed through its pidfd, may still be
	 * exiting (unmapping a large process takes milliseconds). */
	pid_t dying, ns;
	dying_pids(s, &dying, &ns);
	int q = doubt ? -EEXIST : watch_quiet(s->hpid, s->ckpt_hpid, dying, sup->zhpid, known, n);
	if (q == 1) {
		if (!final_look(sup, s, true))
			settled(sup, s);
		return;
	}
	if (q == 0 && s->quiet_tries < 6) {
		/* Still stopping (it needs a CPU for that): 30 us, doubling. */
		look_arm(sup, s, LOOK_IDLE, 0.03 * (double)(1 << s->quiet_tries++), check_quiet);
		return;
	}
	if (!final_look(sup, s, false))
		send_settle(sup, s);
}

/* Asks the zygote to end what is below the frozen session (W_SETTLED
 * answers). */
static void send_settle(struct sup *sup, struct session *s)
{
	struct zmsg_settle *st = xcalloc(1, sizeof *st);
	*st = (struct zmsg_settle){ .pid = s->pid, .keep = s->ckpt_pid > 0 ? s->ckpt_pid : 0, .epoch = sup->epoch,
				    .born_by = kproc_now_ticks() };
	/* The zygote's orphans are ended only when the list of what to keep
	 * is whole: not while a copy is being forked (fork_in_flight), nor
	 * when it would not fit. */
	st->has_all = !fork_in_flight(sup) && live_pids(sup, st->all, ZMSG_PIDS_MAX, &st->n_all);
	bool st_all = st->has_all;
	char *txt = zmsg_settle_encode(st);
	free(st);
	int r = zlink_settle(sup->zl, s->pid, txt);
	free(txt);
	if (st_all)
		sweep_again(sup);
	if (r < 0) {
		log_warn("session %s: cannot ask the zygote to sweep: %s", s->name, strerror(-r));
		kill_session(s);
	}
}

/* The zygote has ended what was left below the frozen session. */
void settled(struct sup *sup, struct session *s)
{
	set_expect(sup, s, P_IDLE);
	stop_watch(sup, s);
	cancel_fork_timer(sup, s); /* a parent's rest after its copy (fork_rest_deadline) */
	/* A save that ended while the session was not yet idle left what it
	 * started below the session: ended now, before the session rests. */
	if (s->save_ran && !s->save)
		end_save_tree(sup, s);
	if (s->ckpt_due != DUE_NONE) {
		set_due(s, DUE_NONE);
		cancel_due_timer(sup, s);
		/* The copy it just took, killed from outside while the session
		 * was being frozen (copy_died could not take one then: not
		 * idle, a checkpoint still due), is taken again first.  Seen:
		 * a copy killed the moment it appeared was never taken again
		 * while the session rested, and a later timeout lost the
		 * state. */
		if (retake_copy(sup, s))
			return;
		post_start(sup, s);
		forks_waiting(sup, s);
		save_when_idle(sup, s);
		post_ended(sup); /* the server may be waiting for this state's save */
		return;
	}
	if (!s->cur) {
		/* At rest again after making a copy (W_FORKED): its own copy,
		 * killed from outside meanwhile, is taken again first. */
		if (retake_copy(sup, s))
			return;
		post_start(sup, s);
		forks_waiting(sup, s);
		save_when_idle(sup, s);
		return;
	}
	/* The reply goes out now; the checkpoint of the state it kept is
	 * taken after it (no fork on the call's path), before the next cell.
	 * The previous checkpoint stays until the new one is accepted: a
	 * session that fails to take it is rolled back to that one.  A cell
	 * cheap and safe to run again is only logged instead (replay.c): a
	 * rollback resumes the last checkpoint and runs it again. */
	struct run *c = s->cur;
	enum call_state st = c->state;
	/* A restored or forked state is a kept one too: it needs its copy
	 * (and its save) like any other. */
	bool kept = sup->cfg.policy->limits.checkpoint && (st == STATE_KEPT || st == STATE_RESTORED || st == STATE_FORKED);
	if (kept && replay_is_run(c) && !replay_run_same_status(c)) {
		/* A cell run again after a rollback ended otherwise than the
		 * first time (it fails now, or no longer fails): the state it
		 * left is not the one it left then.  The session goes back to
		 * the checkpoint taken after the cell before it (roll_back, at
		 * its exit), and the replay stops there. */
		cancel_timers(sup, s);
		kill_session(s);
		return;
	}
	bool again = replay_is_run(c);
	bool logged = kept && !again && replay_log_instead(sup, s, c);
	bool take = kept && !logged && (!again || replay_run_checkpoint(c));
	if (take)
		set_due(s, DUE_AFTER_CALL);
	if (kept && persist_on(sup->persist)) {
		save_state_new(s);
	}
	if (kept)
		save_superseded(sup, s, c);
	finish_cur(sup, s);
	if (take && s->ckpt_due == DUE_AFTER_CALL && proc_alive(s) && s->phase == P_IDLE) {
		take_checkpoint(sup, s, sup->stopping);
	} else {
		forks_waiting(sup, s);
		if (logged)
			save_when_idle(sup, s);
	}
}

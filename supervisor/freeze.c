/* The freeze: "is the call over?"  A call is over once its process is
 * seen asleep and stopped (frozen), and the zygote has swept what it left
 * running. */
#include "private.h"

static void try_freeze(void *arg);
static void check_quiet(void *arg);

/* All the session had to say is in: freeze it, then have the zygote end
 * what the call left running below it.  Only then is the call over (the
 * call's timer, or the resume timer, runs meanwhile).  The process must be
 * seen asleep first, at two looks with no CPU time used in between (every
 * thread blocked in the kernel), so a cell that sends a made-up result and
 * keeps computing runs out its time instead. */
void begin_freeze(struct sup *sup, struct session *s)
{
	set_expect(sup, s, P_FREEZING);
	s->idle_tries = 0;
	try_freeze(s);
}

static void try_freeze(void *arg)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	s->idle_timer = 0;
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
		double ms = first ? 0 : 0.1 * (double)(1 << (s->idle_tries < 8 ? s->idle_tries : 8));
		if (!first) {
			s->look.valid = false;
			s->idle_tries++;
		}
		s->idle_timer = loop_timer(sup->cfg.loop, ms < WATCH_MS ? ms : WATCH_MS, try_freeze, s);
		return;
	}
	if (pidfd_signal(s->pidfd, SIGSTOP) < 0)
		return;
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
	s->idle_timer = 0;
	if (s->phase != P_FREEZING)
		return;
	pid_t known[2 * 512];
	size_t n = 0;
	bool doubt = sup->zhpid <= 0 || s->hpid <= 0;
	for (struct session *o = sup->sessions; o && !doubt; o = o->next) {
		if (!o->alive)
			continue;
		if (!o->spawn_known || n + 2 > sizeof known / sizeof known[0])
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
		settled(sup, s);
		return;
	}
	if (q == 0 && s->quiet_tries < 6) {
		/* Still stopping (it needs a CPU for that): 30 us, doubling. */
		s->idle_timer = loop_timer(sup->cfg.loop, 0.03 * (double)(1 << s->quiet_tries++), check_quiet, s);
		return;
	}
	send_settle(sup, s);
}

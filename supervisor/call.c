/* A call's end: "what does the reply carry?"  Its timers (timeout,
 * progress), the files it made collected, its images downscaled, its
 * status decided and the run handed back to the layer that submitted it. */
#include "private.h"

/* The session's run queue (qhead, qtail, the runs' next) and its current
 * call (cur) change here only. */

/* Call c becomes the current one, taken from the head of the queue. */
void queue_take(struct session *s, struct run *c)
{
	s->qhead = c->next;
	if (!s->qhead)
		s->qtail = NULL;
	c->next = NULL;
	s->cur = c;
}

/* Call c (the current one) goes back to the head of the queue. */
void queue_put_back(struct session *s, struct run *c)
{
	s->cur = NULL;
	c->next = s->qhead;
	s->qhead = c;
	if (!s->qtail)
		s->qtail = c;
}

/* Puts the current call back at the head of the queue, to be started again
 * by start_next (a copy to make first, a checkpoint to take again). */
void requeue_first(struct session *s)
{
	struct run *c = s->cur;
	if (!c)
		return;
	queue_put_back(s, c);
}

/* Run r, of the server's own, goes in place of the current call, which
 * goes back to the head of the queue to be prepared again before it is
 * sent: r is current and counts as prepared (the call's walk of the
 * workspace before it stands for r's). */
void run_in_place(struct session *s, struct run *r)
{
	struct run *c = s->cur;
	c->prepared = false;
	queue_put_back(s, c);
	r->prepared = true;
	queue_put_back(s, r);
	queue_take(s, r);
}

/* A new call waits at the end of the queue. */
void queue_append(struct session *s, struct run *c)
{
	if (s->qtail)
		s->qtail->next = c;
	else
		s->qhead = c;
	s->qtail = c;
}

/* The queued call *pp leaves the queue (cancelled). */
void queue_unlink(struct session *s, struct run **pp)
{
	struct run *c = *pp;
	*pp = c->next;
	if (s->qtail == c) {
		s->qtail = NULL;
		for (struct run *q = s->qhead; q; q = q->next)
			s->qtail = q;
	}
}

/* The tail again, after runs left the queue. */
void queue_fix_tail(struct session *s)
{
	s->qtail = NULL;
	for (struct run *q = s->qhead; q; q = q->next)
		s->qtail = q;
}

/* The runs head .. last (*tail their last next) go ahead of the queue. */
void queue_put_ahead(struct session *s, struct run *head, struct run **tail, struct run *last)
{
	*tail = s->qhead;
	s->qhead = head;
	if (!s->qtail)
		s->qtail = last;
}

/* No current call: it ended, or is answered by the caller. */
void cur_none(struct session *s)
{
	s->cur = NULL;
}

/* The current call fails before it ran: answered at once with msg. */
void fail_call_now(struct sup *sup, struct session *s, const char *msg)
{
	struct run *c = s->cur;
	run_verdict(c, V_FAILED, NULL);
	add_note(c, msg); /* after what the call was told already (a zygote ended for lying) */
	c->t_start = loop_now_ms();
	s->cur = NULL;
	c->duration_ms = 0;
	post_done(sup, c, false);
	post_ended(sup);
}

/* A call is prepared (its workspace snapshot taken) or waits for it. */
void run_prepared(struct run *c)
{
	c->waiting = false;
	c->prepared = true;
}

void run_waits(struct run *c)
{
	c->waiting = true;
}

/* What the run made is known (the layer above's collect answered). */
void run_collected(struct run *c)
{
	c->waiting = false;
	c->collected = true;
}

/* A run of the server's own is never sent again to another process. */
void run_no_resend(struct run *r)
{
	r->resends = 2;
}

/* The call's time counts from now (its duration, its progress). */
void run_clock_start(struct run *c)
{
	c->t_start = loop_now_ms();
}

/* A call is sent: its progress notes count from 0. */
void progress_none(struct session *s)
{
	s->progress = 0;
}

/* The workspace watch of the running call (limits.max_workspace_mb). */
void ws_watch_stop(struct session *s)
{
	wswatch_stop(s->watch);
	s->watch = NULL;
}

void ws_watch_set(struct session *s, struct wswatch *w)
{
	s->watch = w;
}

/* A new process has ended no call yet (finish_cur sets has_last). */
void last_none(struct session *s)
{
	s->has_last = false;
}

/* No call at all: the session goes. */
void queue_none(struct session *s)
{
	s->cur = s->qhead = s->qtail = NULL;
}

void run_outcome_free(struct run *r)
{
	free(r->out_text);
	free(r->err_text);
	free(r->out_log);
	free(r->err_log);
	free(r->note);
	result_destroy(r->result);
}

/* Runs from the moment the cell is sent until the session is frozen again:
 * a result frame alone does not stop it.
 * Attack: a cell writes a well-formed result on its control socket and
 * keeps running (burning CPU, writing files) after its reply. */
static void timeout_fired(void *arg)
{
	struct session *s = arg;
	s->timeout_timer = 0;
	/* Also over the call's own result, until the session is frozen
	 * (verdict.h): that result no longer stands. */
	if (s->cur && run_verdict(s->cur, V_TIMEOUT, NULL)) {
		s->cur->thumb_late = s->phase == P_THUMB;
		kill_session(s);
	}
}

void call_deadline(struct sup *sup, struct session *s, double ms)
{
	if (s->timeout_timer)
		loop_timer_cancel(sup->cfg.loop, s->timeout_timer);
	s->timeout_timer = loop_timer(sup->cfg.loop, ms, timeout_fired, s);
}

static void progress_fired(void *arg)
{
	struct session *s = arg;
	s->progress_timer = 0;
	struct run *c = s->cur;
	if (!c || !c->wants_progress)
		return;
	double elapsed = (loop_now_ms() - c->t_start) / 1000.0;
	s->progress = elapsed > s->progress ? elapsed : s->progress + 1;
	c->ev->progress(c, s->progress, elapsed, s->out.last_len ? s->out.last_line : s->err.last_line);
	s->progress_timer = loop_timer(s->sup->cfg.loop, PROGRESS_MS, progress_fired, s);
}

void progress_start(struct sup *sup, struct session *s)
{
	if (s->progress_timer)
		loop_timer_cancel(sup->cfg.loop, s->progress_timer);
	s->progress_timer = loop_timer(sup->cfg.loop, PROGRESS_MS, progress_fired, s);
}

void cancel_timers(struct sup *sup, struct session *s)
{
	uint64_t *ts[] = { &s->timeout_timer, &s->progress_timer };
	for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
		if (*ts[i]) {
			loop_timer_cancel(sup->cfg.loop, *ts[i]);
			*ts[i] = 0;
		}
	looks_stop(sup, s);
	save_pace_cancel(&s->pace, sup->cfg.loop);
	ws_watch_stop(s);
}

/* The call grew the workspace past limits.max_workspace_mb: stopped like a
 * timeout, so the session rolls back.  Its files stay: the server never
 * deletes what the code wrote (it cannot tell the user's from the code's).
 * Called by the scan after the call (state.c: collected) and by limits.c's
 * watcher while the call runs. */
void over_limit_stop(struct session *s, unsigned long long bytes, unsigned long long scratch, const char *unseen)
{
	ws_watch_stop(s);
	if (!s->cur || !run_verdict(s->cur, V_WORKSPACE, NULL))
		return;
	s->cur->ws_bytes = bytes;
	s->cur->scratch_bytes = scratch;
	if (unseen)
		snprintf(s->cur->ws_unseen, sizeof s->cur->ws_unseen, "%.590s", unseen);
	kill_session(s);
}

/* Asks the layer above to find what the run made (once). */
void collect(struct session *s, struct run *c);

/* Collects the output and hands the run back to its owner (posted: the
 * outbox's drain calls ev->done, then starts the session's next run). */
void finish_cur(struct sup *sup, struct session *s)
{
	struct run *c = s->cur;
	if (!c)
		return;
	usage_end(&c->usage, s->hpid, s->pidfd, s->ckpt_hpid);
	/* Once: a finish that waited for the scan (finish_pending) comes
	 * back after the session moved on (a rolled-back session's resumed
	 * copy being frozen), and the timers running then are that phase's.
	 * Cancelling them left the freeze waiting for a look that never
	 * came, and the state was dropped 30 s later. */
	if (!c->finish_pending)
		cancel_timers(sup, s);
	drain_all(s);
	if (!c->collected) {
		/* Files written before a crash or timeout count too; the scan
		 * runs off the loop and calls us again. */
		c->finish_pending = true;
		collect(s, c);
		return;
	}
	c->out_text = outbuf_finish(&s->out, &c->out_truncated, &c->out_log);
	c->err_text = outbuf_finish(&s->err, &c->err_truncated, &c->err_log);
	c->duration_ms = loop_now_ms() - c->t_start;
	if (s->restore_call == c)
		restore_outcome(sup, s, c); /* the call ended before its result */
	s->has_last = true;
	s->last_exit = c->exit_code;
	s->last_seq = ++sup->ends;
	cur_none(s);
	/* A cell run again after a rollback is the server's own: replay.c
	 * ends it here, at once, since its outcome decides what runs next.
	 * A logged cell's entry is made now, from the output the reply
	 * carries; a rolled-back call's reply waits for its replay.  The
	 * reply goes out from the outbox, and after it (the drain) what
	 * sessions taught the zygote loads while the agent reads it. */
	if (!sup->on_finished || !sup->on_finished(sup, s, c))
		post_done(sup, c, true);
	post_start(sup, s);
	post_ended(sup);
}

void collect(struct session *s, struct run *c)
{
	if (c->waiting || c->collected)
		return;
	c->waiting = true;
	c->ev->collect(c, s->sup->on_collected, s);
}

/* The process died before it received the current cell (no W_STARTED):
 * the cell never ran, so it goes back to the head of the queue and is sent
 * again to the resumed checkpoint or a new process.  Bounded, so a session
 * that dies at once every time still gets an answer. */
bool requeue_unstarted(struct sup *sup, struct session *s)
{
	struct run *c = s->cur;
	if (!c || c->started || c->status != CALL_PENDING || c->result || c->resends >= 2)
		return false;
	cancel_timers(sup, s);
	c->resends++;
	cell_unsent(s, c);
	c->prepared = false; /* a new snapshot before it is sent again */
	queue_put_back(s, c);
	return true;
}

/* The call's status, exit code and state once its process has died
 * (rolled_back: its checkpoint takes its place): a call not yet decided
 * (no timeout, cancellation or memory verdict) crashed. */
void decide_on_death(struct run *c, int wstatus, bool status_known, bool rolled_back)
{
	struct verdict_facts f = { .wstatus = wstatus, .wstatus_known = status_known };
	if (run_verdict(c, rolled_back ? V_DIED_ROLLED_BACK : V_DIED_NEW, &f)) {
		/* Its own signal, not the SIGKILL of the server's verdict (a
		 * limit, a protocol break), which the note already names. */
		c->signal = status_known && WIFSIGNALED(wstatus) && !c->over_limit && !c->broke_protocol ? WTERMSIG(wstatus) : 0;
	}
}

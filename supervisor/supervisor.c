/* The supervisor's face (supervisor.h): its sessions by name, the calls
 * submitted, queued, cancelled and started, and the end of it all.  The
 * rest of it lives in the files private.h lists, one question each. */
#include "private.h"

/* The largest cell sent to a frozen session before it is thawed
 * (send_exec), and at most a quarter of the socket's send buffer (a sysctl
 * may make it small), so that the send never waits for the frozen reader. */
#define EXEC_SEND_FROZEN_MAX ((size_t)16 << 10)

static bool fits_frozen(const struct session *s, size_t len)
{
	return len <= EXEC_SEND_FROZEN_MAX && s->ctrl_sndbuf > 0 && len + WIRE_HDR_BYTES <= (size_t)s->ctrl_sndbuf / 4;
}

static void send_exec(struct sup *sup, struct session *s);
static void start_next(struct sup *sup, struct session *s);
static void drain(struct sup *sup, bool teardown);

struct sup *sup_new(const struct sup_config *cfg)
{
	struct sup *sup = xcalloc(1, sizeof *sup);
	sup->cfg = *cfg;
	zygote_none(sup);
	sup->ob_drain = drain;
	sup->on_ctrl = ctrl_event;
	sup->on_collected = collected;
	sup->on_finished = replay_ended;
	const char *t = getenv("PSM_TEST_SAVE_MS");
	sup->save_test_ms = t ? atof(t) : 0;
	t = getenv("PSM_TEST_SAVE_WALL_MS");
	sup->save_test_wall_ms = t ? atof(t) : 0;
	t = getenv("PSM_TEST_ZYGOTE_SETTLE_MS");
	sup->settle_test = t && *t;
	t = getenv("PSM_TEST_KILL_COPY_AT_SEND");
	sup->copy_kill_test = t ? atoi(t) : 0;
	return sup;
}

int sup_count_sessions(struct sup *sup)
{
	int n = 0;
	for (struct session *s = sup->sessions; s; s = s->next)
		n++;
	return n;
}

int sup_sessions_ran(struct sup *sup, char *list, size_t n, char *latest, size_t latest_n)
{
	int count = 0;
	size_t k = 0;
	unsigned long below = ~0UL;
	list[0] = latest[0] = '\0';
	for (;;) {
		struct session *best = NULL;
		for (struct session *s = sup->sessions; s; s = s->next)
			if (s->has_last && s->last_seq < below && (!best || s->last_seq > best->last_seq))
				best = s;
		if (!best)
			return count;
		below = best->last_seq;
		if (count++ == 0)
			snprintf(latest, latest_n, "%s", best->name);
		if (k < n)
			k += (size_t)snprintf(list + k, n - k, "%s%s (last exit %d)", k ? ", " : "", best->name, best->last_exit);
	}
}

void sup_session_names(struct sup *sup, char *list, size_t n)
{
	size_t k = 0;
	list[0] = '\0';
	for (struct session *s = sup->sessions; s && k < n; s = s->next)
		k += (size_t)snprintf(list + k, n - k, "%s%s", k ? ", " : "", s->name);
}

void sup_states(const struct sup *sup, char *buf, size_t n)
{
	static const char *const due[] = { [DUE_NONE] = "-", [DUE_AFTER_CALL] = "after-call", [DUE_RESUMED] = "resumed" };
	size_t k = 0;
	buf[0] = '\0';
	for (const struct session *s = sup->sessions; s && k < n; s = s->next)
		k += (size_t)snprintf(buf + k, n - k, "%s%s %s/%s/%s", k ? "; " : "", s->name, phase_name(s->phase),
				      life_name(s), due[s->ckpt_due]);
}

unsigned sup_deadlines_missing(const struct sup *sup)
{
	unsigned n = 0;
	for (const struct session *s = sup->sessions; s; s = s->next)
		if (phase_deadline_missing(s)) {
			log_error("session %s: %s with its process %s, and no deadline armed", s->name, phase_name(s->phase),
				  life_name(s));
			n++;
		}
	return n;
}

bool sup_session_exists(struct sup *sup, const char *name)
{
	return find_session(sup, name) != NULL;
}

void sup_set_work(struct sup *sup, struct work *work)
{
	sup->work = work;
}

bool sup_last_exit(struct sup *sup, const char *name, int *exit_code)
{
	struct session *s = find_session(sup, name);
	if (!s || !s->has_last)
		return false;
	*exit_code = s->last_exit;
	return true;
}

bool sup_busy(struct sup *sup)
{
	/* A run in the outbox is not answered yet. */
	if (sup && outbox_holds_runs(sup))
		return true;
	for (struct session *s = sup ? sup->sessions : NULL; s; s = s->next)
		if (s->cur || s->qhead)
			return true;
	return false;
}

/* The layer above has taken what it needs before the cell (a snapshot of
 * the workspace): now it may run.  A run that ended meanwhile (cancelled,
 * its process gone) is finished instead. */
void prepared(struct run *c, void *arg)
{
	struct session *s = arg;
	run_prepared(c);
	if (s->cur != c)
		return;
	if (c->finish_pending)
		finish_cur(s->sup, s);
	else if (proc_alive(s) && s->ckpt_due != DUE_RESUMED && !retake_copy(s->sup, s))
		send_exec(s->sup, s); /* (the copy, killed while the snapshot was taken, first) */
}

static void send_exec(struct sup *sup, struct session *s)
{
	struct run *c = s->cur;
	save_cut(sup, s);
	if (!c->prepared) {
		/* What the workspace held before, to tell this run's files;
		 * taken off the loop, then the cell is sent. */
		if (!c->waiting) {
			run_waits(c);
			c->ev->prepare(c, prepared, s);
		}
		return;
	}
	/* A cell run again after a rollback (replay.c) keeps its number and
	 * carries no note: nobody reads its reply. */
	bool again = replay_is_run(c);
	/* PSM_TEST_KILL_COPY_AT_SEND=N (tests): an outside kill of the copy
	 * as each of the next N calls goes, its exit still under way. */
	if (sup->copy_kill_test > 0 && s->ckpt_pidfd >= 0 && s->phase == P_IDLE && !again && sup->copy_kill_test--)
		pidfd_signal(s->ckpt_pidfd, SIGKILL);
	/* No call goes while its copy is lost and can be taken again. */
	if (!again && copy_lost_before_call(sup, s))
		return;
	if (s->next_note && !again) {
		add_note(c, s->next_note);
		free(s->next_note);
		s->next_note = NULL;
	}
	if (s->fork_of[0] && !again) {
		char m[400];
		snprintf(m, sizeof m,
			 "forked from session %s: this session started as a copy of its state after cell %u; what runs here does not change %s, "
			 "and what runs there does not reach this session",
			 s->fork_of, s->fork_of_cells, s->fork_of);
		add_note(c, m);
		c->forked = true;
		fork_of_none(s);
	}
	uint64_t restore_bytes = 0;
	int restore_format = 1;
	int restore_fds[2] = { -1, -1 };
	int restore_nfds = c->new_session ? restore_begin(sup, s, c, &restore_bytes, &restore_format, restore_fds, restore_answered) : -1;
	if (restore_nfds <= 0 && !again && c->new_session)
		lost_outcome(s, c, false); /* nothing saved to bring back */
	if (restore_nfds > 0 && s->journal_n > 0 && !again) {
		/* The saved state comes with a journal of cells that ran after
		 * it: an empty cell of the server's own loads it, the cells
		 * run again, then this call (replay_load_run). */
		c = replay_load_run(s, c);
		again = true;
	}
	copy_retakes_none(s);
	run_cell(c, again ? replay_cell(c) : cell_next(s));
	char log_rel[192];
	snprintf(log_rel, sizeof log_rel, ".logs/%s-%d.stdout.log", s->name, c->cell);
	outbuf_reset(&s->out, log_rel);
	snprintf(log_rel, sizeof log_rel, ".logs/%s-%d.stderr.log", s->name, c->cell);
	outbuf_reset(&s->err, log_rel);
	struct smsg_exec ex = { .code = c->code, .cell = c->cell };
	double timeout_ms = again ? replay_timeout_ms(c) : c->timeout_ms;
	restore_unloaded(s);
	if (restore_nfds > 0) {
		ex.restore = restore_bytes;
		ex.restore_format = restore_format;
		ex.restore_direct = restore_nfds == 2;
		/* Loading the state is not the cell's work: the timer first
		 * bounds the load (restore_bound_ms), and the cell's own
		 * timeout starts when the session says it is loaded
		 * (restore_loaded), or from now when the server's verdict says
		 * there is nothing to load.  Before, the call got the load's
		 * time on top of timeout_s: an 8 s sleep under timeout_s 5
		 * ended ok.  Attack: a planted snapshot made `time.sleep(40)`
		 * with timeout_s 2 return ok after 44.6 s. */
		double bound = restore_bound_ms(sup, restore_bytes);
		restore_load_begin(s, loop_now_ms() + bound + timeout_ms);
		timeout_ms = bound;
	}
	usage_begin(&c->usage, s->hpid, s->pidfd, s->ckpt_hpid);
	run_clock_start(c);
	progress_none(s);
	/* The kernel's view of the session, for the replay log's choice at
	 * the end of the call; without checkpoints there is no choice, and
	 * no view is read (about 40 us of every call). */
	bool ckpt = sup->cfg.policy->limits.checkpoint;
	if (!again && ckpt)
		replay_cell_sent(s, c);
	/* What the server reads of the session itself, or needs of it not at
	 * all, the session does not read of its own (a cell run again: no
	 * view of ours, its own). */
	ex.no_self_view = !again && (!ckpt || replay_view_own(s, c));
	char *txt = smsg_exec_encode(&ex);
	size_t txt_len = strlen(txt);
	/* Frozen since its last call: it runs again only now.  A cell that
	 * fits in the socket's buffer is sent first, so the session finds it
	 * as it wakes instead of waking again for it (one wake-up less on a
	 * warm call's path); a larger one after, as the frozen session could
	 * never make room for it. */
	bool thaw = s->phase == P_IDLE && s->pidfd >= 0;
	bool send_first = thaw && fits_frozen(s, txt_len);
	if (thaw && !send_first)
		pidfd_signal(s->pidfd, SIGCONT);
	set_expect(sup, s, P_RUNNING);
	start_watch(sup, s);
	call_deadline(sup, s, timeout_ms);
	ws_watch_stop(s);
	ws_watch_set(s, sup_wswatch(sup, workspace_over, s));
	s->save_written0 = psave_written(s->save);
	s->persist_written0 = persist_written_all(sup->persist);
	if (c->wants_progress)
		progress_start(sup, s);
	int r = wire_send(s->ctrl, W_EXEC, txt, txt_len, restore_nfds > 0 ? restore_fds : NULL, restore_nfds > 0 ? restore_nfds : 0);
	free(txt);
	if (send_first)
		pidfd_signal(s->pidfd, SIGCONT);
	for (int i = 0; i < restore_nfds; i++)
		close(restore_fds[i]);
	if (r < 0) {
		log_warn("session %s: cannot send the cell: %s", s->name, strerror(-r));
		kill_session(s);
	}
}

static void start_next(struct sup *sup, struct session *s)
{
	/* What the session must finish first is not waited for by a reset,
	 * which discards the process anyway. */
	bool reset = s->qhead && s->qhead->reset;
	/* A resumed checkpoint finishes resuming, or a new checkpoint is
	 * taken, first (settled() calls us again, or a timer ends it).  A
	 * parent at rest again after making a copy (W_FORKED) is being frozen
	 * and swept: its call waits for that rest too (settled calls us
	 * again; a parent that never rests is ended by rest_expired and its
	 * checkpoint resumed).  Seen, when such a call took the freezing
	 * parent over: the settle already asked of the zygote ended the new
	 * cell's child (a fork that should have exited 7 died of SIGKILL),
	 * and a cell sent after the server's SIGSTOP was never read. */
	if ((s->ckpt_due != DUE_NONE || s->fork_child || s->fork_wait || s->phase == P_FREEZING) && !reset)
		return;
	/* Ended (a protocol break while no call ran, as when its copy was
	 * forged) and not yet reported gone: the call waits for the exit,
	 * which resumes the checkpoint.  Seen before: a call sent in that
	 * moment ran on the dying process, read the message it had sent
	 * before it was ended as the call's, and was rolled back further. */
	if (proc_ending(s) && !reset)
		return;
	/* Its copy was killed from outside: a new one before the call runs,
	 * so that the call's failure still rolls back (settled calls us
	 * again). */
	if (s->qhead && !reset && retake_copy(sup, s))
		return;
	while (!s->cur && s->qhead) {
		struct run *c = s->qhead;
		queue_take(s, c);
		if (c->reset) {
			/* reset also forgets the saved state: a restart must not
			 * bring back what the agent discarded. */
			save_forget(sup, s);
			int r = s->unsaved ? 0 : persist_discard(sup->persist, s->name); /* not ours: another server's */
			if (r < 0)
				log_warn("session %s: cannot remove its saved state: %s", s->name, strerror(-r));
		}
		if (c->reset && proc_alive(s)) {
			/* Discard the state: the old process is ended; its exit
			 * report no longer matches this session. */
			kill_session(s);
			session_no_process(sup, s);
			cancel_due_timer(sup, s);
			cancel_fork_timer(sup, s);
		}
		c->reset = false; /* done: a copy's call comes back to this queue */
		if (!proc_alive(s) && replay_is_run(c)) {
			cur_none(s);
			replay_lost(sup, s, c);
			continue;
		}
		if (!proc_alive(s)) {
			c->new_session = true;
			if (sup->z == Z_FAILED) {
				fail_call_now(sup, s, sup->zerror);
				continue;
			}
			/* While a copy is being forked no other process is added
			 * below the zygote (see forked). */
			if (sup->z != Z_READY || fork_in_flight(sup)) {
				spawn_wait(s);
				return;
			}
			if (c->fork_from[0] && !c->fork_done) {
				int fr = begin_copy(sup, s, c);
				if (fr < 0)
					continue;
				if (fr > 0)
					return;
			}
			int r = spawn_session(sup, s);
			if (r < 0) {
				char msg[300];
				snprintf(msg, sizeof msg, "could not start a session: %s", strerror(-r));
				fail_call_now(sup, s, msg);
				continue;
			}
			last_none(s); /* a new process has ended no call yet */
		}
		send_exec(sup, s);
		/* Its copy was found lost as the call went: the call is back
		 * at the head of the queue until the new copy is in (settled
		 * calls us again).  Taken again here, it would go to a session
		 * that is taking its checkpoint. */
		if (s->ckpt_due != DUE_NONE)
			return;
	}
}

/* After a reply, never before: what sessions taught the zygote loads
 * while the agent reads it. */
static void warm_after_reply(struct sup *sup)
{
	if (sup->z != Z_READY)
		return;
	int n;
	char *names = warmup_after_reply(sup->warm, &n);
	if (names && zlink_send(sup->zl, W_WARM, names, NULL, 0) == 0)
		zlink_warm_sent(sup->zl, n);
	free(names);
}

/* The outbox's one drain (outbox.c says when it runs): the only place that
 * hands a run to the layer above (done, drop), starts a session's next
 * run and tells the server something ended.  In the order posted; what
 * it performs may post more, which this same drain takes.  At teardown
 * (sup_free) the runs are still answered or dropped, and nothing starts. */
static void drain(struct sup *sup, bool teardown)
{
	enum post_kind k;
	struct run *c;
	struct session *s;
	bool flag;
	pid_t pid;
	while (outbox_take(sup, &k, &c, &s, &flag, &pid)) {
		switch (k) {
		case POST_DONE:
			c->ev->done(c); /* c is the layer above's now */
			if (flag && !teardown)
				warm_after_reply(sup);
			break;
		case POST_DROP:
			c->ev->drop(c);
			break;
		case POST_START:
			if (teardown)
				break;
			start_next(sup, s);
			warm_busy(sup);
			break;
		case POST_READ:
			if (teardown)
				break;
			if (s->ctrl >= 0)
				ctrl_event(s, s->ctrl, POLLIN);
			if (s->life == L_LIVE_DOOMED)
				kill_session(s);
			break;
		case POST_DEAD:
			if (teardown)
				break;
			death_handle(sup, s);
			/* What the dead process left below the zygote is ended,
			 * now that its copy (if any) is the session. */
			if (flag)
				send_sweep(sup, sup->epoch);
			break;
		case POST_SETTLED:
			/* As z_settled judged it, unless that changed in the turn
			 * since (the process died, or was frozen no more). */
			if (!teardown && proc_alive(s) && s->life != L_ENDED && s->pid == pid && s->phase == P_FREEZING)
				settled(sup, s);
			break;
		}
	}
	if (outbox_take_ended(sup) && !teardown && sup->cfg.ended)
		sup->cfg.ended(sup->cfg.arg);
}

/* A session's first call in this server's life: the session's saved state
 * is this server's to restore and save only if no other server uses it
 * (sesslock.h).  Otherwise it runs unsaved here, and the first reply says
 * so and what to do instead. */
static void session_lock(struct sup *sup, struct session *s, struct run *c)
{
	if (!persist_on(sup->persist))
		return;
	pid_t holder = 0;
	struct err e = { 0 };
	s->lock_fd = sesslock_take(sup->cfg.ws, s->name, &holder, &e);
	if (s->lock_fd >= 0)
		return;
	save_none(s);
	char who[48] = "", m[900];
	if (holder > 0)
		snprintf(who, sizeof who, " (pid %ld)", (long)holder);
	if (s->lock_fd == -EWOULDBLOCK)
		snprintf(m, sizeof m,
			 "session %s is in use by another python-sandbox-mcp server on this project%s: one server at a time keeps a session's "
			 "saved state, so this server runs session %s without it. Its saved state is neither restored nor replaced here (the other "
			 "server's work is safe), and what runs here is lost when this server exits. To keep work saved, use a session name "
			 "that the other server does not use",
			 s->name, who, s->name);
	else
		snprintf(m, sizeof m,
			 "session %s runs without saving: this server cannot take the lock that keeps two servers from sharing its saved state "
			 "(%.400s). Its saved state is neither restored nor replaced, and what runs here is lost when this server exits",
			 s->name, e.msg);
	log_warn("%s", m);
	add_note(c, m);
}

void sup_submit(struct sup *sup, struct run *c)
{
	struct session *s = find_session(sup, c->session);
	if (!s) {
		s = xcalloc(1, sizeof *s);
		const struct policy_limits *L = &sup->cfg.policy->limits;
		unsigned long long log_cap = (unsigned long long)L->max_file_mb << 20;
		outbuf_init(&s->out, sup->cfg.ws, (size_t)L->max_output_chars, log_cap);
		outbuf_init(&s->err, sup->cfg.ws, (size_t)L->max_output_chars, log_cap);
		snprintf(s->name, sizeof s->name, "%s", c->session);
		s->sup = sup;
		session_fds_none(s);
		gate_none(s);
		s->next = sup->sessions;
		sup->sessions = s;
		s->lock_fd = -1;
		session_lock(sup, s, c);
	}
	queue_append(s, c);
	warm_busy(sup);
	/* Hurry: the session copies ahead what the next call will write while
	 * it takes its checkpoint (interp/precopy.h); with a call waiting,
	 * that only delays it, so W_HURRY cuts it short. */
	if (s->ckpt_due == DUE_AFTER_CALL && s->phase == P_CHECKPOINTING && s->ctrl >= 0)
		(void)wire_send(s->ctrl, W_HURRY, "", 0, NULL, 0);
	post_start(sup, s);
	/* Entered from the layer above, never from a handler of ours: what
	 * the submission decided (a call that cannot start is answered at
	 * once) is performed before the layer above goes on. */
	outbox_drain_now(sup, false);
}

static bool cancel_one(struct sup *sup, bool (*match)(const struct run *r, const void *key), const void *key)
{
	for (struct session *s = sup->sessions; s; s = s->next) {
		/* The cells run again after a rollback are the server's own:
		 * no request matches them (and match reads the caller's run). */
		if (s->cur && !replay_is_run(s->cur) && match(s->cur, key)) {
			s->cur->cancelled = true;
			run_verdict(s->cur, V_CANCEL, NULL); /* unless decided already */
			if (proc_alive(s))
				kill_session(s);
			else
				finish_cur(sup, s);
			return true;
		}
		for (struct run **pp = &s->qhead; *pp; pp = &(*pp)->next)
			if (!replay_is_run(*pp) && match(*pp, key)) {
				struct run *c = *pp;
				queue_unlink(s, pp);
				post_drop(sup, c);
				return true;
			}
	}
	return false;
}

bool sup_cancel(struct sup *sup, bool (*match)(const struct run *r, const void *key), const void *key)
{
	bool found = cancel_one(sup, match, key);
	/* As in sup_submit: what the cancel decided (a queued run dropped, a
	 * run without a process ended) is performed before the layer above
	 * goes on, with whatever waited in the outbox before it; a run whose
	 * end was posted already is no longer the session's to cancel, and
	 * is answered once, as it ended. */
	outbox_drain_now(sup, false);
	return found;
}

/* The server is exiting: each session's state not on disk is saved first
 * (by a checkpoint taken again, with a saver); sup_saving says when that
 * is over. */
void sup_shutdown(struct sup *sup)
{
	save_stopping(sup);
	for (struct session *s = sup->sessions; s; s = s->next) {
		if (save_at_exit(sup, s) && !save_as_journal(sup, s)) {
			/* Its last save was cut short, or never started (a call
			 * was waiting): the checkpoint again, with a saver. */
			log_info("session %s: saving the state after cell %d before exit", s->name, s->cells);
			take_owed_checkpoint(sup, s, true);
		}
	}
}

void sup_free(struct sup *sup)
{
	if (!sup)
		return;
	/* What is posted is performed first (the runs answered as they would
	 * have been on the loop), while every session is still whole. */
	outbox_drain_now(sup, true);
	/* End every session first, then the zygote (pid 1 of the jail's pid
	 * namespace: its end takes every process inside with it). */
	int pidfds[256];
	int n = 0;
	for (struct session *s = sup->sessions; s; s = s->next) {
		if (s->ckpt_pidfd >= 0)
			pidfd_signal(s->ckpt_pidfd, SIGKILL);
		if (s->pidfd >= 0) {
			pidfd_signal(s->pidfd, SIGKILL);
			if (n < 256)
				pidfds[n++] = dup(s->pidfd);
		}
	}
	if (sup->zpid > 0) {
		kill(sup->zpid, SIGKILL);
		waitpid(sup->zpid, NULL, 0);
	}
	/* Wait (bounded) until the sessions are really gone, so no process
	 * outlives the server. */
	for (int i = 0; i < n; i++) {
		if (pidfds[i] < 0)
			continue;
		struct pollfd p = { .fd = pidfds[i], .events = POLLIN };
		poll(&p, 1, 2000);
		close(pidfds[i]);
	}
	end_orphans();
	remove_scratch(sup);
	zygote_timers_stop(sup);
	struct session *s = sup->sessions;
	while (s) {
		struct session *next = s->next;
		/* The loop may outlive this supervisor (the unit tests run
		 * several on one): no timer of ours may fire after it. */
		cancel_timers(sup, s);
		cancel_due_timer(sup, s);
		cancel_fork_timer(sup, s);
		session_close_fds(sup, s);
		if (s->cur)
			post_drop(sup, s->cur);
		for (struct run *c = s->qhead; c;) {
			struct run *cn = c->next;
			post_drop(sup, c);
			c = cn;
		}
		queue_none(s);
		outbuf_free(&s->out);
		outbuf_free(&s->err);
		psave_abandon(s->save);
		ptable_free(s->pieces);
		save_watch_stop(sup, s);
		prestore_free(s->restore);
		free(s->next_note);
		replay_free(s);
		journal_cells_free(s->journal, s->journal_n);
		/* Its runs are dropped before the session goes (a cell run
		 * again names its session). */
		outbox_drain_now(sup, true);
		if (s->lock_fd >= 0)
			close(s->lock_fd);
		free(s);
		s = next;
	}
	gate_free(sup);
	persist_free(sup->persist);
	warmup_free(sup->warm);
	zlink_free(sup->zl);
	free(sup);
}

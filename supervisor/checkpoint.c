/* Checkpoints: take, accept, drop, roll back, resume.  A checkpoint is a
 * frozen fork of the session's process, holding its state after the last
 * call; a crash resumes it in place of the dead process. */
#include "private.h"

#include "../common/pstat.h"

static void copy_died(void *arg, int fd, short revents);
static void copy_death(pid_t hpid, char *buf, size_t n);

static void due_expired(void *arg);

double resume_ms(void)
{
	const char *t = getenv("PSM_TEST_RESUME_MS");
	double v = t ? atof(t) : 0;
	return v > 0 && v < 30000.0 ? v : 30000.0;
}

void cancel_due_timer(struct sup *sup, struct session *s)
{
	if (s->due_timer)
		loop_timer_cancel(sup->cfg.loop, s->due_timer);
	s->due_timer = 0;
}

void arm_due_timer(struct sup *sup, struct session *s)
{
	cancel_due_timer(sup, s);
	s->due_timer = loop_timer(sup->cfg.loop, RESUME_MS, due_expired, s);
}

/* The session's process died during a call: resume its checkpoint, so the
 * state is what it was before the call.  False when there is none. */
bool roll_back(struct sup *sup, struct session *s, int wstatus, bool status_known)
{
	struct run *c = s->cur;
	if (!status_known || s->ckpt_pidfd < 0 || s->ctrl < 0)
		return false;
	/* Dead already, its death not yet seen by the loop (copy_died): a
	 * zombie of the dead session takes the resume signal and never
	 * answers, and the reply would say "rolled_back" about a lost state. */
	if (kproc_exited(s->ckpt_pidfd)) {
		char lost_why[sizeof s->copy_lost];
		copy_death(s->ckpt_hpid, lost_why, sizeof lost_why);
		copy_lost_set(s, lost_why);
		drop_checkpoint(s);
		return false;
	}
	drain_all(s);
	discard_ctrl_input(s);
	/* A save of the checkpoint's state ends with its saver, which the
	 * resumed copy kills; the copy saves its state again (a new
	 * checkpoint, a new saver). */
	quiet_abandon_save(sup, s);
	save_unasked(s);
	/* The copy resumes as the session: its score goes back to the one the
	 * session had, or it and every copy it forks would score the same. */
	oom_offer(s->ckpt_hpid, 0, s->ckpt_pidfd, OOM_ADJ_SESSION);
	/* The copy is frozen (SIGSTOP since it was accepted): the resume
	 * signal first, then SIGCONT, so it wakes with the signal pending. */
	s->ckpt_since = kproc_now_ticks();
	s->ckpt_asked_ms = loop_now_ms();
	if (pidfd_signal(s->ckpt_pidfd, SIGUSR1) < 0 || pidfd_signal(s->ckpt_pidfd, SIGCONT) < 0) {
		log_warn("session %s: the checkpoint is gone (%s)", s->name, strerror(errno));
		return false;
	}
	loop_unwatch(sup->cfg.loop, s->ckpt_pidfd); /* the session's now (copy_died) */
	session_is_copy(s);
	/* Until the resumed copy says hello it drops whatever was queued for
	 * the dead process (a cell sent after it died must not run).  It is
	 * as hostile as the session was: if it does not say hello and take
	 * its own checkpoint in time, it is ended (a copy that ignores the
	 * resume signal must not hold the session, or a reset, forever). */
	set_due(s, DUE_RESUMED);
	set_expect(sup, s, P_RESUMING);
	arm_due_timer(sup, s);
	/* The pipes' write ends live on in the resumed process: watch again
	 * in case a hang-up removed them. */
	loop_watch(sup->cfg.loop, s->ctrl, POLLIN, sup->on_ctrl, s);
	loop_watch(sup->cfg.loop, s->out_r, POLLIN, pipe_event, s);
	loop_watch(sup->cfg.loop, s->err_r, POLLIN, pipe_event, s);
	if (s->broke[0] && !(c && c->started)) {
		/* Ended between calls, while taking the checkpoint of the
		 * previous call's state (or a copy of it): that call's reply
		 * said the state was kept, so the next one says it was not
		 * (the call that is sent again, if one was on its way). */
		char note[600];
		if (s->broke_kept)
			snprintf(note, sizeof note,
				 "after the previous call the session's process broke its protocol with the server (%s), so it was "
				 "ended as a crash and resumed from its copy of the state after that call: nothing was lost", s->broke);
		else
			snprintf(note, sizeof note,
				 "after the previous call the session's process broke its protocol with the server (%s), so it was "
				 "ended as a crash and rolled back to its state before that call: what that call did to variables "
				 "was lost (files it wrote stay)", s->broke);
		note_next(s, note);
		broke_none(s);
	}
	/* The cells logged since the checkpoint run again first, ahead of
	 * every call (replay.c); this call's reply waits for them and says
	 * how they went. */
	bool requeued = requeue_unstarted(sup, s);
	bool replaying = replay_begin(sup, s, requeued ? NULL : c);
	if (requeued)
		return true; /* sent again after the resumed copy's hello */
	if (c) {
		decide_on_death(c, wstatus, status_known, true);
		if (!replaying) {
			char note[800];
			snprintf(note, sizeof note,
				 "%s%sthe session was rolled back to its state before this call: everything defined earlier is still "
				 "there, nothing this call did to variables was kept (files it wrote stay)",
				 c->note ? c->note : "", c->note ? "; " : "");
			set_note(c, note);
		}
		finish_cur(sup, s);
	}
	broke_none(s);
	return true;
}

/* The checkpoint the session owes (ckpt_due) did not come within
 * RESUME_MS: the session is ended as a crash.  After a call the previous
 * checkpoint (if any) resumes; a resumed copy that did not answer is
 * dropped too, and the next call starts a new process (its exit report
 * closes the session). */
static void due_expired(void *arg)
{
	struct session *s = arg;
	s->due_timer = 0;
	if (s->ckpt_due == DUE_NONE)
		return;
	bool resumed = s->ckpt_due == DUE_RESUMED;
	log_warn(resumed ? "session %s: the resumed checkpoint did not answer within %.0f s: ended"
			 : "session %s: no checkpoint within %.0f s: ended",
		 s->name, RESUME_MS / 1000);
	/* The reply that rolled back said the state was kept: the next one
	 * says that copy is gone too. */
	snprintf(s->broke, sizeof s->broke,
		 resumed ? "the copy it was rolled back to did not answer within %.0f s" : "no checkpoint within %.0f s",
		 RESUME_MS / 1000);
	if (resumed)
		drop_checkpoint(s);
	kill_session(s);
}

/* A checkpoint is whatever process the pidfd names, as the kernel says: a
 * live child of the session's process (not what the message claims).  It
 * is frozen at once, so it runs nothing until it is resumed, and it stays
 * as hostile as the session was (resumed under a timer).
 * Attack: a cell forks a child that ignores the resume signal, announces it
 * as the checkpoint and kills itself, so that the server resumes a process
 * that never answers and keeps it from the sweep. */
int accept_checkpoint(struct sup *sup, struct session *s, int pidfd, pid_t said, char *why, size_t n)
{
	struct kproc k;
	if (!said) {
		snprintf(why, n, "a checkpoint message without its pid");
		return -EPROTO;
	}
	/* Born after the server asked for it: a child the cell forked
	 * earlier is no checkpoint of this state. */
	int kr = s->hpid <= 0 ? -EPROTO : kproc_confirm(pidfd, s->hpid, said, s->ckpt_since, &k, why, n);
	if (kr < 0)
		return kr == -ESRCH ? -ESRCH : -EPROTO; /* -ESRCH: it has exited (checkpoint_again) */
	if (pidfd_signal(pidfd, SIGSTOP) < 0) {
		snprintf(why, n, "its checkpoint cannot be stopped");
		return -EPROTO;
	}
	drop_checkpoint(s); /* the previous one */
	if (s->ckpt_asked_ms > 0)
		s->ckpt_cost_ms = loop_now_ms() - s->ckpt_asked_ms;
	replay_checkpoint_taken(s, s->phase == P_RESUMED);
	copy_known(s, pidfd, k.ns, k.host);
	/* Its death is seen at once (the pidfd polls readable), not by the
	 * call that needs it: one more descriptor in the loop's poll, no
	 * system call per call. */
	loop_watch(sup->cfg.loop, pidfd, POLLIN, copy_died, s);
	oom_offer(k.host, s->hpid, pidfd, OOM_ADJ_COPY);
	if (s->copy_lost[0] && !s->copy_given_up) {
		char note[400];
		snprintf(note, sizeof note,
			 "the copy of the session's state kept to roll back to was killed from outside (%s); a new one was taken "
			 "from the session, which held the same state: nothing was lost", s->copy_lost);
		note_next(s, note);
	}
	/* Given up by the server: the call's reply said so already. */
	copy_lost_none(s);
	return 0;
}

/* How a copy the server did not end died, for the log and the notes: its
 * exit status from /proc while it is a zombie of the frozen session (read
 * only where the server may: a root server, or one whose sessions are its
 * own user's and dumpable); else only that it died. */
static void copy_death(pid_t hpid, char *buf, size_t n)
{
	char path[64];
	struct pstat ps;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)hpid);
	/* The exit code (field 52) of a zombie ("Z"). */
	int code = pstat_read(-1, path, &ps) == 0 && ps.state == 'Z' ? ps.exit_code : -1;
	if (code > 0 && WIFSIGNALED(code))
		snprintf(buf, n, "%s: by an operator's kill, or the kernel's out-of-memory killer", call_signal_name(WTERMSIG(code)));
	else if (code > 0 && WIFEXITED(code))
		snprintf(buf, n, "it exited with status %d", WEXITSTATUS(code));
	else
		snprintf(buf, n, "it ended, and the server did not end it");
}

/* The copy is lost (sig, while it is still exiting: the signal seen
 * pending, -1 for a fatal one not named, 0 unknown): said, dropped, its
 * save abandoned.  A zombie of the session until the session runs:
 * "dying". */
static void copy_gone(struct sup *sup, struct session *s, int sig)
{
	char lost_why[sizeof s->copy_lost];
	copy_death(s->ckpt_hpid, lost_why, sizeof lost_why);
	if (sig != 0 && strstr(lost_why, "the server did not end it"))
		snprintf(lost_why, sizeof lost_why, "%s: by an operator's kill, or the kernel's out-of-memory killer",
			 sig > 0 ? call_signal_name(sig) : "a signal");
	copy_lost_set(s, lost_why);
	log_warn("session %s: its checkpoint copy (pid %d) died (%s): a new one is taken", s->name, (int)s->ckpt_hpid, s->copy_lost);
	drop_checkpoint(s);
	/* Its saver died with it (PDEATHSIG): the new copy saves again. */
	if (s->save)
		quiet_abandon_save(sup, s);
}

/* The copy to roll back to died, and not by the server's hand (its pidfd
 * polls readable): the kernel's OOM killer, an operator's kill by name.
 * Without a new one, the next timeout or crash would lose the whole state:
 * a resting session takes one at once (the state it holds is the one the
 * copy held), a busy one after its call (settled: no copy, no log), and
 * the call's reply says what was lost if the call then fails (session_dead). */
static void copy_died(void *arg, int fd, short revents)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	(void)revents;
	if (fd != s->ckpt_pidfd || !kproc_exited(fd)) {
		if (fd != s->ckpt_pidfd)
			loop_unwatch(sup->cfg.loop, fd);
		return;
	}
	copy_gone(sup, s, 0);
	if (!retake_copy(sup, s))
		log_info("session %s: a new copy is taken once its call is over", s->name);
}

/* The last look before a cell goes to a resting session: its copy, killed
 * from outside a moment ago, may still be exiting (unmapping a large
 * process takes milliseconds), so that its pidfd does not poll readable
 * yet and copy_died has not run.  Sent then, the call would run with no
 * state to go back to, and a timeout or crash would lose the whole state
 * although a new copy could have been taken first.  Seen: a copy killed
 * just before the call (the kill from outside a few milliseconds ahead of
 * the request) made a timeout reply `state new`.  The kernel says it
 * (kproc_dying): the copy is dropped and taken again, the call back at the
 * head of the queue (settled starts it).  One read of /proc and one poll
 * per call; a kill after this look is the call's to report (session_dead).
 * True: the call waits for the new copy. */
bool copy_lost_before_call(struct sup *sup, struct session *s)
{
	if (s->ckpt_pidfd < 0 || s->phase != P_IDLE)
		return false;
	int sig;
	if (!kproc_dying(s->ckpt_pidfd, s->ckpt_hpid, &sig))
		return false;
	copy_gone(sup, s, sig);
	return retake_copy(sup, s);
}

/* At most this many copies are taken again between two calls: something
 * outside that kills every copy at once must not keep the session forking. */
#define COPY_RETAKES_MAX 3

/* The checkpoint the session reported has exited already: killed from
 * outside between its fork and the report (the server cannot tell it from
 * a session that sent a dead child, which only harms itself): the session
 * is asked again, at most COPY_RETAKES_MAX times between two calls, in
 * the phase it is in, under the same timer.  False: not asked (the
 * report is then a protocol break, as before). */
bool checkpoint_again(struct sup *sup, struct session *s)
{
	if (s->copy_retakes >= COPY_RETAKES_MAX || s->ctrl < 0)
		return false;
	copy_retake(s);
	copy_lost_set(s, "it ended before the server could take it in");
	log_warn("session %s: its new checkpoint copy died before the server took it in: asked again", s->name);
	s->ckpt_since = kproc_now_ticks();
	s->ckpt_asked_ms = loop_now_ms();
	char *body = save_take_message(s);
	int r = wire_send(s->ctrl, W_TAKE_CHECKPOINT, body, strlen(body), NULL, 0);
	free(body);
	(void)sup;
	return r == 0;
}

bool retake_copy(struct sup *sup, struct session *s)
{
	struct run *c = s->cur;
	if (!s->copy_lost[0] || s->ckpt_pidfd >= 0 || !proc_alive(s) || proc_ending(s) || s->phase != P_IDLE || s->ckpt_due != DUE_NONE ||
	    s->ctrl < 0 || s->pidfd < 0 || s->fork_child || replay_active(s) || !sup->cfg.policy->limits.checkpoint ||
	    s->copy_retakes >= COPY_RETAKES_MAX)
		return false;
	/* A call about to be sent (its workspace snapshot under way) waits
	 * for the copy at the head of the queue. */
	if (c && (c->started || c->finish_pending || c->collected || c->result))
		return false;
	requeue_first(s);
	copy_retake(s);
	take_owed_checkpoint(sup, s, s->dirty);
	return true;
}

/* The session is thawed (for its checkpoint, or to fork a copy): the CPU
 * it had used by then, from which the watchdog counts. */
void thaw_mark(struct session *s)
{
	s->thaw_cpu0 = s->hpid > 0 ? watch_cpu_ms(s->hpid) : 0;
}

/* A checkpoint the session owes now (DUE_AFTER_CALL), taken at once: a
 * copy taken again, or a save at rest or at exit. */
void take_owed_checkpoint(struct sup *sup, struct session *s, bool save)
{
	set_due(s, DUE_AFTER_CALL);
	take_checkpoint(sup, s, save);
}

/* Thaws the idle session just long enough to fork its checkpoint, under a
 * timer; it is frozen and swept again once the checkpoint is in.  save:
 * the checkpoint forks a saver of its state too (saved sessions: only once
 * the session rests, or at exit; savepace.h). */
void take_checkpoint(struct sup *sup, struct session *s, bool save)
{
	thaw_mark(s);
	if (s->pidfd >= 0)
		pidfd_signal(s->pidfd, SIGCONT);
	set_expect(sup, s, P_CHECKPOINTING);
	/* The limits hold while it runs for its checkpoint, too.
	 * Attack: a cell that sent a made-up result and slept through the
	 * looks (it is believed: a sleeping process looks idle) runs again
	 * here, after its reply; without the watchdog it could hold shared
	 * memory over memory_mb, or compute, until the checkpoint timer. */
	start_watch(sup, s);
	arm_due_timer(sup, s);
	s->ckpt_since = kproc_now_ticks();
	s->ckpt_asked_ms = loop_now_ms();
	save_ask(sup, s, save);
	char *body = save_take_message(s);
	int r = wire_send(s->ctrl, W_TAKE_CHECKPOINT, body, strlen(body), NULL, 0);
	free(body);
	if (r < 0)
		kill_session(s);
}

bool save_as_journal(struct sup *sup, struct session *s)
{
	struct journal_cell *v = NULL;
	int n = journal_may(sup, s) ? replay_journal(s, s->snap_cells, &v) : 0;
	return n > 0 && journal_write(sup, s, v, (size_t)n);
}

/* The session rests with a state not on disk: saved once it has rested for
 * the delay savepace.h prices (at once when the server is exiting), by a
 * checkpoint taken again, with a saver.  Calls that come meanwhile move the
 * save back: a working session is not saved after every call. */
static void save_idle_fired(void *arg)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	save_pace_fired(&s->pace);
	if (!persist_on(sup->persist) || !save_startable(sup, s) || save_as_journal(sup, s))
		return;
	log_info("session %s: at rest: saving the state after cell %d", s->name, s->cells);
	take_owed_checkpoint(sup, s, true);
}

void save_when_idle(struct sup *sup, struct session *s)
{
	if (!persist_on(sup->persist) || !save_startable(sup, s))
		return;
	if (sup->stopping)
		save_idle_fired(s);
	else
		save_pace_arm(&s->pace, sup->cfg.loop, save_idle_fired, s);
}

/* Saved sessions' glue: "is this session's state on disk?"  The saver a
 * checkpoint starts, its budget and watchdog, the notes the replies carry
 * about it, and the restore of a saved state into a new process
 * (persist.c does the writing and reading). */
#include "private.h"

static double save_budget(const struct sup *sup, double ms, int factor);
static void fallback_words(const struct session *s, char *buf, size_t n);

/* An idle session whose state is not on disk, with nothing on the way
 * that would save it: a checkpoint taken again starts a save. */
bool save_startable(const struct sup *sup, const struct session *s)
{
	return s->dirty && !s->unsaved && !s->save_failed && !s->save_missed && !s->save && proc_alive(s) && s->phase == P_IDLE && !s->cur && !s->qhead &&
	       s->ckpt_due == DUE_NONE && s->ctrl >= 0 && sup->cfg.policy->limits.checkpoint;
}

/* What keeps the state of an ended call from being on disk yet: its save
 * running, its checkpoint (which starts the save) being taken, or a save
 * that sup_shutdown can still start. */
static bool session_saving(const struct sup *sup, const struct session *s)
{
	if (!persist_on(sup->persist) || !proc_alive(s) || s->unsaved)
		return false;
	return s->save || (s->dirty && !s->save_failed && s->ckpt_due != DUE_NONE) || save_startable(sup, s);
}

bool sup_saving(struct sup *sup)
{
	for (struct session *s = sup ? sup->sessions : NULL; s; s = s->next)
		if (session_saving(sup, s))
			return true;
	return false;
}

/* At the server's exit, one more try for a state whose saver could not
 * start: whether a save may start now (sup_shutdown takes the checkpoint
 * with a saver). */
bool save_at_exit(struct sup *sup, struct session *s)
{
	s->save_missed = false;
	return persist_on(sup->persist) && save_startable(sup, s);
}

/* The server is exiting: saves first. */
void save_stopping(struct sup *sup)
{
	sup->stopping = true;
}

void sup_report_unsaved(struct sup *sup)
{
	for (struct session *s = sup->sessions; s; s = s->next) {
		if (!proc_alive(s) || !persist_on(sup->persist) || s->unsaved)
			continue;
		const char *why = s->save ? "its save was still running"
				  : s->cur ? "a call was still running"
				  : s->dirty && !s->save_failed && s->ckpt_due != DUE_NONE ? "its checkpoint was still being taken"
				  : s->dirty && !s->save_failed && s->save_missed ? "no process to save it could be started"
				  : NULL;
		if (!why)
			continue;
		char fb[160];
		fallback_words(s, fb, sizeof fb);
		log_warn("session %s: the state after cell %d could not be saved before the server exited (%s); %s", s->name,
			 s->save ? (int)s->save_cells : s->cells, why, fb);
	}
}

/* What the state's save costs at most, besides the session's own limits
 * (save_watch_fired): pickling runs user code (__reduce__, __getstate__),
 * so the saver is bounded like a call, in wall-clock and CPU time.  A base
 * for the pickling, then time in proportion to the state it announced
 * (measured: 1.3 s for 1 GiB on the test machine, quiet; 11 s loaded). */
#define SAVE_WALL_MS(sup, bytes) save_budget(sup, 30000.0 + (double)(bytes) / (16.0 * 1048576.0) * 1000.0, 0)
#define SAVE_CPU_MS(sup, bytes) save_budget(sup, 20000.0 + (double)(bytes) / (32.0 * 1048576.0) * 1000.0, 1)

/* PSM_TEST_SAVE_MS=N: a test knob that can only tighten the save's budgets
 * (CPU N ms, wall-clock 2N, or PSM_TEST_SAVE_WALL_MS when set), so that the
 * tests of a save that runs too long do not take 30 s each.  A test that
 * races a limit against the wall clock (memory filled by pickling's
 * processes) keeps the wall-clock budget wide, so that load cannot make
 * the clock win.  factor 0: the wall-clock budget. */
static double save_budget(const struct sup *sup, double ms, int factor)
{
	double cap = factor ? sup->save_test_ms * factor : sup->save_test_wall_ms > 0 ? sup->save_test_wall_ms : sup->save_test_ms * 2;
	return cap > 0 && cap < ms ? cap : ms;
}

static void fmt_age(double sec, char *buf, size_t sz)
{
	if (sec < 120)
		snprintf(buf, sz, "%.0f s", sec);
	else if (sec < 7200)
		snprintf(buf, sz, "%.0f min", sec / 60);
	else if (sec < 172800)
		snprintf(buf, sz, "%.0f h", sec / 3600);
	else
		snprintf(buf, sz, "%.0f days", sec / 86400);
}

/* Appends up to 30 entries of a list the session sent: n names, or n
 * [name, reason] pairs, of total in all.  Untrusted: each piece is
 * sanitised and cut. */
static void list_names(char *buf, size_t sz, const char *const *names, const char *const (*pairs)[2], size_t n_in,
		       size_t total)
{
	size_t n = strlen(buf), shown = 0;
	for (size_t i = 0; i < n_in && shown < 30 && n + 8 < sz; i++) {
		const char *name = pairs ? pairs[i][0] : names[i], *why = pairs ? pairs[i][1] : NULL;
		char *nm = utf8_sanitize((const unsigned char *)name, strnlen(name, 64), NULL);
		char *wy = why ? utf8_sanitize((const unsigned char *)why, strnlen(why, 200), NULL) : NULL;
		int k = snprintf(buf + n, sz - n, "%s%s%s%s%s", shown ? ", " : "", nm ? nm : "?", wy ? " (" : "", wy ? wy : "", wy ? ")" : "");
		free(nm);
		free(wy);
		if (k < 0 || (size_t)k >= sz - n) {
			buf[n] = 0;
			break;
		}
		n += (size_t)k;
		shown++;
	}
	if (total > shown && n + 32 < sz)
		snprintf(buf + n, sz - n, " and %zu more", total - shown);
}

/* What a restart of the server would bring back now, for a note. */
static void fallback_words(const struct session *s, char *buf, size_t n)
{
	if (s->saved_cells)
		snprintf(buf, n, "a restart of the server would bring back the state saved after cell %u", s->saved_cells);
	else
		snprintf(buf, n, "a restart of the server would bring back the last state saved before it, if any");
}

/* The processes of the save: whatever the saver (a child of the frozen
 * checkpoint) started, and what it left behind, which comes up to the
 * session (a subreaper) when its parent ends.  Ended by the server itself,
 * by host pid, from the kernel's parent links: the checkpoint and the
 * session are frozen, so nothing of theirs forks meanwhile, and only their
 * descendants are looked at.  The part below the session waits for the
 * session to be idle (frozen between calls): during a call, or while it
 * takes a checkpoint, its children are the call's (or the new checkpoint).
 * Attack: a __reduce__ that forks a child during the save; the child ran
 * on between calls (a heartbeat file grew 23 times in 8 idle seconds),
 * outside every limit. */
void end_save_tree(struct sup *sup, struct session *s)
{
	int r = 0;
	if (s->ckpt_hpid > 0)
		r = procs_end_below(s->ckpt_hpid, NULL, 0, false);
	if (s->phase == P_IDLE && s->hpid > 0 && !s->save) {
		pid_t keep = s->ckpt_hpid;
		int r2 = procs_end_below(s->hpid, &keep, keep > 0 ? 1 : 0, false);
		if (r2 > 0 || r < 0)
			r = r < 0 ? r : r + r2;
		s->save_ran = false;
	}
	if (r > 0)
		log_info("session %s: ended %d process(es) its save left running", s->name, r);
	else if (r < 0)
		log_warn("session %s: cannot end what its save started: %s", s->name, strerror(-r));
	(void)sup;
}

void save_watch_stop(struct sup *sup, struct session *s)
{
	if (s->save_timer)
		loop_timer_cancel(sup->cfg.loop, s->save_timer);
	s->save_timer = 0;
	wswatch_stop(s->save_ws);
	s->save_ws = NULL;
}

/* The process a save belongs to is gone or rolled back: nothing to say. */
void quiet_abandon_save(struct sup *sup, struct session *s)
{
	struct psave *sv = s->save;
	s->save = NULL;
	psave_abandon(sv);
	save_watch_stop(sup, s);
}

/* The save flags change here only.  A new state was kept (after a call):
 * saved at rest even if the last one's save failed (a logged one too: the
 * save at rest takes its checkpoint). */
void save_state_new(struct session *s)
{
	s->save_missed = s->save_failed = false;
	if (!s->dirty)
		s->unsaved_since = loop_now_ms();
	s->dirty = true;
}

/* A forked copy's state: its name has nothing on disk yet, so its first
 * checkpoint saves it. */
void save_state_copied(struct sup *sup, struct session *s)
{
	s->dirty = persist_on(sup->persist);
	s->unsaved_since = loop_now_ms();
}

/* The state died with the session's process: nothing left to save. */
void save_state_died(struct session *s)
{
	s->dirty = s->save_asked = false;
	s->snap_ours = false; /* the next state follows no snapshot of ours */
}

bool journal_may(const struct sup *sup, const struct session *s)
{
	return persist_on(sup->persist) && !s->unsaved && !s->save && s->snap_ours && s->snap_gen == s->ckpt_gen && proc_alive(s);
}

bool journal_write(struct sup *sup, struct session *s, struct journal_cell *v, size_t n)
{
	double t0 = loop_now_ms();
	size_t bytes = 0;
	struct err e = { 0 };
	int r = pjournal_write(sup->persist, s->name, s->snap_nonce, s->snap_cells, v, n, &bytes, &e);
	int first = v[0].cell;
	journal_cells_free(v, n);
	if (r < 0) {
		/* The state is saved whole instead, and that save says what
		 * went wrong when it fails too (a full disk). */
		log_warn("session %s: %s; saving the state whole instead", s->name, e.msg);
		return false;
	}
	double ms = loop_now_ms() - t0;
	log_info("session %s: state saved (a journal of cells %d to %d after the snapshot of cell %u: %zu bytes in %.1f ms)",
		 s->name, first, s->cells, s->snap_cells, bytes, ms);
	s->save_failed = s->abandon_noted = false;
	s->fail_said[0] = '\0';
	s->dirty = false;
	s->saved_cells = (uint32_t)s->cells;
	/* The delay stays priced by the last whole save (savepace.h): the
	 * next one, after a checkpointed cell, costs what that one did. */
	post_ended(sup); /* the server may be waiting for this state's save */
	return true;
}

struct journal_cell *journal_take(struct session *s, size_t *n)
{
	struct journal_cell *v = s->journal;
	*n = s->journal_n;
	s->journal = NULL;
	s->journal_n = 0;
	return v;
}

/* A journal read before and not run (another restore reads it anew). */
static void journal_drop(struct session *s)
{
	size_t n = 0;
	struct journal_cell *v = journal_take(s, &n);
	journal_cells_free(v, n);
}

void restore_carried_by(struct session *s, struct run *r)
{
	s->restore_call = r;
}

void cells_after_load(struct session *s, int cells)
{
	s->cells = cells;
}

/* The pieces of the session's last save are no longer what is on disk
 * (a whole save replaced them, a reset or an over-large state removed
 * them): the next save is whole. */
static void pieces_forget(struct session *s)
{
	ptable_free(s->pieces);
	s->pieces = NULL;
}

/* A reset forgets the saved state: the save under way is abandoned and
 * nothing is owed or known on disk any more (the caller removes it). */
void save_forget(struct sup *sup, struct session *s)
{
	psave_abandon(s->save);
	s->save = NULL;
	pieces_forget(s);
	save_watch_stop(sup, s);
	s->dirty = s->save_failed = s->snap_ours = false;
	s->saved_cells = 0;
	s->restore_tried = true;
	s->lost[0] = '\0'; /* discarded anyway */
}

/* The session runs without saving (another server holds its lock, or
 * none could be taken): nothing is restored either. */
void save_none(struct session *s)
{
	s->unsaved = true;
	s->restore_tried = true;
}

/* What the session's cell counter and its restore say, set here only.  A
 * new interpreter has run no cell. */
void cells_none(struct session *s)
{
	s->cells = 0;
}

/* The cell number a call runs as. */
void run_cell(struct run *c, int cell)
{
	c->cell = cell;
}

/* The number of the cell sent now. */
int cell_next(struct session *s)
{
	return ++s->cells;
}

/* A forked copy holds the parent's state: its cells, nothing to restore. */
void state_copied_from(struct session *s, const struct session *p)
{
	s->cells = p->cells;
	s->restore_tried = true;
}

/* The copy's parent lives only on disk: the new session is restored from
 * its saved state, tried anew. */
void restore_anew(struct session *s)
{
	s->restore_tried = false;
	s->restore_attempts = 0;
}

/* The state was lost from outside (why) with held cells: the next call
 * looks for the saved state again and says what was lost (lost_outcome). */
void state_lost(struct session *s, const char *why, int held)
{
	snprintf(s->lost, sizeof s->lost, "%s", why);
	s->lost_cells = held;
	s->restore_tried = false;
}

/* The process died before it received call c: its cell was not run, and
 * a stream of the saved state sent with it went to a process that never
 * read it, so the resent cell looks for the saved state again. */
void cell_unsent(struct session *s, const struct run *c)
{
	s->cells--;
	if (s->restore_call == c) {
		prestore_free(s->restore);
		s->restore = NULL;
		s->restore_call = NULL;
		s->restore_tried = false;
	}
}

/* A cell is sent: nothing of a saved state is loading, said or loaded. */
void restore_unloaded(struct session *s)
{
	s->restore_loading = s->restore_said = s->restore_loaded = false;
}

/* A saved state goes with the cell: its load is bounded, and the cell's
 * own timeout ends at deadline (ms) once it is loaded. */
void restore_load_begin(struct session *s, double deadline)
{
	s->restore_loading = true;
	s->restore_deadline = deadline;
}

/* Whether the checkpoint being asked for comes with a saver. */
bool save_ask(struct sup *sup, struct session *s, bool save)
{
	s->save_asked = save && persist_on(sup->persist) && !s->unsaved;
	return s->save_asked;
}

/* The W_TAKE_CHECKPOINT that asks for a checkpoint, with a saver when
 * save_asked: then the labels of the pieces of its last save too, which the
 * saver names instead of sending again (persist.h).  Allocated. */
char *save_take_message(struct session *s)
{
	char *known = s->save_asked ? ptable_known_hex(s->pieces) : NULL;
	char *body = smsg_take_checkpoint_encode(&(struct smsg_take_checkpoint){ .save = s->save_asked, .known = known });
	free(known);
	return body;
}

/* A checkpoint resumed: its own checkpoint comes unasked. */
void save_unasked(struct session *s)
{
	s->save_asked = false;
}

/* The checkpoint came, with a saver's pipe or without: a saver asked for
 * and not given is missed (the state stays dirty, not asked again at once). */
void save_answered(struct session *s, bool had_pipe)
{
	s->save_missed = s->save_asked && !had_pipe;
	s->save_asked = false;
}

/* The next reply names what could not be pickled, once for each new set
 * of names (the save goes on without them). */
static void note_unpicklable(struct session *s, const char *summary)
{
	struct save_summary sm;
	struct err e = { 0 };
	if (summary && save_summary_decode(summary, strlen(summary), &sm, &e) < 0) {
		/* The saver ran the user's pickling code: its summary is
		 * refused whole, and the state it saved is kept. */
		log_warn("session %s: %s", s->name, e.msg);
		return;
	}
	if (!summary)
		sm = (struct save_summary){ 0 };
	unsigned long sig = 5381;
	for (size_t i = 0; i < sm.n_unsaved; i++) {
		for (const char *p = sm.unsaved[i][0]; *p; p++)
			sig = sig * 33 + (unsigned char)*p;
		sig = sig * 33 + 1;
	}
	if (sm.n_unsaved == 0)
		sig = 0;
	if (sig && sig != s->unsaved_sig) {
		char m[3000];
		snprintf(m, sizeof m, "not saved with the session's state (a restart of the server loses them; the rest is saved): ");
		list_names(m, sizeof m, NULL, (const char *const(*)[2])sm.unsaved, sm.n_unsaved,
			   sm.n_unsaved + (size_t)sm.unsaved_more);
		note_next(s, m);
	}
	s->unsaved_sig = sig;
	save_summary_free(&sm);
}

/* A save that did not make it: said at warn level, and in the next reply
 * unless the last one said the same already (a disk that stays full). */
static void save_failure(struct sup *sup, struct session *s, const char *why)
{
	char fb[160], m[900];
	s->save_failed = true;
	fallback_words(s, fb, sizeof fb);
	snprintf(m, sizeof m, "the state after cell %u was not saved: %s; %s", s->save_cells, why, fb);
	log_warn("session %s: %s", s->name, m);
	if (strncmp(s->fail_said, why, sizeof s->fail_said - 1) != 0)
		note_next(s, m);
	snprintf(s->fail_said, sizeof s->fail_said, "%s", why);
	(void)sup;
}

static void save_done(void *arg, const struct psave_result *r)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	s->save = NULL;
	save_watch_stop(sup, s);
	end_save_tree(sup, s);
	if (r->drop_table)
		pieces_forget(s);
	if (r->status == 0) {
		pieces_forget(s);
		s->pieces = r->table; /* NULL for a whole one */
		log_info("session %s: state saved (%llu bytes in %.0f ms, %llu written)", s->name, (unsigned long long)r->bytes, r->ms,
			 (unsigned long long)r->written);
		s->cap_noted = s->save_failed = s->abandon_noted = false;
		s->fail_said[0] = '\0';
		s->dirty = false;
		s->saved_cells = s->save_cells;
		/* The snapshot the next journal follows (the one before it
		 * went with the rename). */
		s->snap_ours = true;
		memcpy(s->snap_nonce, r->nonce, sizeof s->snap_nonce);
		s->snap_cells = s->save_cells;
		s->snap_gen = s->save_gen;
		save_pace_saved(&s->pace, loop_now_ms() - s->save_t0);
		note_unpicklable(s, r->summary);
	} else if (r->status == -EFBIG) {
		/* A restart must not bring back an older state as if it were
		 * the last one: the previous snapshot goes too. */
		persist_discard(sup->persist, s->name);
		pieces_forget(s);
		s->saved_cells = 0;
		s->snap_ours = false;
		s->save_failed = true;
		if (!s->cap_noted) {
			char m[400];
			snprintf(m, sizeof m,
				 "the session's state (%.0f MB) is over limits.persist_mb (%ld MB): it is not saved, and a restart of the server will lose it; "
				 "delete large variables you no longer need (del name) or raise persist_mb in the policy",
				 (double)r->bytes / 1048576.0, sup->cfg.policy->limits.persist_mb);
			note_next(s, m);
			s->cap_noted = true;
		}
		log_warn("session %s: state not saved: %s", s->name, r->msg);
	} else {
		char why[400];
		if (s->save_stop[0])
			snprintf(why, sizeof why, "%s", s->save_stop);
		else if (r->status == -ENOSPC || r->status == -EDQUOT)
			snprintf(why, sizeof why, "the disk of the workspace is full (%s): free some space there", strerror(-r->status));
		else if (r->status == -EPIPE)
			snprintf(why, sizeof why, "the process that pickles it ended before it was done (%s)", r->msg);
		else
			snprintf(why, sizeof why, "%s", r->msg);
		save_failure(sup, s, why);
	}
	s->save_stop[0] = '\0';
	post_ended(sup);
}

/* Stops the save: its processes are ended, and the reason goes to the
 * next reply (save_done, once the stream ends). */
static void stop_save(struct sup *sup, struct session *s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void stop_save(struct sup *sup, struct session *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->save_stop, sizeof s->save_stop, fmt, ap);
	va_end(ap);
	struct psave *sv = s->save;
	s->save = NULL;
	psave_abandon(sv);
	struct psave_result r = { .status = -ECANCELED };
	snprintf(r.msg, sizeof r.msg, "%s", s->save_stop);
	save_done(s, &r);
}

/* The workspace grew past max_workspace_mb (more than the snapshot the
 * server is writing) while the saver ran. */
static void save_workspace_over(void *arg, unsigned long long bytes, const char *unseen)
{
	struct session *s = arg;
	wswatch_stop(s->save_ws);
	s->save_ws = NULL;
	if (s->save && unseen)
		stop_save(s->sup, s,
			  "while it was being saved, the server could not measure all of the workspace: it holds %s, which counts as over "
			  "limits.max_workspace_mb (%ld MB)",
			  unseen, s->sup->cfg.policy->limits.max_workspace_mb);
	else if (s->save)
		stop_save(s->sup, s,
			  "while it was being saved, code run by pickling (a __reduce__ or __getstate__ method) grew the workspace to %llu MB, "
			  "past limits.max_workspace_mb (%ld MB); the files it wrote stay",
			  bytes >> 20, s->sup->cfg.policy->limits.max_workspace_mb);
}

/* The save's watchdog: everything below the checkpoint (the saver and what
 * it started) counts with the session against memory_mb and max_processes,
 * and against the save's own time and CPU budgets. */
static void save_watch_fired(void *arg)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	s->save_timer = 0;
	if (!s->save)
		return;
	const struct policy_limits *L = &sup->cfg.policy->limits;
	uint64_t announced = psave_total(s->save);
	double wall = loop_now_ms() - s->save_t0;
	if (wall > SAVE_WALL_MS(sup, announced)) {
		stop_save(sup, s, "saving it took longer than %.0f s (code run by pickling, a __reduce__ or __getstate__ method, may be slow)",
			  SAVE_WALL_MS(sup, announced) / 1000.0);
		return;
	}
	wswatch_allow(s->save_ws, psave_written(s->save));
	/* A call runs meanwhile: what the server writes is not its growth. */
	if (s->cur && psave_written(s->save) > s->save_written0)
		wswatch_allow(s->watch, psave_written(s->save) - s->save_written0);
	double next = WATCH_MAX_INTERVAL_MS;
	struct footprint u;
	struct save_footprint v;
	pid_t dying_h, dying_ns;
	dying_pids(s, &dying_h, &dying_ns);
	int wr = s->hpid <= 0 || s->ckpt_hpid <= 0 ? -ESRCH
		 : sup->proc_jail ? watch_save_footprint(sup->proc, sup->zhpid, s->pid, s->ckpt_pid, dying_ns, &u, &v)
				  : watch_save_footprint("/proc", sup->zhpid, s->hpid, s->ckpt_hpid, dying_h, &u, &v);
	if (wr == 0) {
		/* With each process's proportional share of what it maps (Pss),
		 * the saver's copy-on-write view of the state counts a third;
		 * where that cannot be read (a server without CAP_SYS_PTRACE
		 * over its sessions), the saver may map as much as the session
		 * holds before it counts. */
		uint64_t anon = v.pss ? v.anon : v.anon > u.anon ? v.anon - u.anon : 0;
		uint64_t total = u.total + anon + v.shmem + v.memfd;
		uint64_t limit = (uint64_t)L->memory_mb << 20;
		long tasks = u.tasks + v.tasks;
		if (total > limit) {
			stop_save(sup, s,
				  "while it was being saved, the session with the code run by pickling (a __reduce__ or __getstate__ method) "
				  "and the processes it started used %.0f MB, over memory_mb (%ld MB)",
				  (double)total / 1048576.0, L->memory_mb);
			return;
		}
		if (tasks > L->max_processes + 1) {
			stop_save(sup, s,
				  "while it was being saved, the code run by pickling started processes: %ld processes and threads with the session, "
				  "over max_processes (%ld)",
				  tasks, L->max_processes);
			return;
		}
		if ((double)v.cpu_ms > SAVE_CPU_MS(sup, announced)) {
			stop_save(sup, s, "saving it used %ld ms of CPU, over the save's budget of %.0f ms", v.cpu_ms,
				  SAVE_CPU_MS(sup, announced));
			return;
		}
		struct footprint both = u;
		both.total = total;
		both.tasks = tasks;
		next = watch_next_ms(&both, limit, L->max_processes);
	}
	s->save_timer = loop_timer(sup->cfg.loop, next, save_watch_fired, s);
}

/* The saver's pipe came with a checkpoint: the state after the session's
 * last call (cells) is written to disk in the background, watched. */
void save_begin(struct sup *sup, struct session *s, int fd)
{
	struct err e = { 0 };
	psave_abandon(s->save);
	save_watch_stop(sup, s);
	s->save_cells = (uint32_t)s->cells;
	s->save_gen = s->ckpt_gen; /* the checkpoint just accepted, which forked the saver */
	s->save_stop[0] = '\0';
	s->save = psave_start(sup->persist, sup->cfg.loop, s->name, (uint32_t)s->cells, fd, s->pieces, save_done, s, &e);
	if (!s->save) {
		save_failure(sup, s, e.msg);
		return;
	}
	s->save_ran = true;
	/* The saver (the frozen copy's one child) is the cheapest to lose to
	 * the OOM killer: a save tried again (oom_offer). */
	char kids[256], *end;
	snprintf(kids, sizeof kids, "/proc/%d/task/%d/children", (int)s->ckpt_hpid, (int)s->ckpt_hpid);
	int kfd = s->ckpt_hpid > 0 ? open(kids, O_RDONLY | O_CLOEXEC) : -1;
	ssize_t kn = kfd >= 0 ? read(kfd, kids, sizeof kids - 1) : -1;
	if (kfd >= 0)
		close(kfd);
	kids[kn > 0 ? kn : 0] = '\0';
	for (char *k = kids; *k; k = end) {
		long pid = strtol(k, &end, 10);
		if (end == k)
			break;
		if (pid > 0)
			oom_offer((pid_t)pid, s->ckpt_hpid, -1, OOM_ADJ_SAVER);
	}
	s->save_t0 = loop_now_ms();
	s->save_timer = loop_timer(sup->cfg.loop, WATCH_MS, save_watch_fired, s);
	s->save_ws = sup_wswatch(sup, save_workspace_over, s);
}

/* A new call: a save still running goes on meanwhile (the saver is a fork
 * of the frozen checkpoint, niced, and its watchdog keeps counting it with
 * the session); what an earlier save started and left ends before the
 * session runs again. */
void save_cut(struct sup *sup, struct session *s)
{
	if (s->save_ran && !s->save)
		end_save_tree(sup, s);
}

/* The call is over and its state's checkpoint replaces the one a save
 * still runs from: that save stops, and the state after this call is saved
 * instead, so nothing is lost by it.  Only when saves keep being cut short
 * this way (calls that come faster than a large state is saved) does the
 * state on disk fall behind: once it is SUPERSEDED_NOTE_MS older than the
 * session's state, the reply says so, once until a save makes it. */
#define SUPERSEDED_NOTE_MS 30000.0

void save_superseded(struct sup *sup, struct session *s, struct run *c)
{
	if (!s->save)
		return;
	double behind = loop_now_ms() - s->unsaved_since;
	if (!s->abandon_noted && s->dirty && behind > SUPERSEDED_NOTE_MS) {
		char fb[160], m[700];
		fallback_words(s, fb, sizeof fb);
		snprintf(m, sizeof m,
			 "the session's saves keep being cut short: each call so far ended before the save of the state before it was done "
			 "(the last one had taken in %.0f of %.0f MB after %.1f s), so nothing has been saved for %.0f s; the state after this call is "
			 "saved next, and a pause between calls lets it finish; %s",
			 (double)psave_received(s->save) / 1048576.0, (double)psave_total(s->save) / 1048576.0,
			 (loop_now_ms() - s->save_t0) / 1000.0, behind / 1000.0, fb);
		add_note(c, m);
		s->abandon_noted = true;
	}
	log_info("session %s: the save of the state after cell %u abandoned: the next state replaces it", s->name, s->save_cells);
	save_pace_cut(&s->pace, loop_now_ms() - s->save_t0);
	quiet_abandon_save(sup, s);
}

/* The server's verdict on the saved state's bytes (persist_restore.c,
 * through state.c's restore_answered, the callback the face gives
 * restore_begin).  True when the call's deadline moves, to *ms from now:
 * its caller arms it (call.c's). */
bool restore_judged(struct session *s, int verdict, double *ms)
{
	s->restore_verdict = verdict == 1 ? RESTORE_OK : verdict == 0 ? RESTORE_BAD : verdict == -EBUSY ? RESTORE_BUSY : -1;
	/* Its own snapshot in pieces: the next save sends what changed since.
	 * (A fork_from one's pieces are in its parent's directory.) */
	if (verdict == 1 && !s->fork_src[0]) {
		pieces_forget(s);
		s->pieces = prestore_table(s->restore);
	}
	if (verdict == 1)
		log_info("session %s: saved state %s and verified (%llu bytes in %.0f ms)", s->name,
			 prestore_direct(s->restore) ? "read directly" : "streamed", (unsigned long long)prestore_bytes(s->restore),
			 prestore_ms(s->restore));
	if (verdict == -EBUSY)
		log_warn("session %s: the saved state was opened for writing by another process while the session read it: not loaded",
			 s->name);
	if (verdict == 0)
		log_warn("session %s: the saved state does not match its tag: refused", s->name);
	/* The load's bound was for loading the state: with nothing to load,
	 * the call has its own timeout (from when it was sent). */
	struct run *c = s->cur;
	if (verdict != 1 && c && c == s->restore_call && s->timeout_timer && s->restore_loading) {
		double left = c->t_start + c->timeout_ms - loop_now_ms();
		*ms = left > 0 ? left : 0;
		s->restore_loading = false;
		return true;
	}
	return false;
}

/* W_RESTORED: the session says the state it was sent is loaded and the
 * cell starts now, so the cell's timeout starts now.  Its word moves the
 * deadline only within the first one (the load's bound plus timeout_s):
 * a session that says it early only shortens its own call, one that never
 * says it is stopped at the load's bound.  Whether the state came back is
 * still the server's verdict (restore_judged), never this message.  True
 * when the call's deadline moves, to *ms from now: its caller (state.c)
 * arms it. */
bool restore_loaded(struct session *s, double *ms)
{
	struct run *c = s->cur;
	s->restore_said = true;
	if (!c || c != s->restore_call)
		return false;
	s->restore_loaded = s->restore_verdict == RESTORE_OK;
	if (!s->restore_loading || !s->timeout_timer)
		return false;
	s->restore_loading = false;
	double now = loop_now_ms();
	double end = now + c->timeout_ms < s->restore_deadline ? now + c->timeout_ms : s->restore_deadline;
	*ms = end > now ? end - now : 0;
	log_info("session %s: saved state loaded in %.0f ms; the cell's %.0f ms start now", s->name, now - c->t_start,
		 end - now);
	return true;
}

/* What the call left of the session's state, by what the server knows of
 * the restore (its verdict on the bytes, whether the load's bound ran
 * out): the status stays what it is (verdict.h). */
static void restore_state(struct run *c, enum call_state st)
{
	run_verdict(c, V_STATE, &(struct verdict_facts){ .state = st });
}

/* The call that carried the saved state was stopped before it ended (a
 * timeout, a crash, the memory limit, a cancellation): its process, and
 * whatever it had loaded, is gone, but the snapshot on disk is whole.  The
 * note says which of the two it was, by the server's own knowledge (its
 * verdict on the bytes, and whether the load's bound ran out): loaded and
 * then stopped, the state before this call is what the next call loads
 * again (rolled back); stopped while loading, the next call tries once
 * more.  Before, both said "ran in a fresh session" beside "its state was
 * lost", while the cell had run on the restored state and the next call
 * said "state restored". */
static void restore_stopped(struct sup *sup, struct session *s, struct run *c, char *m, size_t n)
{
	bool forked = s->fork_src[0] != '\0';
	const char *src = forked ? s->fork_src : s->name;
	char age[32];
	fmt_age(s->restore_age_s, age, sizeof age);
	s->restore_tried = false; /* the next call looks again */
	/* The server's own empty cell that carried a state with a journal
	 * (replay_load_run): the user's call is still to run, and it is the
	 * one that tries again. */
	bool own = s->journal_n > 0;
	if (s->restore_loaded && own) {
		/* Tried once more for the same call, not forever: a state that
		 * is stopped each time it loads (it fills memory_mb) ends in a
		 * new interpreter. */
		bool again = ++s->restore_attempts < 2;
		if (!again) {
			s->restore_tried = true;
			s->cells = 0; /* the call counts from 1 */
			if (forked)
				s->fork_src[0] = '\0';
		}
		restore_state(c, STATE_ROLLED_BACK);
		snprintf(m, n,
			 "the saved state of session %s (saved %s ago, after cell %u) was loaded, then the process that held it was stopped "
			 "before this code ran; %s",
			 src, age, s->restore_cells,
			 again ? "the saved state is still on disk, unchanged, and is loaded once more for this code"
			       : "it was stopped so twice: this code runs in a new interpreter, and its save replaces the saved state");
		return;
	}
	if (s->restore_loaded) {
		/* A copy keeps its parent's name, so the next call copies again. */
		restore_state(c, STATE_ROLLED_BACK);
		s->restore_floor = (uint32_t)c->cell;
		snprintf(m, n,
			 "the saved state of session %s (saved %s ago, after cell %u) was loaded before this code ran; the call was then stopped, "
			 "and the process that held the state with it. The saved state is still on disk, unchanged, and the next call in "
			 "session %s loads it again: nothing saved is lost",
			 src, age, s->restore_cells, s->name);
		return;
	}
	bool again = ++s->restore_attempts < 2;
	bool overran = s->restore_loading && c->status == CALL_TIMEOUT;
	char why[160];
	if (overran)
		snprintf(why, sizeof why, "loading it took longer than its bound of %.0f s (timeout_s counts from when the cell starts)",
			 restore_bound_ms(sup, prestore_bytes(s->restore)) / 1000.0);
	else
		snprintf(why, sizeof why, "the call was stopped while the session loaded it");
	restore_state(c, STATE_NEW);
	c->cell = 1;
	s->cells = 1;
	if (!again) {
		s->restore_tried = true;
		if (forked)
			s->fork_src[0] = '\0';
	}
	if (own)
		snprintf(m, n, "the saved state of session %s could not be loaded: %s. %s", src, why,
			 again ? "It is still on disk, unchanged, and is loaded once more for this code"
			       : "It was not loaded twice: this code runs in a new interpreter, and its save replaces the saved state");
	else
		snprintf(m, n, "the saved state of session %s could not be loaded in this call: %s, so this code did not run. %s", src, why,
			 again ? "The saved state is still on disk, unchanged, and the next call tries again"
			       : "It was not loaded twice: the next call starts a new interpreter, and its save replaces the saved state");
}

/* The reply of the call that carried the saved state: what the server
 * knows (its verdict, the age) decides the state; the session's lists only
 * name what came back. */
void restore_outcome(struct sup *sup, struct session *s, struct run *c)
{
	if (s->journal_state != STATE_PENDING && c->result && c != s->restore_call) {
		/* The call a saved state and its journal were loaded for (the
		 * first after the journal's cells ran again): the state it ran
		 * on came back, and the notes of the load and of the cells run
		 * again come with it. */
		restore_state(c, s->journal_state);
	}
	if (!s->restore || s->restore_call != c)
		return;
	/* What the session says came back (proto/result.h bounds each list). */
	const struct result_restore *rs = c->result && c->result->has_restore ? &c->result->restore : NULL;
	char age[32], m[6144];
	fmt_age(s->restore_age_s, age, sizeof age);
	bool forked = s->fork_src[0] != '\0';
	/* The snapshot as a whole could not be read into the session (out of
	 * memory, most likely): nothing came back, whatever the verdict. */
	const char *unread = rs && rs->verified && rs->n_restored == 0 && rs->n_failed > 0 &&
				     strcmp(rs->failed[0][0], RESULT_SNAPSHOT_FAILED) == 0
			     ? rs->failed[0][1]
			     : NULL;
	if (s->restore_verdict == RESTORE_OK && rs && rs->verified && !unread) {
		restore_state(c, forked ? STATE_FORKED : STATE_RESTORED);
		if (forked)
			snprintf(m, sizeof m, "forked from session %s: this session started as a copy of its state saved %s ago (after cell %u), before this code ran. Restored: ",
				 s->fork_src, age, s->restore_cells);
		else
			snprintf(m, sizeof m, "the session was restored from its state saved %s ago (after cell %u), before this code ran. Restored: ",
				 age, s->restore_cells);
		if (rs->n_restored == 0 && rs->restored_more == 0)
			strcat(m, "nothing");
		else
			list_names(m, sizeof m, rs->restored, NULL, rs->n_restored, rs->n_restored + (size_t)rs->restored_more);
		if (rs->n_failed > 0 && strlen(m) + 40 < sizeof m) {
			strcat(m, ". Could not be restored: ");
			list_names(m, sizeof m, NULL, (const char *const(*)[2])rs->failed, rs->n_failed,
				   rs->n_failed + (size_t)rs->failed_more);
		}
		if (rs->n_unsaved > 0 && strlen(m) + 40 < sizeof m) {
			strcat(m, ". Could not be saved (run the cells that made them again): ");
			list_names(m, sizeof m, NULL, (const char *const(*)[2])rs->unsaved, rs->n_unsaved,
				   rs->n_unsaved + (size_t)rs->unsaved_more);
		}
		s->saved_cells = s->restore_cells;
		if (forked) {
			s->dirty = true; /* its own name has nothing on disk yet */
			s->unsaved_since = loop_now_ms();
		}
	} else {
		if (unread && (strstr(unread, "Cannot allocate memory") || strstr(unread, "MemoryError"))) {
			snprintf(m, sizeof m,
				 "the saved state of session %s could not be loaded (%.300s): a state that fills most of limits.memory_mb "
				 "(%ld MB) needs more to come back, so raise memory_mb to restore it, before the next save of this session "
				 "replaces it; this call ran in a fresh session",
				 forked ? s->fork_src : s->name, unread, sup->cfg.policy->limits.memory_mb);
		} else if (unread) {
			snprintf(m, sizeof m, "the saved state of session %s could not be loaded (%.300s); this call ran in a fresh session",
				 forked ? s->fork_src : s->name, unread);
		} else if (s->restore_verdict == RESTORE_BAD) {
			snprintf(m, sizeof m,
				 "the saved state of session %s was refused: its bytes do not match the tag the server wrote with them "
				 "(changed or planted by something other than the server); this call runs in a fresh session",
				 forked ? s->fork_src : s->name);
		} else if (!c->result) {
			restore_stopped(sup, s, c, m, sizeof m);
			add_note(c, m);
			prestore_free(s->restore);
			s->restore = NULL;
			s->restore_call = NULL;
			return;
		} else {
			/* The cell ran, without the state (its tag was not
			 * judged before the session read on, or a process opened
			 * the file for writing meanwhile): the snapshot is still
			 * on disk and whole.  The next call tries once more,
			 * rather than let the next save replace it with an empty
			 * session. */
			bool again = ++s->restore_attempts < 2 && !forked;
			if (again)
				s->restore_tried = false;
			snprintf(m, sizeof m, "the saved state of session %s could not be loaded in this call%s%s; this call ran in a fresh session",
				 forked ? s->fork_src : s->name,
				 s->restore_verdict == RESTORE_BUSY
					 ? ": another process opened its file for writing while the session read it, so the server does not vouch for what was read"
					 : "",
				 again ? " (the next call tries again)" : "");
		}
		restore_state(c, STATE_NEW);
		/* Nothing came back: the session's cells count from 1 (the
		 * session did so too, bootstrap handle). */
		c->cell = 1;
		s->cells = 1;
	}
	lost_outcome(s, c, c->state == STATE_RESTORED);
	add_note(c, m);
	s->fork_src[0] = '\0';
	prestore_free(s->restore);
	s->restore = NULL;
	s->restore_call = NULL;
}

void lost_outcome(struct session *s, struct run *c, bool restored)
{
	if (!s->lost[0])
		return;
	char m[1000];
	if (restored && (int)s->restore_cells >= s->lost_cells)
		snprintf(m, sizeof m, "the session's state was lost: %s; it came back from its saved state (after cell %u): nothing was lost",
			 s->lost, s->restore_cells);
	else if (restored && (int)s->restore_cells + 1 == s->lost_cells)
		snprintf(m, sizeof m,
			 "the session's state was lost: %s; it came back from its last saved state (after cell %u), so what the call "
			 "after it did to variables (cell %d) was lost: run it again if you need it",
			 s->lost, s->restore_cells, s->lost_cells);
	else if (restored)
		snprintf(m, sizeof m,
			 "the session's state was lost: %s; it came back from its last saved state (after cell %u), so what the calls "
			 "after it did to variables (cells %u to %d) was lost: run them again if you need it",
			 s->lost, s->restore_cells, s->restore_cells + 1, s->lost_cells);
	else
		snprintf(m, sizeof m,
			 "the session's state was lost: %s; no saved state of it could be brought back, so this call runs in a new "
			 "interpreter: what %s %d defined is gone (files they wrote stay)",
			 s->lost, s->lost_cells > 1 ? "cells 1 to" : "cell", s->lost_cells);
	add_note(c, m);
	s->lost[0] = '\0';
}

/* The bound on loading a saved state of `bytes` (reading it, checking its
 * tag, unpickling it), before the cell's own timeout starts: 10 s and 1 s
 * per 32 MB, at most max_timeout_s. */
double restore_bound_ms(const struct sup *sup, uint64_t bytes)
{
	double want = 10000.0 + (double)bytes / (32.0 * 1048576.0) * 1000.0;
	double cap = sup->cfg.policy->limits.max_timeout_s * 1000.0;
	return want < cap ? want : cap;
}

/* The first call to a session in this server's life looks for a saved
 * state: its own, or (fork_from a session that is only on disk) the
 * parent's.  Returns how many descriptors it put in fds to send with the
 * cell (prestore_start: 2 when the session reads the file itself), its size in
 * *bytes and its layout in *format, or -1 when there is none (a refused
 * one is said in the call's note). */
int restore_begin(struct sup *sup, struct session *s, struct run *c, uint64_t *bytes, int *format, int fds[2],
		  prestore_done_fn done)
{
	if (s->restore_tried || !persist_on(sup->persist) || (s->unsaved && !s->fork_src[0]))
		return -1;
	s->restore_tried = true;
	const char *src = s->fork_src[0] ? s->fork_src : s->name;
	struct prestore *r = NULL;
	struct err e = { 0 };
	int rc = prestore_open(sup->persist, src, &r, &e);
	if (rc < 0) {
		char m[1000];
		if (rc == -EKEYREJECTED) {
			snprintf(m, sizeof m,
				 "the saved state of session %s was saved with another key: not restored (it was made by another user, or with "
				 "another XDG_STATE_HOME, and this server can only check what it saved itself); this call runs in a fresh session",
				 src);
			log_info("session %s: %s", s->name, m);
		} else {
			snprintf(m, sizeof m, "the saved state of session %s %s: %.700s; this call runs in a fresh session", src,
				 rc == -EFBIG ? "is not restored" : "was refused", e.msg);
			log_warn("session %s: %s", s->name, m);
		}
		add_note(c, m);
		s->fork_src[0] = '\0';
		return -1;
	}
	if (rc == 0)
		return -1;
	int nfds = prestore_start(r, sup->cfg.loop, done, s, fds);
	if (nfds < 0) {
		prestore_free(r);
		return -1;
	}
	/* The cells kept as a journal after it, run again once it is loaded
	 * (replay_load_run).  One that is refused is said, and the snapshot
	 * alone comes back. */
	journal_drop(s);
	int jr = pjournal_read(sup->persist, src, prestore_nonce(r), prestore_cells(r), &s->journal, &s->journal_n, &e);
	if (jr < 0) {
		char m[600];
		snprintf(m, sizeof m,
			 "the cells that ran after the saved state of session %s was saved, kept beside it as a journal, were refused "
			 "(%.300s) and are not run again: the state comes back as it was saved",
			 src, e.msg);
		log_warn("session %s: %s", s->name, m);
		add_note(c, m);
	} else if (jr > 0 && !sup->cfg.policy->limits.checkpoint) {
		/* A cell that fails when run again rolls back to the loaded
		 * state: without checkpoints there is none to go back to. */
		char m[600];
		snprintf(m, sizeof m,
			 "cells %d to %d, which ran after the saved state of session %s was saved and were kept beside it as a journal, "
			 "are not run again: limits.checkpoint is false, and running them again needs a copy of the state to go back to; "
			 "the state comes back as it was saved",
			 s->journal[0].cell, s->journal[s->journal_n - 1].cell, src);
		add_note(c, m);
		journal_drop(s);
	}
	s->restore = r;
	s->restore_call = c;
	s->restore_verdict = RESTORE_PENDING;
	s->restore_age_s = prestore_age_s(r);
	s->restore_cells = prestore_cells(r);
	/* The cells go on from the saved state's; a retry after a first call
	 * that was stopped goes on from that call's (its number is not given
	 * twice). */
	s->cells = (int)(s->restore_cells > s->restore_floor ? s->restore_cells : s->restore_floor);
	*bytes = prestore_bytes(r);
	*format = prestore_format(r);
	return nfds;
}

/* What counts against max_workspace_mb, watched (files/wswatch.h): for a
 * call (send_exec) and for a saver (save_begin). */
struct wswatch *sup_wswatch(struct sup *sup, void (*over)(void *arg, unsigned long long bytes, const char *unseen),
			    void *arg)
{
	const struct policy *p = sup->cfg.policy;
	bool list = p->fs_write == FS_WRITE_LIST;
	return wswatch_start(sup->cfg.loop, sup->work, sup->cfg.ws, sup_scratch(sup),
			     list ? (const char *const *)p->fs_write_paths : NULL, list ? p->n_fs_write_paths : 0,
			     (unsigned long long)p->limits.max_workspace_mb << 20, over, arg);
}

const char *sup_scratch(const struct sup *sup)
{
	return sup && sup->scratch[0] ? sup->scratch : NULL;
}

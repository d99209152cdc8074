/* A session's processes: "which process is this session, and how does it
 * talk?"  Its spawn, its descriptors and pipes, its kill, and its death
 * reported and posted (what the death leaves is death.c's). */
#include "private.h"

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 ? -errno : fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

/* ---- the process's life (enum life): entered here only ---- */

/* What may happen to a session's process, whatever it is doing. */
enum life_event {
	E_WANT,     /* a process is wanted, the zygote cannot make one yet (spawn_wait) */
	E_UNWANT,   /* ... it can now, or the wait is over (spawn_unwait, spawn_given_up) */
	E_MADE,     /* spawned or forked: its descriptors (session_adopt_fds) */
	E_KNOWN,    /* the kernel's word: its pid and pidfd (session_known) */
	E_KILL,     /* the server ends it (kill_session) */
	E_REPORT,   /* the zygote reaped it (session_reported_dead) */
	E_GONE,     /* gone with no report to come (session_gone) */
	E_TAKE,     /* its posted end is handled now (death_take) */
	E_COPY,     /* its copy to roll back to becomes the process (session_is_copy) */
	E_CLEAR,    /* the session has no process (session_no_process) */
	E_COUNT
};

/* A row's entries: TO(a life), STAY (allowed, nothing changes), or 0
 * (left out: never happens there; a bug, logged). */
#define TO(l) ((l) + 1)
#define STAY TO(L_COUNT)

/* One row per life: its name, and where each event leads.  What entering
 * a life does (a signal, an awaited report, a posted end) is done by the
 * one function below that takes that event, and nowhere else.
 * Attacks it keeps out, each seen before: a kill after the zygote's exit
 * report waited for a report that could never come, and 60 s later every
 * session's state was lost (a process whose end is known is never awaited
 * again: only L_LIVE's kill awaits); a kill asked before the pidfd came
 * must end that process and no later one (L_BORN_DOOMED, L_LIVE_DOOMED);
 * a second end for one process (the zygote's report after its loss, or
 * the reverse) is posted once (L_ENDED takes both and stays). */
/* Entering a life where no process runs (ended, dying, none) ends the
 * looks at it (the watchdog's, the freeze's): nothing is left to look at.
 * That is the rows' "drops" (on entry); every other action of an entry is
 * the event's function's, below. */
static const struct life_row {
	const char *name;
	unsigned char next[E_COUNT];
	bool drops_looks;
} lives[L_COUNT] = {
	[L_NONE] = { "none", { [E_WANT] = TO(L_WAITING), [E_MADE] = TO(L_BORN), [E_KILL] = STAY, [E_CLEAR] = STAY },
		     true },
	[L_WAITING] = { "waiting",
			{ [E_WANT] = STAY, [E_UNWANT] = TO(L_NONE), [E_MADE] = TO(L_BORN), [E_KILL] = STAY,
			  [E_CLEAR] = TO(L_NONE) } },
	[L_BORN] = { "born",
		     { [E_KNOWN] = TO(L_LIVE), [E_KILL] = TO(L_BORN_DOOMED), [E_GONE] = TO(L_ENDED),
		       [E_CLEAR] = TO(L_NONE) } },
	[L_BORN_DOOMED] = { "born-doomed",
			    { [E_KNOWN] = TO(L_LIVE_DOOMED), [E_KILL] = STAY, [E_GONE] = TO(L_ENDED),
			      [E_CLEAR] = TO(L_NONE) } },
	[L_LIVE] = { "live",
		     { [E_KILL] = TO(L_KILLED), [E_REPORT] = TO(L_ENDED), [E_GONE] = TO(L_ENDED),
		       [E_CLEAR] = TO(L_NONE) } },
	[L_LIVE_DOOMED] = { "live-doomed",
			    { [E_KILL] = TO(L_KILLED), [E_REPORT] = TO(L_ENDED), [E_GONE] = TO(L_ENDED),
			      [E_CLEAR] = TO(L_NONE) } },
	[L_KILLED] = { "killed",
		       { [E_KILL] = STAY, [E_REPORT] = TO(L_ENDED), [E_GONE] = TO(L_ENDED), [E_CLEAR] = TO(L_NONE) } },
	[L_ENDED] = { "ended",
		      { [E_KILL] = STAY, [E_REPORT] = STAY, [E_GONE] = STAY, [E_TAKE] = TO(L_DYING),
			[E_CLEAR] = TO(L_NONE) },
		      true },
	[L_DYING] = { "dying", { [E_KILL] = STAY, [E_COPY] = TO(L_LIVE), [E_CLEAR] = TO(L_NONE) }, true },
};

static const char *const event_names[E_COUNT] = {
	"want", "unwant", "made", "known", "kill", "report", "gone", "take", "copy", "clear",
};

const char *life_name(const struct session *s)
{
	return (size_t)s->life < L_COUNT ? lives[s->life].name : "?";
}

static unsigned refused; /* events no row took (sup_life_refused) */

unsigned sup_life_refused(void)
{
	return refused;
}

/* The one assignment of s->life.  True when ev leads somewhere (or
 * stays); false, logged, and nothing changed when it cannot happen in
 * this state. */
static bool life_enter(struct session *s, enum life_event ev)
{
	unsigned next = lives[s->life].next[ev];
	if (next == 0) {
		refused++;
		log_error("session %s: its process, %s, cannot take the event %s: ignored", s->name, lives[s->life].name,
			  event_names[ev]);
		return false;
	}
	if (next != STAY && next - 1 != (unsigned)s->life) {
		log_debug("session %s: process %s -> %s (%s)", s->name, lives[s->life].name, lives[next - 1].name,
			  event_names[ev]);
		s->life = (enum life)(next - 1);
		if (lives[s->life].drops_looks)
			looks_stop(s->sup, s);
	}
	return true;
}

/* Not one whose end is posted already (session_reported_dead): the
 * zygote's word about that process came too late to count. */
struct session *session_by_pid(struct sup *sup, pid_t pid)
{
	for (struct session *s = sup->sessions; s; s = s->next)
		if (proc_alive(s) && s->life != L_ENDED && s->pid == pid)
			return s;
	return NULL;
}

struct session *session_by_id(struct sup *sup, int id)
{
	for (struct session *s = sup->sessions; s; s = s->next)
		if (proc_alive(s) && s->id == id)
			return s;
	return NULL;
}

struct session *find_session(struct sup *sup, const char *name)
{
	for (struct session *s = sup->sessions; s; s = s->next)
		if (strcmp(s->name, name) == 0)
			return s;
	return NULL;
}

/* A copy is being made: its process is a child of the zygote that the
 * server does not know yet, which a sweep or the orphans' part of a settle
 * would end as a left-over. */
bool fork_in_flight(const struct sup *sup)
{
	for (const struct session *s = sup->sessions; s; s = s->next)
		if (s->fork_child)
			return true;
	return false;
}

void kill_session(struct session *s)
{
	/* What the call used, read while the process still exists. */
	if (s->cur)
		usage_end(&s->cur->usage, s->hpid, s->pidfd, s->ckpt_hpid);
	/* No pidfd yet (born): killed once it is in and what it sent is
	 * read (L_LIVE_DOOMED). */
	if (s->pidfd >= 0)
		pidfd_signal(s->pidfd, SIGKILL);
	bool live = s->life == L_LIVE || s->life == L_LIVE_DOOMED;
	life_enter(s, E_KILL);
	/* Its exit report is due from the zygote (under a timer), once: only
	 * for a live process.  Attack on the server's own bookkeeping: a
	 * session that died by itself with nothing else holding its socket
	 * (no checkpoint) was killed once more after its report (its last
	 * words, read before its death, end in the end of its stream); the
	 * report that kill waited for could never come, and exit_ms later the
	 * zygote was taken to have broken its protocol and every session's
	 * state was lost. */
	if (live)
		zlink_await_exit(s->sup->zl, s->pid, s->pidfd);
}

void session_close_fds(struct sup *sup, struct session *s)
{
	struct loop *l = sup->cfg.loop;
	if (s->ckpt_pidfd >= 0)
		pidfd_signal(s->ckpt_pidfd, SIGKILL);
	s->ckpt_pid = s->ckpt_hpid = 0;
	int *fds[] = { &s->ctrl, &s->out_r, &s->err_r, &s->pidfd, &s->ckpt_pidfd, &s->dropped_pidfd };
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (*fds[i] >= 0) {
			loop_unwatch(l, *fds[i]);
			close(*fds[i]);
			*fds[i] = -1;
		}
	wire_reader_free(&s->rd);
	gate_close(sup, s);
}

/* The session has no process (it ended, its copy never came, or a reset
 * discarded it): its descriptors closed, no process known, no checkpoint
 * owed, no phase.  The one place that says so; the callers reset what
 * else their case needs. */
void session_no_process(struct sup *sup, struct session *s)
{
	session_close_fds(sup, s);
	life_enter(s, E_CLEAR); /* an end posted and not yet handled goes with it */
	s->pid = s->hpid = 0;
	s->proc_gen++;
	set_due(s, DUE_NONE);
	set_expect(sup, s, P_NONE);
}

/* A process is wanted once the zygote can make one (spawn_pending). */
void spawn_wait(struct session *s)
{
	life_enter(s, E_WANT);
}

/* It is made now (or no longer wanted). */
void spawn_unwait(struct session *s)
{
	life_enter(s, E_UNWANT);
}

/* None can be made: the interpreter could not start. */
void spawn_given_up(struct session *s)
{
	life_enter(s, E_UNWANT);
}

/* Each process incarnation of a session has an id of its own. */
void session_new_id(struct sup *sup, struct session *s)
{
	s->id = ++sup->next_id;
}

/* The copy to roll back to is asked for again (it died before it was
 * taken in, or killed from outside): counted, up to COPY_RETAKES_MAX. */
void copy_retake(struct session *s)
{
	s->copy_retakes++;
}

/* Why the copy to roll back to was lost from outside (said by the next
 * reply, or the call that needed it), or nothing lost. */
void copy_lost_set(struct session *s, const char *why)
{
	snprintf(s->copy_lost, sizeof s->copy_lost, "%s", why);
	s->copy_given_up = false;
}

/* The server gave the copy up during a call (limits.c: copy_uncounted),
 * whose reply says so: why, for a death in that call. */
void copy_given_up(struct session *s, const char *why)
{
	snprintf(s->copy_lost, sizeof s->copy_lost, "%s", why);
	s->copy_given_up = true;
}

void copy_lost_none(struct session *s)
{
	s->copy_lost[0] = '\0';
	s->copy_given_up = false;
}

/* A call is sent: the retakes are counted anew. */
void copy_retakes_none(struct session *s)
{
	s->copy_retakes = 0;
}

/* A new session: no descriptor of a process yet. */
void session_fds_none(struct session *s)
{
	s->pidfd = s->ctrl = s->out_r = s->err_r = s->ckpt_pidfd = s->dropped_pidfd = -1;
	s->dropped_hpid = s->dropped_pid = 0;
}

/* The kernel confirmed the session's new process (spawned or forked): its
 * pids and its pidfd, kept. */
void session_known(struct session *s, pid_t ns, pid_t host, int pidfd)
{
	s->proc_gen++;
	s->pid = ns;
	s->hpid = host;
	s->pidfd = pidfd;
	life_enter(s, E_KNOWN);
}

/* The copy to roll back to becomes the session's process (resumed): the
 * dead process's pidfd goes, and nothing is asked of the new one yet. */
void session_is_copy(struct session *s)
{
	s->proc_gen++;
	if (s->pidfd >= 0)
		close(s->pidfd);
	s->pidfd = s->ckpt_pidfd;
	s->pid = s->ckpt_pid;
	s->hpid = s->ckpt_hpid;
	s->ckpt_pidfd = -1;
	s->ckpt_pid = s->ckpt_hpid = 0;
	life_enter(s, E_COPY);
}

/* The looks at a live process: the memory watchdog's (limits.c) and the
 * freeze's (freeze.c).  Their timers are armed, marked fired and cancelled
 * here only, one of each kind at a time, so that the end of the process
 * (looks_stop) reaches every one. */
static uint64_t *look_timer(struct session *s, enum look which)
{
	return which == LOOK_WATCH ? &s->watch_timer : &s->idle_timer;
}

void look_arm(struct sup *sup, struct session *s, enum look which, double ms, void (*cb)(void *arg))
{
	look_cancel(sup, s, which);
	*look_timer(s, which) = loop_timer(sup->cfg.loop, ms, cb, s);
}

void look_fired(struct session *s, enum look which)
{
	*look_timer(s, which) = 0;
}

bool look_armed(struct session *s, enum look which)
{
	return *look_timer(s, which) != 0;
}

void look_cancel(struct sup *sup, struct session *s, enum look which)
{
	uint64_t *t = look_timer(s, which);
	if (*t)
		loop_timer_cancel(sup->cfg.loop, *t);
	*t = 0;
}

/* The looks at a live process end: it died, or the call is over. */
void looks_stop(struct sup *sup, struct session *s)
{
	look_cancel(sup, s, LOOK_WATCH);
	look_cancel(sup, s, LOOK_IDLE);
}

/* The zygote reported the session's process reaped (its pidfd agreed):
 * no other report comes for it (reported), and its death is an event of
 * its own, handled by the outbox's drain (death_handle), once what the
 * process sent before it died has been read.  The report comes on the
 * zygote's socket and may overtake that: before, the report's handler read
 * the session's socket itself, inside the zygote link's own handler, and
 * ran whatever those messages did (a freeze, a copy, a kill) nested there.
 * Until the drain the session is deaf to the zygote's word about that
 * process (session_by_pid), as it was once the death had been handled;
 * the looks at it end now (entering L_ENDED drops them). */
void session_reported_dead(struct sup *sup, struct session *s, int wstatus, bool status_known)
{
	bool posted = s->life == L_ENDED;
	life_enter(s, E_REPORT);
	if (posted)
		return;
	s->death_status = wstatus;
	s->death_known = status_known;
	post_dead(sup, s, true);
}

/* The session's process is gone with no exit report to come: the zygote
 * died (and every process below it), or it could not fork the process.
 * Its death is posted the same way, with no status (nothing to roll back
 * to: its copy went with the zygote), also over a reported one not yet
 * handled, and with no sweep after it. */
void session_gone(struct sup *sup, struct session *s)
{
	bool posted = s->life == L_ENDED;
	life_enter(s, E_GONE);
	s->death_status = 0;
	s->death_known = false;
	if (!posted)
		post_dead(sup, s, false);
}

/* For death.c: the death posted, taken once (false: none is due any
 * more, the process went otherwise meanwhile). */
bool death_take(struct session *s, int *wstatus, bool *status_known)
{
	if (s->life != L_ENDED)
		return false;
	life_enter(s, E_TAKE);
	*wstatus = s->death_status;
	*status_known = s->death_known;
	return true;
}

/* A checkpoint accepted (checkpoint.c: accept_checkpoint): the copy to
 * roll back to. */
void copy_known(struct session *s, int pidfd, pid_t ns, pid_t host)
{
	s->ckpt_pidfd = pidfd;
	s->ckpt_pid = ns;
	s->ckpt_hpid = host;
}

/* The checkpoint goes: killed through its pidfd.  Until it has exited it
 * is "dying" (dying_pids): neither counted against the session's limits
 * nor taken for something the call left. */
void drop_checkpoint(struct session *s)
{
	if (s->ckpt_pidfd >= 0) {
		loop_unwatch(s->sup->cfg.loop, s->ckpt_pidfd);
		pidfd_signal(s->ckpt_pidfd, SIGKILL);
		/* Kept until the next one: the end of the call tells the dying
		 * copy from a live child by it (check_quiet). */
		if (s->dropped_pidfd >= 0)
			close(s->dropped_pidfd);
		s->dropped_pidfd = s->ckpt_pidfd;
		s->dropped_hpid = s->ckpt_hpid;
		s->dropped_pid = s->ckpt_pid;
	}
	s->ckpt_pidfd = -1;
	s->ckpt_pid = s->ckpt_hpid = 0;
}

static void drain(struct session *s, int fd, struct outbuf *ob)
{
	unsigned char buf[65536];
	for (int i = 0; i < 64; i++) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n <= 0)
			return;
		/* Output between calls (a background thread, a left-over child)
		 * has no call to go to and is dropped. */
		if (s->cur)
			outbuf_feed(ob, buf, (size_t)n);
	}
}

void drain_all(struct session *s)
{
	unsigned char buf[65536];
	int fds[2] = { s->out_r, s->err_r };
	struct outbuf *obs[2] = { &s->out, &s->err };
	/* One look at both first: after most calls both are empty, and a
	 * read of each that says so costs a system call more (each about
	 * 4 us on the test VM, done once or twice a call).  Whatever was
	 * written before this look is readable in it; a look that fails
	 * reads both, as before. */
	struct pollfd pf[2] = { { .fd = fds[0], .events = POLLIN }, { .fd = fds[1], .events = POLLIN } };
	int ready = poll(pf, 2, 0); /* a negative fd is skipped, its revents 0 */
	if (ready == 0)
		return;
	for (int k = 0; k < 2; k++) {
		if (fds[k] < 0 || (ready > 0 && !pf[k].revents))
			continue;
		/* Bounded: a process that keeps writing cannot hold us here. */
		for (int i = 0; i < 4096; i++) {
			ssize_t n = read(fds[k], buf, sizeof buf);
			if (n <= 0)
				break;
			if (s->cur)
				outbuf_feed(obs[k], buf, (size_t)n);
		}
	}
}

void pipe_event(void *arg, int fd, short revents)
{
	struct session *s = arg;
	if (fd == s->out_r)
		drain(s, fd, &s->out);
	else
		drain(s, fd, &s->err);
	if ((revents & (POLLHUP | POLLERR)) && !(revents & POLLIN)) {
		/* Writer gone (the process exited): stop watching; the exit is
		 * reported by the zygote. */
		loop_unwatch(s->sup->cfg.loop, fd);
	}
}

/* Drops whatever a dead process left on the control socket, so the resumed
 * checkpoint starts on a clean stream. */
void discard_ctrl_input(struct session *s)
{
	char buf[65536];
	for (int i = 0; i < 1024; i++)
		if (read(s->ctrl, buf, sizeof buf) <= 0)
			break;
	wire_reader_free(&s->rd);
	wire_reader_init(&s->rd, WIRE_MAX_PAYLOAD);
}

/* The control socket and the output pipes of a new session process: the
 * server's ends in mine[3], the process's in theirs[3].  0 or -errno. */
int session_fds_new(int mine[3], int theirs[3])
{
	int sv[2] = { -1, -1 }, po[2] = { -1, -1 }, pe[2] = { -1, -1 };
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
		int err = errno;
		for (int i = 0; i < 2; i++) {
			if (sv[i] >= 0) close(sv[i]);
			if (po[i] >= 0) close(po[i]);
			if (pe[i] >= 0) close(pe[i]);
		}
		return -err;
	}
	mine[0] = sv[0], mine[1] = po[0], mine[2] = pe[0];
	theirs[0] = sv[1], theirs[1] = po[1], theirs[2] = pe[1];
	return 0;
}

void close3(int fds[3])
{
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* The session has a process on the way (spawned or forked) that talks on
 * mine[3]: nothing of it is known yet but the descriptors. */
void session_adopt_fds(struct sup *sup, struct session *s, const int mine[3], enum phase ph)
{
	life_enter(s, E_MADE);
	s->pid = 0;
	s->pidfd = -1;
	s->ckpt_pid = 0;
	s->ckpt_pidfd = -1;
	s->ctrl = mine[0];
	s->out_r = mine[1];
	s->err_r = mine[2];
	/* Read once: only this process sets options on its end of the socket,
	 * so the size stays what it is now (send_exec judges by it). */
	socklen_t bl = sizeof s->ctrl_sndbuf;
	if (getsockopt(s->ctrl, SOL_SOCKET, SO_SNDBUF, &s->ctrl_sndbuf, &bl) < 0)
		s->ctrl_sndbuf = 0;
	set_nonblock(s->ctrl);
	set_nonblock(s->out_r);
	set_nonblock(s->err_r);
	wire_reader_init(&s->rd, WIRE_MAX_PAYLOAD);
	hello_awaited(s);
	s->hpid = s->ckpt_hpid = 0;
	set_expect(sup, s, ph);
	struct loop *l = sup->cfg.loop;
	loop_watch(l, s->ctrl, POLLIN, sup->on_ctrl, s);
	loop_watch(l, s->out_r, POLLIN, pipe_event, s);
	loop_watch(l, s->err_r, POLLIN, pipe_event, s);
}

int spawn_session(struct sup *sup, struct session *s)
{
	int mine[3], theirs[3];
	int r = session_fds_new(mine, theirs);
	if (r < 0)
		return r;
	session_new_id(sup, s);
	const struct policy_limits *lim = &sup->cfg.policy->limits;
	struct zmsg_spawn sp = {
		.id = s->id,
		.seed = lim->seed,
		.checkpoint = lim->checkpoint,
		/* Saving is done by a fork of the checkpoint: none without one. */
		.persist_cap = persist_on(sup->persist) && lim->checkpoint
				       ? (unsigned long long)lim->persist_mb * 1048576ull : 0,
	};
	snprintf(sp.name, sizeof sp.name, "%s", s->name);
	char *txt = zmsg_spawn_encode(&sp);
	r = zlink_spawn(sup->zl, s->id, txt, theirs, 3);
	free(txt);
	close3(theirs);
	if (r < 0) {
		close3(mine);
		return r;
	}
	cells_none(s);
	session_adopt_fds(sup, s, mine, P_RUNNING);
	return 0;
}

/* The session sent what it must not send now: it is ended like a crash, and
 * rolled back (its exit report does the rest). */
void violation(struct sup *sup, struct session *s, const char *what)
{
	log_warn("session %s (%s): %s: the session is ended", s->name, phase_name(s->phase), what);
	struct run *c = s->cur;
	if (c && !c->note) {
		char note[300];
		snprintf(note, sizeof note,
			 "the session's process broke its protocol with the server (%s), so it was ended as a crash", what);
		set_note(c, note); /* it had none */
	}
	if (c) {
		run_verdict(c, V_BROKE, NULL);
		c->broke_protocol = true;
	} else {
		session_broke(s, what); /* said by the next reply */
	}
	/* Thawed to make a copy (or frozen again after it), its checkpoint
	 * holds the state after its last call already: the rollback loses
	 * nothing. */
	s->broke_kept = !c && s->ckpt_due == DUE_NONE && (s->phase == P_FORKING || s->phase == P_FREEZING);
	set_expect(sup, s, P_NONE);
	loop_unwatch(sup->cfg.loop, s->ctrl);
	kill_session(s);
}

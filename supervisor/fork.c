/* Branching (fork_from): "how is a session copied?"  The parent is thawed
 * to fork a copy of itself, which becomes the new session's process. */
#include "private.h"

static void fork_expired(void *arg);

/* The session is a copy of session name, said by its first reply. */
void fork_of_set(struct session *s, const char *name)
{
	snprintf(s->fork_of, sizeof s->fork_of, "%s", name);
}

void fork_of_none(struct session *s)
{
	s->fork_of[0] = '\0';
}

void cancel_fork_timer(struct sup *sup, struct session *p)
{
	if (p->fork_timer)
		loop_timer_cancel(sup->cfg.loop, p->fork_timer);
	p->fork_timer = 0;
}

/* Whether a live session's process holds a state to copy now (idle,
 * nothing on the way), and whether it will (busy with a call, a checkpoint,
 * a resume, another copy). */
static bool fork_ready(const struct session *p)
{
	return proc_known(p) && p->phase == P_IDLE && !p->cur && !p->qhead && p->ckpt_due == DUE_NONE &&
	       !p->fork_child && p->pidfd >= 0 && p->ctrl >= 0;
}

int sup_fork_check(struct sup *sup, const char *parent, const char *session, bool reset, char *why, size_t n)
{
	if (strcmp(parent, session) == 0) {
		snprintf(why, n, "\"fork_from\" names the session itself: give the new session another name");
		return -1;
	}
	struct session *p = find_session(sup, parent);
	if (!(p && proc_alive(p)) && !persist_has(sup->persist, parent)) {
		snprintf(why, n,
			 "\"fork_from\": session \"%s\" does not exist (no session of that name runs in this server%s); fork an existing session",
			 parent, persist_on(sup->persist) ? " and none is saved" : "");
		return -1;
	}
	if (!reset && (find_session(sup, session) || persist_has(sup->persist, session))) {
		snprintf(why, n,
			 "cannot fork into session \"%s\": it already exists%s; choose a new session name, or pass reset: true to replace it",
			 session, find_session(sup, session) ? "" : " (its state is saved)");
		return -1;
	}
	return 0;
}

/* Asks the idle parent for a copy of its process, a child of the zygote
 * (interp/session.c: fork_copy), talking on descriptors of its own.  The parent
 * is thawed for it under a timer and the watchdog, as for a checkpoint. */
static int fork_session(struct sup *sup, struct session *s, struct session *p)
{
	int mine[3], theirs[3];
	int r = session_fds_new(mine, theirs);
	if (r < 0)
		return r;
	struct smsg_fork fm;
	snprintf(fm.name, sizeof fm.name, "%s", s->name);
	char *txt = smsg_fork_encode(&fm);
	r = wire_send(p->ctrl, W_FORK, txt, strlen(txt), theirs, 3);
	free(txt);
	close3(theirs);
	if (r < 0) {
		close3(mine);
		return r;
	}
	session_new_id(sup, s);
	state_copied_from(s, p); /* its state is the copy */
	session_adopt_fds(sup, s, mine, P_RESUMING);
	last_none(s);
	/* Until its hello and its own checkpoint it is as a resumed copy. */
	set_due(s, DUE_RESUMED);
	arm_due_timer(sup, s);
	s->fork_parent = p;
	s->fork_asked = kproc_now_ticks();
	s->fork_t0 = loop_now_ms();
	fork_of_set(s, p->name);
	s->fork_of_cells = (uint32_t)p->cells;
	p->fork_child = s;
	/* The copy inherits the parent's seccomp gate; the parent may pass
	 * it once, for this copy. */
	gate_share(sup, s, p);
	gate_pass_once(p);
	warm_busy(sup);
	thaw_mark(p);
	set_expect(sup, p, P_FORKING);
	pidfd_signal(p->pidfd, SIGCONT);
	start_watch(sup, p);
	cancel_fork_timer(sup, p);
	p->fork_timer = loop_timer(sup->cfg.loop, RESUME_MS, fork_expired, p);
	return 0;
}

/* What waited while a copy was being forked, now that none is: the held
 * sweep, the sessions to spawn, the warm-up. */
static void release_sweep(struct sup *sup)
{
	if (fork_in_flight(sup))
		return;
	/* Always a sweep once a copy is in or has failed: a child of the
	 * zygote that the parent's code made while its gate was open (gate.c)
	 * is no session, and is ended now. */
	send_sweep(sup, sweep_release_epoch(sup));
	spawn_pending(sup);
	warm_busy(sup);
}

/* The copy did not come (the parent refused, failed or lied): its call
 * hears why; the parent goes back to rest. */
void fork_failed(struct sup *sup, struct session *p, const char *why)
{
	struct session *s = p->fork_child;
	cancel_fork_timer(sup, p);
	p->fork_child = NULL;
	gate_passed(p);
	if (s) {
		s->fork_parent = NULL;
		char m[400];
		snprintf(m, sizeof m, "could not fork session %s: %s", p->name, why);
		log_warn("session %s: %s", s->name, m);
		/* Its pid was never taken (forked takes it after the parent
		 * lets go of its child): none to forget. */
		session_no_process(sup, s);
		cancel_due_timer(sup, s);
		fork_of_none(s);
		/* The copy's first call waits at the head of its queue. */
		struct run *c = s->qhead;
		if (!s->cur && c && c->fork_from[0])
			queue_take(s, c);
		if (s->cur)
			fail_call_now(sup, s, m);
		post_start(sup, s);
	}
	release_sweep(sup);
}

/* The parent did not answer in time: ended as a crash (rolled back), and
 * the copy's call hears it. */
static void fork_expired(void *arg)
{
	struct session *p = arg;
	p->fork_timer = 0;
	if (!p->fork_child)
		return;
	log_warn("session %s: no copy within %.0f s: ended", p->name, RESUME_MS / 1000);
	char why[sizeof p->broke];
	snprintf(why, sizeof why, "no copy of the session within %.0f s", RESUME_MS / 1000);
	session_broke(p, why);
	fork_failed(p->sup, p, "it did not answer in time");
	kill_session(p);
}

/* The parent's rest after W_FORKED has not come: its own code ran while it
 * was thawed (at-fork hooks) and keeps it busy.  Ended as a protocol break,
 * resumed from its checkpoint (which holds its state: it was at rest). */
static void rest_expired(void *arg)
{
	struct session *p = arg;
	p->fork_timer = 0;
	if (p->phase != P_FREEZING || !proc_alive(p) || p->cur)
		return;
	log_warn("session %s: not at rest within %.0f s after making a copy: ended", p->name, RESUME_MS / 1000);
	char why[160];
	snprintf(why, sizeof why, "it did not come to rest within %.0f s after making a copy of itself", RESUME_MS / 1000);
	violation(p->sup, p, why);
}

/* The parent is frozen again after W_FORKED, under the copy's deadline:
 * its code ran while it was thawed and may go on (a thread an at-fork hook
 * started).  Attack: an at-fork hook that started a native thread spinning
 * without the interpreter's lock kept the parent from ever being frozen:
 * with no deadline and no call, it burnt a CPU "at rest" for good.
 * Cancelled once it rests (settled); a call for the parent waits for that
 * rest (supervisor.c: start_next), a reset ends the parent at once
 * (rest_expired then does nothing). */
void fork_rest_deadline(struct sup *sup, struct session *p)
{
	cancel_fork_timer(sup, p);
	p->fork_timer = loop_timer(sup->cfg.loop, RESUME_MS, rest_expired, p);
}

/* W_FORKED from the parent: the copy's pidfd, acted on only once the kernel
 * says it names a new child of the zygote, started after the request, that
 * is no process the server knows.  While a copy is being made nothing else
 * becomes a child of the zygote (spawns wait, and so does the warm-up's
 * probe), so such a pidfd names the copy, or a process the parent's own
 * code made, which is no more than the parent.
 * Attack: a parent that answers with the pidfd of another session, of the
 * zygote's warm-up probe, or of an old process of its own (sessions may
 * pidfd_open), to have the server freeze, watch or end it as the new
 * session. */
enum forked_next forked(struct sup *sup, struct session *p, struct wire_msg *m, struct session **copy)
{
	struct session *s = p->fork_child;
	cancel_fork_timer(sup, p);
	/* A body that is not one (proto/smsg.h) claims no pid and says no
	 * error: the copy is then judged by its pidfd alone. */
	struct smsg_forked fm;
	struct err de = { 0 };
	if (smsg_forked_decode(m->data, m->len, &fm, &de) < 0)
		fm = (struct smsg_forked){ 0 };
	/* The copy is a new child of the zygote (it forks it for the
	 * parent), as the kernel says (kproc.h), born after the request. */
	pid_t claim = fm.pid;
	struct kproc k = { 0 };
	char kwhy[160];
	int wp = m->nfds == 1 ? kproc_confirm(m->fds[0], sup->zhpid, claim, s->fork_asked, &k, kwhy, sizeof kwhy) : -EBADF;
	pid_t host = k.host, ns = k.ns;
	if (wp == -ESRCH) {
		/* The copy ended at once (killed, out of memory): no lie. */
		fork_failed(sup, p, "the copy ended as soon as it started");
		return FORKED_NONE;
	}
	bool ok = wp == 0 && host > 0;
	for (struct session *o = sup->sessions; ok && o; o = o->next)
		if (proc_alive(o) && (o->hpid == host || o->ckpt_hpid == host))
			ok = false;
	if (!ok) {
		char e[200];
		if (fm.error[0] && m->nfds == 0) {
			snprintf(e, sizeof e, "the fork failed (%s)", fm.error);
			fork_failed(sup, p, e);
			return FORKED_NONE;
		}
		if (m->nfds == 1)
			pidfd_signal(m->fds[0], SIGKILL);
		fork_failed(sup, p, "its process answered with something that is not its copy");
		violation(sup, p, "a copy that is no new child of the zygote");
		return FORKED_BROKE;
	}
	p->fork_child = NULL;
	gate_passed(p);
	s->fork_parent = NULL;
	session_known(s, ns, host, m->fds[0]);
	m->nfds = 0; /* kept */
	save_state_copied(sup, s);
	log_info("session %s: forked from session %s (cell %d) in %.1f ms", s->name, p->name, p->cells, loop_now_ms() - s->fork_t0);
	*copy = s;
	return FORKED_COPY;
}

/* After the parent of a copy made (FORKED_COPY) is being frozen again:
 * the sweep held while the copy was unknown goes, and what the copy sent
 * meanwhile is read. */
void forked_release(struct sup *sup, struct session *copy)
{
	release_sweep(sup);
	post_read(sup, copy); /* its hello may be in already */
}

/* Calls that wait for this parent to rest before they can copy it: tried
 * again once it rests, or once it is gone (then from its saved state). */
void forks_waiting(struct sup *sup, struct session *p)
{
	for (struct session *s = sup->sessions; s && (fork_ready(p) || !proc_alive(p)); s = s->next)
		if (s->fork_wait && strcmp(s->fork_wait_for, p->name) == 0) {
			s->fork_wait = false;
			post_start(sup, s);
		}
}

/* The first call of a session that starts as a copy (fork_from), before
 * it is sent: the copy is forked from the parent's process when it rests
 * (the call goes back to the head of the queue meanwhile), or, when the
 * parent lives only on disk, the new session is restored from the
 * parent's saved state.  1: the call waits; 0: go on and spawn; -1: the
 * call was answered (it failed). */
int begin_copy(struct sup *sup, struct session *s, struct run *c)
{
	struct session *p = find_session(sup, c->fork_from);
	if (p && proc_alive(p)) {
		queue_put_back(s, c);
		if (!fork_ready(p)) {
			s->fork_wait = true;
			snprintf(s->fork_wait_for, sizeof s->fork_wait_for, "%s", p->name);
			return 1;
		}
		int r = fork_session(sup, s, p);
		if (r < 0) {
			queue_take(s, c);
			char m[300];
			snprintf(m, sizeof m, "could not fork session %s: %s", p->name, strerror(-r));
			fail_call_now(sup, s, m);
			return -1;
		}
		c->fork_done = true;
		return 1;
	}
	if (persist_has(sup->persist, c->fork_from)) {
		snprintf(s->fork_src, sizeof s->fork_src, "%s", c->fork_from);
		restore_anew(s);
		c->fork_done = true;
		return 0;
	}
	char m[300];
	snprintf(m, sizeof m, "could not fork session %s: it no longer exists (it was reset or its process ended)", c->fork_from);
	fail_call_now(sup, s, m);
	return -1;
}

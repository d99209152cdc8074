/* The zygote from the server's side: "is there an interpreter to fork
 * from?"  Starting it (its scratch directory, its environment, its
 * configuration), restarting it, its end, and what its link (zlink.c)
 * reports about the sessions it forks. */
#include "private.h"

static void fail_waiting(struct sup *sup);

void end_orphans(void)
{
	int r = procs_end_below(getpid(), NULL, 0, true);
	if (r > 0)
		log_info("ended %d process(es) the sandboxed code left running", r);
}

/* Called once the zygote and every session are dead (nothing writes there
 * any more).  The directory is the one the server made (sup_start), still
 * the same one (its inode), and jail_scratch_remove_same follows no
 * symlink the code may have left. */
void remove_scratch(struct sup *sup)
{
	if (!sup->scratch[0])
		return;
	int r = jail_scratch_remove_same(sup->scratch, sup->scratch_dev, sup->scratch_ino);
	if (r < 0)
		log_warn("cannot remove the sandbox's scratch directory %s: %s", sup->scratch, strerror(-r));
	sup->scratch[0] = '\0';
}

/* The scratch directory of the namespace-free mode, made here and named in
 * the zygote's configuration (jail/jail.c: make_scratch).  Attack: the
 * zygote used to make it and report its path in W_READY, which the server
 * removed at exit: code in the zygote sent
 * /tmp/psm-scratch-x/../../../var/tmp/victim, and a root server deleted
 * that directory.  Now the server removes only the path it made.  With
 * namespaces it is not used (the jail's /tmp is a private tmpfs) and goes
 * once the jail's report says so. */
static void make_scratch(struct sup *sup)
{
	remove_scratch(sup);
	uid_t uid = getuid();
	gid_t gid = getgid();
	if (geteuid() == 0) {
		struct jail_config jc = { .policy = sup->cfg.policy, .workspace = sup->cfg.ws->abs };
		jail_uid_choose(&jc, &uid, &gid);
		/* A root-owned project without a mount tree: the jail keeps the
		 * effective uid 0 (jail/uid.c) and gives the directory's
		 * group to 65534 itself. */
		if (uid == 65534)
			uid = gid = 0;
	}
	int r = jail_scratch_make(uid, gid, sup->scratch, sizeof sup->scratch, &sup->scratch_dev, &sup->scratch_ino);
	if (r < 0) {
		sup->scratch[0] = '\0';
		log_warn("cannot make the sandbox's scratch directory: %s", strerror(-r));
	}
}

/* The interpreter's zygote is gone: killed from outside, died, or ended by
 * the server for breaking its protocol.  Everything below it goes too. */
static void zygote_gone(struct sup *sup, const char *why)
{
	zlink_close(sup->zl);
	int st = 0;
	/* Dead already (not ended here): how it died, for the sessions it
	 * carried (session_dead, lost_outcome). */
	bool died = false;
	/* The link waited for the zygote's own exit (zlink.c: lose); the
	 * process the server forked (itself, or the intermediate that waits
	 * for it in its pid namespace) exits a moment after: waited for, at
	 * most 200 ms (it is ended after that anyway). */
	for (int i = 0; sup->zpid > 0 && !sup->zbroke[0] && !died && i < 200; i++)
		if (!(died = waitpid(sup->zpid, &st, WNOHANG) == sup->zpid))
			usleep(1000);
	if (sup->zpid > 0) {
		kill(sup->zpid, SIGKILL);
		if (!died)
			waitpid(sup->zpid, NULL, 0);
		sup->zpid = -1;
	}
	if (died && WIFSIGNALED(st))
		snprintf(sup->zdied, sizeof sup->zdied,
			 "the interpreter's zygote (the process every session is forked from) %s (%s%s), and every session's "
			 "process with it", WTERMSIG(st) == SIGKILL ? "was killed" : "crashed", call_signal_name(WTERMSIG(st)),
			 WTERMSIG(st) == SIGKILL ? ": by an operator's kill, or the kernel's out-of-memory killer" : "");
	else if (died)
		snprintf(sup->zdied, sizeof sup->zdied,
			 "the interpreter's zygote (the process every session is forked from) exited (status %d), and every "
			 "session's process with it", WEXITSTATUS(st));
	else if (!sup->zbroke[0])
		snprintf(sup->zdied, sizeof sup->zdied,
			 "the interpreter's zygote (the process every session is forked from) ended its link to the server (%.200s), "
			 "so it was ended with every session's process", why);
	if (sup->z != Z_FAILED)
		sup->z = Z_DOWN;
	sup->zhpid = 0;
	log_warn("the zygote ended: %s", why);
	/* Without a pid namespace the code's processes do not die with the
	 * zygote: they come up to the server (a subreaper) and end here.  Not
	 * as pid 1 while serving (every orphan of the container would), only
	 * at exit (sup_free). */
	if (getpid() != 1)
		end_orphans();
	remove_scratch(sup);
	/* Every session lived inside it (its pid namespace, or killed by
	 * PDEATHSIG): they are gone too, each death posted (the outbox's
	 * drain reads what each sent before it and handles it, in this order,
	 * before a new zygote can start: its timer is later).  A call still
	 * waiting for a process of its own hears why it runs in a new one.
	 * zbroke and zdied stay for those deaths, until the next start. */
	for (struct session *s = sup->sessions; s; s = s->next) {
		if (proc_alive(s))
			session_gone(sup, s);
		else if (s->cur && sup->zbroke[0])
			add_note(s->cur, sup->zbroke);
	}
}

static int send_config(struct sup *sup, int sock)
{
	const struct sup_config *cfg = &sup->cfg;
	struct zconfig zc = {
		.skill_text = cfg->policy->text,
		.skill_source = cfg->policy->source,
		.approved = cfg->approved,
		.root = cfg->ws->root,
		.workspace = cfg->ws->abs,
		.workspace_display = cfg->ws->display,
		.venv = cfg->venv,
		.venv_pth_off = cfg->venv_pth_off,
		.venv_withheld = cfg->venv_withheld,
		.timeout_s = cfg->timeout_s,
		.memory_mb = cfg->memory_mb,
		.log_level = (int)log_threshold,
		.check = cfg->check_session,
		/* The sandbox refuses memfds in every mode.  A memfd is memory
		 * that only a descriptor shows, and a descriptor can be held by
		 * no process: sent over a socketpair (SCM_RIGHTS) and closed,
		 * it waits in the socket, where no look at a process finds it,
		 * for as long as the socket lives.  Seccomp cannot see what a
		 * sendmsg carries, and socketpairs stay (asyncio and
		 * multiprocessing.Pipe need them); files under /tmp and
		 * /dev/shm stay counted that way (statfs of their size-capped
		 * tmpfs counts a file wherever its descriptors are).
		 * Attack: six memfds of 150 MB, each written, sent and closed,
		 * held 900 MB of host memory under memory_mb 256, every call ok.
		 * (And before: memfds written and never mapped, where the server
		 * cannot read the sessions' descriptors.) */
		.no_memfd = true,
		.stay_readable = watch_stay_readable(),
		.scratch = sup->scratch[0] ? sup->scratch : NULL,
	};
	char *txt = zconfig_encode(&zc);
	int r = txt ? wire_send(sock, W_CONFIG, txt, strlen(txt), NULL, 0) : -ENOMEM;
	free(txt);
	return r;
}

static const struct zlink_events zlink_events;

int sup_start(struct sup *sup, struct err *e)
{
	const struct sup_config *cfg = &sup->cfg;
	/* What the last zygote's end said to the deaths it caused (handled
	 * by now: see zygote_gone). */
	sup->zbroke[0] = '\0';
	sup->zdied[0] = '\0';
	if (!sup->persist) {
		sup->persist = persist_new(cfg->ws, cfg->policy);
		if (cfg->policy->limits.persist && !persist_on(sup->persist))
			log_warn("sessions will not be saved: %s", persist_why_off(sup->persist));
	}
	if (!sup->warm)
		sup->warm = warmup_new(cfg->ws, cfg->policy, cfg->check_session ? WARMUP_OFF : cfg->warmup);
	if (!sup->zl)
		sup->zl = zlink_new(cfg->loop, &zlink_events, sup, cfg->zlink);
	warmup_zygote_started(sup->warm);
	make_scratch(sup);
	/* Decided before the fork (the probe forks and execs itself), and the
	 * same for every start: send_config's no_memfd follows it. */
	bool owner = !cfg->fake_zygote && watch_owner_ns();
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return err_sys(e, -errno, "socketpair");
	fflush(NULL);
	errno = 0;
	pid_t pid = cfg->fake_zygote ? cfg->fake_zygote(cfg->arg, sv[1], sv[0]) : fork();
	if (pid < 0) {
		int err = errno ? errno : EAGAIN;
		close(sv[0]);
		close(sv[1]);
		return err_sys(e, -err, "fork");
	}
	if (pid == 0) {
		close(sv[0]);
		/* The zygote must not hold the MCP stdin/stdout. */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0)
			dup2(null, STDIN_FILENO);
		dup2(STDERR_FILENO, STDOUT_FILENO);
		char fdarg[16];
		snprintf(fdarg, sizeof fdarg, "%d", sv[1]);
		fcntl(sv[1], F_SETFD, 0); /* the one descriptor it keeps */
		char *argv[] = { "python-sandbox-mcp", "--zygote-fd", fdarg, NULL };
		/* Attack: the server's environment (API tokens a client passes to
		 * its servers) would sit in the zygote's initial stack, which every
		 * session inherits and can read with ctypes even after the jail
		 * clears the environment.  The zygote gets only the test and
		 * sanitizer knobs it reads, nothing else. */
		static const char *const keep[] = { "PSM_JAIL_DISABLE=", "PSM_SECCOMP_PFC=", "PSM_TEST_ZYGOTE_KILL=",
						    "PSM_TEST_ZYGOTE_HOOK=", "PSM_TEST_ZYGOTE_PIDFD=", "PSM_TEST_ZYGOTE_SWEEP_MS=", "PSM_TEST_ZYGOTE_SETTLE_MS=",
						    "PSM_TEST_ZYGOTE_FAULT_US=",
						    "ASAN_OPTIONS=", "UBSAN_OPTIONS=", "LSAN_OPTIONS=" };
		/* Room for the titles the zygote and its sessions give themselves
		 * (setproctitle reuses the argv and environment area). */
		static char room[] = "PSM_TITLE_ROOM=................................................"
				     "................................................................";
		/* The user's home directory, only so that the jail can refuse a
		 * ROOT equal to it (not a project; see jail/jail.c). */
		static char home[4096 + 16];
		const char *h = getenv("HOME");
		snprintf(home, sizeof home, "PSM_HOME=%s", h ? h : "");
		/* malloc's heap in transparent huge pages (glibc 2.35 and later;
		 * an older one ignores it): the server's own value, never the
		 * server's environment's.  A DataFrame's columns of up to 32 MB
		 * live in that heap (glibc raises its mmap threshold to there as
		 * such blocks are freed); in 4 kB pages, each one reused after
		 * the trim before a checkpoint (interp/session.c) faulted in
		 * again page by page.  `sklearn fit` at 4M rows: 28k to 44k
		 * faults and 0.57 to 1.19 s a call, against 2k to 19k and 0.23 to
		 * 0.96 s (bench/CHECKPOINTS.md). */
		static char tunables[] = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1";
		char *envp[N_ELEMENTS(keep) + 4];
		size_t n = 0;
		envp[n++] = room;
		envp[n++] = home;
		envp[n++] = tunables;
		for (char **ev = environ; *ev && n < N_ELEMENTS(keep) + 3; ev++)
			for (size_t k = 0; k < N_ELEMENTS(keep); k++)
				if (strncmp(*ev, keep[k], strlen(keep[k])) == 0) {
					envp[n++] = *ev;
					break;
				}
		envp[n] = NULL;
		/* A server not run by root: the zygote's memory is made in a
		 * user namespace this server owns, so that it can count its
		 * sessions by proportional shares (see jail/ns.c for what this
		 * does not open).  The probe said it works here; a failure now
		 * may leave this child in a namespace without a mapping, so it
		 * ends (the server's restart says so if it keeps failing). */
		if (owner && jail_ns_owner_enter() < 0) {
			static const char msg[] = "python-sandbox-mcp: cannot start the zygote in its own user namespace\n";
			(void)!write(STDERR_FILENO, msg, sizeof msg - 1);
			_exit(127);
		}
		exec_self(cfg->self_exe, argv, envp);
		_exit(127);
	}
	close(sv[1]);
	/* A zygote that died already (killed, or its start failed) makes this
	 * send fail with EPIPE: that is not the server's error to return but
	 * the zygote's death, seen below as the end of its socket, where every
	 * waiting call gets its answer. */
	int r = send_config(sup, sv[0]);
	if (r < 0)
		log_warn("cannot configure the zygote: %s", strerror(-r));
	sup->zpid = pid;
	sup->z = Z_WARMING;
	zlink_attach(sup->zl, sv[0], pid);
	log_debug("zygote started (pid %d)", (int)pid);
	return 0;
}

/* A zygote that was ready this long before it died did not die of its own
 * start: its death does not count toward the crash loop. */
#define ZYGOTE_SERVED_MS 10000.0

static void restart_zygote(void *arg)
{
	struct sup *sup = arg;
	struct err e = { 0 };
	sup->restart_timer = 0;
	if (sup->z != Z_DOWN)
		return;
	if (sup_start(sup, &e) < 0) {
		/* No zygote and none coming: the waiting calls must hear it. */
		sup->z = Z_FAILED;
		snprintf(sup->zerror, sizeof sup->zerror,
			 "the interpreter could not be started: %.600s", e.msg);
		log_error("%s", sup->zerror);
		fail_waiting(sup);
	}
}

/* The interpreter could not start: every call waiting for it gets the
 * reason now (never a request left without a reply). */
static void fail_waiting(struct sup *sup)
{
	for (struct session *s = sup->sessions; s; s = s->next)
		if (s->life == L_WAITING) {
			spawn_given_up(s);
			if (s->cur)
				fail_call_now(sup, s, sup->zerror[0] ? sup->zerror : "the interpreter could not be started");
			post_start(sup, s);
		}
}

void sup_disable(struct sup *sup, const char *why)
{
	sup->z = Z_FAILED;
	snprintf(sup->zerror, sizeof sup->zerror, "%s", why);
	fail_waiting(sup);
}

/* The sweep.  After each exit (once a checkpoint has resumed in place of a
 * dead session): tell the zygote which of its processes are sessions and checkpoints; it
 * ends the rest, which the code of a dead session left running
 * (zygote.c: sweep). */
/* The sweep held while a copy was forked is let go: the epoch it waited
 * with (or the current one when none was held). */
unsigned long long sweep_release_epoch(struct sup *sup)
{
	unsigned long long epoch = sup->sweep_held ? (unsigned long long)sup->held_epoch : sup->epoch;
	sup->sweep_held = false;
	return epoch;
}

/* No zygote process yet (or any more). */
void zygote_none(struct sup *sup)
{
	sup->zpid = -1;
}

void send_sweep(struct sup *sup, unsigned long long epoch)
{
	if (!zlink_open(sup->zl))
		return;
	if (fork_in_flight(sup)) {
		/* The copy being forked is a child of the zygote the server
		 * cannot name yet: the sweep waits for it (fork_failed or
		 * forked sends it). */
		sup->sweep_held = true;
		sup->held_epoch = (double)epoch;
		return;
	}
	struct zmsg_sweep *sw = xcalloc(1, sizeof *sw);
	sw->epoch = epoch;
	sw->born_by = kproc_now_ticks(); /* before the list: nothing it names is younger */
	if (!live_pids(sup, sw->keep, ZMSG_PIDS_MAX, &sw->n_keep)) {
		/* Never a list cut short: what it left out would be ended. */
		log_warn("more than %d live processes: no sweep", ZMSG_PIDS_MAX);
		free(sw);
		return;
	}
	char *txt = zmsg_sweep_encode(sw);
	free(sw);
	if (zlink_send(sup->zl, W_SWEEP, txt, NULL, 0) < 0)
		log_warn("could not send the sweep to the zygote");
	free(txt);
	sweep_again(sup);
}

static void sweep_again_fired(void *arg)
{
	struct sup *sup = arg;
	sup->sweep_again_timer = 0;
	send_sweep(sup, sup->epoch);
	/* Not again after this one: it was made long after what the first
	 * one left (that was born in the first list's tick). */
	if (sup->sweep_again_timer) {
		loop_timer_cancel(sup->cfg.loop, sup->sweep_again_timer);
		sup->sweep_again_timer = 0;
	}
}

/* A sweep or a settle's list leaves the zygote's children born in its own
 * clock tick or later, which it may not know (a checkpoint forked within
 * milliseconds of a rollback).  What a dead session left in that tick is
 * still ended: by one more sweep, with a list made SWEEP_AGAIN_MS later.
 * Attack: a cell forks a child and crashes at once, so that the child is
 * born in the tick of the sweep that answers the crash.  Each sweep pushes
 * the follow-up back: after two exits within SWEEP_AGAIN_MS, the one that
 * judges the second sweep's own tick must come after that sweep, not
 * after the first (each sweep in between judges the ticks before its own). */
void sweep_again(struct sup *sup)
{
	if (sup->sweep_again_timer)
		loop_timer_cancel(sup->cfg.loop, sup->sweep_again_timer);
	sup->sweep_again_timer = loop_timer(sup->cfg.loop, SWEEP_AGAIN_MS, sweep_again_fired, sup);
}

bool live_pids(const struct sup *sup, pid_t *out, size_t max, size_t *n)
{
	size_t k = 0;
	for (const struct session *s = sup->sessions; s; s = s->next) {
		if (!proc_alive(s))
			continue;
		pid_t two[2] = { s->pid, s->ckpt_pid };
		for (int i = 0; i < 2; i++) {
			if (two[i] <= 0)
				continue;
			if (k == max)
				return false;
			out[k++] = two[i];
		}
	}
	*n = k;
	return true;
}

static void z_jail(void *arg, bool enforceable, bool nsfree, const char *why, const char *report)
{
	struct sup *sup = arg;
	/* The kernel's word on where the zygote is: the sessions' parent, and
	 * the procfs the watchdog reads (never learned from a session). */
	sup->zhpid = zlink_zygote(sup->zl);
	sup->proc_jail = watch_proc_root(sup->zhpid, sup->proc, sizeof sup->proc);
	log_debug("the watchdog reads %s", sup->proc);
	if (nsfree)
		log_info("jail mode: Landlock + seccomp (no namespaces on this machine; "
			 "python-sandbox-mcp --check says what that changes and how to get them)");
	else
		remove_scratch(sup); /* the jail's /tmp is its own */
	struct statfs sfs;
	sup->scratch_tmpfs = sup->scratch[0] && statfs(sup->scratch, &sfs) == 0 && sfs.f_type == TMPFS_MAGIC;
	scratch_none(sup);
	log_debug("jail:\n%s", report);
	if (sup->cfg.check_session)
		/* For the --check process that started this server. */
		fprintf(stderr, "%s\n%s%s\n", CHECK_JAIL_BEGIN, report, CHECK_JAIL_END);
	if (!enforceable) {
		/* Fail closed: nothing runs under less protection than the
		 * policy asks for (the zygote starts no interpreter). */
		sup->z = Z_FAILED;
		snprintf(sup->zerror, sizeof sup->zerror,
			 "the sandbox cannot enforce the policy on this machine: %s%s",
			 why[0] ? why : "a required layer is missing",
			 sup->cfg.check_session ? "" : " (run python-sandbox-mcp --check for details)");
		log_error("%s", sup->zerror);
		fail_waiting(sup);
	}
}

static void z_ready(void *arg, double start_ms)
{
	struct sup *sup = arg;
	if (sup->z == Z_FAILED)
		return;
	sup->z = Z_READY;
	sup->ready_at = loop_now_ms();
	log_info("interpreter ready in %.0f ms", start_ms);
	spawn_pending(sup);
}

static void z_fatal(void *arg, const char *msg)
{
	struct sup *sup = arg;
	sup->z = Z_FAILED;
	snprintf(sup->zerror, sizeof sup->zerror, "the sandbox could not start: %s", msg);
	log_error("%s", sup->zerror);
	fail_waiting(sup);
}

static void z_spawned(void *arg, int id, int pidfd, const struct kproc *k, bool gone)
{
	struct sup *sup = arg;
	struct session *s = session_by_id(sup, id);
	if (!s) {
		/* Reset or cancelled meanwhile: end the orphan (the kernel
		 * confirmed it is the zygote's new child). */
		if (pidfd >= 0) {
			pidfd_signal(pidfd, SIGKILL);
			close(pidfd);
		}
		return;
	}
	if (pidfd < 0) {
		/* Without the kernel's handle on it the server could not
		 * freeze, watch or end it: no session runs like that. */
		if (gone)
			log_warn("session %s: its process ended at once", s->name);
		else
			log_error("the zygote could not fork session %s", s->name);
		session_gone(sup, s);
		return;
	}
	session_known(s, k->ns, k->host, pidfd);
	/* What it sent meanwhile (ctrl_event left it unread), then the kill
	 * asked for before its pidfd was in, if one was. */
	post_read(sup, s);
}

/* The zygote's own timers (its next start, a sweep again), at the
 * supervisor's end: armed and cancelled in this file only. */
void zygote_timers_stop(struct sup *sup)
{
	uint64_t *ts[] = { &sup->restart_timer, &sup->sweep_again_timer };
	for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
		if (*ts[i]) {
			loop_timer_cancel(sup->cfg.loop, *ts[i]);
			*ts[i] = 0;
		}
}

/* The zygote is ready, or no copy is in flight any more: the sessions
 * that waited for that start, from the outbox's drain.  start_next decides
 * each one there, in order: one whose call makes a copy puts a copy in
 * flight, and those after it wait again (a process born while a copy is
 * in flight could pass for the copy; see forked). */
void spawn_pending(struct sup *sup)
{
	for (struct session *s = sup->sessions; s; s = s->next)
		if (s->life == L_WAITING) {
			spawn_unwait(s);
			/* The call that waited goes back to the head of the queue
			 * (none: it was cancelled, or failed, meanwhile; then only
			 * a call still queued starts a process.  Attack: a call
			 * cancelled before the zygote was ready had send_exec run
			 * with no call, and the server died of SIGSEGV). */
			requeue_first(s);
			post_start(sup, s);
		}
}

/* The zygote reaped pid.  Its report is believed only for a session whose
 * own pidfd says it has exited: a report for a live session's pid (a lie,
 * or a stale report of an earlier holder of that pid) changes nothing. */
static void z_exited(void *arg, pid_t pid, int status, bool status_known, unsigned long long epoch)
{
	struct sup *sup = arg;
	sup->epoch = epoch;
	struct session *s = session_by_pid(sup, pid);
	if (s && s->pidfd >= 0 && !kproc_exited(s->pidfd)) {
		log_debug("session %s: an exit report for pid %d, which is alive: ignored", s->name, (int)pid);
		s = NULL;
	}
	/* Its death is posted, and the sweep follows it from the outbox's
	 * drain (with the latest epoch by then). */
	if (s)
		session_reported_dead(sup, s, status, status_known);
	else
		send_sweep(sup, epoch);
}

/* Posted, not handled here: the call's end (freeze.c: settled) starts the
 * next steps of the session (its reply, its checkpoint), which run from the
 * outbox's drain with no handler of the zygote's link on the stack. */
static void z_settled(void *arg, pid_t pid)
{
	struct sup *sup = arg;
	struct session *s = session_by_pid(sup, pid);
	if (s && s->phase == P_FREEZING)
		post_settled(sup, s, pid);
}

/* The learned warm-up works in the zygote only while no call runs. */
void warm_busy(struct sup *sup)
{
	/* No probe is forked either while a copy is (see forked). */
	bool busy = fork_in_flight(sup);
	for (struct session *o = sup->sessions; o && !busy; o = o->next)
		busy = o->cur || o->qhead;
	char *txt = sup->z == Z_READY ? warmup_busy(sup->warm, busy) : NULL;
	if (txt && zlink_send(sup->zl, W_WARM, txt, NULL, 0) == 0)
		warmup_busy_sent(sup->warm, busy);
	free(txt);
	zlink_warm_paused(sup->zl, busy);
}

static bool z_warmed(void *arg, const struct zmsg_warmed *w)
{
	struct sup *sup = arg;
	return warmup_outcome(sup->warm, w);
}

/* The zygote is gone, or broke its protocol (then the server ends it): a
 * new one is started, as after a kill from outside. */
static void z_lost(void *arg, bool broken, const char *why)
{
	struct sup *sup = arg;
	bool was_ready = sup->z == Z_READY;
	char reason[320];
	snprintf(reason, sizeof reason, "%s%s", broken ? "it broke its protocol with the server: " : "", why);
	if (broken) {
		log_warn("the zygote broke its protocol with the server (%s): it is ended and a new one is started", why);
		snprintf(sup->zbroke, sizeof sup->zbroke,
			 "the interpreter's zygote (the process every session is forked from) broke its protocol with the "
			 "server (%.200s), so it was ended and a new one started: every session's state was lost", why);
	}
	zygote_gone(sup, reason);
	if (sup->z == Z_FAILED) {
		fail_waiting(sup);
	} else if (sup->restarts < 5 && (was_ready || sup->restarts < 2)) {
		/* Killed from outside: warm a new one, the next call works.
		 * A zygote that died while warming up without saying why
		 * (no W_FATAL: killed, out of memory) gets two more tries;
		 * calls waiting for it wait for those.  Five restarts within a
		 * minute of each other mean a crash loop: then the server stops
		 * trying and says so. */
		if (loop_now_ms() - sup->last_restart > 60000.0)
			sup->restarts = 0;
		/* One that served for a while was killed from outside (the
		 * OOM killer, an operator), not a crash loop: five such kills a
		 * minute apart must not leave the server without an
		 * interpreter for good. */
		if (was_ready && loop_now_ms() - sup->ready_at > ZYGOTE_SERVED_MS)
			sup->restarts = 0;
		sup->restarts++;
		sup->last_restart = loop_now_ms();
		sup->restart_timer = loop_timer(sup->cfg.loop, (sup->cfg.restart_ms > 0 ? sup->cfg.restart_ms : 100.0) * sup->restarts,
						restart_zygote, sup);
	} else {
		sup->z = Z_FAILED;
		if (broken)
			snprintf(sup->zerror, sizeof sup->zerror,
				 "the interpreter's zygote broke its protocol with the server again and again (last: %.300s), "
				 "so the server stopped starting it: something that runs at the interpreter's start (a .pth "
				 "file of the venv, an installed module) is hostile or broken; see the server's log", why);
		else
			snprintf(sup->zerror, sizeof sup->zerror,
				 "the interpreter could not be started (see the server's log on stderr)");
		fail_waiting(sup);
	}
}

static const struct zlink_events zlink_events = {
	.jail = z_jail,
	.ready = z_ready,
	.fatal = z_fatal,
	.spawned = z_spawned,
	.exited = z_exited,
	.settled = z_settled,
	.warmed = z_warmed,
	.lost = z_lost,
};

/* The zygote and the sessions it forks.
 *
 * zygote_main: jail first, then Python, then the stack imported once; then a
 * loop over the server's control socket (W_SPAWN) and SIGCHLD (a signalfd),
 * reporting each child's exit to the server (W_EXITED).  It is pid 1 of the
 * jail's pid namespace when there is one, so it also reaps orphans.
 *
 * Each forked child runs zygote_session_main (session.c): the session that
 * runs the cells, where user code runs, so nothing it sends back is trusted.
 * Here: the zygote's start, its loop, the spawns, and the sweeps and
 * settles that end what ended sessions left behind. */
#include "zygote.h"
#include "bigmem.h"
#include "forkfd.h"
#include "procs.h"
#include "session.h"
#include "warm.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/balloon.h"
#include "../common/log.h"
#include "../common/util.h"
#include "../jail/jail.h"
#include "../policy/trust.h"
#include "pyembed.h"
#include "../proto/config.h"
#include "../proto/result.h"
#include "../proto/smsg.h"
#include "../proto/zmsg.h"
#include "../proto/wire.h"

/* PSM_TEST_ZYGOTE_KILL=STEP: a test hook that makes the zygote die by
 * SIGKILL at one step of its start-up (exec, config, jail, python, ready,
 * spawn), the way the OOM killer or a stray kill would, so the tests can
 * check that every pending call is still answered.  It can only end the
 * zygote; it changes nothing that the jail enforces. */
static char kill_step[32];

/* PSM_TEST_ZYGOTE_HOOK=FILE and PSM_TEST_ZYGOTE_PIDFD=PID: test hooks that
 * put Python code, and a pidfd of a process the test chose, into the real
 * zygote, so that the tests can play a zygote that
 * runs code nobody approved and check from outside what the server does
 * with each message it sends.  They grant nothing an attacker lacks: the
 * server's environment is the user's own word (whoever sets it runs code
 * as the user already); the code runs where an installed module's
 * import-time code runs (in the jail, after it is built, before the zygote
 * says it is ready), as a venv's .pth files did before they were kept out
 * of the zygote; and the pidfd stands for
 * what pidfd_open of a host process gives code in a jail without a pid
 * namespace, which the jail's signal scope still keeps it from using.
 * The file is read before the jail, which may hide it. */
static char *test_hook;
static int test_pidfd = -1;

/* PSM_TEST_ZYGOTE_SWEEP_MS=N (at most 2000): a test hook that pauses the
 * zygote for N ms inside each sweep, after it has checked that the list is
 * current, as a preemption on a loaded machine does, so the tests can
 * check that what happens meanwhile (a checkpoint taken, its session
 * dead) is not judged by the older list.  It only slows the zygote. */
static unsigned sweep_pause_ms;
/* PSM_TEST_ZYGOTE_SETTLE_MS=N (at most 2000): the same pause at the start
 * of each settle, the last step of freezing a session (the server then
 * always asks for it), so the tests can act while a session is being
 * frozen. */
static unsigned settle_pause_ms;

static void test_pause(unsigned ms)
{
	if (ms) {
		struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
		nanosleep(&ts, NULL);
	}
}

static void test_sweep_pause(void)
{
	test_pause(sweep_pause_ms);
}

static void test_hooks_read(void)
{
	const char *f = getenv("PSM_TEST_ZYGOTE_HOOK");
	FILE *fp = f && *f ? fopen(f, "re") : NULL;
	if (fp) {
		size_t cap = 1 << 20, n = 0;
		test_hook = xcalloc(1, cap + 1);
		n = fread(test_hook, 1, cap, fp);
		test_hook[n] = '\0';
		fclose(fp);
	}
	const char *sp = getenv("PSM_TEST_ZYGOTE_SWEEP_MS");
	long ms = sp && *sp ? strtol(sp, NULL, 10) : 0;
	sweep_pause_ms = ms > 0 && ms <= 2000 ? (unsigned)ms : 0;
	sp = getenv("PSM_TEST_ZYGOTE_SETTLE_MS");
	ms = sp && *sp ? strtol(sp, NULL, 10) : 0;
	settle_pause_ms = ms > 0 && ms <= 2000 ? (unsigned)ms : 0;
	const char *p = getenv("PSM_TEST_ZYGOTE_PIDFD");
	long pid = p && *p ? strtol(p, NULL, 10) : 0;
	test_pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, (pid_t)pid, 0) : -1;
}

/* Runs the hook's code in __main__ with `ctrl` (the zygote's socket) and
 * `pidfd` (or -1) defined. */
static void test_hook_run(int ctrl)
{
	if (!test_hook)
		return;
	char pre[96];
	snprintf(pre, sizeof pre, "ctrl = %d\npidfd = %d\n", ctrl, test_pidfd);
	PyRun_SimpleString(pre);
	PyRun_SimpleString(test_hook);
	free(test_hook);
	test_hook = NULL;
}

static void test_kill_point(const char *step)
{
	if (kill_step[0] && strcmp(kill_step, step) == 0) {
		raise(SIGKILL);
		_exit(137); /* pid 1 of a pid namespace ignores its own SIGKILL */
	}
}


static __attribute__((noreturn)) void fatal(int ctrl, const char *msg)
{
	log_error("%s", msg);
	send_msg(ctrl, W_FATAL, zmsg_fatal_encode(&(struct zmsg_fatal){ .message = msg }), NULL, 0);
	_exit(70);
}

static const char *fs_read_name(const struct policy *p)
{
	return p->fs_read == FS_READ_ROOT ? "true" : p->fs_read == FS_READ_WORKSPACE ? "false" : "a list";
}

static const char *fs_write_name(const struct policy *p)
{
	return p->fs_write == FS_WRITE_WORKSPACE ? "workspace" : p->fs_write == FS_WRITE_NONE ? "false" : "a list";
}

/* The configuration handed to the bootstrap (_psm.zygote_init). */
static char *bootstrap_config(const struct zygote_config *zc, const struct jail_report *rep)
{
	const struct policy *p = zc->policy;
	cJSON *j = cJSON_CreateObject();
	char buf[4096];
	snprintf(buf, sizeof buf, "%s/outputs", zc->workspace);
	cJSON_AddStringToObject(j, "outputs_dir", buf);
	cJSON_AddStringToObject(j, "workspace_display", zc->workspace_display);
	cJSON_AddStringToObject(j, "fs_read", fs_read_name(p));
	cJSON_AddStringToObject(j, "fs_write", fs_write_name(p));
	cJSON_AddBoolToObject(j, "fs_read_hidden", p->fs_read != FS_READ_ROOT);
	cJSON_AddBoolToObject(j, "net_access", p->net_access);
	cJSON_AddBoolToObject(j, "shell_exec", p->shell_exec);
	cJSON_AddBoolToObject(j, "nsfree", rep->nsfree);
	cJSON_AddBoolToObject(j, "no_memfd", jail_memfd_refused(zc->no_memfd, zc->stay_readable, rep));
	cJSON_AddNumberToObject(j, "memory_mb", (double)p->limits.memory_mb);
	cJSON_AddNumberToObject(j, "max_file_mb", (double)p->limits.max_file_mb);
	cJSON_AddNumberToObject(j, "max_processes", (double)p->limits.max_processes);
	cJSON_AddNumberToObject(j, "max_result_chars", (double)p->limits.max_output_chars);
	/* What the jail shows, so a missing file elsewhere can be named as
	 * hidden by fs_read rather than just missing. */
	cJSON *vis = cJSON_AddArrayToObject(j, "visible");
	cJSON_AddItemToArray(vis, cJSON_CreateString(zc->workspace));
	if (p->fs_read == FS_READ_ROOT)
		cJSON_AddItemToArray(vis, cJSON_CreateString(zc->root));
	for (size_t i = 0; p->fs_read == FS_READ_LIST && i < p->n_fs_read_paths; i++)
		cJSON_AddItemToArray(vis, cJSON_CreateString(p->fs_read_paths[i]));
	for (const char *const *rp = jail_default_runtime_paths(); rp && *rp; rp++)
		cJSON_AddItemToArray(vis, cJSON_CreateString(*rp));
	/* Not /tmp or /dev/shm: the jail's are private, the host's hidden. */
	static const char *const always[] = { "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/proc", NULL };
	for (const char *const *a = always; *a; a++)
		cJSON_AddItemToArray(vis, cJSON_CreateString(*a));
	/* Where the sandboxed code can write: the learned warm-up never loads
	 * a module from there (bootstrap _warm_setup). */
	cJSON *wr = cJSON_AddArrayToObject(j, "writable");
	cJSON_AddItemToArray(wr, cJSON_CreateString(zc->workspace));
	for (size_t i = 0; p->fs_write == FS_WRITE_LIST && i < p->n_fs_write_paths; i++)
		if (p->fs_write_paths[i][0] == '/')
			cJSON_AddItemToArray(wr, cJSON_CreateString(p->fs_write_paths[i]));
	static const char *const scratch_dirs[] = { "/tmp", "/dev/shm", "/var/tmp", NULL };
	for (const char *const *a = scratch_dirs; *a; a++)
		cJSON_AddItemToArray(wr, cJSON_CreateString(*a));
	if (rep->scratch[0])
		cJSON_AddItemToArray(wr, cJSON_CreateString(rep->scratch));
	/* The venv's site-packages: added by each session after its fork
	 * (bootstrap session_init), never by the zygote, which every later
	 * session is forked from.  Attack: a project's .pth that ran in the
	 * zygote wrote forged messages on the zygote's socket, and survived
	 * reset: true. */
	cJSON_AddBoolToObject(j, "venv_pth", !zc->venv_pth_off);
	cJSON_AddBoolToObject(j, "venv_withheld", zc->venv_withheld);
	/* The project's own files are no part of the installation either. */
	cJSON *proj = cJSON_AddArrayToObject(j, "project");
	cJSON_AddItemToArray(proj, cJSON_CreateString(zc->root));
	cJSON *sites = cJSON_AddArrayToObject(j, "site_dirs");
	if (zc->venv) {
		glob_t g;
		snprintf(buf, sizeof buf, "%s/lib/python3*/site-packages", zc->venv);
		if (glob(buf, 0, NULL, &g) == 0) {
			for (size_t i = 0; i < g.gl_pathc; i++)
				cJSON_AddItemToArray(sites, cJSON_CreateString(g.gl_pathv[i]));
			globfree(&g);
		}
	}
	char *s = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	return s;
}


/* The sessions this zygote forked and has not reaped yet: kept by every
 * sweep, also before the server has read their W_SPAWNED. */
static pid_t spawned[512]; /* max_sessions is at most 256, plus those ending */
/* How many children were reaped: a sweep is for the state the server saw. */
static unsigned long long exits;

static void note_spawned(pid_t pid, bool add)
{
	for (size_t i = 0; i < sizeof spawned / sizeof spawned[0]; i++)
		if (add ? spawned[i] == 0 : spawned[i] == pid) {
			spawned[i] = add ? pid : 0;
			return;
		}
}

static void spawn_session(int ctrl, struct wire_msg *m, int sfd)
{
	struct zmsg_spawn sp;
	struct err e = { 0 };
	if (zmsg_spawn_decode(m->data, m->len, &sp, &e) < 0 || m->nfds != 3) {
		log_error("malformed spawn request: %s", e.msg[0] ? e.msg : "not three descriptors");
		return;
	}
	test_kill_point("spawn");
	fflush(NULL);
	PyOS_BeforeFork();
	int pidfd = -1;
	pid_t pid = fork_pidfd(&pidfd);
	int fork_errno = errno;
	if (pid == 0) {
		PyOS_AfterFork_Child();
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		session_child_signals();
		close(sfd);
		close(ctrl);
		int fds[3] = { m->fds[0], m->fds[1], m->fds[2] };
		m->nfds = 0;
		zygote_session_main(&sp, fds);
	}
	PyOS_AfterFork_Parent();
	if (pid > 0)
		note_spawned(pid, true);
	struct zmsg_spawned rep = { .id = sp.id, .pid = pid < 0 ? -1 : pid };
	if (pid < 0)
		snprintf(rep.error, sizeof rep.error, "%s", strerror(fork_errno));
	send_msg(ctrl, W_SPAWNED, zmsg_spawned_encode(&rep), pidfd >= 0 ? &pidfd : NULL, pidfd >= 0 ? 1 : 0);
	if (pidfd >= 0)
		close(pidfd);
}

/* When a session dies, what its code left running is reparented here,
 * where it no longer shows where it came from: the server, which knows
 * every live session and checkpoint, answers each W_EXITED with the list
 * of those to keep, and everything else below the zygote is ended.
 * Attack: a cell forks a process that calls setsid(), then the call times
 * out or the session is reset; the process would run on in the jail,
 * writing into the workspace, until the server exits.
 * A sweep sent before a later exit is stale (a checkpoint that has just
 * resumed may be missing from it) and is skipped: that exit's own sweep
 * follows. */
static void reap(int ctrl);

static void sweep(int ctrl, unsigned long long epoch, unsigned long long born_by, const pid_t *list, size_t n_list)
{
	/* An exit the server has not heard of yet makes the list stale: the
	 * dead session's checkpoint is a child of the zygote now, and may be
	 * what its rollback resumes. */
	reap(ctrl);
	if (epoch != exits)
		return;
	test_sweep_pause();
	size_t cap = sizeof spawned / sizeof spawned[0] + n_list + 1;
	pid_t *keep = xcalloc(cap, sizeof *keep);
	size_t n = 0;
	/* The warm-up's probe is the zygote's own, no session's. */
	if (warm_probe_pid() > 0)
		keep[n++] = warm_probe_pid();
	for (size_t i = 0; i < sizeof spawned / sizeof spawned[0]; i++)
		if (spawned[i] > 0)
			keep[n++] = spawned[i];
	memcpy(keep + n, list, n_list * sizeof *keep);
	n += n_list;
	/* Judged only what the list can know: a session can still die during
	 * the scan (the zygote is one process on a loaded machine), and a
	 * checkpoint it took after the list was made would be an orphan the
	 * list does not name (born in the list's own tick or later).  Nothing
	 * a cell leaves escapes by this: an orphan is born before the death
	 * that orphans it, the server answers every death with a sweep whose
	 * list is made after it, and each sweep with one more 50 ms later
	 * (zstart.c: sweep_again), for what was born in the first one's tick. */
	int r = procs_end_below_by(getpid(), keep, n, false, born_by);
	if (r > 0)
		log_info("ended %d process(es) left by ended sessions", r);
	free(keep);
}

static void sweep_msg(int ctrl, const struct wire_msg *m)
{
	struct zmsg_sweep *sw = xcalloc(1, sizeof *sw);
	struct err e = { 0 };
	if (zmsg_sweep_decode(m->data, m->len, sw, &e) < 0)
		log_error("%s", e.msg);
	else
		sweep(ctrl, sw->epoch, sw->born_by, sw->keep, sw->n_keep);
	free(sw);
}

/* The server froze a session at the end of a call: end everything below it
 * but its checkpoint (which the server verified through its pidfd), and,
 * when the server's view of the exits is current, whatever was orphaned to
 * the zygote that is no session or checkpoint.  This runs here, in a
 * process no cell can reach (pid 1 of the pid namespace, or outside the
 * cell's Landlock signal scope), never inside the session.
 * Attack: a cell forks a setsid() child, then lowers RLIMIT_NOFILE to 4 or
 * uses up its descriptors, so that a clean-up inside the session cannot
 * read /proc and the child runs on across calls. */
static void settle(int ctrl, const struct wire_msg *m)
{
	struct zmsg_settle *st = xcalloc(1, sizeof *st);
	struct err e = { 0 };
	struct zmsg_settled rep = { 0 };
	test_pause(settle_pause_ms);
	if (zmsg_settle_decode(m->data, m->len, st, &e) < 0) {
		log_error("%s", e.msg);
	} else {
		rep.pid = st->pid;
		pid_t k = st->keep;
		/* Never below the zygote itself (pid 1 of its namespace). */
		int r = st->pid > 1 ? procs_end_below(st->pid, &k, k > 0 ? 1 : 0, false) : 0;
		if (r > 0)
			rep.ended += r;
		else if (r < 0)
			log_warn("settle: %s", strerror(-r));
		if (st->has_all)
			sweep(ctrl, st->epoch, st->born_by, st->all, st->n_all);
	}
	send_msg(ctrl, W_SETTLED, zmsg_settled_encode(&rep), NULL, 0);
	free(st);
}

static void reap(int ctrl)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid <= 0)
			return;
		if (warm_reaped(pid))
			continue; /* the zygote's own probe: no session's exit */
		exits++;
		note_spawned(pid, false);
		/* What the code of a dead session left running is ended by the
		 * sweep the server sends in answer (see sweep). */
		struct zmsg_exited x = { .pid = pid, .status = status, .status_known = true, .epoch = exits };
		send_msg(ctrl, W_EXITED, zmsg_exited_encode(&x), NULL, 0);
	}
}

static char **build_env(const struct zygote_config *zc)
{
	static char mpl[4200];
	if (zc->policy->fs_write == FS_WRITE_WORKSPACE && !zc->check) {
		/* A font cache that survives restarts (building it costs seconds). */
		snprintf(mpl, sizeof mpl, "MPLCONFIGDIR=%s/.cache/matplotlib", zc->workspace);
	} else {
		snprintf(mpl, sizeof mpl, "MPLCONFIGDIR=/tmp/matplotlib");
	}
	static char *env[] = {
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=/tmp",
		"TMPDIR=/tmp",
		"LANG=C.UTF-8",
		"LC_ALL=C.UTF-8",
		/* Single-threaded BLAS: fork() while an OpenBLAS thread pool is
		 * busy hangs in its atfork handler. */
		"OPENBLAS_NUM_THREADS=1",
		"OMP_NUM_THREADS=1",
		"MKL_NUM_THREADS=1",
		"NUMEXPR_NUM_THREADS=1",
		"MPLBACKEND=Agg",
		"PYTHONNOUSERSITE=1",
		"PYTHONDONTWRITEBYTECODE=1",
		mpl,
		NULL,
	};
	return env;
}

void zygote_jail_config(const struct zygote_config *zc, struct jail_config *jc)
{
	static int keep[2];
	keep[0] = zc->ctrl;
	keep[1] = test_pidfd;
	*jc = (struct jail_config){
		.policy = zc->policy,
		.root = zc->root,
		.workspace = zc->workspace,
		.venv = zc->venv,
		.runtime_ro = jail_default_runtime_paths(),
		.keep_fds = keep,
		.n_keep_fds = test_pidfd >= 0 ? 2 : 1,
		.env = (const char *const *)build_env(zc),
		.no_host_changes = zc->check,
		.no_memfd = zc->no_memfd,
		.stay_readable = zc->stay_readable,
		.scratch = zc->scratch,
	};
}

/* The jail's report goes first, before the interpreter starts: until then
 * nothing but this program has run in this process, so the verdict the
 * server acts on (fail closed) is the jail's own, not one that a .pth file
 * or a module's import-time code could write in its place.  With it goes
 * this process's own pidfd, which the server pins the zygote by once the
 * kernel confirms it is the process it found below the one it started
 * (the server does not open it itself: it may not be allowed to, as under
 * valgrind, which does not know pidfd_open).  A jail that
 * cannot enforce the policy starts no interpreter at all: the server
 * refuses to run code, and this process waits for its end. */
static void send_jail_report(int ctrl, const struct jail_report *rep, int self_pidfd)
{
	char *desc = jail_report_describe(rep);
	struct zmsg_jail jm = { .enforceable = rep->enforceable, .nsfree = rep->nsfree, .why = rep->why, .report = desc };
	int r = send_msg(ctrl, W_JAIL, zmsg_jail_encode(&jm), self_pidfd >= 0 ? &self_pidfd : NULL, self_pidfd >= 0);
	if (self_pidfd >= 0)
		close(self_pidfd);
	free(desc);
	if (r < 0)
		_exit(0);
	if (rep->enforceable)
		return;
	struct wire_msg m;
	while (wire_recv(ctrl, &m, 1 << 20) == 0)
		wire_msg_free(&m);
	_exit(0);
}

/* Below the server's priority, for the zygote and everything forked from
 * it (sessions, copies, savers), relative to the server's own nice value.
 * Attack: a cell's busy processes starve the server on a small machine, so
 * that the watchdog's looks come late and memory grows unseen between two
 * of them: six forked children allocating 160 MB each passed memory_mb 256
 * by 170 MB and more, 2 runs in 8 on 2 cores with 4 other busy processes.
 * At nice +5 a runnable sandboxed process weighs a third of the server's,
 * so the watchdog runs first when its timer fires.  No cell can undo it:
 * the jail sets RLIMIT_NICE to 0 (no raising of priority) and drops
 * CAP_SYS_NICE.  On an idle machine it changes nothing. */
#define ZYGOTE_NICE 5
static void below_server_priority(void)
{
	errno = 0;
	int cur = getpriority(PRIO_PROCESS, 0);
	if (cur == -1 && errno != 0)
		return;
	if (setpriority(PRIO_PROCESS, 0, cur + ZYGOTE_NICE > 19 ? 19 : cur + ZYGOTE_NICE) < 0)
		log_debug("cannot lower the sandbox's priority: %s", strerror(errno));
}

void zygote_main(const struct zygote_config *zc)
{
	int ctrl = zc->ctrl;
	log_set_prefix("zygote");
	setproctitle("-python-sandbox-mcp: zygote");
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	below_server_priority();
	/* Python's own stdout must never reach the MCP stream. */
	dup2(STDERR_FILENO, STDOUT_FILENO);

	struct jail_config jc;
	zygote_jail_config(zc, &jc);
	int self_pidfd = -1;
	jc.self_pidfd = &self_pidfd;
	struct jail_report rep;
	struct err e = { 0 };
	memset(&rep, 0, sizeof rep);
	/* Before seccomp, which refuses pidfd_open: the children's pidfds
	 * come from clone (forkfd.h). */
	forkfd_init();
	/* Read before the jail hides /sys: only a choice of page size for
	 * large arrays hangs on it (interp/bigmem.c).  Small pages after a
	 * rest pay only where the host takes freed memory back and a small
	 * page's fault is cheap; on a machine where it is dear, huge pages
	 * cost less at any age. */
	bool host_takes_freed = balloon_reports_free_pages(BALLOON_DRIVERS_DIR);
	double fault_us = -1;
	if (host_takes_freed) {
		const char *t = getenv("PSM_TEST_ZYGOTE_FAULT_US"); /* the tests' choice of machine */
		fault_us = t && *t ? strtod(t, NULL) : small_page_fault_us();
	}
	bool small_after_rest = small_pages_after_rest(host_takes_freed, fault_us);
	if (jail_enter(&jc, &rep, &e) < 0)
		fatal(ctrl, e.msg);
	test_kill_point("jail");
	/* Each session stacks the gate on its way out of the tree: compiled
	 * here once, loaded there with one call. */
	if (!jail_session_gate_prepare())
		log_debug("the sessions' gate is not compiled here: each session compiles its own (none where seccomp is disabled)");
	send_jail_report(ctrl, &rep, self_pidfd);
	if (chdir(zc->root) < 0)
		fatal(ctrl, "cannot enter the project directory inside the jail");
	/* Orphans (a resumed checkpoint whose session died, a process the code
	 * left behind) are reparented here, so every exit is seen and reaped,
	 * also where there is no pid namespace. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (zc->policy->fs_write == FS_WRITE_WORKSPACE && !zc->check) {
		char d[4200];
		snprintf(d, sizeof d, "%s/.cache", zc->workspace);
		mkdir(d, 0755);
		snprintf(d, sizeof d, "%s/.cache/matplotlib", zc->workspace);
		mkdir(d, 0755);
	}

	double t0 = mono_ms();
	if (py_start(&e) < 0)
		fatal(ctrl, e.msg);
	test_kill_point("python");
	char *cfg = bootstrap_config(zc, &rep);
	char *info = NULL;
	size_t len;
	int is_bytes;
	int r = py_call("zygote_init", cfg, &info, &len, &is_bytes, &e);
	free(cfg);
	if (r < 0)
		fatal(ctrl, e.msg);
	test_hook_run(ctrl);
	zygote_session_precopy(zc->policy->limits.memory_mb);
	/* With checkpoints, for the copies a fork would make; without them,
	 * where small pages pay after a rest, for the page size alone:
	 * NumPy's default allocator advises huge pages for every large block,
	 * the dear ones after a rest on such a host. */
	if (zc->policy->limits.checkpoint || small_after_rest) {
		int b = bigmem_install(zc->policy->limits.memory_mb, small_after_rest, zc->policy->limits.checkpoint);
		if (b < 0)
			log_debug("large arrays: NumPy's default allocator (%s)",
			     b == -ENOENT ? "NumPy is not imported" : "its C API is not the one this build knows");
		else if (small_after_rest)
			log_debug("large arrays: the host takes freed memory back (virtio balloon free page reporting) and a "
				  "small page faults in %.1f us: huge pages only for memory given back a moment ago", fault_us);
	}
	if (host_takes_freed && !small_after_rest)
		log_debug("large arrays: the host takes freed memory back, but a small page faults in %.1f us, dearer than "
			  "a huge page it took back: huge pages at any age", fault_us);
	/* Objects that exist now stay shared copy-on-write with every session:
	 * the collector must not touch (and so copy) their pages. */
	PyRun_SimpleString("import gc; gc.collect(); gc.freeze()");

	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	/* Only exits are reaped here: a session stopped between calls and
	 * continued for the next would otherwise wake the zygote twice per
	 * call, CPU the call waits for on a busy machine.  The session gets
	 * the default back (session_child_signals). */
	sigaction(SIGCHLD, &(struct sigaction){ .sa_handler = SIG_DFL, .sa_flags = SA_NOCLDSTOP }, NULL);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0)
		fatal(ctrl, "signalfd failed");

	free(info); /* what the bootstrap says of the interpreter: no one reads it */
	test_kill_point("ready");
	send_msg(ctrl, W_READY, zmsg_ready_encode(&(struct zmsg_ready){ .start_ms = mono_ms() - t0 }), NULL, 0);

	struct pollfd pf[3] = { { .fd = ctrl, .events = POLLIN }, { .fd = sfd, .events = POLLIN }, { .fd = -1, .events = POLLIN } };
	for (;;) {
		/* The learned warm-up works only while nothing else waits: its
		 * timeout is 0 while it has a step to do, each step is one
		 * module, and while the server has a call running (W_WARM
		 * pause) no step starts; so a request waits at most for what
		 * is left of the one step under way. */
		pf[2].fd = warm_fd();
		pf[2].revents = 0;
		if (poll(pf, 3, warm_timeout()) < 0) {
			if (errno == EINTR)
				continue;
			_exit(75);
		}
		if (pf[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) > 0)
				;
			reap(ctrl);
		}
		if (pf[0].revents) {
			struct wire_msg m;
			r = wire_recv(ctrl, &m, 1 << 20);
			if (r < 0)
				_exit(0); /* the server is gone: so are we, and our children */
			if (m.type == W_SPAWN)
				spawn_session(ctrl, &m, sfd);
			else if (m.type == W_SWEEP)
				sweep_msg(ctrl, &m);
			else if (m.type == W_SETTLE)
				settle(ctrl, &m);
			else if (m.type == W_WARM)
				warm_enqueue(&m);
			wire_msg_free(&m);
			continue; /* more requests first */
		}
		warm_work(ctrl, sfd);
	}
}

/* The server closed its end of the control socket (it exited or was
 * killed): data it sent before may still be queued, so POLLIN alone says
 * nothing; the hang-up does. */
static bool server_gone(int ctrl)
{
	struct pollfd pf = { .fd = ctrl, .events = POLLRDHUP };
	return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL));
}

int zygote_exec_main(int ctrl)
{
	struct wire_msg m;
	struct err e = { 0 };
	log_set_prefix("zygote");
	const char *ks = getenv("PSM_TEST_ZYGOTE_KILL"); /* before clearenv */
	snprintf(kill_step, sizeof kill_step, "%s", ks ? ks : "");
	test_hooks_read();
	test_kill_point("exec");
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Had the server died before the line above, PDEATHSIG would never
	 * come.  Its end of the socket tells, whatever our parent's pid now
	 * is: a server that is pid 1 (a container's first process) is the
	 * normal case, not a sign that it is gone. */
	if (server_gone(ctrl))
		return 70;
	if (wire_recv(ctrl, &m, 4u << 20) < 0 || m.type != W_CONFIG)
		fatal(ctrl, "no configuration from the server");
	struct zconfig cfg;
	int dr = zconfig_decode(m.data, m.len, &cfg);
	wire_msg_free(&m);
	if (dr < 0)
		fatal(ctrl, "incomplete configuration from the server");
	test_kill_point("config");
	if (cfg.log_level >= 0)
		log_threshold = (enum log_level)cfg.log_level;
	struct policy *p = NULL, *ceiling = NULL;
	struct trust_report cut = { 0 };
	/* The same text, the same checks as the server: the zygote enforces
	 * exactly the policy the server printed.  That includes workspace
	 * trust: unless the server says the file is approved, the ceiling
	 * (the built-in policy) cuts it down here too, with the same
	 * function; for the built-in policy itself that changes nothing. */
	const char *root = cfg.root, *ws = cfg.workspace;
	if (policy_parse(cfg.skill_text, strlen(cfg.skill_text), cfg.skill_source, &p, &e) < 0 || policy_resolve(p, root, &e) < 0 ||
	    (!cfg.approved && (policy_builtin(&ceiling, &e) < 0 || policy_resolve(ceiling, root, &e) < 0 ||
			       trust_ceiling(p, ceiling, root, ws, true, &cut, &e) < 0)) ||
	    policy_tighten(p, cfg.timeout_s, cfg.memory_mb, &e) < 0)
		fatal(ctrl, e.msg);
	trust_report_free(&cut);
	policy_free(ceiling);
	struct zygote_config zc = {
		.policy = p,
		.root = root,
		.workspace = ws,
		.workspace_display = cfg.workspace_display,
		.venv = cfg.venv,
		.venv_pth_off = cfg.venv_pth_off,
		.venv_withheld = cfg.venv_withheld,
		.ctrl = ctrl,
		.check = cfg.check,
		.no_memfd = cfg.no_memfd,
		.stay_readable = cfg.stay_readable,
		.scratch = cfg.scratch,
	};
	zygote_main(&zc);
}


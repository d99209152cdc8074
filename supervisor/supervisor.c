#include "supervisor.h"

#include <errno.h>
#include <linux/magic.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/text.h"
#include "../common/util.h"
#include "../proto/config.h"
#include "../proto/wire.h"
#include "../interp/procs.h"
#include "../interp/zygote.h"
#include "../policy/jail.h"
#include "outbuf.h"
#include "persist.h"
#include "usage.h"
#include "warmup.h"
#include "watch.h"
#include "../files/wswatch.h"

/* A resumed checkpoint says hello and takes its own checkpoint within this,
 * or it is ended and the next call starts a new process. */
#define RESUME_MS 30000.0
/* Downscaling the call's images in the session gets its own time, once the
 * cell is done (a large PNG takes seconds on a loaded machine): still a
 * timer, so a session that never answers is ended. */
#define THUMBS_MS 60000.0
#define WATCH_MS ((double)WATCH_INTERVAL_MS)
/* What a session may use of CPU while thawed to take its checkpoint (a
 * fork takes a few ms, also of a process of gigabytes). */
#define SETTLE_CPU_MS 2000

/* Where a session's process is in its exchange with the server, which says
 * what it may send next (expect_for).  The session is hostile: anything else
 * ends it as a crash. */
enum phase {
	P_NONE,      /* no process */
	P_IDLE,      /* frozen (SIGSTOP) between calls; sends nothing */
	P_RUNNING,   /* a cell was sent: hello (new process), started, result */
	P_SETTLING,  /* result in: its checkpoint next */
	P_SCANNING,  /* result and checkpoint in: the server's scan of the workspace runs */
	P_THUMB,     /* an image to downscale was sent: its data next */
	P_FREEZING,  /* all it had to say is in: being frozen and swept */
	P_RESUMING,  /* a checkpoint was told to resume: hello, then checkpoint */
};

enum zstate { Z_DOWN, Z_WARMING, Z_READY, Z_FAILED };

struct session {
	char name[SESSION_NAME_MAX + 1];
	int id;              /* spawn id, unique per process incarnation */
	bool alive;          /* a process exists or is being spawned */
	pid_t pid;           /* in the zygote's pid namespace; 0 until known */
	int pidfd, ctrl, out_r, err_r;
	pid_t ckpt_pid;      /* the frozen copy to roll back to, 0 when none */
	int ckpt_pidfd;
	int dropped_pidfd;   /* the checkpoint it replaced (SIGKILLed), or -1 */
	/* Host pids (this server's pid namespace), from the pidfds: the kernel's
	 * word, never the session's. */
	pid_t hpid, ckpt_hpid;
	enum phase phase;
	bool hello_due;      /* a new process: its hello may precede the result */
	bool spawn_known;    /* the zygote's report of the fork (pid, pidfd) is in */
	bool resume_ckpt;    /* resuming: the hello came, the checkpoint is due */
	bool checkpointing;  /* after a reply: its checkpoint is being taken */
	uint64_t resume_timer, watch_timer, idle_timer;
	int idle_tries;
	struct watch_look look; /* the previous look while freezing */
	long thaw_cpu0;         /* its CPU time when thawed for a checkpoint */
	int quiet_tries;        /* looks for its threads stopped (check_quiet) */
	struct wire_expect expect[3];
	struct wire_reader rd;
	struct outbuf out, err;
	int cells;
	bool has_last;
	int last_exit;
	struct run *cur, *qhead, *qtail;
	uint64_t timeout_timer, progress_timer;
	struct wswatch *watch;   /* the workspace's disk use during a call */
	bool kill_pending;   /* kill as soon as the pidfd arrives */
	bool want_spawn;     /* waiting for the zygote */
	bool resuming;       /* checkpoint signalled; nothing is sent until its hello */
	double progress;
	/* Saved sessions (persist.c) */
	struct psave *save;        /* the state being written, or NULL */
	struct prestore *restore;  /* the saved state being streamed in */
	struct run *restore_call; /* the call it was sent with */
	int restore_verdict;       /* RESTORE_* */
	double restore_age_s;
	uint32_t restore_cells;
	bool restore_tried;        /* looked for a snapshot in this server's life */
	int restore_attempts;      /* calls that carried it without loading it */
	bool cap_noted;            /* the reply said the state was over persist_mb */
	char *next_note;           /* for the next reply (note_next) */
	/* Why the process was ended between calls (a protocol break while
	 * taking its checkpoint), for the next reply; "" when it was not. */
	char broke[96];
	struct sup *sup;
	struct session *next;
};

enum { RESTORE_PENDING = 2, RESTORE_OK = 1, RESTORE_BAD = 0 };

struct sup {
	struct sup_config cfg;
	struct work *work;       /* for the workspace's watch, or NULL */
	enum zstate z;
	pid_t zpid;
	int zctrl;
	char zerror[768];
	/* The zygote's scratch directory in the namespace-free mode (TMPDIR
	 * on the host): removed when that zygote ends. */
	char scratch[256];
	/* That directory lies on a tmpfs: what it holds is memory, counted
	 * toward each running call's memory_mb (see watch_fired). */
	bool scratch_tmpfs;
	unsigned long long scratch_bytes; /* at the last walk (files/wswatch.h) */
	int restarts;
	double last_restart;     /* loop_now_ms() of the last restart */
	int next_id;
	unsigned long long epoch; /* the zygote's count of exits, from W_EXITED */
	pid_t zhpid;             /* the zygote's host pid (the sessions' parent) */
	char proc[320];          /* where the watchdog reads the jail's processes */
	bool proc_jail;          /* proc is the jail's own procfs (pids in the jail) */
	struct session *sessions;
	struct persist *persist;
	struct warmup *warm;     /* the learned warm-up (warmup.c) */
};

static void start_next(struct sup *sup, struct session *s);
static void save_done(void *arg, const struct psave_result *r);
static void restore_outcome(struct sup *sup, struct session *s, struct run *c);
static void session_dead(struct sup *sup, struct session *s, int wstatus, bool status_known);
static void settled(struct sup *sup, struct session *s);
static void take_checkpoint(struct sup *sup, struct session *s);
static void ctrl_event(void *arg, int fd, short revents);
static void note_next(struct session *s, const char *text);

/* Signals the process behind a pidfd: no pid reuse can redirect it.  Where
 * pidfd_send_signal is missing (valgrind does not know it), the pid from
 * /proc/self/fdinfo is used instead. */
static int pidfd_signal(int pidfd, int sig)
{
	if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) == 0)
		return 0;
	if (errno != ENOSYS)
		return -1;
	pid_t pid = pidfd_pid(pidfd);
	if (pid <= 0) {
		errno = ESRCH;
		return -1;
	}
	return kill(pid, sig);
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 ? -errno : fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

struct sup *sup_new(const struct sup_config *cfg)
{
	struct sup *sup = calloc(1, sizeof *sup);
	if (!sup)
		return NULL;
	sup->cfg = *cfg;
	sup->zctrl = -1;
	sup->zpid = -1;
	return sup;
}

static struct session *find_session(struct sup *sup, const char *name)
{
	for (struct session *s = sup->sessions; s; s = s->next)
		if (strcmp(s->name, name) == 0)
			return s;
	return NULL;
}

int sup_count_sessions(struct sup *sup)
{
	int n = 0;
	for (struct session *s = sup->sessions; s; s = s->next)
		n++;
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

/* A run or a save ended: the server may be waiting for that. */
static void ended(struct sup *sup)
{
	if (sup->cfg.ended)
		sup->cfg.ended(sup->cfg.arg);
}

bool sup_last_exit(struct sup *sup, const char *name, int *exit_code)
{
	struct session *s = find_session(sup, name);
	if (!s || !s->has_last)
		return false;
	*exit_code = s->last_exit;
	return true;
}

/* ------------------------------------------------------------ the zygote */

static void zygote_event(void *arg, int fd, short revents);

static void spawn_pending(struct sup *sup);

static void end_orphans(void)
{
	int r = procs_end_below(getpid(), NULL, 0, true);
	if (r > 0)
		log_info("ended %d process(es) the sandboxed code left running", r);
}

/* Called once the zygote and every session are dead (nothing writes there
 * any more).  jail_scratch_remove takes only what the jail named
 * psm-scratch-* and follows no symlink the code may have left. */
static void remove_scratch(struct sup *sup)
{
	if (!sup->scratch[0])
		return;
	int r = jail_scratch_remove(sup->scratch);
	if (r < 0)
		log_warn("cannot remove the sandbox's scratch directory %s: %s", sup->scratch, strerror(-r));
	sup->scratch[0] = '\0';
}

static void zygote_gone(struct sup *sup, const char *why)
{
	if (sup->zctrl >= 0) {
		loop_unwatch(sup->cfg.loop, sup->zctrl);
		close(sup->zctrl);
		sup->zctrl = -1;
	}
	if (sup->zpid > 0) {
		kill(sup->zpid, SIGKILL);
		waitpid(sup->zpid, NULL, 0);
		sup->zpid = -1;
	}
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
	 * PDEATHSIG): they are gone too. */
	for (struct session *s = sup->sessions; s; s = s->next)
		if (s->alive)
			session_dead(sup, s, 0, false);
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
		/* The watchdog counts memfds from the sessions' descriptors; a
		 * server that cannot read them has the sandbox refuse memfds
		 * instead.
		 * Attack: memfds written and never mapped (no RSS shows them)
		 * by a server run by an unprivileged user or in a container. */
		.no_memfd = !watch_sees_fds(),
	};
	char *txt = zconfig_encode(&zc);
	int r = txt ? wire_send(sock, W_CONFIG, txt, strlen(txt), NULL, 0) : -ENOMEM;
	free(txt);
	return r;
}

int sup_start(struct sup *sup, struct err *e)
{
	const struct sup_config *cfg = &sup->cfg;
	if (!sup->persist) {
		sup->persist = persist_new(cfg->ws, cfg->policy);
		if (cfg->policy->limits.persist && !persist_on(sup->persist))
			log_warn("sessions will not be saved: %s", persist_why_off(sup->persist));
	}
	if (!sup->warm)
		sup->warm = warmup_new(cfg->ws, cfg->policy, cfg->check_session ? WARMUP_OFF : cfg->warmup);
	warmup_zygote_started(sup->warm);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return err_sys(e, -errno, "socketpair");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return err_sys(e, -errno, "fork");
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
						    "ASAN_OPTIONS=", "UBSAN_OPTIONS=", "LSAN_OPTIONS=" };
		/* Room for the titles the zygote and its sessions give themselves
		 * (setproctitle reuses the argv and environment area). */
		static char room[] = "PSM_TITLE_ROOM=................................................"
				     "................................................................";
		/* The user's home directory, only so that the jail can refuse a
		 * ROOT equal to it (not a project; see policy/jail.c). */
		static char home[4096 + 16];
		const char *h = getenv("HOME");
		snprintf(home, sizeof home, "PSM_HOME=%s", h ? h : "");
		char *envp[N_ELEMENTS(keep) + 3];
		size_t n = 0;
		envp[n++] = room;
		envp[n++] = home;
		for (char **ev = environ; *ev && n < N_ELEMENTS(keep) + 2; ev++)
			for (size_t k = 0; k < N_ELEMENTS(keep); k++)
				if (strncmp(*ev, keep[k], strlen(keep[k])) == 0) {
					envp[n++] = *ev;
					break;
				}
		envp[n] = NULL;
		execve(cfg->self_exe, argv, envp);
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
	sup->zctrl = sv[0];
	sup->z = Z_WARMING;
	loop_watch(cfg->loop, sv[0], POLLIN, zygote_event, sup);
	log_debug("zygote started (pid %d)", (int)pid);
	return 0;
}

static void fail_waiting(struct sup *sup);

static void restart_zygote(void *arg)
{
	struct sup *sup = arg;
	struct err e = { 0 };
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

static void fail_call_now(struct sup *sup, struct session *s, const char *msg);

/* The interpreter could not start: every call waiting for it gets the
 * reason now (never a request left without a reply). */
static void fail_waiting(struct sup *sup)
{
	for (struct session *s = sup->sessions; s; s = s->next)
		if (s->want_spawn) {
			s->want_spawn = false;
			s->alive = false;
			if (s->cur)
				fail_call_now(sup, s, sup->zerror[0] ? sup->zerror : "the interpreter could not be started");
			start_next(sup, s);
		}
}

void sup_disable(struct sup *sup, const char *why)
{
	sup->z = Z_FAILED;
	snprintf(sup->zerror, sizeof sup->zerror, "%s", why);
	fail_waiting(sup);
}

bool sup_busy(struct sup *sup)
{
	/* A save in progress counts: at the end of input the server gives it
	 * the grace period rather than lose the last state. */
	for (struct session *s = sup ? sup->sessions : NULL; s; s = s->next)
		if (s->cur || s->qhead || s->save)
			return true;
	return false;
}

static struct session *session_by_pid(struct sup *sup, pid_t pid)
{
	for (struct session *s = sup->sessions; s; s = s->next)
		if (s->alive && s->pid == pid)
			return s;
	return NULL;
}

static struct session *session_by_id(struct sup *sup, int id)
{
	for (struct session *s = sup->sessions; s; s = s->next)
		if (s->alive && s->id == id)
			return s;
	return NULL;
}

static void kill_session(struct session *s)
{
	/* What the call used, read while the process still exists. */
	if (s->cur)
		usage_end(&s->cur->usage, s->pidfd, s->ckpt_pidfd);
	if (s->pidfd >= 0)
		pidfd_signal(s->pidfd, SIGKILL);
	else
		s->kill_pending = true;
}

/* After each exit (once a checkpoint has resumed in place of a dead session):
 * tell the zygote which of its processes are sessions and checkpoints; it
 * ends the rest, which the code of a dead session left running
 * (zygote.c: sweep). */
static void send_sweep(struct sup *sup, const cJSON *epoch)
{
	if (!cJSON_IsNumber(epoch) || sup->zctrl < 0)
		return;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "epoch", epoch->valuedouble);
	cJSON *keep = cJSON_AddArrayToObject(j, "keep");
	for (struct session *s = sup->sessions; s && keep; s = s->next) {
		if (!s->alive)
			continue;
		if (s->pid > 0)
			cJSON_AddItemToArray(keep, cJSON_CreateNumber(s->pid));
		if (s->ckpt_pid > 0)
			cJSON_AddItemToArray(keep, cJSON_CreateNumber(s->ckpt_pid));
	}
	char *txt = cJSON_PrintUnformatted(j);
	if (txt && wire_send(sup->zctrl, W_SWEEP, txt, strlen(txt), NULL, 0) < 0)
		log_warn("could not send the sweep to the zygote");
	free(txt);
	cJSON_Delete(j);
}

static void zygote_event(void *arg, int fd, short revents)
{
	struct sup *sup = arg;
	struct wire_msg m;
	int r = wire_recv(fd, &m, 1 << 20);
	if (r < 0) {
		bool was_ready = sup->z == Z_READY;
		zygote_gone(sup, r == -EPIPE ? "end of stream" : strerror(-r));
		if (sup->z == Z_FAILED) {
			fail_waiting(sup);
		} else if (sup->restarts < 5 && (was_ready || sup->restarts < 2)) {
			/* Killed from outside: warm a new one, the next call works.
			 * A zygote that died while warming up without saying why
			 * (no W_FATAL: killed, out of memory) gets two more tries;
			 * calls waiting for it wait for those.  Five restarts within a minute of each other mean a crash
			 * loop: then the server stops trying and says so. */
			if (loop_now_ms() - sup->last_restart > 60000.0)
				sup->restarts = 0;
			sup->restarts++;
			sup->last_restart = loop_now_ms();
			loop_timer(sup->cfg.loop, 100.0 * sup->restarts, restart_zygote, sup);
		} else {
			sup->z = Z_FAILED;
			snprintf(sup->zerror, sizeof sup->zerror,
				 "the interpreter could not be started (see the server's log on stderr)");
			fail_waiting(sup);
		}
		return;
	}
	cJSON *j = cJSON_ParseWithLength((const char *)m.data, m.len);
	switch (m.type) {
	case W_READY: {
		const cJSON *enf = cJSON_GetObjectItemCaseSensitive(j, "enforceable");
		const cJSON *why = cJSON_GetObjectItemCaseSensitive(j, "why");
		const cJSON *jail = cJSON_GetObjectItemCaseSensitive(j, "jail");
		const cJSON *ms = cJSON_GetObjectItemCaseSensitive(j, "start_ms");
		const cJSON *scratch = cJSON_GetObjectItemCaseSensitive(j, "scratch");
		if (cJSON_IsString(scratch))
			snprintf(sup->scratch, sizeof sup->scratch, "%s", scratch->valuestring);
		struct statfs sfs;
		sup->scratch_tmpfs = sup->scratch[0] && statfs(sup->scratch, &sfs) == 0 && sfs.f_type == TMPFS_MAGIC;
		sup->scratch_bytes = 0;
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "nsfree")))
			log_info("jail mode: Landlock + seccomp (no namespaces on this machine; "
				 "python-sandbox-mcp --check says what that changes and how to get them)");
		if (cJSON_IsString(jail))
			log_debug("jail:\n%s", jail->valuestring);
		if (cJSON_IsString(jail) && sup->cfg.check_session)
			/* For the --check process that started this server. */
			fprintf(stderr, "%s\n%s%s\n", CHECK_JAIL_BEGIN, jail->valuestring, CHECK_JAIL_END);
		if (cJSON_IsFalse(enf)) {
			/* Fail closed: nothing runs under less protection than the
			 * policy asks for. */
			sup->z = Z_FAILED;
			snprintf(sup->zerror, sizeof sup->zerror,
				 "the sandbox cannot enforce the policy on this machine: %s "
				 "(run python-sandbox-mcp --check for details)",
				 cJSON_IsString(why) ? why->valuestring : "a required layer is missing");
			log_error("%s", sup->zerror);
			fail_waiting(sup);
		} else {
			sup->z = Z_READY;
			log_info("interpreter ready in %.0f ms", cJSON_IsNumber(ms) ? ms->valuedouble : -1.0);
			spawn_pending(sup);
		}
		break;
	}
	case W_FATAL: {
		const cJSON *msg = cJSON_GetObjectItemCaseSensitive(j, "message");
		sup->z = Z_FAILED;
		snprintf(sup->zerror, sizeof sup->zerror, "the sandbox could not start: %s",
			 cJSON_IsString(msg) ? msg->valuestring : "unknown error");
		log_error("%s", sup->zerror);
		fail_waiting(sup);
		break;
	}
	case W_SPAWNED: {
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "pid");
		struct session *s = cJSON_IsNumber(id) ? session_by_id(sup, id->valueint) : NULL;
		int pidfd = m.nfds > 0 ? m.fds[0] : -1;
		if (!s) {
			/* Reset or cancelled meanwhile: end the orphan. */
			if (pidfd >= 0)
				pidfd_signal(pidfd, SIGKILL);
			break;
		}
		if (!cJSON_IsNumber(pid) || pid->valueint <= 0) {
			log_error("the zygote could not fork session %s", s->name);
			session_dead(sup, s, 0, false);
			break;
		}
		pid_t ns;
		if (pidfd < 0 || watch_pidfd(pidfd, &s->hpid, &ns) < 0) {
			/* Without the kernel's handle on it the server could not
			 * freeze, watch or end it: no session runs like that. */
			log_error("session %s: no pidfd for its process", s->name);
			if (pidfd >= 0)
				pidfd_signal(pidfd, SIGKILL);
			session_dead(sup, s, 0, false);
			break;
		}
		s->pid = pid->valueint;
		s->pidfd = pidfd;
		m.nfds = 0; /* keep it */
		s->spawn_known = true;
		if (sup->zhpid <= 0 && (sup->zhpid = watch_ppid(s->hpid)) > 0) {
			sup->proc_jail = watch_proc_root(sup->zhpid, sup->proc, sizeof sup->proc);
			log_debug("the watchdog reads %s", sup->proc);
		}
		if (s->ctrl >= 0)
			ctrl_event(s, s->ctrl, POLLIN); /* what it sent meanwhile */
		if (s->kill_pending)
			kill_session(s);
		break;
	}
	case W_EXITED: {
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "pid");
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
		struct session *s = cJSON_IsNumber(pid) ? session_by_pid(sup, pid->valueint) : NULL;
		const cJSON *ep = cJSON_GetObjectItemCaseSensitive(j, "epoch");
		if (cJSON_IsNumber(ep))
			sup->epoch = (unsigned long long)ep->valuedouble;
		if (s)
			session_dead(sup, s, cJSON_IsNumber(st) ? st->valueint : 0, cJSON_IsNumber(st));
		send_sweep(sup, ep);
		break;
	}
	case W_WARMED:
		warmup_outcome(sup->warm, j);
		break;
	case W_SETTLED: {
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "pid");
		struct session *s = cJSON_IsNumber(pid) ? session_by_pid(sup, pid->valueint) : NULL;
		if (s && s->phase == P_FREEZING)
			settled(sup, s);
		break;
	}
	default:
		log_warn("unexpected message %u from the zygote", m.type);
	}
	cJSON_Delete(j);
	wire_msg_free(&m);
}

/* ------------------------------------------------------------ sessions */

static void session_close_fds(struct sup *sup, struct session *s)
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

static void drain_all(struct session *s)
{
	unsigned char buf[65536];
	int fds[2] = { s->out_r, s->err_r };
	struct outbuf *obs[2] = { &s->out, &s->err };
	for (int k = 0; k < 2; k++) {
		if (fds[k] < 0)
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

static void pipe_event(void *arg, int fd, short revents)
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

static void finish_cur(struct sup *sup, struct session *s);

static void begin_freeze(struct sup *sup, struct session *s);
static void set_expect(struct sup *sup, struct session *s, enum phase ph);

static void timeout_fired(void *arg);

static void send_thumb_or_finish(struct sup *sup, struct session *s)
{
	struct run *c = s->cur;
	char rel[4096];
	if (c->ev->next_thumb(c, rel, sizeof rel)) {
		cJSON *j = cJSON_CreateObject();
		char path[4200];
		snprintf(path, sizeof path, "%s/%s", sup->cfg.ws->abs, rel);
		cJSON_AddStringToObject(j, "op", "thumb");
		cJSON_AddStringToObject(j, "path", path);
		cJSON_AddNumberToObject(j, "max_bytes", 256 * 1024 - 1024);
		char *txt = cJSON_PrintUnformatted(j);
		cJSON_Delete(j);
		int r = txt ? wire_send(s->ctrl, W_THUMB, txt, strlen(txt), NULL, 0) : -ENOMEM;
		free(txt);
		if (r == 0) {
			if (s->phase != P_THUMB && s->timeout_timer) {
				loop_timer_cancel(sup->cfg.loop, s->timeout_timer);
				s->timeout_timer = loop_timer(sup->cfg.loop, THUMBS_MS, timeout_fired, s);
			}
			set_expect(sup, s, P_THUMB);
			return; /* wait for W_THUMB_DATA */
		}
		/* The session cannot be asked: no more images are. */
	}
	begin_freeze(sup, s);
}

static void resume_expired(void *arg);
static void drop_checkpoint(struct session *s);

/* The status a call has from its own result ("ok", "error"): the clock
 * still runs until the session is frozen, so a later failure replaces it. */
static bool status_from_result(const struct run *c)
{
	return c->status == CALL_OK || c->status == CALL_ERROR;
}

/* The call's result no longer stands (the process broke the protocol, ran
 * out of time after it, or went over a limit): its status comes from what
 * ends it, and the state is rolled back. */
static void drop_result(struct run *c)
{
	if (status_from_result(c)) {
		c->status = CALL_PENDING;
		c->state = STATE_PENDING;
	}
	cJSON_Delete(c->py);
	c->py = NULL;
}

/* Runs from the moment the cell is sent until the session is frozen again:
 * a result frame alone does not stop it.
 * Attack: a cell writes a well-formed result on its control socket and
 * keeps running (burning CPU, writing files) after its reply. */
static void timeout_fired(void *arg)
{
	struct session *s = arg;
	s->timeout_timer = 0;
	if (!s->cur || (s->cur->status != CALL_PENDING && !status_from_result(s->cur)))
		return;
	drop_result(s->cur);
	s->cur->status = CALL_TIMEOUT;
	s->cur->exit_code = call_status_exit_code(CALL_TIMEOUT, 0, false);
	kill_session(s);
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

static void cancel_timers(struct sup *sup, struct session *s)
{
	uint64_t *ts[] = { &s->timeout_timer, &s->progress_timer, &s->watch_timer, &s->idle_timer };
	for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
		if (*ts[i]) {
			loop_timer_cancel(sup->cfg.loop, *ts[i]);
			*ts[i] = 0;
		}
	wswatch_stop(s->watch);
	s->watch = NULL;
}

static void cancel_resume_timer(struct sup *sup, struct session *s)
{
	if (s->resume_timer)
		loop_timer_cancel(sup->cfg.loop, s->resume_timer);
	s->resume_timer = 0;
}

/* The call grew the workspace past limits.max_workspace_mb: stopped like a
 * timeout, so the session rolls back.  Its files stay: the server never
 * deletes what the code wrote (it cannot tell the user's from the code's). */
static void over_limit_stop(struct session *s, unsigned long long bytes, unsigned long long scratch)
{
	wswatch_stop(s->watch);
	s->watch = NULL;
	if (!s->cur || (s->cur->status != CALL_PENDING && !status_from_result(s->cur)))
		return;
	drop_result(s->cur);
	s->cur->status = CALL_LIMITS;
	s->cur->exit_code = call_status_exit_code(CALL_LIMITS, 0, false);
	s->cur->ws_bytes = bytes;
	s->cur->scratch_bytes = scratch;
	kill_session(s);
}

static void workspace_over(void *arg, unsigned long long bytes)
{
	struct session *s = arg;
	over_limit_stop(s, bytes, wswatch_scratch_bytes(s->watch));
}

/* Asks the layer above to find what the run made (once). */
static void collect(struct session *s, struct run *c);

/* What the current run made is known: its images are downscaled next
 * (once the checkpoint is in too), unless the run is being finished (its
 * process died meanwhile). */
static void collected(struct run *c, void *arg)
{
	struct session *s = arg;
	c->waiting = false;
	c->collected = true;
	if (s->cur != c)
		return;
	if (c->finish_pending) {
		finish_cur(s->sup, s);
	} else if (s->phase == P_SCANNING) {
		/* The watcher looks every 250 ms or more: the snapshot after
		 * the call is checked too, with files by their size.
		 * Attack: one fast write past max_workspace_mb (or a sparse
		 * file, 4 KiB on disk) in a call that ends before the watcher
		 * looks, which then ended ok. */
		unsigned long long limit = (unsigned long long)s->sup->cfg.policy->limits.max_workspace_mb << 20;
		if (c->ws_after > limit && c->ws_after > c->ws_before)
			over_limit_stop(s, c->ws_after, c->scratch_after);
		else
			send_thumb_or_finish(s->sup, s);
	}
}

/* The learned warm-up works in the zygote only while no call runs. */
static void warm_busy(struct sup *sup)
{
	bool busy = false;
	for (struct session *o = sup->sessions; o && !busy; o = o->next)
		busy = o->cur || o->qhead;
	warmup_busy(sup->warm, sup->zctrl, busy);
}

/* Collects the output and hands the run back to its owner (ev->done). */
static void finish_cur(struct sup *sup, struct session *s)
{
	struct run *c = s->cur;
	if (!c)
		return;
	usage_end(&c->usage, s->pidfd, s->ckpt_pidfd);
	cancel_timers(sup, s);
	drain_all(s);
	if (!c->collected) {
		/* Files written before a crash or timeout count too; the scan
		 * runs off the loop and calls us again. */
		c->finish_pending = true;
		collect(s, c);
		return;
	}
	const char *log_rel;
	char disp[512];
	c->out_text = outbuf_finish(&s->out, &c->out_truncated, &log_rel);
	if (log_rel && ws_display_path(sup->cfg.ws, log_rel, disp, sizeof disp) == 0)
		c->out_log = strdup(disp);
	c->err_text = outbuf_finish(&s->err, &c->err_truncated, &log_rel);
	if (log_rel && ws_display_path(sup->cfg.ws, log_rel, disp, sizeof disp) == 0)
		c->err_log = strdup(disp);
	c->duration_ms = loop_now_ms() - c->t_start;
	if (s->restore_call == c)
		restore_outcome(sup, s, c); /* the call ended before its result */
	s->has_last = true;
	s->last_exit = c->exit_code;
	s->cur = NULL;
	c->ev->done(c);
	/* After the reply, never before: what sessions taught the zygote
	 * loads while the agent reads it. */
	warmup_after_reply(sup->warm, sup->z == Z_READY ? sup->zctrl : -1);
	start_next(sup, s);
	warm_busy(sup);
	ended(sup);
}

static void collect(struct session *s, struct run *c)
{
	if (c->waiting || c->collected)
		return;
	c->waiting = true;
	c->ev->collect(c, collected, s);
}

/* The process died before it received the current cell (no W_STARTED):
 * the cell never ran, so it goes back to the head of the queue and is sent
 * again to the resumed checkpoint or a new process.  Bounded, so a session
 * that dies at once every time still gets an answer. */
static bool requeue_unstarted(struct sup *sup, struct session *s)
{
	struct run *c = s->cur;
	if (!c || c->started || c->status != CALL_PENDING || c->py || c->resends >= 2)
		return false;
	cancel_timers(sup, s);
	c->resends++;
	s->cells--;
	if (s->restore_call == c) {
		/* The stream went to a process that never read it: the
		 * resent cell looks for the saved state again. */
		prestore_free(s->restore);
		s->restore = NULL;
		s->restore_call = NULL;
		s->restore_tried = false;
	}
	c->prepared = false; /* a new snapshot before it is sent again */
	s->cur = NULL;
	c->next = s->qhead;
	s->qhead = c;
	if (!s->qtail)
		s->qtail = c;
	return true;
}

/* Drops whatever a dead process left on the control socket, so the resumed
 * checkpoint starts on a clean stream. */
static void discard_ctrl_input(struct session *s)
{
	char buf[65536];
	for (int i = 0; i < 1024; i++)
		if (read(s->ctrl, buf, sizeof buf) <= 0)
			break;
	wire_reader_free(&s->rd);
	wire_reader_init(&s->rd, WIRE_MAX_PAYLOAD);
}

/* The call's status and exit code once its process has died: a call not
 * yet decided (no timeout, cancellation or memory verdict) crashed. */
static void decide_on_death(struct run *c, int wstatus, bool status_known)
{
	if (c->status == CALL_PENDING)
		c->status = CALL_CRASHED;
	c->exit_code = call_status_exit_code(c->status, wstatus, status_known);
}

/* The session's process died during a call: resume its checkpoint, so the
 * state is what it was before the call.  False when there is none. */
static bool roll_back(struct sup *sup, struct session *s, int wstatus, bool status_known)
{
	struct run *c = s->cur;
	if (!status_known || s->ckpt_pidfd < 0 || s->ctrl < 0)
		return false;
	drain_all(s);
	discard_ctrl_input(s);
	/* The copy is frozen (SIGSTOP since it was accepted): the resume
	 * signal first, then SIGCONT, so it wakes with the signal pending. */
	if (pidfd_signal(s->ckpt_pidfd, SIGUSR1) < 0 || pidfd_signal(s->ckpt_pidfd, SIGCONT) < 0) {
		log_warn("session %s: the checkpoint is gone (%s)", s->name, strerror(errno));
		return false;
	}
	if (s->pidfd >= 0)
		close(s->pidfd);
	s->pidfd = s->ckpt_pidfd;
	s->pid = s->ckpt_pid;
	s->hpid = s->ckpt_hpid;
	s->ckpt_pidfd = -1;
	s->ckpt_pid = s->ckpt_hpid = 0;
	s->kill_pending = false;
	/* Until the resumed copy says hello it drops whatever was queued for
	 * the dead process (a cell sent after it died must not run).  It is
	 * as hostile as the session was: if it does not say hello and take
	 * its own checkpoint in time, it is ended (a copy that ignores the
	 * resume signal must not hold the session, or a reset, forever). */
	s->resuming = true;
	s->resume_ckpt = false;
	set_expect(sup, s, P_RESUMING);
	cancel_resume_timer(sup, s);
	s->resume_timer = loop_timer(sup->cfg.loop, RESUME_MS, resume_expired, s);
	/* The pipes' write ends live on in the resumed process: watch again
	 * in case a hang-up removed them. */
	loop_watch(sup->cfg.loop, s->ctrl, POLLIN, ctrl_event, s);
	loop_watch(sup->cfg.loop, s->out_r, POLLIN, pipe_event, s);
	loop_watch(sup->cfg.loop, s->err_r, POLLIN, pipe_event, s);
	if (requeue_unstarted(sup, s))
		return true; /* sent again after the resumed copy's hello */
	if (c) {
		decide_on_death(c, wstatus, status_known);
		c->state = STATE_ROLLED_BACK;
		char note[800];
		snprintf(note, sizeof note,
			 "%s%sthe session was rolled back to its state before this call: everything defined earlier is still there, "
			 "nothing this call did to variables was kept (files it wrote stay)",
			 c->note ? c->note : "", c->note ? "; " : "");
		free(c->note);
		c->note = strdup(note);
		finish_cur(sup, s);
	} else if (s->broke[0]) {
		/* Ended between calls, while taking the checkpoint of the
		 * previous call's state: that call's reply said the state was
		 * kept, so the next one says it was not. */
		char note[400];
		snprintf(note, sizeof note,
			 "after the previous call the session's process broke its protocol with the server (%s), so it was "
			 "ended as a crash and rolled back to its state before that call: what that call did to variables "
			 "was lost (files it wrote stay)", s->broke);
		note_next(s, note);
	}
	s->broke[0] = '\0';
	return true;
}

/* The resumed copy did not finish resuming in time: it is ended, and the
 * next call starts a new process (its exit report closes the session). */
static void resume_expired(void *arg)
{
	struct session *s = arg;
	s->resume_timer = 0;
	if (!s->resuming)
		return;
	log_warn("session %s: the resumed checkpoint did not answer within %.0f s: ended", s->name, RESUME_MS / 1000);
	drop_checkpoint(s);
	kill_session(s);
}

static void session_dead(struct sup *sup, struct session *s, int wstatus, bool status_known)
{
	/* The exit report comes on the zygote's socket and may overtake what
	 * the process sent on its own before dying (its checkpoint's pidfd, a
	 * reply): read that first. */
	if (s->ctrl >= 0)
		ctrl_event(s, s->ctrl, POLLIN);
	struct run *c = s->cur;
	/* Gone on its own (a crash): nothing left to measure, and the
	 * checkpoint that may take its place must not be measured instead. */
	if (c)
		usage_end(&c->usage, s->pidfd, s->ckpt_pidfd);
	uint64_t *ts[] = { &s->watch_timer, &s->idle_timer };
	for (size_t i = 0; i < 2; i++)
		if (*ts[i]) {
			loop_timer_cancel(sup->cfg.loop, *ts[i]);
			*ts[i] = 0;
		}
	if (sup->cfg.policy->limits.checkpoint && roll_back(sup, s, wstatus, status_known))
		return;
	session_close_fds(sup, s);
	s->alive = false;
	s->pid = s->hpid = 0;
	s->want_spawn = false;
	s->kill_pending = false;
	s->resuming = s->checkpointing = false;
	s->phase = P_NONE;
	cancel_timers(sup, s);
	cancel_resume_timer(sup, s);
	if (!c && s->broke[0]) {
		char note[400];
		snprintf(note, sizeof note,
			 "after the previous call the session's process broke its protocol with the server (%s), so it was "
			 "ended as a crash; no copy of an earlier state was left, so this call starts a new interpreter",
			 s->broke);
		note_next(s, note);
	}
	s->broke[0] = '\0';
	if (!c || requeue_unstarted(sup, s)) {
		start_next(sup, s); /* queued calls start in a new process */
		return;
	}
	if (c) {
		decide_on_death(c, wstatus, status_known);
		/* Without a checkpoint the state died with the process. */
		c->state = STATE_NEW;
		if (!c->note) {
			char note[300];
			snprintf(note, sizeof note,
				 "the session's process ended, so its state (variables, imports) was lost; "
				 "the next call in session %s starts a new interpreter%s", s->name,
				 sup->cfg.policy->limits.checkpoint ? "" : " (limits.checkpoint is false)");
			c->note = strdup(note);
		}
		finish_cur(sup, s);
	}
}

/* What the session may send in phase ph, and how much (see enum phase).
 * Sizes are tight per type: a result is bounded by the policy's output
 * limit (the bootstrap caps the repr it sends), an image by the 256 KiB a
 * reply may carry.
 * Attack: one 16 MB result frame parsed into a JSON tree grew the server by
 * hundreds of MB for good. */
static void set_expect(struct sup *sup, struct session *s, enum phase ph)
{
	long chars = sup->cfg.policy->limits.max_output_chars;
	uint32_t result_max = (uint32_t)(64 * 1024 + (chars > 0 && chars < (1L << 19) ? chars : 1L << 19) * 12);
	size_t n = 0;
	s->phase = ph;
	switch (ph) {
	case P_RUNNING:
		if (s->hello_due)
			s->expect[n++] = (struct wire_expect){ W_HELLO, 256, 0 };
		if (s->cur && !s->cur->started)
			s->expect[n++] = (struct wire_expect){ W_STARTED, 0, 0 };
		s->expect[n++] = (struct wire_expect){ W_RESULT, result_max, 0 };
		break;
	case P_SETTLING:
		/* its pidfd, and the saver's pipe (saved sessions) */
		s->expect[n++] = (struct wire_expect){ W_CHECKPOINT, 256, 2 };
		break;
	case P_THUMB:
		s->expect[n++] = (struct wire_expect){ W_THUMB_DATA, 256 * 1024, 0 };
		break;
	case P_RESUMING:
		s->expect[n++] = s->resume_ckpt ? (struct wire_expect){ W_CHECKPOINT, 256, 2 }
						: (struct wire_expect){ W_HELLO, 256, 0 };
		break;
	default:
		break; /* frozen or gone: nothing is expected */
	}
	s->rd.expect = s->expect;
	s->rd.n_expect = n;
}

/* The session sent what it must not send now: it is ended like a crash, and
 * rolled back (its exit report does the rest). */
static void violation(struct sup *sup, struct session *s, const char *what)
{
	log_warn("session %s: %s: the session is ended", s->name, what);
	struct run *c = s->cur;
	if (c && !c->note) {
		char note[300];
		snprintf(note, sizeof note,
			 "the session's process broke its protocol with the server (%s), so it was ended as a crash", what);
		c->note = strdup(note);
	}
	if (c)
		drop_result(c);
	else
		snprintf(s->broke, sizeof s->broke, "%s", what); /* said by the next reply */
	set_expect(sup, s, P_NONE);
	loop_unwatch(sup->cfg.loop, s->ctrl);
	kill_session(s);
}

static void drop_checkpoint(struct session *s)
{
	if (s->ckpt_pidfd >= 0) {
		pidfd_signal(s->ckpt_pidfd, SIGKILL);
		/* Kept until the next one: the end of the call tells the dying
		 * copy from a live child by it (check_quiet). */
		if (s->dropped_pidfd >= 0)
			close(s->dropped_pidfd);
		s->dropped_pidfd = s->ckpt_pidfd;
	}
	s->ckpt_pidfd = -1;
	s->ckpt_pid = s->ckpt_hpid = 0;
}

/* A checkpoint is whatever process the pidfd names, as the kernel says: a
 * live child of the session's process (not what the message claims).  It
 * is frozen at once, so it runs nothing until it is resumed, and it stays
 * as hostile as the session was (resumed under a timer).
 * Attack: a cell forks a child that ignores the resume signal, announces it
 * as the checkpoint and kills itself, so that the server resumes a process
 * that never answers and keeps it from the sweep. */
/* The checkpoint the last one replaced (killed, maybe still exiting): its
 * pids here and in the zygote's namespace, as its pidfd says, or 0 when it
 * is gone or there is none. */
static void dying_pids(const struct session *s, pid_t *host, pid_t *ns)
{
	if (s->dropped_pidfd < 0 || watch_pidfd(s->dropped_pidfd, host, ns) < 0)
		*host = *ns = 0;
}

static int accept_checkpoint(struct sup *sup, struct session *s, int pidfd)
{
	pid_t host, ns;
	if (s->hpid <= 0 || watch_pidfd(pidfd, &host, &ns) < 0 || watch_ppid(host) != s->hpid ||
	    pidfd_signal(pidfd, SIGSTOP) < 0)
		return -EPROTO;
	drop_checkpoint(s); /* the previous one */
	s->ckpt_pidfd = pidfd;
	s->ckpt_pid = ns;
	s->ckpt_hpid = host;
	(void)sup;
	return 0;
}

/* The memory and process watchdog, while the session's code may run.  It
 * reads the kernel's counters of every process below the session (the
 * frozen checkpoint left out): per-process rlimits cannot see shared
 * memory, memfds, tmpfs files or how many processes share the work.
 * Attack: 8 memfds of 250 MB mapped shared under a 256 MB limit, 6 GB of
 * MAP_SHARED|MAP_ANONYMOUS, six forked children of 500 MB each. */
static void watch_fired(void *arg)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	s->watch_timer = 0;
	if (!s->alive || s->phase == P_IDLE || s->phase == P_NONE)
		return;
	/* A new process is measured once the zygote's report of it is in.
	 * Attack: the first look came before that report (a spawn slower than
	 * 20 ms, on a loaded machine) and the watchdog stopped for the whole
	 * call: a fresh session filled 2.2 GB of memfds under memory_mb 256. */
	if (s->hpid <= 0) {
		s->watch_timer = loop_timer(sup->cfg.loop, WATCH_MS, watch_fired, s);
		return;
	}
	const struct policy_limits *L = &sup->cfg.policy->limits;
	if (s->phase == P_SETTLING) {
		/* Taking a checkpoint is a fork: milliseconds of CPU even for
		 * gigabytes (page tables), no user code but at-fork hooks. */
		long cpu = watch_cpu_ms(s->hpid);
		if (cpu >= 0 && s->thaw_cpu0 >= 0 && cpu - s->thaw_cpu0 > SETTLE_CPU_MS) {
			log_warn("session %s: %ld ms of CPU while taking its checkpoint: ended", s->name, cpu - s->thaw_cpu0);
			snprintf(s->broke, sizeof s->broke, "it used %ld ms of CPU while taking its checkpoint", cpu - s->thaw_cpu0);
			kill_session(s);
			return;
		}
	}
	struct footprint u;
	/* The jail's own procfs lists its processes only (cheap); the host's
	 * lists every process of the machine. */
	/* The checkpoint a new one replaced is killed, and counted no more
	 * while it exits: a session of 800 MB under memory_mb 1024 was ended
	 * as the old copy and the session summed to 1.6 GB. */
	pid_t dying_h, dying_ns;
	dying_pids(s, &dying_h, &dying_ns);
	int wr = sup->proc_jail ? watch_footprint(sup->proc, sup->zhpid, s->pid, s->ckpt_pid, dying_ns, &u)
				: watch_footprint("/proc", sup->zhpid, s->hpid, s->ckpt_hpid, dying_h, &u);
	/* Without namespaces the private temp directory is no tmpfs of the
	 * jail's that watch_footprint could count: where it lies on the
	 * host's tmpfs, its size at the workspace watch's last walk is memory
	 * too (as /tmp is with namespaces).
	 * Attack: 400 MB written there under memory_mb 128 took host Shmem
	 * from 9 to 419 MB until the server ended. */
	if (s->watch)
		sup->scratch_bytes = wswatch_scratch_bytes(s->watch);
	if (wr == 0 && sup->scratch_tmpfs) {
		u.tmpfs += sup->scratch_bytes;
		u.total += sup->scratch_bytes;
	}
	double next = WATCH_MS;
	if (wr == 0) {
		struct run *c = s->cur;
		uint64_t limit = (uint64_t)L->memory_mb << 20;
		long max_tasks = L->max_processes;
		if (s->phase == P_SETTLING) {
			/* The new checkpoint is a fork, counted until the server
			 * has it, and so is its saver (saved sessions), a fork of
			 * it.  Each shows the session's shared pages in its RSS:
			 * the sum may count the session three times here (a
			 * session of 128 MB under memory_mb 256 showed 561 MB and
			 * was ended with a limit of twice), and those are more
			 * tasks. */
			limit *= 3;
			max_tasks += 3;
		}
		if (u.total > limit) {
			log_info("session %s: %.0f MB in use (anon %.0f, shared %.0f, memfd %.0f, tmpfs %.0f) over memory_mb %ld: ended",
				 s->name, u.total / 1048576.0, u.anon / 1048576.0, u.shmem / 1048576.0, u.memfd / 1048576.0,
				 u.tmpfs / 1048576.0, L->memory_mb);
			if (c && (c->status == CALL_PENDING || status_from_result(c))) {
				drop_result(c);
				c->over_limit = true;
				c->status = CALL_MEMORY;
				c->exit_code = call_status_exit_code(CALL_MEMORY, 0, false);
				if (!c->note) {
					char note[300];
					snprintf(note, sizeof note,
						 "the session's processes used %.0f MB together, over memory_mb (%ld MB): "
						 "shared memory, memfds, files in /tmp and /dev/shm and child processes all count",
						 u.total / 1048576.0, L->memory_mb);
					c->note = strdup(note);
				}
			}
			if (!c)
				snprintf(s->broke, sizeof s->broke, "its processes used %.0f MB while taking its checkpoint, over memory_mb",
					 u.total / 1048576.0);
			kill_session(s);
			return;
		}
		if (u.tasks > max_tasks) {
			log_info("session %s: %ld processes and threads, over max_processes %ld: ended", s->name, u.tasks, L->max_processes);
			if (c && (c->status == CALL_PENDING || status_from_result(c))) {
				drop_result(c);
				c->over_limit = true;
				if (!c->note) {
					char note[300];
					snprintf(note, sizeof note,
						 "the session ran %ld processes and threads at once, over max_processes (%ld), so it was ended",
						 u.tasks, L->max_processes);
					c->note = strdup(note);
				}
			}
			if (!c)
				snprintf(s->broke, sizeof s->broke, "%ld processes and threads while taking its checkpoint, over max_processes",
					 u.tasks);
			kill_session(s);
			return;
		}
		/* Far below the limits, the looks are further apart (each reads
		 * every process's status and descriptors: 0.4 ms of the server's
		 * CPU, 21 ms a second at 20 ms apart, a fifth of a 2-core machine
		 * with 50 agents), never so far apart that memory filled at the
		 * machine's fastest passes the limit by more than its tolerance
		 * before the next look. */
		if (s->phase != P_SETTLING)
			next = watch_next_ms(&u, limit, max_tasks);
	}
	s->watch_timer = loop_timer(sup->cfg.loop, next, watch_fired, s);
}

static void start_watch(struct sup *sup, struct session *s)
{
	if (!s->watch_timer)
		s->watch_timer = loop_timer(sup->cfg.loop, WATCH_MS, watch_fired, s);
}

static void try_freeze(void *arg);
static void check_quiet(void *arg);
static void send_settle(struct sup *sup, struct session *s);

/* All the session had to say is in: freeze it, then have the zygote end
 * what the call left running below it.  Only then is the call over (the
 * call's timer, or the resume timer, runs meanwhile).  The process must be
 * seen asleep first, at two looks with no CPU time used in between (every
 * thread blocked in the kernel), so a cell that sends a made-up result and
 * keeps computing runs out its time instead. */
static void begin_freeze(struct sup *sup, struct session *s)
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

/* Asks the zygote to end what is below the frozen session (W_SETTLED
 * answers). */
static void send_settle(struct sup *sup, struct session *s)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "pid", s->pid);
	cJSON_AddNumberToObject(j, "keep", s->ckpt_pid);
	cJSON_AddNumberToObject(j, "epoch", (double)sup->epoch);
	cJSON *all = cJSON_AddArrayToObject(j, "all");
	for (struct session *o = sup->sessions; o && all; o = o->next) {
		if (!o->alive)
			continue;
		if (o->pid > 0)
			cJSON_AddItemToArray(all, cJSON_CreateNumber(o->pid));
		if (o->ckpt_pid > 0)
			cJSON_AddItemToArray(all, cJSON_CreateNumber(o->ckpt_pid));
	}
	char *txt = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	int r = txt && sup->zctrl >= 0 ? wire_send(sup->zctrl, W_SETTLE, txt, strlen(txt), NULL, 0) : -EPIPE;
	free(txt);
	if (r < 0) {
		log_warn("session %s: cannot ask the zygote to sweep: %s", s->name, strerror(-r));
		kill_session(s);
	}
}

/* The session did not take its checkpoint in time: it is ended as a crash,
 * and the previous checkpoint (if any) resumes. */
static void checkpoint_expired(void *arg)
{
	struct session *s = arg;
	s->resume_timer = 0;
	if (!s->checkpointing)
		return;
	log_warn("session %s: no checkpoint within %.0f s: ended", s->name, RESUME_MS / 1000);
	snprintf(s->broke, sizeof s->broke, "no checkpoint within %.0f s", RESUME_MS / 1000);
	kill_session(s);
}

/* Thaws the idle session just long enough to fork its checkpoint, under a
 * timer; it is frozen and swept again once the checkpoint is in. */
static void take_checkpoint(struct sup *sup, struct session *s)
{
	s->thaw_cpu0 = s->hpid > 0 ? watch_cpu_ms(s->hpid) : 0;
	if (s->pidfd >= 0)
		pidfd_signal(s->pidfd, SIGCONT);
	set_expect(sup, s, P_SETTLING);
	/* The limits hold while it runs for its checkpoint, too.
	 * Attack: a cell that sent a made-up result and slept through the
	 * looks (it is believed: a sleeping process looks idle) runs again
	 * here, after its reply; without the watchdog it could hold shared
	 * memory over memory_mb, or compute, until the checkpoint timer. */
	start_watch(sup, s);
	cancel_resume_timer(sup, s);
	s->resume_timer = loop_timer(sup->cfg.loop, RESUME_MS, checkpoint_expired, s);
	if (wire_send(s->ctrl, W_TAKE_CHECKPOINT, "", 0, NULL, 0) < 0)
		kill_session(s);
}

/* The zygote has ended what was left below the frozen session. */
static void settled(struct sup *sup, struct session *s)
{
	set_expect(sup, s, P_IDLE);
	if (s->watch_timer) {
		loop_timer_cancel(sup->cfg.loop, s->watch_timer);
		s->watch_timer = 0;
	}
	if (s->resuming || s->checkpointing) {
		s->resuming = s->checkpointing = false;
		cancel_resume_timer(sup, s);
		start_next(sup, s);
		return;
	}
	if (!s->cur)
		return;
	/* The reply goes out now; the checkpoint of the state it kept is
	 * taken after it (no fork on the call's path), before the next cell.
	 * The previous checkpoint stays until the new one is accepted: a
	 * session that fails to take it is rolled back to that one. */
	bool take = sup->cfg.policy->limits.checkpoint && s->cur->state == STATE_KEPT;
	if (take)
		s->checkpointing = true;
	finish_cur(sup, s);
	if (take && s->checkpointing && s->alive && s->phase == P_IDLE)
		take_checkpoint(sup, s);
}

static void on_message(struct sup *sup, struct session *s, struct wire_msg *m)
{
	struct run *c = s->cur;
	/* It ran to send this: an earlier look says nothing about it now. */
	s->look = (struct watch_look){ 0 };
	switch (m->type) {
	case W_HELLO:
		if (s->phase == P_RESUMING) {
			s->resume_ckpt = true;
			if (!sup->cfg.policy->limits.checkpoint)
				begin_freeze(sup, s);
			else
				set_expect(sup, s, P_RESUMING);
		} else {
			s->hello_due = false;
			set_expect(sup, s, s->phase);
		}
		return;
	case W_STARTED:
		s->hello_due = false;
		c->started = true;
		set_expect(sup, s, s->phase);
		return;
	case W_CHECKPOINT:
		if (m->nfds == 2) {
			/* The saver's pipe: the state after this call, streamed by
			 * a fork of the checkpoint, copied to disk and
			 * authenticated here (persist.c). */
			int save_fd = m->fds[1];
			m->fds[1] = -1;
			m->nfds = 1;
			psave_abandon(s->save);
			s->save = persist_on(sup->persist)
				  ? psave_start(sup->persist, sup->cfg.loop, s->name, (uint32_t)s->cells, save_fd, save_done, s)
				  : (close(save_fd), NULL);
		}
		/* The message is the checkpoint: without its pidfd it is not
		 * what the server asked for, and the session is ended as a
		 * crash, rolled back to the previous checkpoint, and the next
		 * reply says so.
		 * Attack: a cell that uses up its descriptors (or lowers its
		 * own limit) leaves a session that cannot take a checkpoint;
		 * it said so, and the server went on with no copy of the state
		 * at all and said nothing (a later crash lost everything). */
		if (m->nfds == 0) {
			violation(sup, s, "a checkpoint message without the checkpoint");
			return;
		}
		if (accept_checkpoint(sup, s, m->fds[0]) < 0) {
			violation(sup, s, "a checkpoint that is no child of the session");
			return;
		}
		m->nfds = 0; /* kept */
		if (s->phase == P_RESUMING || s->checkpointing) {
			begin_freeze(sup, s);
		} else {
			/* The images next, once what the run made is known too
			 * (collected). */
			set_expect(sup, s, P_SCANNING);
			if (c->collected)
				send_thumb_or_finish(sup, s);
		}
		return;
	case W_RESULT: {
		/* The first of the two looks that must find it asleep before it
		 * is frozen (begin_freeze), taken now: the scan of what the call
		 * made runs in between, so the second look needs no wait. */
		if (s->hpid > 0)
			watch_idle(s->hpid, &s->look);
		/* Measured now: thumbnails made after the cell are the server's
		 * work, not the call's. */
		usage_end(&c->usage, s->pidfd, s->ckpt_pidfd);
		c->py = cJSON_ParseWithLength((const char *)m->data, m->len);
		const cJSON *st = cJSON_GetObjectItemCaseSensitive(c->py, "status");
		if (!cJSON_IsString(st)) {
			violation(sup, s, "a result without a status");
			return;
		}
		if (c->status != CALL_PENDING) {
			/* Cancelled or over a limit meanwhile: its end is on the way. */
			set_expect(sup, s, P_NONE);
			return;
		}
		/* The session only ever reports ok, error or memory; a status
		 * that rolls back (memory: a failed allocation may have left
		 * objects half-built) is acted on by killing the process, so the
		 * checkpoint resumes. */
		enum call_status said = call_status_parse(st->valuestring);
		if (said != CALL_OK && said != CALL_MEMORY)
			said = CALL_ERROR;
		c->status = said;
		c->exit_code = call_status_exit_code(said, 0, false);
		if (call_status_table[said].rolls_back) {
			set_expect(sup, s, P_NONE);
			kill_session(s);
			return;
		}
		c->state = STATE_KEPT;
		/* The modules the cell imported: a report from the session,
		 * checked by warmup_note. */
		warmup_note(sup->warm, cJSON_GetObjectItemCaseSensitive(c->py, "imports"));
		restore_outcome(sup, s, c);
		set_expect(sup, s, P_SCANNING);
		collect(s, c); /* then the thumbnails */
		return;
	}
	case W_THUMB_DATA:
		c->ev->thumb(c, m->data, m->len);
		send_thumb_or_finish(sup, s);
		return;
	default:
		violation(sup, s, "an unexpected message");
	}
}

static void ctrl_event(void *arg, int fd, short revents)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	(void)revents;
	/* Being ended (a protocol break, a rolled-back status): nothing more
	 * it says matters. */
	if (s->phase == P_NONE)
		return;
	/* Nothing from a new process is judged before the zygote's report of
	 * it (its pidfd) is in: that report is already on its way, on the
	 * zygote's socket. */
	if (!s->spawn_known) {
		struct pollfd p = { .fd = sup->zctrl, .events = POLLIN };
		if (sup->zctrl >= 0 && poll(&p, 1, 0) == 1)
			zygote_event(sup, sup->zctrl, POLLIN);
		return;
	}
	for (int budget = 0; budget < 64; budget++) {
		struct wire_msg m;
		int r = wire_reader_step(&s->rd, fd, &m);
		if (r == 0)
			return;
		if (r == -EPIPE) {
			/* End of stream: the process is ended; its exit (from the
			 * zygote) finishes the call. */
			loop_unwatch(sup->cfg.loop, fd);
			kill_session(s);
			return;
		}
		if (r < 0) {
			char what[96];
			uint32_t type, len;
			memcpy(&type, s->rd.hdr + 4, 4);
			memcpy(&len, s->rd.hdr + 8, 4);
			snprintf(what, sizeof what, "%s (type %u, %u bytes)",
				 r == -EMSGSIZE ? "a message over its size" : "a message it may not send now", type, len);
			violation(sup, s, what);
			return;
		}
		on_message(sup, s, &m);
		wire_msg_free(&m);
		if (s->phase == P_NONE || s->ctrl != fd)
			return;
	}
}


/* ------------------------------------------------------------ saved sessions */

/* Appends text to *dst as a paragraph of its own (a note). */
static void append_para(char **dst, const char *text)
{
	if (!text || !*text)
		return;
	size_t a = *dst ? strlen(*dst) : 0, b = strlen(text);
	char *n = malloc(a + b + 2);
	if (!n)
		return;
	if (a) {
		memcpy(n, *dst, a);
		n[a++] = '\n';
	}
	memcpy(n + a, text, b + 1);
	free(*dst);
	*dst = n;
}

/* Adds a paragraph to the call's note (other parts of the server add
 * theirs). */
static void add_note(struct run *c, const char *text)
{
	append_para(&c->note, text);
}

/* Adds a paragraph to the note of the session's next reply. */
static void note_next(struct session *s, const char *text)
{
	append_para(&s->next_note, text);
}

static void save_done(void *arg, const struct psave_result *r)
{
	struct session *s = arg;
	struct sup *sup = s->sup;
	s->save = NULL;
	if (r->status == 0) {
		log_info("session %s: state saved (%llu bytes in %.0f ms)", s->name, (unsigned long long)r->bytes, r->ms);
		s->cap_noted = false;
	} else if (r->status == -EFBIG) {
		/* A restart must not bring back an older state as if it were
		 * the last one: the previous snapshot goes too. */
		persist_discard(sup->persist, s->name);
		if (!s->cap_noted) {
			char m[400];
			snprintf(m, sizeof m,
				 "the session's state (%.0f MB) is over limits.persist_mb (%ld MB): it is not saved, and a restart of the server will lose it; "
				 "delete large variables you no longer need (del name) or raise persist_mb in the policy",
				 (double)r->bytes / 1048576.0, sup->cfg.policy->limits.persist_mb);
			note_next(s, m);
			s->cap_noted = true;
		}
		log_info("session %s: state not saved: %s", s->name, r->msg);
	} else {
		log_debug("session %s: save abandoned: %s", s->name, r->msg);
	}
	ended(sup);
}

static void restore_done(void *arg, int verdict)
{
	struct session *s = arg;
	s->restore_verdict = verdict == 1 ? RESTORE_OK : verdict == 0 ? RESTORE_BAD : -1;
	if (verdict == 0)
		log_warn("session %s: the saved state does not match its tag: refused", s->name);
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

/* Appends up to 30 entries of a list the session sent: names, or
 * [name, reason] pairs.  Untrusted: each piece is sanitised and cut. */
static void list_names(char *buf, size_t sz, const cJSON *list, bool reasons)
{
	size_t n = strlen(buf);
	int shown = 0, total = cJSON_GetArraySize(list);
	const cJSON *it;
	cJSON_ArrayForEach(it, list)
	{
		const cJSON *name = reasons ? cJSON_GetArrayItem(it, 0) : it;
		const cJSON *why = reasons ? cJSON_GetArrayItem(it, 1) : NULL;
		if (!cJSON_IsString(name) || shown >= 30 || n + 8 >= sz)
			continue;
		char *nm = utf8_sanitize((const unsigned char *)name->valuestring, strnlen(name->valuestring, 64), NULL);
		char *wy = cJSON_IsString(why) ? utf8_sanitize((const unsigned char *)why->valuestring, strnlen(why->valuestring, 200), NULL) : NULL;
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
		snprintf(buf + n, sz - n, " and %d more", total - shown);
}

/* The reply of the call that carried the saved state: what the server
 * knows (its verdict, the age) decides the state; the session's lists only
 * name what came back. */
static void restore_outcome(struct sup *sup, struct session *s, struct run *c)
{
	if (!s->restore || s->restore_call != c)
		return;
	const cJSON *rj = cJSON_GetObjectItemCaseSensitive(c->py, "restore");
	char age[32], m[6144];
	fmt_age(s->restore_age_s, age, sizeof age);
	if (s->restore_verdict == RESTORE_OK && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rj, "verified"))) {
		c->state = STATE_RESTORED;
		snprintf(m, sizeof m, "the session was restored from its state saved %s ago (after cell %u), before this code ran. Restored: ",
			 age, s->restore_cells);
		list_names(m, sizeof m, cJSON_GetObjectItemCaseSensitive(rj, "restored"), false);
		const cJSON *failed = cJSON_GetObjectItemCaseSensitive(rj, "failed");
		const cJSON *unsaved = cJSON_GetObjectItemCaseSensitive(rj, "unsaved");
		if (cJSON_GetArraySize(failed) > 0 && strlen(m) + 40 < sizeof m) {
			strcat(m, ". Could not be restored: ");
			list_names(m, sizeof m, failed, true);
		}
		if (cJSON_GetArraySize(unsaved) > 0 && strlen(m) + 40 < sizeof m) {
			strcat(m, ". Could not be saved (run the cells that made them again): ");
			list_names(m, sizeof m, unsaved, true);
		}
	} else if (s->restore_verdict == RESTORE_BAD) {
		c->state = STATE_NEW;
		snprintf(m, sizeof m,
			 "the saved state of session %s was refused: its bytes do not match the tag the server wrote with them "
			 "(changed or planted by something other than the server); this call runs in a fresh session", s->name);
	} else {
		/* The call ended before the state was loaded (a timeout, a
		 * crash): the snapshot is still on disk and whole.  The next
		 * call tries once more, rather than let the next save replace
		 * it with an empty session. */
		c->state = STATE_NEW;
		bool again = ++s->restore_attempts < 2;
		if (again)
			s->restore_tried = false;
		snprintf(m, sizeof m, "the saved state of session %s could not be loaded in this call%s; this call ran in a fresh session",
			 s->name, again ? " (the next call tries again)" : "");
	}
	add_note(c, m);
	prestore_free(s->restore);
	s->restore = NULL;
	s->restore_call = NULL;
}

/* The first call to a session in this server's life looks for a saved
 * state.  Returns the fd to send with the cell (its size in *bytes), or
 * -1 when there is none (a refused one is said in the call's note). */
static int restore_begin(struct sup *sup, struct session *s, struct run *c, uint64_t *bytes)
{
	if (s->restore_tried || !persist_on(sup->persist))
		return -1;
	s->restore_tried = true;
	struct prestore *r = NULL;
	struct err e = { 0 };
	int rc = prestore_open(sup->persist, s->name, &r, &e);
	if (rc < 0) {
		char m[1000];
		snprintf(m, sizeof m, "the saved state of session %s was refused: %.700s; this call runs in a fresh session", s->name, e.msg);
		add_note(c, m);
		log_warn("session %s: %s", s->name, m);
		return -1;
	}
	if (rc == 0)
		return -1;
	int fd = prestore_start(r, sup->cfg.loop, restore_done, s);
	if (fd < 0) {
		prestore_free(r);
		return -1;
	}
	s->restore = r;
	s->restore_call = c;
	s->restore_verdict = RESTORE_PENDING;
	s->restore_age_s = prestore_age_s(r);
	s->restore_cells = prestore_cells(r);
	s->cells = (int)s->restore_cells;
	*bytes = prestore_bytes(r);
	return fd;
}

static int spawn_session(struct sup *sup, struct session *s)
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
	s->id = ++sup->next_id;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "id", s->id);
	cJSON_AddStringToObject(j, "name", s->name);
	cJSON_AddNumberToObject(j, "seed", (double)sup->cfg.policy->limits.seed);
	cJSON_AddBoolToObject(j, "checkpoint", sup->cfg.policy->limits.checkpoint);
	/* Saving is done by a fork of the checkpoint: none without one. */
	cJSON_AddNumberToObject(j, "persist_cap",
				persist_on(sup->persist) && sup->cfg.policy->limits.checkpoint
					? (double)sup->cfg.policy->limits.persist_mb * 1048576.0 : 0.0);
	char *txt = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	int fds[3] = { sv[1], po[1], pe[1] };
	int r = txt ? wire_send(sup->zctrl, W_SPAWN, txt, strlen(txt), fds, 3) : -ENOMEM;
	free(txt);
	close(sv[1]);
	close(po[1]);
	close(pe[1]);
	if (r < 0) {
		close(sv[0]);
		close(po[0]);
		close(pe[0]);
		return r;
	}
	s->alive = true;
	s->pid = 0;
	s->pidfd = -1;
	s->ckpt_pid = 0;
	s->ckpt_pidfd = -1;
	s->ctrl = sv[0];
	s->out_r = po[0];
	s->err_r = pe[0];
	s->cells = 0;
	s->has_last = false;
	set_nonblock(s->ctrl);
	set_nonblock(s->out_r);
	set_nonblock(s->err_r);
	wire_reader_init(&s->rd, WIRE_MAX_PAYLOAD);
	s->hello_due = true;
	s->spawn_known = false;
	s->hpid = s->ckpt_hpid = 0;
	set_expect(sup, s, P_RUNNING);
	struct loop *l = sup->cfg.loop;
	loop_watch(l, s->ctrl, POLLIN, ctrl_event, s);
	loop_watch(l, s->out_r, POLLIN, pipe_event, s);
	loop_watch(l, s->err_r, POLLIN, pipe_event, s);
	return 0;
}

static void send_exec(struct sup *sup, struct session *s);

/* The layer above has taken what it needs before the cell (a snapshot of
 * the workspace): now it may run.  A run that ended meanwhile (cancelled,
 * its process gone) is finished instead. */
static void prepared(struct run *c, void *arg)
{
	struct session *s = arg;
	c->waiting = false;
	c->prepared = true;
	if (s->cur != c)
		return;
	if (c->finish_pending)
		finish_cur(s->sup, s);
	else if (s->alive && !s->resuming && !s->want_spawn)
		send_exec(s->sup, s);
}

static void send_exec(struct sup *sup, struct session *s)
{
	struct run *c = s->cur;
	/* A new call: a save still running is abandoned, never waited for
	 * (the session kills its saver when it reads the cell). */
	psave_abandon(s->save);
	s->save = NULL;
	if (!c->prepared) {
		/* What the workspace held before, to tell this run's files;
		 * taken off the loop, then the cell is sent. */
		if (!c->waiting) {
			c->waiting = true;
			c->ev->prepare(c, prepared, s);
		}
		return;
	}
	if (s->next_note) {
		add_note(c, s->next_note);
		free(s->next_note);
		s->next_note = NULL;
	}
	uint64_t restore_bytes = 0;
	int restore_fd = c->new_session ? restore_begin(sup, s, c, &restore_bytes) : -1;
	c->cell = ++s->cells;
	char log_rel[192];
	snprintf(log_rel, sizeof log_rel, ".logs/%s-%d.stdout.log", s->name, c->cell);
	outbuf_reset(&s->out, log_rel);
	snprintf(log_rel, sizeof log_rel, ".logs/%s-%d.stderr.log", s->name, c->cell);
	outbuf_reset(&s->err, log_rel);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "op", "exec");
	cJSON_AddStringToObject(j, "code", c->code);
	cJSON_AddNumberToObject(j, "cell", c->cell);
	double timeout_ms = c->timeout_ms;
	if (restore_fd >= 0) {
		cJSON_AddNumberToObject(j, "restore", (double)restore_bytes);
		/* Loading the state is not the cell's work: it gets its own
		 * time (1 s per 32 MB, generous on a loaded machine). */
		timeout_ms += (double)restore_bytes / (32.0 * 1048576.0) * 1000.0;
	}
	char *txt = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	usage_begin(&c->usage, s->pidfd);
	c->t_start = loop_now_ms();
	s->progress = 0;
	/* Frozen since its last call: it runs again only now. */
	if (s->phase == P_IDLE && s->pidfd >= 0)
		pidfd_signal(s->pidfd, SIGCONT);
	set_expect(sup, s, P_RUNNING);
	start_watch(sup, s);
	s->timeout_timer = loop_timer(sup->cfg.loop, timeout_ms, timeout_fired, s);
	wswatch_stop(s->watch);
	s->watch = wswatch_start(sup->cfg.loop, sup->work, sup->cfg.ws, sup->scratch,
				 (unsigned long long)sup->cfg.policy->limits.max_workspace_mb << 20, workspace_over, s);
	if (c->wants_progress)
		s->progress_timer = loop_timer(sup->cfg.loop, PROGRESS_MS, progress_fired, s);
	int r = txt ? wire_send(s->ctrl, W_EXEC, txt, strlen(txt), restore_fd >= 0 ? &restore_fd : NULL, restore_fd >= 0 ? 1 : 0) : -ENOMEM;
	free(txt);
	if (restore_fd >= 0)
		close(restore_fd);
	if (r < 0) {
		log_warn("session %s: cannot send the cell: %s", s->name, strerror(-r));
		kill_session(s);
	}
}

static void fail_call_now(struct sup *sup, struct session *s, const char *msg)
{
	struct run *c = s->cur;
	c->status = CALL_ERROR;
	c->exit_code = call_status_exit_code(CALL_ERROR, 0, false);
	c->state = STATE_NEW;
	c->note = strdup(msg);
	c->t_start = loop_now_ms();
	s->cur = NULL;
	c->duration_ms = 0;
	c->ev->done(c);
	ended(sup);
}

static void start_next(struct sup *sup, struct session *s)
{
	/* A resumed checkpoint finishes resuming, or a new checkpoint is
	 * taken, first (settled() calls us again, or a timer ends it), unless
	 * a reset discards it anyway. */
	if ((s->resuming || s->checkpointing) && !(s->qhead && s->qhead->reset))
		return;
	while (!s->cur && s->qhead) {
		struct run *c = s->qhead;
		s->qhead = c->next;
		if (!s->qhead)
			s->qtail = NULL;
		c->next = NULL;
		s->cur = c;
		if (c->reset) {
			/* reset also forgets the saved state: a restart must not
			 * bring back what the agent discarded. */
			psave_abandon(s->save);
			s->save = NULL;
			s->restore_tried = true;
			int r = persist_discard(sup->persist, s->name);
			if (r < 0)
				log_warn("session %s: cannot remove its saved state: %s", s->name, strerror(-r));
		}
		if (c->reset && s->alive) {
			/* Discard the state: the old process is ended; its exit
			 * report no longer matches this session. */
			kill_session(s);
			session_close_fds(sup, s);
			s->alive = false;
			s->resuming = s->checkpointing = false;
			s->pid = s->hpid = 0;
			cancel_resume_timer(sup, s);
			set_expect(sup, s, P_NONE);
		}
		if (!s->alive) {
			c->new_session = true;
			if (sup->z == Z_FAILED) {
				fail_call_now(sup, s, sup->zerror);
				continue;
			}
			if (sup->z != Z_READY) {
				s->want_spawn = true;
				return;
			}
			int r = spawn_session(sup, s);
			if (r < 0) {
				char msg[300];
				snprintf(msg, sizeof msg, "could not start a session: %s", strerror(-r));
				fail_call_now(sup, s, msg);
				continue;
			}
		}
		send_exec(sup, s);
	}
}

static void spawn_pending(struct sup *sup)
{
	for (struct session *s = sup->sessions; s; s = s->next)
		if (s->want_spawn) {
			s->want_spawn = false;
			int r = spawn_session(sup, s);
			if (r < 0) {
				char msg[300];
				snprintf(msg, sizeof msg, "could not start a session: %s", strerror(-r));
				fail_call_now(sup, s, msg);
				start_next(sup, s);
				continue;
			}
			send_exec(sup, s);
		}
}

void sup_submit(struct sup *sup, struct run *c)
{
	struct session *s = find_session(sup, c->session);
	if (!s) {
		s = calloc(1, sizeof *s);
		const struct policy_limits *L = &sup->cfg.policy->limits;
		unsigned long long log_cap = (unsigned long long)L->max_file_mb << 20;
		if (!s || outbuf_init(&s->out, sup->cfg.ws, (size_t)L->max_output_chars, log_cap) < 0 ||
		    outbuf_init(&s->err, sup->cfg.ws, (size_t)L->max_output_chars, log_cap) < 0) {
			c->status = CALL_ERROR;
			c->exit_code = call_status_exit_code(CALL_ERROR, 0, false);
			c->note = strdup("out of memory");
			c->ev->done(c);
			free(s);
			return;
		}
		snprintf(s->name, sizeof s->name, "%s", c->session);
		s->sup = sup;
		s->pidfd = s->ctrl = s->out_r = s->err_r = s->ckpt_pidfd = s->dropped_pidfd = -1;
		s->next = sup->sessions;
		sup->sessions = s;
	}
	if (s->qtail)
		s->qtail->next = c;
	else
		s->qhead = c;
	s->qtail = c;
	warm_busy(sup);
	/* The session copies ahead what the next call will write while it
	 * takes its checkpoint (interp/precopy.h); with a call waiting, that
	 * only delays it. */
	if (s->checkpointing && s->phase == P_SETTLING && s->ctrl >= 0)
		(void)wire_send(s->ctrl, W_HURRY, "", 0, NULL, 0);
	start_next(sup, s);
}

bool sup_cancel(struct sup *sup, bool (*match)(const struct run *r, const void *key), const void *key)
{
	for (struct session *s = sup->sessions; s; s = s->next) {
		if (s->cur && match(s->cur, key)) {
			s->cur->cancelled = true;
			if (s->cur->status == CALL_PENDING) {
				s->cur->status = CALL_CANCELLED;
				s->cur->exit_code = call_status_exit_code(CALL_CANCELLED, 0, false);
			}
			if (s->alive)
				kill_session(s);
			else
				finish_cur(sup, s);
			return true;
		}
		for (struct run **pp = &s->qhead; *pp; pp = &(*pp)->next)
			if (match(*pp, key)) {
				struct run *c = *pp;
				*pp = c->next;
				if (s->qtail == c) {
					s->qtail = NULL;
					for (struct run *q = s->qhead; q; q = q->next)
						s->qtail = q;
				}
				c->ev->drop(c);
				return true;
			}
	}
	return false;
}

void sup_free(struct sup *sup)
{
	if (!sup)
		return;
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
	struct session *s = sup->sessions;
	while (s) {
		struct session *next = s->next;
		/* The loop may outlive this supervisor (the unit tests run
		 * several on one): no timer of ours may fire after it. */
		cancel_timers(sup, s);
		cancel_resume_timer(sup, s);
		session_close_fds(sup, s);
		if (s->cur)
			s->cur->ev->drop(s->cur);
		for (struct run *c = s->qhead; c;) {
			struct run *cn = c->next;
			c->ev->drop(c);
			c = cn;
		}
		outbuf_free(&s->out);
		outbuf_free(&s->err);
		psave_abandon(s->save);
		prestore_free(s->restore);
		free(s->next_note);
		free(s);
		s = next;
	}
	persist_free(sup->persist);
	warmup_free(sup->warm);
	if (sup->zctrl >= 0)
		close(sup->zctrl);
	free(sup);
}

const char *sup_scratch(const struct sup *sup)
{
	return sup && sup->scratch[0] ? sup->scratch : NULL;
}

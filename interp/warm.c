/* Learned warm-up in the zygote: a queue of names, a probe per name, then
 * the import in the zygote itself one module at a time (see warm.h). */
#include "warm.h"

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../jail/jail.h"
#include "../proto/wire.h"
#include "../proto/zmsg.h"
#include "pyembed.h"

/* As many names as the server keeps per project, and some more. */
#define QUEUE_MAX 64
#define NAME_MAX_LEN 128
/* The probe's answer lists the modules it loaded (hundreds for a large
 * package): bounded, an answer over it is a failed probe. */
#define ANSWER_MAX (4u << 20)
/* A probe still running after this is killed and its name dropped (the
 * probe itself drops an import slower than half of it). */
#define PROBE_DEADLINE_MS 60000.0

enum wstate { WS_IDLE, WS_PROBING, WS_LOADING };

static char queue[QUEUE_MAX][NAME_MAX_LEN + 1];
static size_t q_head, q_len;
static enum wstate st;
static char cur[NAME_MAX_LEN + 1];
static pid_t probe;      /* the running probe (0: none), until reaped */
static bool probe_ended; /* reaped */
static int pfd = -1;     /* its answer */
static char *ans;
static size_t ans_len;
static bool ans_eof;
static double deadline;
/* The server has a call running: no new probe, no import step, and the
 * probe under way is stopped (SIGSTOP) until the call ends.  A probe that
 * went on importing beside a call took the CPU that call waited for: a
 * fresh session's first `import sklearn.linear_model` took 1.4x as long
 * while the zygote was learning scipy.stats (bench/CHECKPOINTS.md). */
static bool paused;
/* When the probe was stopped: its deadline moves by the time it spent so. */
static double paused_at;
/* Where the warm-up's imports run: an empty directory that can never hold
 * a file (removed, held open), and the zygote's own working directory
 * (ROOT) to return to. */
static int empty_fd = -1, home_fd = -1;

static bool queued(const char *name)
{
	for (size_t i = 0; i < q_len; i++)
		if (strcmp(queue[(q_head + i) % QUEUE_MAX], name) == 0)
			return true;
	return st != WS_IDLE && strcmp(cur, name) == 0;
}

/* Stops or continues the probe with the pause.  Only before the zygote
 * has reaped it: until then its pid cannot name another process. */
static void set_paused(bool on)
{
	paused = on;
	if (st != WS_PROBING || probe <= 0 || probe_ended)
		return;
	if (on) {
		paused_at = mono_ms();
		kill(probe, SIGSTOP);
	} else {
		deadline += mono_ms() - paused_at;
		kill(probe, SIGCONT);
	}
}

/* A child of the zygote starts with the signals a plain process has: none
 * blocked, and SIGCHLD's stop and continue notices back (the zygote turns
 * them off for itself), so a cell's own children behave as in Python. */
void session_child_signals(void)
{
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_UNBLOCK, &all, NULL);
	sigaction(SIGCHLD, &(struct sigaction){ .sa_handler = SIG_DFL }, NULL);
}

void warm_enqueue(const struct wire_msg *m)
{
	struct zmsg_warm *w = xcalloc(1, sizeof *w);
	struct err e = { 0 };
	if (zmsg_warm_decode(m->data, m->len, w, &e) < 0) {
		log_error("%s", e.msg);
		free(w);
		return;
	}
	if (w->has_pause && w->pause != paused)
		set_paused(w->pause);
	/* The server checked every name; the bootstrap checks them again
	 * before anything is imported.  Here only the queue's bound. */
	for (size_t i = 0; i < w->n_names; i++) {
		if (q_len == QUEUE_MAX || queued(w->names[i]))
			continue;
		snprintf(queue[(q_head + q_len) % QUEUE_MAX], NAME_MAX_LEN + 1, "%s", w->names[i]);
		q_len++;
	}
	free(w);
}

int warm_fd(void)
{
	return st == WS_PROBING && !ans_eof ? pfd : -1;
}

int warm_timeout(void)
{
	if (paused && st != WS_PROBING)
		return -1;
	if (st == WS_LOADING || (st == WS_IDLE && q_len > 0))
		return 0;
	if (st == WS_PROBING) {
		if (ans_eof && probe_ended)
			return 0;
		if (paused && !probe_ended)
			return -1; /* stopped: its deadline waits too */
		double left = deadline - mono_ms();
		return left <= 0 ? 0 : (int)left + 1;
	}
	return -1;
}

pid_t warm_probe_pid(void)
{
	return probe_ended ? 0 : probe;
}

bool warm_reaped(pid_t pid)
{
	/* Once the probe is reaped its pid is free: a session given it after
	 * the pids wrap must have its exit reported (the server waits for
	 * that report, and takes a zygote that never sends it for broken). */
	if (pid <= 0 || probe_ended || pid != probe)
		return false;
	probe_ended = true;
	return true;
}

/* The outcome of cur for the server: the bootstrap's JSON (which may be
 * the probe's, a process that ran the module's code) with the name, put
 * through the codec's decoder (proto/zmsg.h): what goes up is what the
 * codec knows, or a refusal that says why the answer was not one. */
static void report(int ctrl, const char *json, const char *why)
{
	struct zmsg_warmed w;
	struct err e = { 0 };
	cJSON *j = json ? cJSON_Parse(json) : NULL;
	char *txt = NULL;
	if (cJSON_IsObject(j)) {
		cJSON_DeleteItemFromObjectCaseSensitive(j, "name");
		cJSON_AddStringToObject(j, "name", cur);
		txt = cJSON_PrintUnformatted(j);
	}
	cJSON_Delete(j);
	if (!txt || zmsg_warmed_decode(txt, strlen(txt), &w, &e) < 0) {
		w = (struct zmsg_warmed){ .why = txt ? e.msg : why ? why : "no answer", .ms = -1, .steps = -1, .longest_ms = -1 };
		snprintf(w.name, sizeof w.name, "%s", cur);
	}
	free(txt);
	char *msg = zmsg_warmed_encode(&w);
	int r = wire_send(ctrl, W_WARMED, msg, strlen(msg), NULL, 0);
	free(msg);
	if (r < 0)
		_exit(0); /* the server is gone: so are we */
	log_debug("warm-up: %s %s", cur, w.ok ? "loaded" : "refused");
	zmsg_warmed_free(&w);
}

static void close_probe(void)
{
	if (pfd >= 0)
		close(pfd);
	pfd = -1;
	free(ans);
	ans = NULL;
	ans_len = 0;
	ans_eof = false;
}

/* The working directory of every import the warm-up makes.  Attack: the
 * zygote and its probe imported with ROOT as their working directory, and
 * an installed module that acts on it (unittest.__main__ runs a test
 * discovery there) imported the workspace as a package, running a
 * __init__.py a session had written, first in the probe, then in the
 * zygote.  An empty directory instead: made in the jail's temporary
 * directory, then removed and held open.  A removed directory stays empty
 * for good (nothing can be created in it), and only a directory that is
 * really gone (no link left) is used: a session that swapped the name
 * meanwhile, or put a file in it, gets the warm-up refused. */
static int empty_dir(void)
{
	if (empty_fd >= 0)
		return empty_fd;
	if (home_fd < 0)
		home_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	const char *tmp = getenv("TMPDIR");
	char t[4200];
	snprintf(t, sizeof t, "%s/psm-empty-XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
	if (home_fd < 0 || !mkdtemp(t))
		return -1;
	int fd = open(t, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat sb;
	if (rmdir(t) < 0 || fd < 0 || fstat(fd, &sb) < 0 || sb.st_nlink != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	empty_fd = fd;
	return fd;
}

/* Runs one bootstrap function of the warm-up in the empty directory, then
 * returns to the zygote's own (the sessions' working directory). */
static int call_in_empty(const char *fn, const char *arg, char **out, size_t *len, struct err *e)
{
	int is_bytes;
	if (empty_dir() < 0 || fchdir(empty_fd) < 0)
		return err_set(e, -ENOENT, "no empty directory to import in (%s)", strerror(errno ? errno : ENOENT));
	int r = py_call(fn, arg, out, len, &is_bytes, e);
	if (fchdir(home_fd) < 0) {
		/* No way back to ROOT: no session may be forked from here. */
		log_error("warm-up: cannot return to the project directory: %s", strerror(errno));
		_exit(77);
	}
	return r;
}

/* Runs in the probe: a fork of the zygote that imports the name, answers,
 * and exits.  It runs only installed code (the bootstrap refuses anything
 * else before importing it), and whatever that code does dies with it.
 * It is as hostile as a session: it holds no descriptor but its answer's
 * pipe, works in the empty directory, and has a Landlock domain of its
 * own, so it can neither signal nor read (ptrace, /proc/PID/mem) a session
 * or the zygote; its answer is checked by the zygote like any report. */
static __attribute__((noreturn)) void run_probe(int wfd, pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	setproctitle("-python-sandbox-mcp: warm-up probe %s", cur);
	/* Background work: the sessions come first. */
	setpriority(PRIO_PROCESS, 0, 10);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		close(null);
	}
	/* Its answer on 3, the empty directory on 4, nothing else. */
	int wd = fcntl(wfd, F_DUPFD_CLOEXEC, 64), dd = fcntl(empty_fd, F_DUPFD_CLOEXEC, 64);
	if (wd < 0 || dd < 0 || dup2(wd, 3) < 0 || dup2(dd, 4) < 0)
		_exit(0);
	if (syscall(SYS_close_range, 5U, ~0U, 0) < 0)
		for (int fd = 5; fd < 1024; fd++)
			close(fd);
	struct err e = { 0 };
	if (fchdir(4) < 0 || close(4) < 0 || jail_session_enter(&e) < 0)
		_exit(0);
	char *out = NULL;
	size_t len = 0;
	int is_bytes;
	wfd = 3;
	if (py_call("warm_probe", cur, &out, &len, &is_bytes, &e) == 0) {
		for (size_t off = 0; off < len;) {
			ssize_t w = write(wfd, out + off, len - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				break;
			off += (size_t)w;
		}
	}
	_exit(0);
}

static void start_probe(int ctrl, int sfd)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		report(ctrl, NULL, "no pipe for the probe");
		return;
	}
	if (empty_dir() < 0) {
		close(p[0]);
		close(p[1]);
		report(ctrl, NULL, "no empty directory to import in");
		return;
	}
	pid_t parent = getpid();
	fflush(NULL);
	PyOS_BeforeFork();
	pid_t pid = fork();
	if (pid == 0) {
		PyOS_AfterFork_Child();
		session_child_signals();
		close(p[0]);
		run_probe(p[1], parent);
	}
	PyOS_AfterFork_Parent();
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		report(ctrl, NULL, "the zygote could not fork a probe");
		return;
	}
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	probe = pid;
	probe_ended = false;
	pfd = p[0];
	deadline = mono_ms() + PROBE_DEADLINE_MS;
	st = WS_PROBING;
}

static void read_answer(void)
{
	for (;;) {
		char buf[65536];
		ssize_t r = read(pfd, buf, sizeof buf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return; /* EAGAIN: more later */
		if (r == 0 || ans_len + (size_t)r > ANSWER_MAX) {
			ans_eof = true;
			return;
		}
		ans = xrealloc(ans, ans_len + (size_t)r + 1);
		memcpy(ans + ans_len, buf, (size_t)r);
		ans_len += (size_t)r;
		ans[ans_len] = '\0';
	}
}

/* The probe answered (or died): load the name here, or report why not. */
static void probe_done(int ctrl)
{
	cJSON *j = ans ? cJSON_ParseWithLength(ans, ans_len) : NULL;
	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok"))) {
		report(ctrl, cJSON_IsObject(j) ? ans : NULL, "the probe ended without an answer (it crashed)");
		cJSON_Delete(j);
		close_probe();
		st = WS_IDLE;
		return;
	}
	cJSON *plan = cJSON_CreateObject();
	cJSON_AddStringToObject(plan, "name", cur);
	cJSON *order = cJSON_DetachItemFromObjectCaseSensitive(j, "order");
	if (order)
		cJSON_AddItemToObject(plan, "order", order);
	char *arg = cJSON_PrintUnformatted(plan);
	cJSON_Delete(plan);
	cJSON_Delete(j);
	close_probe();
	char *out = NULL;
	size_t len;
	int is_bytes;
	struct err e = { 0 };
	if (!arg || py_call("warm_begin", arg, &out, &len, &is_bytes, &e) < 0) {
		report(ctrl, NULL, e.msg[0] ? e.msg : "out of memory");
		st = WS_IDLE;
	} else {
		st = WS_LOADING;
	}
	free(arg);
	free(out);
}

void warm_work(int ctrl, int sfd)
{
	char *out = NULL;
	size_t len;
	struct err e = { 0 };
	if (paused && st != WS_PROBING)
		return;
	switch (st) {
	case WS_IDLE:
		if (q_len == 0)
			return;
		snprintf(cur, sizeof cur, "%s", queue[q_head]);
		q_head = (q_head + 1) % QUEUE_MAX;
		q_len--;
		/* Names refused without running anything (malformed, denied,
		 * not installed) or already held need no probe. */
		if (call_in_empty("warm_check", cur, &out, &len, &e) < 0) {
			report(ctrl, NULL, e.msg);
		} else if (len > 0) {
			report(ctrl, out, NULL);
		} else {
			start_probe(ctrl, sfd);
		}
		free(out);
		return;
	case WS_PROBING:
		if (!ans_eof)
			read_answer();
		if (ans_eof && probe_ended) {
			probe_done(ctrl);
		} else if (!(paused && !probe_ended) && mono_ms() > deadline) {
			if (!probe_ended)
				kill(probe, SIGKILL); /* reaped by the zygote's loop */
			char why[96];
			snprintf(why, sizeof why, "the probe took longer than %.0f s", PROBE_DEADLINE_MS / 1000);
			report(ctrl, NULL, why);
			close_probe();
			st = WS_IDLE;
		}
		return;
	case WS_LOADING:
		if (call_in_empty("warm_step", "", &out, &len, &e) < 0) {
			report(ctrl, NULL, e.msg);
			st = WS_IDLE;
		} else if (len > 0) {
			cJSON *j = cJSON_Parse(out);
			bool tainted = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "tainted"));
			cJSON_Delete(j);
			report(ctrl, out, NULL);
			st = WS_IDLE;
			if (tainted) {
				/* A module outside the installation is in the zygote
				 * now (the probe did not see it): no session may be
				 * forked from this process.  The server starts a new
				 * zygote, without this name. */
				log_error("warm-up: %s loaded a file from outside the installation; the zygote ends", cur);
				_exit(76);
			}
		}
		free(out);
		return;
	}
}

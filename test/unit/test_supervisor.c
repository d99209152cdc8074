/* The supervisor's state machine (the rooms of supervisor/private.h)
 * against a fake zygote and fake sessions: real processes on the other end of the real
 * wire protocol, with real pidfds, frozen and resumed with real signals.
 *
 * The supervisor execs its "zygote" as `SELF --zygote-fd N`; SELF is this
 * test binary, whose main() then becomes the fake zygote instead of running
 * the tests.  The fake forks a fake session per W_SPAWN.  A session keeps
 * one number of state (x) and obeys the words of each cell's code:
 *   inc             x += 1
 *   crash           exit(9) once the cell has started (after the words before it)
 *   die_unstarted   exit(3) on reading the cell, before W_STARTED (not when resumed)
 *   hang_unstarted  never say W_STARTED (not when resumed)
 *   say_restored    send W_RESTORED after W_STARTED, though no saved state came
 *   fail_resumed    answer "error" when run in a resumed copy (a replay)
 * and answers {"status": "ok", "result": "<x>", "pid", "resumed"}.  Its
 * checkpoint is a fork that waits for SIGUSR1, then says hello as the
 * session (then, while HOLD_RECKPT exists, it waits before taking its
 * own checkpoint, and while HOLD_BUSY exists it runs after taking it);
 * while the file HOLD_RESUME exists in the workspace it waits
 * before that hello, and a new session waits before its first hello while
 * HOLD_HELLO exists.  Nothing here is a mock of the supervisor's side: the
 * test drives the real supervisor through its public functions and reads
 * what each run's events report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../proto/config.h"
#include "../../proto/wire.h"
#include "../../supervisor/replay.h"
#include "../../supervisor/supervisor.h"
#include "../../supervisor/zlink.h"
#include "tmptree.h"

#define HOLD_RESUME "hold-resume"
#define HOLD_HELLO "hold-hello"
#define HOLD_RECKPT "hold-reckpt"
#define HOLD_BUSY "hold-busy"

/* ------------------------------------------------------------ the fake processes */

static char ws_dir[4096];
static int ctrl_fd = -1;      /* a session's control socket */
static long x;                /* a session's state */
static bool resumed;          /* this process is a resumed checkpoint */
static pid_t zygote_pid, session_pid;

static void send_json(int fd, uint32_t type, cJSON *j, const int *fds, int nfds)
{
	char *txt = cJSON_PrintUnformatted(j);
	if (!txt || wire_send(fd, type, txt, strlen(txt), fds, nfds) < 0)
		_exit(80);
	free(txt);
	cJSON_Delete(j);
}

static void hello(void)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "pid", getpid());
	if (resumed)
		cJSON_AddBoolToObject(j, "resumed", 1);
	send_json(ctrl_fd, W_HELLO, j, NULL, 0);
}

static bool held(const char *name)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/%s", ws_dir, name);
	return access(p, F_OK) == 0;
}

/* ---- forgeries: what a lying zygote or session sends ----
 * The name is in WORKSPACE/forge; each is done once (WORKSPACE/forged marks
 * it done), so that the zygote the server starts next, or the session after
 * a rollback, answers truly again. */
static char forge[64], climb[1024];
static pid_t canary, old_child;

static void read_ws_file(const char *name, char *buf, size_t n)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/%s", ws_dir, name);
	buf[0] = '\0';
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t k = read(fd, buf, n - 1);
	buf[k > 0 ? k : 0] = '\0';
	close(fd);
}

static bool forging(const char *what)
{
	if (strcmp(forge, what) != 0)
		return false;
	char p[4200];
	snprintf(p, sizeof p, "%s/forged", ws_dir);
	int fd = open(p, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static void forge_setup(void)
{
	char buf[64];
	read_ws_file("forge", forge, sizeof forge);
	read_ws_file("canary", buf, sizeof buf);
	canary = (pid_t)atoi(buf);
	read_ws_file("climb", climb, sizeof climb);
}

/* A child forked long before anything asks for it: sent where a new
 * process belongs. */
static void fork_old_child(void)
{
	pid_t me = getpid();
	old_child = fork();
	if (old_child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != me)
			_exit(0);
		for (;;)
			pause();
	}
	usleep(30 * 1000); /* a few clock ticks older than any request */
}

static int pidfd_of(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* ---- the saver forgery: a pipe with every checkpoint ----
 * With "ckpt-saver" the session hands the read end of a pipe with every
 * checkpoint, asked for a saver or not, with a save stream in it laid out
 * as a real saver's (interp/bootstrap.py save_state: PSMSAVE1, the length,
 * the summary record, the metadata).  An unasked pipe gets all of it but
 * the last byte; at the session's next cell or checkpoint request (by
 * then the server has dealt with the checkpoint) it looks whether the
 * server still holds the read end (it would be reading: the save of a
 * whole state after every call), records what it saw in WORKSPACE/savers
 * and then sends the last byte.  An asked pipe gets it all at once. */
static int saver_w = -1;      /* the write end of the last unasked pipe */
static char saver_last;       /* the byte held back */

static void note_saver(const char *line)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/savers", ws_dir);
	int fd = open(p, O_CREAT | O_APPEND | O_WRONLY | O_CLOEXEC, 0644);
	if (fd >= 0) {
		(void)!write(fd, line, strlen(line));
		close(fd);
	}
}

static void put_le64(unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

static int forged_saver(bool asked)
{
	static const char summary[] = "{\"unsaved\": [], \"unsaved_count\": 0}";
	static const char meta[] = "{\"version\": 1, \"history\": [\"inc\"], \"imports\": [], \"defs\": [], "
				   "\"unsaved\": [], \"vars\": [], \"figures\": {}}";
	unsigned char b[512];
	size_t sl = sizeof summary - 1, ml = sizeof meta - 1, n = 0;
	memcpy(b, "PSMSAVE1", 8);
	put_le64(b + 8, 16 + sl + ml);
	put_le64(b + 16, sl);
	memcpy(b + 24, summary, sl);
	put_le64(b + 24 + sl, ml);
	memcpy(b + 32 + sl, meta, ml);
	n = 32 + sl + ml;
	int pp[2];
	if (pipe2(pp, O_CLOEXEC) < 0)
		return -1;
	if (write(pp[1], b, asked ? n : n - 1) != (ssize_t)(asked ? n : n - 1))
		_exit(82);
	if (asked) {
		close(pp[1]);
		note_saver("asked: sent\n");
	} else {
		saver_w = pp[1];
		saver_last = (char)b[n - 1];
	}
	return pp[0];
}

/* At the session's next cell or checkpoint request the server has dealt
 * with the checkpoint the unasked pipe came with: it closed the read end
 * (POLLERR on the write end), or it still reads it. */
static void saver_seen(void)
{
	if (saver_w < 0)
		return;
	struct pollfd p = { .fd = saver_w, .events = POLLOUT };
	bool closed = poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
	note_saver(closed ? "unasked: closed unread\n" : "unasked: still held by the server\n");
	if (!closed)
		(void)!write(saver_w, &saver_last, 1);
	close(saver_w);
	saver_w = -1;
}

/* Forks the frozen copy; the parent announces it.  The copy returns once
 * resumed, as the session.  save: the server asked for a saver. */
static void checkpoint(bool save)
{
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	pid_t me = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		for (;;) {
			struct timespec t = { 0, 50 * 1000 * 1000 };
			if (sigtimedwait(&usr1, NULL, &t) == SIGUSR1)
				break;
			pid_t pp = getppid();
			if (pp != me && pp != zygote_pid)
				_exit(0); /* everything above is gone */
		}
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		resumed = true;
		while (held(HOLD_RESUME))
			usleep(20 * 1000);
		char junk[4096];
		while (recv(ctrl_fd, junk, sizeof junk, MSG_DONTWAIT) > 0)
			;
		hello();
		while (held(HOLD_RECKPT))
			usleep(20 * 1000);
		checkpoint(false);
		while (held(HOLD_BUSY))
			; /* runs: the server's freeze keeps looking */
		return;
	}
	int fds[2] = { pid > 0 ? pidfd_of(pid) : -1, -1 };
	if (strcmp(forge, "ckpt-saver") == 0)
		fds[1] = forged_saver(save);
	pid_t claim = pid;
	if (forging("ckpt-foreign")) {
		close(fds[0]);
		fds[0] = pidfd_of(canary);
		claim = canary;
	} else if (forging("ckpt-old")) {
		close(fds[0]);
		fds[0] = pidfd_of(old_child);
		claim = old_child;
	} else if (forging("ckpt-claim")) {
		claim = pid + 1000;
	} else if (forging("ckpt-notpipe")) {
		fds[1] = open(ws_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "pid", claim);
	send_json(ctrl_fd, W_CHECKPOINT, j, fds[0] >= 0 ? fds : NULL, fds[0] < 0 ? 0 : fds[1] >= 0 ? 2 : 1);
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static bool has_word(const char *code, const char *w)
{
	size_t n = strlen(w);
	for (const char *p = code; (p = strstr(p, w)); p += n)
		if ((p == code || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return true;
	return false;
}

static __attribute__((noreturn)) void session_main(void)
{
	if (strcmp(forge, "ckpt-old") == 0)
		fork_old_child();
	while (held(HOLD_HELLO))
		usleep(20 * 1000);
	hello();
	for (;;) {
		struct wire_msg m;
		if (wire_recv(ctrl_fd, &m, WIRE_MAX_PAYLOAD) < 0)
			_exit(0);
		/* Not at W_HURRY, which can come before the checkpoint is in. */
		if (m.type == W_EXEC || m.type == W_TAKE_CHECKPOINT)
			saver_seen();
		if (m.type == W_TAKE_CHECKPOINT) {
			cJSON *req = cJSON_ParseWithLength((const char *)m.data, m.len);
			checkpoint(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "save")));
			cJSON_Delete(req);
		} else if (m.type == W_THUMB) {
			wire_send(ctrl_fd, W_THUMB_DATA, "", 0, NULL, 0);
		} else if (m.type == W_EXEC) {
			cJSON *cell = cJSON_ParseWithLength((const char *)m.data, m.len);
			const char *code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cell, "code"));
			code = code ? code : "";
			if (!resumed && has_word(code, "die_unstarted"))
				_exit(3);
			if (!resumed && has_word(code, "hang_unstarted"))
				for (;;)
					pause();
			wire_send(ctrl_fd, W_STARTED, "", 0, NULL, 0);
			if (has_word(code, "say_restored"))
				wire_send(ctrl_fd, W_RESTORED, "", 0, NULL, 0);
			if (has_word(code, "inc"))
				x++;
			if (has_word(code, "crash"))
				_exit(9);
			/* What the test reads back rides in the value (ev_done). */
			char v[64];
			snprintf(v, sizeof v, "%ld %d %d", x, (int)getpid(), resumed ? 1 : 0);
			struct cell_result res = { .status = RESULT_OK, .value = v };
			if (resumed && has_word(code, "fail_resumed")) {
				res.status = RESULT_ERROR;
				res.has_error = true;
				res.error.type = "ReplayError";
			}
			char *txt = result_encode(&res);
			wire_send(ctrl_fd, W_RESULT, txt, strlen(txt), NULL, 0);
			free(txt);
			cJSON_Delete(cell);
		}
		wire_msg_free(&m);
	}
}

/* A lying zygote's answers to a spawn (true when it answered falsely or not
 * at all).  Each frame is one a zygote running unapproved code could write. */
static bool forge_spawn(int zfd, const cJSON *req)
{
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(req, "id");
	if (forging("silent-spawn"))
		return true;
	if (forging("spawned-unknown") || forging("spawned-foreign") || forging("spawned-old")) {
		bool unknown = strcmp(forge, "spawned-unknown") == 0, old = strcmp(forge, "spawned-old") == 0;
		pid_t who = old ? old_child : canary;
		int fd = pidfd_of(who);
		cJSON *rep = cJSON_CreateObject();
		cJSON_AddNumberToObject(rep, "id", unknown ? 9999 : id->valuedouble);
		cJSON_AddNumberToObject(rep, "pid", who);
		send_json(zfd, W_SPAWNED, rep, &fd, 1);
		close(fd);
		return !unknown; /* the real spawn is answered too, after the lie */
	}
	cJSON *j = cJSON_CreateObject();
	uint32_t type = 0;
	if (forging("ready-again")) {
		type = W_READY;
		cJSON_AddStringToObject(j, "scratch", climb);
	} else if (forging("jail-again")) {
		type = W_JAIL;
		cJSON_AddBoolToObject(j, "enforceable", 1);
	} else if (forging("settled-unasked")) {
		type = W_SETTLED;
		cJSON_AddNumberToObject(j, "pid", 1);
	} else if (forging("warmed-unasked")) {
		type = W_WARMED;
		cJSON_AddStringToObject(j, "name", "wave");
		cJSON_AddBoolToObject(j, "ok", 1);
	} else if (forging("oversized")) {
		uint32_t hdr[3] = { WIRE_MAGIC, W_EXITED, 1u << 20 };
		(void)!write(zfd, hdr, sizeof hdr);
	} else if (forging("garbage")) {
		wire_send(zfd, W_EXITED, "not json", 8, NULL, 0);
	} else if (forging("deaf")) {
		/* Makes the server write (a sweep per exit) and reads nothing. */
		for (int i = 0; i < 3000; i++) {
			char b[96];
			int n = snprintf(b, sizeof b, "{\"pid\":%d,\"status\":0,\"epoch\":0}", 100000 + i);
			if (wire_send(zfd, W_EXITED, b, (size_t)n, NULL, 0) < 0)
				break;
		}
		for (;;)
			pause();
	}
	if (type)
		send_json(zfd, type, j, NULL, 0);
	else
		cJSON_Delete(j);
	return false;
}

/* The fake zygote: W_CONFIG, W_READY, then sessions on W_SPAWN, their
 * exits as W_EXITED, and W_SETTLED for each W_SETTLE. */
static __attribute__((noreturn)) void zygote_main(int zfd)
{
	struct wire_msg m;
	struct zconfig cfg;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_CHILD_SUBREAPER, 1); /* orphaned checkpoints come here, as in the real one */
	zygote_pid = getpid();
	if (wire_recv(zfd, &m, 4u << 20) < 0 || m.type != W_CONFIG || zconfig_decode(m.data, m.len, &cfg) < 0)
		_exit(81);
	wire_msg_free(&m);
	snprintf(ws_dir, sizeof ws_dir, "%s", cfg.workspace);
	forge_setup();
	if (strcmp(forge, "spawned-old") == 0)
		fork_old_child();
	cJSON *jail = cJSON_CreateObject();
	cJSON_AddBoolToObject(jail, "enforceable", 1);
	cJSON_AddStringToObject(jail, "jail", "jail: enforceable (a fake)\n");
	/* Its own pidfd goes with the report, as the real zygote's does;
	 * a forged one names another process, or is missing. */
	if (forging("jail-no-pidfd")) {
		send_json(zfd, W_JAIL, jail, NULL, 0);
	} else if (forging("jail-foreign-pidfd")) {
		int other = (int)syscall(SYS_pidfd_open, canary, 0);
		send_json(zfd, W_JAIL, jail, &other, 1);
	} else if (forging("jail-pipe")) {
		int pp[2];
		if (pipe(pp) < 0)
			_exit(82);
		send_json(zfd, W_JAIL, jail, &pp[0], 1);
	} else {
		int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
		send_json(zfd, W_JAIL, jail, &self, 1);
	}
	cJSON *ready = cJSON_CreateObject();
	cJSON_AddNumberToObject(ready, "start_ms", 1);
	send_json(zfd, W_READY, ready, NULL, 0);
	unsigned long long exits = 0;
	pid_t last = 0;
	for (;;) {
		int status;
		pid_t dead;
		while ((dead = waitpid(-1, &status, WNOHANG)) > 0) {
			if (forging("no-exit-report"))
				continue; /* reaped, never reported */
			cJSON *j = cJSON_CreateObject();
			cJSON_AddNumberToObject(j, "pid", dead);
			cJSON_AddNumberToObject(j, "status", status);
			cJSON_AddNumberToObject(j, "epoch", (double)++exits);
			send_json(zfd, W_EXITED, j, NULL, 0);
		}
		if (last > 0 && held("now") && forging("exited-live")) {
			/* The exit of a session that lives on. */
			cJSON *j = cJSON_CreateObject();
			cJSON_AddNumberToObject(j, "pid", last);
			cJSON_AddNumberToObject(j, "status", 0);
			cJSON_AddNumberToObject(j, "epoch", 99);
			send_json(zfd, W_EXITED, j, NULL, 0);
		}
		struct pollfd p = { .fd = zfd, .events = POLLIN };
		if (poll(&p, 1, 10) <= 0)
			continue;
		if (wire_recv(zfd, &m, 1 << 20) < 0)
			_exit(0);
		cJSON *j = cJSON_ParseWithLength((const char *)m.data, m.len);
		if (m.type == W_SPAWN && m.nfds == 3 && forge_spawn(zfd, j)) {
			; /* answered falsely, or not at all */
		} else if (m.type == W_SPAWN && m.nfds == 3) {
			pid_t pid = fork();
			if (pid == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				close(zfd);
				ctrl_fd = m.fds[0];
				dup2(m.fds[1], 1);
				dup2(m.fds[2], 2);
				session_pid = getpid();
				session_main();
			}
			last = pid;
			int pidfd = pid > 0 ? pidfd_of(pid) : -1;
			pid_t claim = pid;
			if (forging("spawned-claim"))
				claim = pid + 1000;
			if (forging("spawned-pipe")) {
				int pp[2];
				if (pipe(pp) == 0) {
					close(pidfd);
					close(pp[1]);
					pidfd = pp[0];
				}
			}
			cJSON *rep = cJSON_CreateObject();
			cJSON_AddItemToObject(rep, "id", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(j, "id"), 1));
			cJSON_AddNumberToObject(rep, "pid", claim);
			send_json(zfd, W_SPAWNED, rep, pidfd >= 0 ? &pidfd : NULL, pidfd >= 0 ? 1 : 0);
			if (pidfd >= 0)
				close(pidfd);
		} else if (m.type == W_SETTLE) {
			cJSON *rep = cJSON_CreateObject();
			cJSON_AddItemToObject(rep, "pid", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(j, "pid"), 1));
			cJSON_AddNumberToObject(rep, "ended", 0);
			send_json(zfd, W_SETTLED, rep, NULL, 0);
		}
		cJSON_Delete(j);
		wire_msg_free(&m);
	}
}

/* ------------------------------------------------------------ the test's side */

struct trun {
	struct run run;          /* first */
	bool done, dropped;
	int n_done;              /* how many times ev->done came */
	long x;                  /* the result: the session's state */
	pid_t pid;               /* the process that answered */
	bool resumed;
};

static struct loop *loop;
static struct policy *pol;
static struct workspace ws;
static struct sup *sup;
static char tmpdir[] = "/tmp/psm-sup-XXXXXX";
static char self[4096];
static bool timed_out;
/* For the forged processes (below): a process of the test's own that no
 * server may signal, a directory outside the project that none may
 * delete, and the server's log of one test. */
static pid_t the_canary;
static char victim[] = "/var/tmp/psm-sup-victim-XXXXXX";
static char climb_base[] = "/tmp/psm-scratch-suptest-XXXXXX";
static const struct zlink_limits quick = {
	.start_ms = 20000, .spawn_ms = 1500, .settle_ms = 1500, .exit_ms = 1500, .warm_ms = 20000,
	.out_msgs = 64, .out_bytes = 1u << 20,
};
static char *captured;
static int saved_err = -1;
static char cap_path[64];

static void ev_ready(struct run *r, void (*ready)(struct run *r, void *arg), void *arg)
{
	ready(r, arg);
}

/* A prepare that the test finishes when it chooses (a snapshot of a large
 * workspace, still running on a worker). */
static struct {
	struct run *r;
	void (*ready)(struct run *r, void *arg);
	void *arg;
} pending;

static void ev_prepare_later(struct run *r, void (*ready)(struct run *r, void *arg), void *arg)
{
	pending.r = r;
	pending.ready = ready;
	pending.arg = arg;
}

static bool ev_no_thumb(struct run *r, char *rel, size_t size)
{
	return false;
}

static void ev_thumb(struct run *r, const unsigned char *data, size_t len)
{
}

static void ev_progress(struct run *r, double progress, double elapsed_s, const char *line)
{
}

static void ev_done(struct run *r)
{
	struct trun *t = (struct trun *)r;
	t->done = true;
	t->n_done++;
	/* The fake session's value: "x pid resumed" (session_main). */
	const char *v = r->result ? r->result->value : NULL;
	long val = -1;
	int pid = 0, was_resumed = 0;
	if (v && sscanf(v, "%ld %d %d", &val, &pid, &was_resumed) != 3)
		val = -1;
	t->x = val;
	t->pid = pid;
	t->resumed = was_resumed != 0;
	loop_stop(loop);
}

static void ev_drop(struct run *r)
{
	((struct trun *)r)->dropped = true;
}

static const struct run_events events_later = {
	.prepare = ev_prepare_later,
	.collect = ev_ready,
	.next_thumb = ev_no_thumb,
	.thumb = ev_thumb,
	.progress = ev_progress,
	.done = ev_done,
	.drop = ev_drop,
};

/* A scan of what the run wrote that the test finishes when it chooses. */
static const struct run_events events_collect_later = {
	.prepare = ev_ready,
	.collect = ev_prepare_later,
	.next_thumb = ev_no_thumb,
	.thumb = ev_thumb,
	.progress = ev_progress,
	.done = ev_done,
	.drop = ev_drop,
};

static const struct run_events events = {
	.prepare = ev_ready,
	.collect = ev_ready,
	.next_thumb = ev_no_thumb,
	.thumb = ev_thumb,
	.progress = ev_progress,
	.done = ev_done,
	.drop = ev_drop,
};

static struct trun *submit(const char *code, double timeout_ms)
{
	struct trun *t = calloc(1, sizeof *t);
	assert_non_null(t);
	t->run.ev = &events;
	t->run.code = strdup(code);
	snprintf(t->run.session, sizeof t->run.session, "default");
	t->run.timeout_ms = timeout_ms;
	sup_submit(sup, &t->run);
	return t;
}

static void trun_free(struct trun *t)
{
	run_outcome_free(&t->run);
	free(t->run.code);
	free(t);
}

static void stop_waiting(void *arg)
{
	timed_out = true;
	loop_stop(loop);
}

/* Runs the loop until t is done (at most 60 s: a loaded machine). */
static void wait_done(struct trun *t)
{
	timed_out = false;
	uint64_t guard = loop_timer(loop, 60000.0, stop_waiting, NULL);
	while (!t->done && !timed_out)
		loop_run(loop);
	loop_timer_cancel(loop, guard);
	assert_false(timed_out);
	assert_true(t->done);
}

/* Runs the loop for ms (what is in flight goes on). */
static void spin(double ms)
{
	timed_out = false;
	loop_timer(loop, ms, stop_waiting, NULL);
	while (!timed_out)
		loop_run(loop);
}

static void hold(const char *name, bool on)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/%s", ws.abs, name);
	if (on) {
		int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		close(fd);
	} else {
		unlink(p);
	}
}

static struct trun *run_ok(const char *code)
{
	struct trun *t = submit(code, 30000.0);
	wait_done(t);
	assert_int_equal(t->run.status, CALL_OK);
	return t;
}

static int setup(void **state)
{
	struct err e = { 0 };
	assert_true(mkdtemp(tmpdir) != NULL);
	char wsd[256];
	snprintf(wsd, sizeof wsd, "%s/workspace", tmpdir);
	assert_int_equal(policy_builtin(&pol, &e), 0);
	assert_int_equal(policy_resolve(pol, tmpdir, &e), 0);
	pol->limits.persist = false; /* nothing written outside tmpdir */
	assert_int_equal(ws_open(&ws, tmpdir, wsd, &e), 0);
	snprintf(ws_dir, sizeof ws_dir, "%s", ws.abs); /* read_ws_file, on the test's side */
	loop = loop_new();
	/* The canary: a process no server may signal.  Not below the test
	 * process (a supervisor ends whatever is below it when it is freed,
	 * as the server does with what the sandbox left): forked twice, it
	 * is orphaned away; it goes when the test does. */
	int cp[2];
	assert_int_equal(pipe(cp), 0);
	pid_t me = getpid(), mid = fork();
	if (mid == 0) {
		pid_t c = fork();
		if (c == 0) {
			/* Nothing of a pipeline the test runs in is held open. */
			int null = open("/dev/null", O_RDWR | O_CLOEXEC);
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			for (;;) {
				if (kill(me, 0) < 0)
					_exit(0);
				sleep(1);
			}
		}
		(void)!write(cp[1], &c, sizeof c);
		_exit(0);
	}
	waitpid(mid, NULL, 0);
	assert_int_equal(read(cp[0], &the_canary, sizeof the_canary), (ssize_t)sizeof the_canary);
	close(cp[0]);
	close(cp[1]);
	assert_true(the_canary > 0);
	assert_non_null(mkdtemp(victim));
	char keep[128];
	snprintf(keep, sizeof keep, "%s/keep", victim);
	int kfd = open(keep, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(kfd >= 0);
	close(kfd);
	assert_non_null(mkdtemp(climb_base));
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	assert_true(n > 0);
	self[n] = '\0';
	return 0;
}

static int teardown(void **state)
{
	kill(the_canary, SIGKILL);
	tmp_tree_remove(victim);
	rmdir(climb_base);
	free(captured);
	loop_free(loop);
	ws_close(&ws);
	policy_free(pol);
	tmp_tree_remove(tmpdir);
	return 0;
}

/* A supervisor and its fake zygote for each test. */
static int sup_up(void **state)
{
	struct sup_config cfg = { .loop = loop, .policy = pol, .ws = &ws, .self_exe = self };
	struct err e = { 0 };
	hold(HOLD_RESUME, false);
	hold(HOLD_HELLO, false);
	hold(HOLD_RECKPT, false);
	hold(HOLD_BUSY, false);
	sup = sup_new(&cfg);
	assert_non_null(sup);
	assert_int_equal(sup_start(sup, &e), 0);
	return 0;
}

static int sup_down(void **state)
{
	sup_free(sup);
	sup = NULL;
	return 0;
}

/* A crash during a call: the state is the one before it (the checkpoint
 * resumed), and the next call runs in that resumed copy. */
static void test_roll_back(void **state)
{
	struct trun *a = run_ok("inc");
	assert_int_equal(a->x, 1);
	assert_true(a->run.new_session);
	assert_int_equal(a->run.state, STATE_KEPT);
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.status, CALL_CRASHED);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	assert_int_equal(b->run.exit_code, 9); /* the process's own exit status */
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 1); /* not 2: the crashed call's inc was dropped */
	assert_true(c->resumed);
	assert_int_not_equal(c->pid, a->pid);
	assert_int_equal(c->run.state, STATE_KEPT);
	assert_false(c->run.new_session);
	assert_int_equal(c->run.cell, 3); /* every cell sent counts, rolled back or not */
	trun_free(a);
	trun_free(b);
	trun_free(c);
}

/* A session that says a saved state is loaded in a call that carried none
 * (to restart its timeout): a protocol break, rolled back like a crash; the
 * timer it wanted moved never moves. */
static void test_restored_unasked(void **state)
{
	struct trun *a = run_ok("inc");
	struct trun *b = submit("say_restored inc", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.status, CALL_CRASHED);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 1);
	trun_free(a);
	trun_free(b);
	trun_free(c);
}

/* The resumed copy takes its own checkpoint: a second crash rolls back to
 * the same state again, and the state goes on from there. */
static void test_resume_twice(void **state)
{
	trun_free(run_ok("inc"));
	for (int i = 0; i < 2; i++) {
		struct trun *b = submit("inc crash", 30000.0);
		wait_done(b);
		assert_int_equal(b->run.state, STATE_ROLLED_BACK);
		trun_free(b);
	}
	struct trun *c = run_ok("inc");
	assert_int_equal(c->x, 2);
	assert_true(c->resumed);
	trun_free(c);
}

/* The process died before it received the cell: the cell never ran, so
 * it is sent again to the resumed checkpoint, and answered from there as
 * if nothing had happened. */
static void test_requeue_unstarted(void **state)
{
	struct trun *a = run_ok("inc");
	struct trun *b = submit("die_unstarted inc", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.status, CALL_OK);
	assert_int_equal(b->run.resends, 1);
	assert_int_equal(b->x, 2); /* ran once, on the state of after a */
	assert_true(b->resumed);
	assert_int_not_equal(b->pid, a->pid);
	assert_int_equal(b->run.state, STATE_KEPT);
	assert_null(b->run.note);
	trun_free(a);
	trun_free(b);
}

/* The decision after a call that kept its state: each fact that makes a
 * second run unsafe takes a checkpoint, and so do the log's bounds and the
 * budget; only a cheap, safe cell is logged. */
static void test_replay_decide(void **state)
{
	struct replay_facts f = { .has_base = true, .plain = true, .threads = 1, .code = "x = 1", .ms = 10, .budget_ms = 1000 };
	assert_int_equal(replay_decide(&f, NULL, 0), REPLAY_LOG);
	struct replay_facts g = f;
	g.has_base = false;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_NO_BASE);
	g = f;
	g.plain = false;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_KIND);
	g = f;
	g.wrote = true;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_WROTE);
	g = f;
	g.effect = "it started a process";
	char why[64];
	assert_int_equal(replay_decide(&g, why, sizeof why), REPLAY_FORK_EFFECT);
	assert_string_equal(why, "it started a process");
	g = f;
	g.threads = 2;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_THREADS);
	g.threads = 0; /* unknown: unsure */
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_THREADS);
	g = f;
	g.code = "t = time.time()";
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_CODE);
	g.code = "import mymod";
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_LOG);
	g.import_read = true;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_CODE);
	g = f;
	g.log_n = REPLAY_MAX_CELLS - 1;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_LOG);
	g.log_n = REPLAY_MAX_CELLS;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_FULL);
	g = f;
	g.log_code = REPLAY_MAX_CODE - 3;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_FULL);
	g = f;
	g.log_ms = 985;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_LOG);
	g.log_ms = 990;
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_BUDGET);
	g = f;
	g.budget_ms = 0; /* PSM_TEST_REPLAY_MS=0: a checkpoint after every call */
	assert_int_equal(replay_decide(&g, NULL, 0), REPLAY_FORK_BUDGET);
	setenv("PSM_TEST_REPLAY_MS", "250", 1);
	assert_true(replay_budget_ms() == 250.0);
	setenv("PSM_TEST_REPLAY_MS", "5000", 1); /* it only tightens */
	assert_true(replay_budget_ms() == REPLAY_BUDGET_MS);
	setenv("PSM_TEST_REPLAY_MS", "x", 1);
	assert_true(replay_budget_ms() == REPLAY_BUDGET_MS);
	unsetenv("PSM_TEST_REPLAY_MS");
	assert_true(replay_budget_ms() == REPLAY_BUDGET_MS);
}

/* What the code text names: the clock, entropy, the process, threads,
 * temporary files; random only without a seed. */
static void test_replay_code(void **state)
{
	static const char *const unsafe[] = {
		"import time\nt = time.time()", "from datetime import datetime\nd = datetime.now()", "datetime.date.today()",
		"datetime.datetime.utcnow()", "import random\nx = random.random()", "np.random.rand(3)",
		"rng = np.random.default_rng()", "os.urandom(8)", "import secrets", "uuid.uuid4()", "uuid.uuid1()",
		"t0 = perf_counter()", "os.getpid()", "import threading", "open('/tmp/x', 'w')", "tempfile.mkstemp()",
		"np.random.seed(0); g = np.random.default_rng()",
		/* what was read may have changed since */
		"df = pd.read_csv('workspace/data.csv')", "import mymodule", "from helpers import f",
		"text = open('notes.txt').read()", "a = np.load('a.npy')", "cfg = json.load(f)", "Path('x').read_text()",
		"files = os.listdir('workspace')", "os.path.exists('workspace/go')", "glob.glob('*.csv')",
		/* effects past the session's memory */
		"urlopen(Request(url, data=b'x'))", "requests.post(url)", "s.connect(('h', 1))", "subprocess.run(['sh'])",
		"os.system('ls')", "con = sqlite3.connect('t.db')", "con.execute('INSERT INTO t VALUES (1)')",
		"df.to_csv('workspace/.cache/log.csv', mode='a')", "df.to_parquet(p)", "f.write('x')", "w.writerow(r)",
		"p.write_text('x')", "np.save('a.npy', a)", "plt.savefig('a.png')", "model.save_weights(p)", "os.remove(p)",
		"os.rename(a, b)", "shutil.copy(a, b)", "Path(p).unlink()", "json.dump(d, f)", "import ctypes",
	};
	static const char *const safe[] = {
		"x = 1", "df.groupby('k').mean()", "rng = np.random.default_rng(42)\nx = rng.normal()",
		"np.random.seed(0)\nx = np.random.rand(3)", "model.fit(X, y, random_state=0) if False else None",
		"runtime = 3; timeout_s = 2", "r = random.Random(7).random()",
		"data = get()", "spread = df.max() - df.min()", "reader_count = 2", "already = True",
		"df = df.rename(columns={'a': 'b'})", "xs.remove(3)", "s = t.replace('a', 'b')", "a = df.to_numpy()",
		"d = pd.to_datetime(s)", "sys.stdout.write('x')", "os.write(1, b'x')", "saved = 3", "writer_count = 1",
		"c = df.copy()",
	};
	char why[64];
	for (size_t i = 0; i < sizeof unsafe / sizeof unsafe[0]; i++)
		if (!replay_code_unsafe(unsafe[i], true, why, sizeof why))
			fail_msg("taken for safe: %s", unsafe[i]);
	for (size_t i = 0; i < sizeof safe / sizeof safe[0]; i++)
		if (replay_code_unsafe(safe[i], true, why, sizeof why))
			fail_msg("taken for unsafe (%s): %s", why, safe[i]);
	/* An import the session says read nothing beyond the installed Python
	 * (or nothing at all: the module was loaded) is no file read; the
	 * other words still count. */
	static const char *const installed[] = { "import mymodule", "from scipy import stats\nstats.ttest_ind(a, b)",
						  "from sklearn.linear_model import LinearRegression" };
	for (size_t i = 0; i < sizeof installed / sizeof installed[0]; i++)
		if (replay_code_unsafe(installed[i], false, why, sizeof why))
			fail_msg("taken for unsafe (%s): %s", why, installed[i]);
	assert_true(replay_code_unsafe("import time\nt = time.time()", false, why, sizeof why));
	assert_true(replay_code_unsafe("import json\ncfg = json.load(f)", false, why, sizeof why));
	assert_true(replay_code_unsafe("from helpers import f", true, why, sizeof why));
	assert_string_equal(why, "import (a file read)");
}

/* Cheap cells are logged (no checkpoint): a crash resumes the checkpoint of
 * cell 1 and runs cells 2 and 3 again, and the reply says so. */
static void test_replay_rollback(void **state)
{
	struct trun *a = run_ok("inc");
	trun_free(run_ok("inc"));
	trun_free(run_ok("inc"));
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	assert_non_null(b->run.note);
	/* The fake session's value carries its pid: another process, another
	 * output, which the note names. */
	if (!strstr(b->run.note, "the copy taken after cell 1 was resumed and cells 2 to 3 run again") ||
	    !strstr(b->run.note, "cell 2 gave another output when run again"))
		fail_msg("note: %s", b->run.note);
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 3); /* cells 2 and 3 ran again; 4 did not */
	assert_true(c->resumed);
	assert_int_not_equal(c->pid, a->pid);
	assert_int_equal(c->run.cell, 5);
	/* The replay ended with a checkpoint of cell 3's state: a second
	 * crash runs only cell 5 (logged) again. */
	struct trun *d = submit("inc crash", 30000.0);
	wait_done(d);
	if (!d->run.note || !strstr(d->run.note, "the copy taken after cell 3 was resumed and cell 5 run again"))
		fail_msg("note: %s", d->run.note ? d->run.note : "(none)");
	struct trun *e = run_ok("");
	assert_int_equal(e->x, 3);
	trun_free(a);
	trun_free(b);
	trun_free(c);
	trun_free(d);
	trun_free(e);
}

/* A cell whose second run fails (its status changed): the replay stops,
 * the state is the one after the cell before it, and the reply says so. */
static void test_replay_fails(void **state)
{
	trun_free(run_ok("inc"));
	trun_free(run_ok("inc"));
	trun_free(run_ok("inc fail_resumed"));
	trun_free(run_ok("inc"));
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	if (!b->run.note || !strstr(b->run.note, "cell 3 failed when run again") || !strstr(b->run.note, "the state is as after cell 2") ||
	    !strstr(b->run.note, "what cells 3 to 4 did to variables is gone"))
		fail_msg("note: %s", b->run.note ? b->run.note : "(none)");
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 2); /* cells 1 and 2, not the half-done 3 */
	trun_free(b);
	trun_free(c);
}

/* Under PSM_TEST_REPLAY_MS=0 every call takes its checkpoint, as before the
 * log: a crash resumes the last call's state, nothing is run again. */
static void test_replay_off(void **state)
{
	setenv("PSM_TEST_REPLAY_MS", "0", 1);
	trun_free(run_ok("inc"));
	trun_free(run_ok("inc"));
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	unsetenv("PSM_TEST_REPLAY_MS");
	assert_null(strstr(b->run.note, "run again"));
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 2);
	trun_free(b);
	trun_free(c);
}

static bool same_run(const struct run *r, const void *key)
{
	return r == key;
}

/* A call cancelled while the session resumes: it is dropped (no reply),
 * and the session goes on once resumed. */
static void test_cancel_while_resuming(void **state)
{
	trun_free(run_ok("inc"));
	hold(HOLD_RESUME, true);
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	/* The resumed copy has not said hello: c waits in the queue. */
	struct trun *c = submit("inc", 30000.0);
	spin(300);
	assert_false(c->done);
	assert_true(sup_busy(sup));
	assert_true(sup_cancel(sup, same_run, &c->run));
	assert_true(c->dropped);
	assert_false(c->done);
	assert_false(sup_cancel(sup, same_run, &c->run)); /* gone from the queue */
	hold(HOLD_RESUME, false);
	struct trun *d = run_ok("");
	assert_int_equal(d->x, 1); /* c never ran */
	assert_true(d->resumed);
	trun_free(b);
	trun_free(c);
	trun_free(d);
}

/* The resumed copy says hello but never takes its own checkpoint (a
 * hostile copy, or one that hangs): dropped after RESUME_MS, and the call
 * that waited for it runs in a new process, its reply saying that the
 * state is gone. */
static void test_resumed_never_answers(void **state)
{
	trun_free(run_ok("inc"));
	hold(HOLD_RECKPT, true);
	struct trun *b = submit("inc crash", 30000.0);
	wait_done(b);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	struct trun *c = submit("inc", 30000.0);
	wait_done(c);
	assert_int_equal(c->run.status, CALL_OK);
	assert_int_equal(c->x, 1); /* a new process: the state before was lost */
	assert_false(c->resumed);
	if (!c->run.note || !strstr(c->run.note, "the copy it was rolled back to did not answer within 1 s") ||
	    !strstr(c->run.note, "this call starts a new interpreter"))
		fail_msg("the reply does not say the state was lost: %s", c->run.note ? c->run.note : "(no note)");
	hold(HOLD_RECKPT, false);
	trun_free(b);
	trun_free(c);
}

/* A crashed call is finished once the scan of what it wrote is in (off
 * the loop); that scan comes back while the resumed copy is being frozen:
 * the freeze goes on, and the next call runs in the resumed copy.  Before,
 * the late finish cancelled the freeze's timer, and the copy was dropped
 * at RESUME_MS with the state. */
static void test_late_scan_during_resume(void **state)
{
	trun_free(run_ok("inc"));
	hold(HOLD_BUSY, true);
	struct trun *b = calloc(1, sizeof *b);
	assert_non_null(b);
	b->run.ev = &events_collect_later;
	b->run.code = strdup("inc crash");
	snprintf(b->run.session, sizeof b->run.session, "default");
	b->run.timeout_ms = 30000.0;
	pending.r = NULL;
	sup_submit(sup, &b->run);
	for (int i = 0; i < 100 && !pending.r; i++)
		spin(20);
	assert_non_null(pending.r); /* the crash is in; its scan runs */
	spin(300);                  /* the copy resumed, checkpointed, runs */
	assert_false(b->done);
	pending.ready(pending.r, pending.arg);
	wait_done(b);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	hold(HOLD_BUSY, false);
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 1);
	assert_true(c->resumed);
	if (c->run.note && strstr(c->run.note, "did not answer"))
		fail_msg("the resumed copy was dropped: %s", c->run.note);
	trun_free(b);
	trun_free(c);
}

static int resume_short_up(void **state)
{
	setenv("PSM_TEST_RESUME_MS", "1000", 1);
	return sup_up(state);
}

static int resume_short_down(void **state)
{
	unsetenv("PSM_TEST_RESUME_MS");
	return sup_down(state);
}

/* The cell's time ran out before the session said it had started it: a
 * timeout (never sent again), rolled back. */
static void test_timeout_while_starting(void **state)
{
	struct trun *a = run_ok("inc");
	struct trun *b = submit("hang_unstarted inc", 300.0);
	wait_done(b);
	assert_int_equal(b->run.status, CALL_TIMEOUT);
	assert_int_equal(b->run.exit_code, 124);
	assert_int_equal(b->run.resends, 0);
	assert_int_equal(b->run.state, STATE_ROLLED_BACK);
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 1);
	assert_true(c->resumed);
	trun_free(a);
	trun_free(b);
	trun_free(c);
}

/* A new session's process that never says hello: the call times out on
 * its own timer, the process is ended, and the next call gets a new one. */
static void test_timeout_before_hello(void **state)
{
	hold(HOLD_HELLO, true);
	struct trun *a = submit("inc", 300.0);
	wait_done(a);
	assert_int_equal(a->run.status, CALL_TIMEOUT);
	assert_int_equal(a->run.exit_code, 124);
	assert_int_equal(a->run.state, STATE_NEW); /* no checkpoint: the state is gone */
	hold(HOLD_HELLO, false);
	struct trun *b = run_ok("inc");
	assert_int_equal(b->x, 1); /* a never ran */
	assert_true(b->run.new_session);
	assert_false(b->resumed);
	trun_free(a);
	trun_free(b);
}

/* A call cancelled while its snapshot is still being taken: its process is
 * ended and rolled back; once the snapshot is in, the call is finished
 * (no reply: cancelled) and the session serves the next call.  (It used to
 * stay the session's current call for good.) */
static void test_cancel_while_preparing(void **state)
{
	trun_free(run_ok("inc"));
	struct trun *b = calloc(1, sizeof *b);
	assert_non_null(b);
	b->run.ev = &events_later;
	b->run.code = strdup("inc");
	snprintf(b->run.session, sizeof b->run.session, "default");
	b->run.timeout_ms = 30000.0;
	memset(&pending, 0, sizeof pending);
	sup_submit(sup, &b->run);
	for (int i = 0; i < 300 && !pending.r; i++)
		spin(20); /* once a's checkpoint is in */
	assert_ptr_equal(pending.r, &b->run);
	assert_true(sup_cancel(sup, same_run, &b->run));
	spin(300); /* the process is ended, its checkpoint resumes */
	assert_false(b->done);
	pending.ready(pending.r, pending.arg);
	wait_done(b);
	assert_true(b->run.cancelled);
	assert_int_equal(b->run.status, CALL_CANCELLED);
	struct trun *c = run_ok("");
	assert_int_equal(c->x, 1);
	trun_free(b);
	trun_free(c);
}

/* A run's end is posted to the supervisor's outbox and handed to the
 * layer above at a safe point, never from inside the handler that ended
 * it.  A cancel that comes while the done waits there finds no run to
 * cancel; the run is answered once, with its outcome, not as cancelled,
 * and the session goes on. */
static void test_cancel_while_done_posted(void **state)
{
	/* The first call of a session crashes: no copy to roll back to, so
	 * the call ends as soon as the scan of what it wrote is in. */
	struct trun *b = calloc(1, sizeof *b);
	assert_non_null(b);
	b->run.ev = &events_collect_later;
	b->run.code = strdup("inc crash");
	snprintf(b->run.session, sizeof b->run.session, "default");
	b->run.timeout_ms = 30000.0;
	pending.r = NULL;
	sup_submit(sup, &b->run);
	for (int i = 0; i < 100 && !pending.r; i++)
		spin(20);
	assert_non_null(pending.r); /* the crash is in; its scan runs */
	spin(300);
	/* The scan ends outside the loop: the run's end is decided now, and
	 * its done posted, not handed over from inside. */
	pending.ready(pending.r, pending.arg);
	assert_false(b->done);
	assert_true(sup_busy(sup)); /* the outbox holds an unanswered run */
	assert_false(sup_cancel(sup, same_run, &b->run));
	assert_int_equal(b->n_done, 1); /* the face's drain handed it over */
	assert_false(b->run.cancelled);
	assert_int_equal(b->run.status, CALL_CRASHED);
	spin(300);
	assert_int_equal(b->n_done, 1);
	struct trun *c = run_ok("inc");
	assert_int_equal(c->x, 1); /* a new interpreter */
	trun_free(b);
	trun_free(c);
}

/* The supervisor freed while its outbox holds a run's end and the next
 * start: the ended run is answered once, the queued one dropped, nothing
 * starts, and no timer of the freed supervisor fires on the loop after
 * it (the sanitizers' build checks for a leak or a use after free). */
static void test_free_with_done_posted(void **state)
{
	struct trun *b = calloc(1, sizeof *b);
	assert_non_null(b);
	b->run.ev = &events_collect_later;
	b->run.code = strdup("inc crash");
	snprintf(b->run.session, sizeof b->run.session, "default");
	b->run.timeout_ms = 30000.0;
	pending.r = NULL;
	sup_submit(sup, &b->run);
	for (int i = 0; i < 100 && !pending.r; i++)
		spin(20);
	assert_non_null(pending.r);
	struct trun *c = submit("inc", 30000.0); /* queued behind b */
	spin(100);
	assert_false(c->done);
	pending.ready(pending.r, pending.arg); /* b's done and the next start posted */
	assert_false(b->done);
	sup_free(sup);
	sup = NULL;
	assert_int_equal(b->n_done, 1);
	assert_int_equal(b->run.status, CALL_CRASHED);
	assert_true(c->dropped);
	assert_int_equal(c->n_done, 0);
	spin(200);
	assert_int_equal(b->n_done, 1);
	trun_free(b);
	trun_free(c);
}

/* ------------------------------------------------------------ forged processes
 *
 * One test per row of the trust table (docs/SECURITY.md): the fake zygote or
 * session sends the message out of state, with a foreign pidfd, or with a
 * path that climbs out, and the server must never signal, delete, open or
 * count anything it did not create.  The canary is a process of the test's
 * own (not below the zygote), the victim a directory outside the project;
 * both are checked from outside after the server is gone. */


/* The canary runs, and nothing stopped it. */
static bool canary_untouched(void)
{
	char p[64], buf[512];
	snprintf(p, sizeof p, "/proc/%d/stat", (int)the_canary);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	const char *f = strrchr(buf, ')');
	return f && (f[2] == 'S' || f[2] == 'R');
}

static void ws_write(const char *name, const char *text)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/%s", ws.abs, name);
	int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* The server's log of one test (its warnings say why a zygote was ended). */
static void capture_begin(void)
{
	snprintf(cap_path, sizeof cap_path, "%s/log", tmpdir);
	int fd = open(cap_path, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	saved_err = dup(2);
	dup2(fd, 2);
	close(fd);
	log_threshold = LOG_WARNING;
}

static const char *capture_end(void)
{
	fflush(stderr);
	dup2(saved_err, 2);
	close(saved_err);
	log_threshold = LOG_ERROR;
	free(captured);
	captured = calloc(1, 1 << 16);
	int fd = open(cap_path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && captured) {
		ssize_t n = read(fd, captured, (1 << 16) - 1);
		(void)n;
		close(fd);
	}
	return captured ? captured : "";
}

static int forged_up(void **state)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/forged", ws.abs);
	unlink(p);
	snprintf(p, sizeof p, "%s/now", ws.abs);
	unlink(p);
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)the_canary);
	ws_write("canary", pid);
	snprintf(p, sizeof p, "%s/../..%s", climb_base, victim);
	ws_write("climb", p);
	ws_write("forge", (const char *)*state);
	struct sup_config cfg = { .loop = loop, .policy = pol, .ws = &ws, .self_exe = self, .zlink = &quick, .restart_ms = 1 };
	struct err e = { 0 };
	hold(HOLD_RESUME, false);
	hold(HOLD_HELLO, false);
	capture_begin();
	sup = sup_new(&cfg);
	assert_non_null(sup);
	assert_int_equal(sup_start(sup, &e), 0);
	return 0;
}

static int forged_down(void **state)
{
	sup_free(sup);
	sup = NULL;
	capture_end();
	ws_write("forge", "");
	/* Checked once the server is gone: whatever it removed or signalled
	 * at its end is done. */
	char p[4200];
	snprintf(p, sizeof p, "%s/keep", victim);
	assert_int_equal(access(p, F_OK), 0);
	assert_true(canary_untouched());
	return 0;
}

/* The zygote lies while the first call's process is being spawned: the
 * zygote is ended (the log says why), and the call runs in the next one
 * with a note that says so. */
static void forged_at_spawn(void **state, const char *why)
{
	struct trun *a = submit("inc", 30000.0);
	wait_done(a);
	const char *log = capture_end();
	assert_true(canary_untouched());
	if (!strstr(log, "the zygote broke its protocol with the server") || !strstr(log, why))
		fail_msg("no \"%s\" in the log: %s", why, log);
	if (!a->run.note || !strstr(a->run.note, "broke its protocol"))
		fail_msg("the call's note: %s", a->run.note ? a->run.note : "none");
	capture_begin();
	trun_free(a);
	/* The next zygote answers truly. */
	struct trun *b = run_ok("inc");
	assert_true(b->x >= 1);
	trun_free(b);
}

static void test_spawned_unknown(void **state)
{
	forged_at_spawn(state, "a spawn report for session process 9999, which the server never asked for");
}

static void test_spawned_foreign(void **state)
{
	forged_at_spawn(state, "whose parent is");
}

static void test_spawned_old(void **state)
{
	forged_at_spawn(state, "which started before the request");
}

static void test_spawned_claim(void **state)
{
	forged_at_spawn(state, "the message says");
}

static void test_spawned_pipe(void **state)
{
	forged_at_spawn(state, "the descriptor is no pidfd");
}

static void test_ready_again(void **state)
{
	forged_at_spawn(state, "W_READY (type 21) where the server expected none");
}

static void test_jail_again(void **state)
{
	char why[64];
	snprintf(why, sizeof why, "W_JAIL (type %d) where the server expected none", W_JAIL);
	forged_at_spawn(state, why);
}

/* The zygote's first message carries its own pidfd, which the server pins
 * it by: one naming another process (here the canary, a process of the
 * host), a descriptor that is no pidfd, or none, and that zygote is ended
 * before anything runs in it; the next one serves the call. */
static void forged_at_jail(const char *why)
{
	struct trun *a = run_ok("inc");
	trun_free(a);
	const char *log = capture_end();
	assert_true(canary_untouched());
	if (!strstr(log, "the zygote broke its protocol with the server") || !strstr(log, why))
		fail_msg("no \"%s\" in the log: %s", why, log);
	capture_begin();
}

static void test_jail_no_pidfd(void **state)
{
	forged_at_jail("its jail report came without the pidfd of its process");
}

static void test_jail_foreign_pidfd(void **state)
{
	char why[96];
	snprintf(why, sizeof why, "its jail report came with the pidfd of process %d, not of its own", (int)the_canary);
	forged_at_jail(why);
}

static void test_jail_pipe(void **state)
{
	forged_at_jail("the descriptor is no pidfd");
}

static void test_settled_unasked(void **state)
{
	forged_at_spawn(state, "W_SETTLED (type 34) where the server expected none");
}

static void test_warmed_unasked(void **state)
{
	forged_at_spawn(state, "W_WARMED (type 37) where the server expected none");
}

static void test_oversized(void **state)
{
	forged_at_spawn(state, "a W_EXITED of 1048576 bytes, over its size");
}

static void test_garbage(void **state)
{
	forged_at_spawn(state, "a W_EXITED whose body is not a JSON object");
}

static void test_silent_spawn(void **state)
{
	forged_at_spawn(state, "no answer to the spawn of session process");
}

static void test_deaf(void **state)
{
	forged_at_spawn(state, "it does not read what the server sends");
}

/* A session that dies and whose exit the zygote never reports: the call is
 * answered anyway, once the exit report's timer runs out. */
static void test_no_exit_report(void **state)
{
	/* With a checkpoint holding its socket, the session's end shows only
	 * in the zygote's report: the call runs out its time, the server kills
	 * the process, and the report of that is what never comes. */
	trun_free(run_ok("inc"));
	spin(300);
	struct trun *a = submit("crash", 1000.0);
	wait_done(a);
	const char *log = capture_end();
	if (!strstr(log, "it did not report the exit of pid"))
		fail_msg("log: %s", log);
	assert_int_not_equal(a->run.status, CALL_OK);
	capture_begin();
	trun_free(a);
	trun_free(run_ok("inc"));
}

/* Without checkpoints nothing else holds a session's socket: a session
 * that dies by itself shows as the end of its stream as well as in the
 * zygote's report, in either order.  The server read that end again after
 * the report (session_dead reads what the process sent before dying) and
 * killed the reaped process once more, which asked for an exit report
 * that could never come: exit_ms later the zygote was taken to have
 * broken its protocol, and every session's state was lost (seen in the
 * soak, where checkpoints are killed; every crash with `checkpoint:
 * false`). */
static void test_crash_without_checkpoint(void **state)
{
	pol->limits.checkpoint = false;
	struct trun *a = submit("crash", 5000.0);
	wait_done(a);
	assert_int_not_equal(a->run.status, CALL_OK);
	trun_free(a);
	struct trun *b = run_ok("inc");
	spin(quick.exit_ms + 1000.0); /* the exit report's timer has run out */
	struct trun *c = run_ok("inc");
	pol->limits.checkpoint = true;
	const char *log = capture_end();
	if (strstr(log, "did not report the exit") || strstr(log, "zygote ended"))
		fail_msg("log: %s", log);
	assert_int_equal(b->x, 1);
	assert_int_equal(c->x, 2); /* the same process: nothing was lost */
	assert_int_equal(c->pid, b->pid);
	capture_begin();
	trun_free(b);
	trun_free(c);
}

/* An exit report for a session that lives: nothing changes (the same
 * process keeps its state; no checkpoint is resumed in its place). */
static void test_exited_live(void **state)
{
	struct trun *a = run_ok("inc");
	hold("now", true);
	spin(400);
	struct trun *b = run_ok("inc");
	assert_int_equal(b->x, 2);
	assert_int_equal(b->pid, a->pid);
	assert_false(b->resumed);
	const char *log = capture_end();
	capture_begin();
	assert_null(strstr(log, "broke its protocol"));
	trun_free(a);
	trun_free(b);
}

/* The session sends a checkpoint that is not the one the server asked for:
 * ended as a crash, and the next reply says so; the pidfd's process is
 * never stopped or counted as the checkpoint. */
static void forged_checkpoint(void **state, const char *why)
{
	struct trun *a = run_ok("inc");
	spin(300); /* the checkpoint after the reply */
	struct trun *b = run_ok("inc");
	const char *log = capture_end();
	if (!b->run.note || !strstr(b->run.note, why))
		fail_msg("no \"%s\" in the note: %s (log: %s)", why, b->run.note ? b->run.note : "none", log);
	assert_int_equal(b->x, 1); /* a new process: the state was lost */
	assert_true(canary_untouched());
	capture_begin();
	trun_free(a);
	trun_free(b);
}

static void test_ckpt_foreign(void **state)
{
	forged_checkpoint(state, "a checkpoint that is not a new child of the session (the pidfd names process");
}

static void test_ckpt_old(void **state)
{
	forged_checkpoint(state, "which started before the request");
}

static void test_ckpt_claim(void **state)
{
	forged_checkpoint(state, "the message says");
}

static void test_ckpt_notpipe(void **state)
{
	forged_checkpoint(state, "whose second descriptor is not a pipe's read end");
}

/* ---- saved sessions on, for the saver's row ----
 * The key lives outside the project (the server refuses one inside it), in
 * a private directory of the test's own; the other rows run with saving
 * off and see none of this. */
static char state_home[] = "/tmp/psm-sup-state-XXXXXX";

static int forged_persist_up(void **state)
{
	assert_non_null(mkdtemp(state_home));
	assert_int_equal(setenv("XDG_STATE_HOME", state_home, 1), 0);
	pol->limits.persist = true;
	return forged_up(state);
}

static int forged_persist_down(void **state)
{
	int r = forged_down(state);
	pol->limits.persist = false;
	unsetenv("XDG_STATE_HOME");
	tmp_tree_remove(state_home);
	char p[4200];
	snprintf(p, sizeof p, "%s/.sessions", ws.abs);
	tmp_tree_remove(p);
	snprintf(p, sizeof p, "%s/savers", ws.abs);
	unlink(p);
	return r;
}

static bool snap_exists(const char *name)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/.sessions/default/%s", ws.abs, name);
	return access(p, F_OK) == 0;
}

static int count_lines(const char *text, const char *line)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, line)); p += strlen(line))
		n++;
	return n;
}

/* A session hands a saver's pipe, with a plausible save stream in it, with
 * every checkpoint, also those the server took without asking for a saver
 * (W_TAKE_CHECKPOINT {}): the server closes those unread (the session sees
 * its pipe broken before its next cell) and writes nothing to the
 * session's snapshot; the one it asks for (at exit, {"save": true}) it
 * reads and saves.
 * Attack: a session that has the server copy, hash and write its whole
 * state after every call, the CPU that saving only at rest spares. */
static void test_ckpt_saver_unasked(void **state)
{
	/* A checkpoint after every call (cheap cells are only logged
	 * otherwise, replay.c): three pipes to judge. */
	setenv("PSM_TEST_REPLAY_MS", "0", 1);
	const char *log = capture_end();
	if (strstr(log, "sessions will not be saved"))
		fail_msg("saving is off in this test: %s", log);
	capture_begin();
	for (int i = 0; i < 3; i++)
		trun_free(run_ok("inc"));
	spin(300); /* the last call's checkpoint */
	log = capture_end(); /* what fails below is said on stderr */
	char seen[4096];
	read_ws_file("savers", seen, sizeof seen);
	/* Two pipes judged at the next cell, nothing written meanwhile. */
	if (count_lines(seen, "unasked: closed unread\n") != 2 || strstr(seen, "unasked: still held") || strstr(seen, "asked: sent"))
		fail_msg("what the session saw of its unasked pipes: %s", seen);
	assert_false(snap_exists("state.snap"));
	assert_false(snap_exists(".state.tmp"));
	/* At exit the server asks for the saver: that pipe is read. */
	capture_begin();
	sup_shutdown(sup);
	for (int i = 0; i < 200 && !snap_exists("state.snap"); i++)
		spin(50);
	read_ws_file("savers", seen, sizeof seen);
	if (count_lines(seen, "unasked: closed unread\n") != 3 || strstr(seen, "unasked: still held") || count_lines(seen, "asked: sent\n") != 1)
		fail_msg("what the session saw of its pipes: %s", seen);
	assert_true(snap_exists("state.snap"));
	log = capture_end();
	if (strstr(log, "not saved") || strstr(log, "broke its protocol"))
		fail_msg("log: %s", log);
	capture_begin();
	unsetenv("PSM_TEST_REPLAY_MS");
}

#define FORGED(fn, name) cmocka_unit_test_prestate_setup_teardown(fn, forged_up, forged_down, (void *)name)

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--zygote-fd") == 0)
		zygote_main(atoi(argv[2]));
	log_threshold = LOG_ERROR;
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_roll_back, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_restored_unasked, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_resume_twice, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_requeue_unstarted, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_cancel_while_resuming, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_resumed_never_answers, resume_short_up, resume_short_down),
		cmocka_unit_test_setup_teardown(test_late_scan_during_resume, resume_short_up, resume_short_down),
		cmocka_unit_test_setup_teardown(test_timeout_while_starting, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_timeout_before_hello, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_cancel_while_preparing, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_cancel_while_done_posted, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_free_with_done_posted, sup_up, sup_down),
		cmocka_unit_test(test_replay_decide),
		cmocka_unit_test(test_replay_code),
		cmocka_unit_test_setup_teardown(test_replay_rollback, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_replay_fails, sup_up, sup_down),
		cmocka_unit_test_setup_teardown(test_replay_off, sup_up, sup_down),
		FORGED(test_spawned_unknown, "spawned-unknown"),
		FORGED(test_spawned_foreign, "spawned-foreign"),
		FORGED(test_spawned_old, "spawned-old"),
		FORGED(test_spawned_claim, "spawned-claim"),
		FORGED(test_spawned_pipe, "spawned-pipe"),
		FORGED(test_ready_again, "ready-again"),
		FORGED(test_jail_again, "jail-again"),
		FORGED(test_jail_no_pidfd, "jail-no-pidfd"),
		FORGED(test_jail_foreign_pidfd, "jail-foreign-pidfd"),
		FORGED(test_jail_pipe, "jail-pipe"),
		FORGED(test_settled_unasked, "settled-unasked"),
		FORGED(test_warmed_unasked, "warmed-unasked"),
		FORGED(test_oversized, "oversized"),
		FORGED(test_garbage, "garbage"),
		FORGED(test_silent_spawn, "silent-spawn"),
		FORGED(test_deaf, "deaf"),
		FORGED(test_no_exit_report, "no-exit-report"),
		FORGED(test_crash_without_checkpoint, "honest"),
		FORGED(test_exited_live, "exited-live"),
		FORGED(test_ckpt_foreign, "ckpt-foreign"),
		FORGED(test_ckpt_old, "ckpt-old"),
		FORGED(test_ckpt_claim, "ckpt-claim"),
		FORGED(test_ckpt_notpipe, "ckpt-notpipe"),
		cmocka_unit_test_prestate_setup_teardown(test_ckpt_saver_unasked, forged_persist_up, forged_persist_down,
							 (void *)"ckpt-saver"),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* What the supervisor's tests share (test_supervisor.c: the rooms of
 * supervisor/private.h; test_sup_forged.c: forged processes): a fake zygote
 * and fake sessions, real processes on the other end of the real
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
 *   result_exit     exit(5) right after sending the result
 *   ckpt_exit       exit(6) right after sending the checkpoint that follows
 *   fail_resumed    answer "error" when run in a resumed copy (a replay)
 * and answers {"status": "ok", "result": "<x>", "pid", "resumed"}.  Its
 * checkpoint is a fork that waits for SIGUSR1, then says hello as the
 * session (then, while HOLD_RECKPT exists, it waits before taking its
 * own checkpoint, and while HOLD_BUSY exists it runs after taking it);
 * while the file HOLD_RESUME exists in the workspace it waits
 * before that hello, and a new session waits before its first hello while
 * HOLD_HELLO exists.  The fake zygote, once the file ZYGOTE_LINGER
 * exists, removes it, closes its socket, and is killed (SIGKILL) 600 ms
 * later, as a real one killed as pid 1 of its pid namespace ends its
 * sessions before it can be reaped; with ZYGOTE_DEAF it closes its socket
 * and lives on.  Nothing here is a mock of the supervisor's side: the
 * test drives the real supervisor through its public functions and reads
 * what each run's events report.  Included by those two files only; each
 * test file's main() starts with sup_fake_main(). */
#ifndef TEST_UNIT_SUP_HARNESS_H
#define TEST_UNIT_SUP_HARNESS_H

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
#define ZYGOTE_LINGER "zygote-linger"
#define ZYGOTE_DEAF "zygote-deaf"

/* ------------------------------------------------------------ the fake processes */

static char ws_dir[4096];
static int ctrl_fd = -1;      /* a session's control socket */
static long x;                /* a session's state */
static bool resumed;          /* this process is a resumed checkpoint */
static bool exit_after_ckpt;  /* ckpt_exit: the next checkpoint is its last word */
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
 * as a real saver's (interp/bootstrap/saved.py save_state: PSMSAVE1, the length,
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
		exit_after_ckpt = false;
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
			if (exit_after_ckpt)
				_exit(6);
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
			if (has_word(code, "ckpt_exit"))
				exit_after_ckpt = true;
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
			if (has_word(code, "result_exit"))
				_exit(5);
			/* As the real session does (interp/session.c). */
			if (has_word(code, "selfstop"))
				raise(SIGSTOP);
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
		if (held(ZYGOTE_LINGER) || held(ZYGOTE_DEAF)) {
			bool dies = held(ZYGOTE_LINGER);
			char p[4200];
			snprintf(p, sizeof p, "%s/%s", ws_dir, dies ? ZYGOTE_LINGER : ZYGOTE_DEAF);
			unlink(p); /* once: the next zygote serves */
			close(zfd);
			if (dies) {
				usleep(600 * 1000);
				raise(SIGKILL);
			}
			for (;;)
				pause();
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
 * delete (test_sup_forged.c checks both). */
static pid_t the_canary;
static char victim[] = "/var/tmp/psm-sup-victim-XXXXXX";
static char climb_base[] = "/tmp/psm-scratch-suptest-XXXXXX";
static char *captured; /* the server's log of one test (test_sup_forged.c) */

static void ev_ready(struct run *r, void (*ready)(struct run *r, void *arg), void *arg)
{
	ready(r, arg);
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

/* The state-change log (PSM_TRACE_STATES=1): every session's phase, process
 * life and owed checkpoint after each event the loop runs, printed when it
 * changed, between cmocka's own lines.  A refactor of the supervisor's
 * states runs the tests before and after and compares the two logs. */
static unsigned deadlines_missing; /* after any event, in this test */

static void trace_states(void *arg)
{
	static char last[2048];
	char now[2048];
	(void)arg;
	if (!sup)
		return;
	deadlines_missing += sup_deadlines_missing(sup);
	if (!getenv("PSM_TRACE_STATES"))
		return;
	sup_states(sup, now, sizeof now);
	if (strcmp(now, last) != 0) {
		printf("  states: %s\n", now);
		memcpy(last, now, sizeof last);
	}
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
	/* After every event: no session waits with no deadline; and, with
	 * PSM_TRACE_STATES, the state-change log. */
	loop_after_each(loop, trace_states, NULL);
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

/* A test binary run as `SELF --zygote-fd N` is the fake zygote. */
static void sup_fake_main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--zygote-fd") == 0)
		zygote_main(atoi(argv[2]));
}

#endif

/* Fuzz target: the server's side of the zygote and its sessions, against a
 * process that plays a lying zygote.  The real supervisor (the rooms of
 * supervisor/private.h, zlink.c, kproc.c) runs one call; its zygote is a
 * fork of the fuzzer (sup_config.fake_zygote) that plays the input as a
 * script on the real wire protocol: frames of every type the zygote or a
 * session may send, in any order, with bodies from the input, and with
 * descriptors chosen from a menu: a pidfd of the canary (a process the
 * server never made), of the fake zygote itself, of the server, of a process
 * that has exited, of a child the fake forked (a session as the server asked
 * for one, when the input sends it in answer to a spawn), a pipe, /dev/null.
 * It reads what the server sends (spawn ids, the sessions' sockets, settle
 * and warm-up requests) and can answer on a session's socket too.
 *
 * Input: a sequence of ops, one byte each (op % 16), most followed by a few
 * bytes of arguments (see play()).  The fake ends when the input does,
 * then the zygote's socket closes; a second start of a zygote is refused,
 * so the call ends with an answer.
 *
 * Checks, whatever the script: the call is answered (done or dropped)
 * exactly once and in bounded time; every event about a session's process
 * is one its life table takes, and after every event no session waits on
 * its process without its phase's deadline armed; the canary is neither killed nor
 * stopped; the canary directory (named in a W_READY's scratch path that
 * climbs out of a psm-scratch directory) is intact; no descriptor leaks. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
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
#include "../../common/pcache.h"
#include "../../common/util.h"
#include "../../proto/wire.h"
#include "../../supervisor/supervisor.h"
#include "../../supervisor/zlink.h"
#include "fuzz.h"

static struct loop *loop;
static struct policy *pol;
static struct workspace ws;
static char root[64], victim[96], scratch_base[96];
static pid_t canary;
static const uint8_t *script;
static size_t script_len;
static int starts;

static const struct zlink_limits quick = {
	.start_ms = 150, .spawn_ms = 80, .settle_ms = 80, .exit_ms = 80, .warm_ms = 150,
	.out_msgs = 32, .out_bytes = 1u << 16,
};

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void cleanup(void)
{
	if (canary > 0)
		kill(canary, SIGKILL);
	if (root[0])
		nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	if (victim[0])
		nftw(victim, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	if (scratch_base[0])
		rmdir(scratch_base);
}

static void setup(void)
{
	struct err e = { 0 };
	/* Quiet (every input breaks the protocol), unless FUZZ_ZYGOTE_LOG=1. */
	log_threshold = getenv("FUZZ_ZYGOTE_LOG") ? LOG_DEBUG : LOG_ERROR + 1;
	snprintf(root, sizeof root, "/tmp/psm-fuzz-zygote-XXXXXX");
	FUZZ_CHECK(mkdtemp(root) != NULL, "mkdtemp");
	snprintf(victim, sizeof victim, "/tmp/psm-fuzz-zygote-victim-XXXXXX");
	FUZZ_CHECK(mkdtemp(victim) != NULL, "mkdtemp");
	snprintf(scratch_base, sizeof scratch_base, "/tmp/psm-scratch-fuzz-XXXXXX");
	FUZZ_CHECK(mkdtemp(scratch_base) != NULL, "mkdtemp");
	char p[160];
	snprintf(p, sizeof p, "%s/keep", victim);
	int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	FUZZ_CHECK(fd >= 0, "keep");
	close(fd);
	/* The canary is not below this process (the supervisor ends what is
	 * below the server when it is freed): forked twice. */
	int cp[2];
	FUZZ_CHECK(pipe(cp) == 0, "pipe");
	pid_t me = getpid(), mid = fork();
	if (mid == 0) {
		pid_t c = fork();
		if (c == 0) {
			/* Nothing of a pipeline it was started in is held open. */
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
	FUZZ_CHECK(read(cp[0], &canary, sizeof canary) == (ssize_t)sizeof canary, "canary");
	close(cp[0]);
	close(cp[1]);
	atexit(cleanup);
	char wsd[128];
	snprintf(wsd, sizeof wsd, "%s/workspace", root);
	FUZZ_CHECK(policy_builtin(&pol, &e) == 0, "%s", e.msg);
	FUZZ_CHECK(policy_resolve(pol, root, &e) == 0, "%s", e.msg);
	pol->limits.persist = false;
	FUZZ_CHECK(ws_open(&ws, root, wsd, &e) == 0, "%s", e.msg);
	loop = loop_new();
	signal(SIGPIPE, SIG_IGN);
}

/* ------------------------------------------------------------ the fake zygote */

struct fake {
	const uint8_t *p, *end;
	int zfd;
	int ctrl;         /* the last session socket the server handed down */
	double last_id;   /* the last spawn id asked for */
	double settle_pid;
	char warm_name[160];
	pid_t child;      /* the last child forked (a session as asked) */
	int child_pidfd;
	int dead_pidfd;   /* a process that has exited */
};

static uint8_t next(struct fake *f)
{
	return f->p < f->end ? *f->p++ : 0;
}

static int pidfd_of(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* A descriptor from the menu, or -1 for none. */
static int pick_fd(struct fake *f, uint8_t k)
{
	switch (k % 9) {
	case 1: return pidfd_of(canary);
	case 2: return pidfd_of(getpid());
	case 3: return pidfd_of(getppid()); /* the server itself */
	case 4: return f->child_pidfd >= 0 ? fcntl(f->child_pidfd, F_DUPFD_CLOEXEC, 3) : -1;
	case 5: return f->dead_pidfd >= 0 ? fcntl(f->dead_pidfd, F_DUPFD_CLOEXEC, 3) : -1;
	case 6: {
		int pp[2];
		if (pipe2(pp, O_CLOEXEC) < 0)
			return -1;
		close(pp[1]);
		return pp[0];
	}
	case 7: return open("/dev/null", O_RDONLY | O_CLOEXEC);
	case 8: return open(victim, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	default: return -1;
	}
}

static double pick_pid(struct fake *f, uint8_t k)
{
	switch (k % 7) {
	case 0: return canary;
	case 1: return getpid();
	case 2: return f->child > 0 ? f->child : 2;
	case 3: return getppid();
	case 4: return 1;
	case 5: return -1;
	default: return (double)(k * 131);
	}
}

/* Sends *jp (consumed) with a descriptor from the menu. */
static void send_frame(struct fake *f, int sock, uint32_t type, cJSON **jp, uint8_t fdk)
{
	char *txt = cJSON_PrintUnformatted(*jp);
	cJSON_Delete(*jp);
	*jp = NULL;
	int fd = pick_fd(f, fdk);
	if (txt)
		(void)wire_send(sock, type, txt, strlen(txt), fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
	free(txt);
	if (fd >= 0)
		close(fd);
}

/* A string of the input (up to n bytes, made printable). */
static void take_str(struct fake *f, char *out, size_t n)
{
	size_t len = next(f) % n;
	size_t i = 0;
	for (; i < len && f->p < f->end; i++) {
		uint8_t c = next(f);
		out[i] = (char)(c >= 0x20 && c < 0x7f ? c : '.');
	}
	out[i] = '\0';
}

/* Reads what the server sent so far: spawn requests (their ids and the
 * session's socket), settles, warm-up names. */
static void read_server(struct fake *f)
{
	for (int i = 0; i < 16; i++) {
		struct pollfd p = { .fd = f->zfd, .events = POLLIN };
		if (poll(&p, 1, 0) != 1)
			return;
		struct wire_msg m;
		if (wire_recv(f->zfd, &m, 1u << 22) < 0)
			return;
		cJSON *j = cJSON_ParseWithLength((const char *)m.data, m.len);
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "pid");
		const cJSON *names = cJSON_GetObjectItemCaseSensitive(j, "names");
		if (m.type == W_SPAWN && cJSON_IsNumber(id) && m.nfds == 3) {
			f->last_id = id->valuedouble;
			if (f->ctrl >= 0)
				close(f->ctrl);
			f->ctrl = m.fds[0];
			m.fds[0] = -1;
		} else if (m.type == W_SETTLE && cJSON_IsNumber(pid)) {
			f->settle_pid = pid->valuedouble;
		} else if (m.type == W_WARM && cJSON_IsArray(names) && cJSON_GetArraySize(names) > 0) {
			const char *n = cJSON_GetStringValue(cJSON_GetArrayItem(names, 0));
			snprintf(f->warm_name, sizeof f->warm_name, "%s", n ? n : "");
		}
		cJSON_Delete(j);
		wire_msg_free(&m);
	}
}

static const uint32_t zygote_types[] = { W_JAIL, W_READY, W_SPAWNED, W_EXITED, W_SETTLED, W_WARMED, W_FATAL };
static const uint32_t session_types[] = { W_HELLO, W_STARTED, W_RESULT, W_CHECKPOINT, W_THUMB_DATA, W_RESTORED };

/* Raw bytes: a header of any type and length, then some. */
static void raw_frame(struct fake *f, int zfd)
{
	uint32_t hdr[3] = { next(f) & 1 ? WIRE_MAGIC : 0x41414141u, next(f), (uint32_t)next(f) << (next(f) % 24) };
	(void)!write(zfd, hdr, sizeof hdr);
	uint8_t n = next(f);
	for (uint8_t i = 0; i < n && f->p < f->end; i++) {
		uint8_t c = next(f);
		(void)!write(zfd, &c, 1);
	}
}

/* As the session, on the socket the server handed down. */
static void session_frame(struct fake *f, cJSON **jp)
{
	uint8_t k = next(f);
	uint32_t type = session_types[k % N_ELEMENTS(session_types)];
	if (type == W_RESULT)
		cJSON_AddStringToObject(*jp, "status", k & 8 ? "ok" : "memory");
	uint8_t pk = next(f), fk = next(f);
	if (type != W_STARTED || (k & 16))
		cJSON_AddNumberToObject(*jp, "pid", pick_pid(f, pk));
	if (f->ctrl >= 0 && type == W_STARTED && !(k & 16)) {
		(void)wire_send(f->ctrl, W_STARTED, "", 0, NULL, 0);
		cJSON_Delete(*jp);
		*jp = NULL;
	} else if (f->ctrl >= 0) {
		send_frame(f, f->ctrl, type, jp, fk);
	}
}

/* A child of the fake zygote: a session as asked. */
static void spawn_child(struct fake *f)
{
	if (f->child_pidfd >= 0)
		close(f->child_pidfd);
	pid_t me = getpid();
	f->child = fork();
	if (f->child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != me)
			_exit(0); /* the fake ended before the line above */
		for (;;)
			pause();
	}
	f->child_pidfd = f->child > 0 ? pidfd_of(f->child) : -1;
}

/* Any zygote type, a body from the input. */
static void any_frame(struct fake *f, int zfd)
{
	char body[96];
	take_str(f, body, sizeof body);
	uint32_t type = zygote_types[next(f) % N_ELEMENTS(zygote_types)];
	int fd = pick_fd(f, next(f));
	(void)wire_send(zfd, type, body, strlen(body), fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0);
	if (fd >= 0)
		close(fd);
}

static __attribute__((noreturn)) void play(int zfd)
{
	struct fake f = { .p = script, .end = script + script_len, .zfd = zfd, .ctrl = -1, .child = -1,
			  .child_pidfd = -1, .dead_pidfd = -1 };
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	pid_t d = fork();
	if (d == 0)
		_exit(0);
	f.dead_pidfd = pidfd_of(d);
	waitpid(d, NULL, 0);
	while (f.p < f.end) {
		uint8_t op = next(&f) % 16;
		cJSON *j = cJSON_CreateObject();
		switch (op) {
		case 0: /* the jail's report */
			cJSON_AddBoolToObject(j, "enforceable", next(&f) & 1);
			cJSON_AddBoolToObject(j, "nsfree", next(&f) & 1);
			cJSON_AddStringToObject(j, "jail", "jail: a fake\n");
			{
				/* The report carries the zygote's own pidfd (kind 2):
				 * kinds 0 and 2 swapped, so that the inputs that sent
				 * it with none still reach the later phases. */
				uint8_t k = next(&f);
				send_frame(&f, zfd, W_JAIL, &j, k % 9 == 0 ? 2 : k % 9 == 2 ? 0 : k);
			}
			break;
		case 1: { /* ready, perhaps with a scratch path that climbs out */
			char path[300];
			snprintf(path, sizeof path, "%s/../..%s", scratch_base, victim);
			cJSON_AddNumberToObject(j, "start_ms", next(&f));
			if (next(&f) & 1)
				cJSON_AddStringToObject(j, "scratch", path);
			send_frame(&f, zfd, W_READY, &j, next(&f));
			break;
		}
		case 2: { /* a spawn report */
			uint8_t a = next(&f), b = next(&f);
			cJSON_AddNumberToObject(j, "id", a & 1 ? f.last_id : (double)b);
			cJSON_AddNumberToObject(j, "pid", a & 2 ? (double)f.child : pick_pid(&f, b));
			send_frame(&f, zfd, W_SPAWNED, &j, next(&f));
			break;
		}
		case 3: /* an exit report */
			cJSON_AddNumberToObject(j, "pid", pick_pid(&f, next(&f)));
			cJSON_AddNumberToObject(j, "status", next(&f));
			cJSON_AddNumberToObject(j, "epoch", next(&f));
			send_frame(&f, zfd, W_EXITED, &j, next(&f));
			break;
		case 4: /* a settle report */
			cJSON_AddNumberToObject(j, "pid", next(&f) & 1 ? f.settle_pid : pick_pid(&f, next(&f)));
			send_frame(&f, zfd, W_SETTLED, &j, next(&f));
			break;
		case 5: { /* a warm-up answer */
			char n[64];
			take_str(&f, n, sizeof n);
			cJSON_AddStringToObject(j, "name", next(&f) & 1 ? f.warm_name : n);
			cJSON_AddBoolToObject(j, "ok", next(&f) & 1);
			cJSON_AddBoolToObject(j, "tainted", next(&f) & 1);
			send_frame(&f, zfd, W_WARMED, &j, next(&f));
			break;
		}
		case 6: { /* fatal */
			char msg[64];
			take_str(&f, msg, sizeof msg);
			cJSON_AddStringToObject(j, "message", msg);
			send_frame(&f, zfd, W_FATAL, &j, 0);
			break;
		}
		case 7:
			cJSON_Delete(j);
			j = NULL;
			raw_frame(&f, zfd);
			break;
		case 8:
			read_server(&f);
			break;
		case 9: {
			struct timespec t = { 0, 1000000L * (1 + next(&f) % 4) };
			nanosleep(&t, NULL);
			read_server(&f);
			break;
		}
		case 10:
			session_frame(&f, &j);
			break;
		case 11:
			spawn_child(&f);
			break;
		case 12: /* the end, now */
			_exit(0);
		default:
			cJSON_Delete(j);
			j = NULL;
			any_frame(&f, zfd);
			break;
		}
		if (j)
			cJSON_Delete(j);
	}
	_exit(0);
}

static pid_t fake_zygote(void *arg, int zygote_end, int server_end)
{
	(void)arg;
	if (starts++ > 0) {
		errno = EAGAIN;
		return -1; /* one zygote per input: the call must then be answered */
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(server_end);
		play(zygote_end);
	}
	return pid;
}

/* ------------------------------------------------------------ the server's side */

struct frun {
	struct run run;
	int done, dropped;
};

static bool finished;

static void ev_ready(struct run *r, void (*ready)(struct run *r, void *arg), void *arg)
{
	ready(r, arg);
}
static bool ev_no_thumb(struct run *r, char *rel, size_t size)
{
	(void)r;
	(void)rel;
	(void)size;
	return false;
}
static void ev_thumb(struct run *r, const unsigned char *data, size_t len)
{
	(void)r;
	(void)data;
	(void)len;
}
static void ev_progress(struct run *r, double progress, double elapsed_s, const char *line)
{
	(void)r;
	(void)progress;
	(void)elapsed_s;
	(void)line;
}
static void ev_done(struct run *r)
{
	((struct frun *)r)->done++;
	finished = true;
	loop_stop(loop);
}
static void ev_drop(struct run *r)
{
	((struct frun *)r)->dropped++;
}

static const struct run_events events = {
	.prepare = ev_ready, .collect = ev_ready, .next_thumb = ev_no_thumb, .thumb = ev_thumb,
	.progress = ev_progress, .done = ev_done, .drop = ev_drop,
};

static bool guard_fired;
static void guard(void *arg)
{
	(void)arg;
	guard_fired = true;
	loop_stop(loop);
}

/* The server's descriptors but the /proc files it keeps open on purpose
 * (common/pcache.h: at most PCACHE_MAX, checked below). */
static int count_fds(void)
{
	int n = -pcache_count();
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	while (d && (de = readdir(d)))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* The canary runs, and nothing stopped it. */
static bool canary_untouched(void)
{
	char p[64], buf[512];
	snprintf(p, sizeof p, "/proc/%d/stat", (int)canary);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	const char *f = strrchr(buf, ')');
	return f && (f[2] == 'S' || f[2] == 'R');
}

static unsigned deadlines_missing;

static void count_deadlines(void *arg)
{
	deadlines_missing += sup_deadlines_missing(arg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!loop)
		setup();
	if (size > 4096)
		return 0;
	script = data;
	script_len = size;
	starts = 0;
	int fds0 = count_fds();
	char self[] = "/proc/self/exe";
	struct sup_config cfg = { .loop = loop, .policy = pol, .ws = &ws, .self_exe = self, .zlink = &quick,
				  .restart_ms = 1, .fake_zygote = fake_zygote, .warmup = WARMUP_OFF };
	struct sup *sup = sup_new(&cfg);
	FUZZ_CHECK(sup != NULL, "sup_new");
	/* After every event: no session waits on its process with no
	 * deadline armed (a wait the script could make endless). */
	deadlines_missing = 0;
	loop_after_each(loop, count_deadlines, sup);
	struct err e = { 0 };
	FUZZ_CHECK(sup_start(sup, &e) == 0, "sup_start: %s", e.msg);
	/* Two calls in one session: after the first one's reply the server
	 * asks for its checkpoint, which the script may answer. */
	struct frun *runs[2];
	for (int i = 0; i < 2; i++) {
		struct frun *r = calloc(1, sizeof *r);
		FUZZ_CHECK(r != NULL, "calloc");
		r->run.ev = &events;
		r->run.code = "1";
		snprintf(r->run.session, sizeof r->run.session, "fuzz");
		r->run.timeout_ms = 200;
		runs[i] = r;
		finished = guard_fired = false;
		sup_submit(sup, &r->run);
		/* Bounded: every wait of the server's has a timer shorter than this. */
		uint64_t g = loop_timer(loop, 5000, guard, NULL);
		while (!finished && !guard_fired)
			loop_run(loop);
		loop_timer_cancel(loop, g);
		FUZZ_CHECK(finished, "call %d was not answered within 5 s", i + 1);
	}
	loop_after_each(loop, NULL, NULL);
	sup_free(sup);
	FUZZ_CHECK(deadlines_missing == 0, "a session waited on its process with no deadline armed (%u times)",
		   deadlines_missing);
	for (int i = 0; i < 2; i++) {
		struct frun *r = runs[i];
		FUZZ_CHECK(r->done == 1 && r->dropped == 0, "call %d was answered %d times, dropped %d times", i + 1, r->done,
			   r->dropped);
		result_destroy(r->run.result);
		free(r->run.out_text);
		free(r->run.err_text);
		free(r->run.out_log);
		free(r->run.err_log);
		free(r->run.note);
		free(r);
	}
	FUZZ_CHECK(canary_untouched(), "the canary (a process the server never made) was signalled");
	char p[160];
	snprintf(p, sizeof p, "%s/keep", victim);
	FUZZ_CHECK(access(p, F_OK) == 0, "the directory outside the project was removed");
	FUZZ_CHECK(count_fds() == fds0, "descriptors leaked: %d before, %d after", fds0, count_fds());
	FUZZ_CHECK(pcache_count() <= PCACHE_MAX, "%d /proc descriptors kept", pcache_count());
	/* Whatever the zygote and its sessions said, every event about a
	 * session's process was one its life table takes. */
	FUZZ_CHECK(sup_life_refused() == 0, "an event about a session's process that its life table refuses");
	return 0;
}

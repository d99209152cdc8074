/* The link to the zygote: see zlink.h. */
#include "zlink.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../proto/wire.h"
#include "../proto/zmsg.h"

/* Requests that can wait at once: a spawn per session (max_sessions is at
 * most 256) and a settle per session, and the processes killed meanwhile. */
#define MAX_WAITS 512
/* What may wait unread in the zygote's direction: a zygote that lets more
 * pile up does not read what the server sends (legitimately it reads
 * between two import steps of the warm-up, a second at most). */
const struct zlink_limits zlink_defaults = {
	.start_ms = 180000.0,
	.spawn_ms = 60000.0,
	.settle_ms = 60000.0,
	.exit_ms = 60000.0,
	.warm_ms = 180000.0,
	.out_msgs = 2048,
	.out_bytes = 4u << 20,
	.linger_ms = 5000.0,
};
/* Messages read per wake-up, so that a zygote writing without end cannot
 * hold the loop. */
#define READ_BUDGET 64

enum zl_phase {
	ZL_DOWN,    /* no zygote */
	ZL_JAIL,    /* exec'd, building its jail: its report next */
	ZL_PYTHON,  /* jailed, starting the interpreter: W_READY next */
	ZL_READY,   /* serving */
	ZL_IDLE,    /* its jail cannot enforce the policy: it says nothing more */
	ZL_BROKEN,  /* closed; the lost event is on its way */
};

struct wait {
	int kind;             /* W_SPAWN, W_SETTLE, W_EXITED */
	int id;               /* spawn: the session's spawn id */
	pid_t pid;            /* settle, exit: the pid in the zygote's namespace */
	int pidfd;            /* exit: a dup of the killed process's pidfd */
	unsigned long long since; /* spawn: kproc_now_ticks() before the request */
	double deadline;
};

struct out {
	unsigned char *buf;
	size_t len, off;
	int fds[WIRE_MAX_FDS];
	int nfds;
	struct out *next;
};

struct zlink {
	struct loop *loop;
	const struct zlink_limits *lim;
	const struct zlink_events *ev;
	void *arg;
	int fd;
	pid_t zpid, zhpid;
	int zpidfd;          /* pins the zygote's process (its pid cannot be reused) */
	enum zl_phase phase;
	double started;
	struct wire_reader rd;
	struct wire_expect expect[6];
	struct wait waits[MAX_WAITS];
	size_t n_waits;
	int warm_out;        /* W_WARMED still due */
	bool warm_paused;
	double warm_deadline;
	struct out *oq, *oq_tail;
	size_t oq_bytes, oq_msgs;
	uint64_t timer, lost_timer;
	int exit_pidfd;      /* the zygote's pidfd, watched from the end of its link to its exit */
	double closed_at;    /* when its link ended (the wait to its exit, logged) */
	double timer_at;
	bool lost_broken;
	char lost_why[256];
};

static void zl_event(void *arg, int fd, short revents);
static void arm_timer(struct zlink *z);

struct zlink *zlink_new(struct loop *l, const struct zlink_events *ev, void *arg, const struct zlink_limits *lim)
{
	struct zlink *z = xcalloc(1, sizeof *z);
	z->loop = l;
	z->lim = lim ? lim : &zlink_defaults;
	z->ev = ev;
	z->arg = arg;
	z->fd = z->zpidfd = z->exit_pidfd = -1;
	return z;
}

static void clear_waits(struct zlink *z)
{
	for (size_t i = 0; i < z->n_waits; i++)
		if (z->waits[i].pidfd >= 0)
			close(z->waits[i].pidfd);
	z->n_waits = 0;
	z->warm_out = 0;
	z->warm_paused = false;
}

static void free_queue(struct zlink *z)
{
	while (z->oq) {
		struct out *o = z->oq;
		z->oq = o->next;
		for (int i = 0; i < o->nfds; i++)
			close(o->fds[i]);
		free(o->buf);
		free(o);
	}
	z->oq_tail = NULL;
	z->oq_bytes = z->oq_msgs = 0;
}

/* Everything of the current zygote goes; the phase is set by the caller. */
static void shut(struct zlink *z)
{
	if (z->fd >= 0) {
		loop_unwatch(z->loop, z->fd);
		close(z->fd);
		z->fd = -1;
	}
	if (z->zpidfd >= 0)
		close(z->zpidfd);
	z->zpidfd = -1;
	z->zhpid = 0;
	wire_reader_free(&z->rd);
	clear_waits(z);
	free_queue(z);
	if (z->timer)
		loop_timer_cancel(z->loop, z->timer);
	z->timer = 0;
}

/* The wait for the zygote's exit after its link ended (lose) is over. */
static void unlinger(struct zlink *z)
{
	if (z->exit_pidfd >= 0) {
		loop_unwatch(z->loop, z->exit_pidfd);
		close(z->exit_pidfd);
	}
	z->exit_pidfd = -1;
	if (z->lost_timer)
		loop_timer_cancel(z->loop, z->lost_timer);
	z->lost_timer = 0;
}

void zlink_close(struct zlink *z)
{
	if (!z)
		return;
	shut(z);
	unlinger(z);
	z->phase = ZL_DOWN;
}

void zlink_free(struct zlink *z)
{
	if (!z)
		return;
	zlink_close(z);
	free(z);
}

static void deliver_lost(void *arg)
{
	struct zlink *z = arg;
	z->lost_timer = 0;
	unlinger(z);
	z->phase = ZL_DOWN;
	char why[sizeof z->lost_why];
	memcpy(why, z->lost_why, sizeof why);
	z->ev->lost(z->arg, z->lost_broken, why);
}

/* The zygote whose link ended has exited: its loss is told on the next
 * turn of the loop. */
static void exit_seen(void *arg, int fd, short revents)
{
	struct zlink *z = arg;
	(void)revents;
	if (fd != z->exit_pidfd)
		return;
	loop_unwatch(z->loop, fd);
	/* For operators: how long a zygote's teardown takes (its sessions
	 * and copies killed and waited for), against linger_ms. */
	log_info("the zygote exited %.0f ms after its link to the server closed", loop_now_ms() - z->closed_at);
	if (z->lost_timer)
		loop_timer_cancel(z->loop, z->lost_timer);
	z->lost_timer = loop_timer(z->loop, 0, deliver_lost, z);
}

/* The link ends: closed now, the event on the next turn of the loop (or
 * once the zygote has exited), so that it never runs inside a zlink_*
 * call or another event. */
static void lose(struct zlink *z, bool broken, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void lose(struct zlink *z, bool broken, const char *fmt, ...)
{
	if (z->phase == ZL_BROKEN || z->phase == ZL_DOWN)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(z->lost_why, sizeof z->lost_why, fmt, ap);
	va_end(ap);
	z->lost_broken = broken;
	/* The zygote closed its end (or its socket failed): it is exiting,
	 * and the event waits until it has, so that the server can say how
	 * it died.  Its socket closes early in its exit; as pid 1 of its pid
	 * namespace it then kills and waits for every session and copy
	 * below it before it can be reaped, which took longer than the
	 * 200 ms zygote_gone waits under a sanitizer build on a loaded
	 * machine: a zygote killed from outside was then reported as one
	 * that "ended its link" and was ended by the server.  Bounded
	 * (linger_ms): one that closes its socket and lives on is ended
	 * after it, as before.  A link the server breaks waits for nothing
	 * (zygote_gone ends the process). */
	int pfd = -1;
	if (!broken && z->zpidfd >= 0 && !kproc_exited(z->zpidfd)) {
		pfd = z->zpidfd;
		z->zpidfd = -1;
	}
	shut(z);
	z->phase = ZL_BROKEN;
	if (pfd >= 0) {
		z->exit_pidfd = pfd;
		z->closed_at = loop_now_ms();
		loop_watch(z->loop, pfd, POLLIN, exit_seen, z);
	}
	z->lost_timer = loop_timer(z->loop, pfd >= 0 ? z->lim->linger_ms : 0, deliver_lost, z);
}

void zlink_attach(struct zlink *z, int fd, pid_t zpid)
{
	zlink_close(z);
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
	z->fd = fd;
	z->zpid = zpid;
	z->phase = ZL_JAIL;
	z->started = loop_now_ms();
	wire_reader_init(&z->rd, 1u << 20);
	loop_watch(z->loop, fd, POLLIN, zl_event, z);
	arm_timer(z);
}

bool zlink_open(const struct zlink *z)
{
	return z && z->fd >= 0;
}

pid_t zlink_zygote(const struct zlink *z)
{
	return z && z->fd >= 0 ? z->zhpid : 0;
}

/* ------------------------------------------------------------ what the state expects */

/* Sizes: a jail report is a few kB (the layers, the remedy), a spawn or an
 * exit report a few dozen bytes, a warm-up answer a name and a reason that
 * may quote two paths. */
static void set_expect(struct zlink *z)
{
	size_t n = 0;
	bool spawn = false, settle = false;
	for (size_t i = 0; i < z->n_waits; i++) {
		spawn |= z->waits[i].kind == W_SPAWN;
		settle |= z->waits[i].kind == W_SETTLE;
	}
	switch (z->phase) {
	case ZL_JAIL:
		z->expect[n++] = (struct wire_expect){ W_JAIL, 32768, 1 };
		z->expect[n++] = (struct wire_expect){ W_FATAL, 8192, 0 };
		break;
	case ZL_PYTHON:
		z->expect[n++] = (struct wire_expect){ W_READY, 16384, 0 };
		z->expect[n++] = (struct wire_expect){ W_FATAL, 8192, 0 };
		break;
	case ZL_READY:
		z->expect[n++] = (struct wire_expect){ W_EXITED, 256, 0 };
		if (spawn)
			z->expect[n++] = (struct wire_expect){ W_SPAWNED, 256, 1 };
		if (settle)
			z->expect[n++] = (struct wire_expect){ W_SETTLED, 256, 0 };
		if (z->warm_out > 0)
			z->expect[n++] = (struct wire_expect){ W_WARMED, 16384, 0 };
		break;
	default:
		break; /* nothing: any message breaks the link */
	}
	z->rd.expect = z->expect;
	z->rd.n_expect = n;
}

/* ------------------------------------------------------------ timers */

static void timer_fired(void *arg);

/* One timer, at the earliest deadline of what the server waits for. */
static void arm_timer(struct zlink *z)
{
	double at = 0;
	if (z->phase == ZL_JAIL || z->phase == ZL_PYTHON)
		at = z->started + z->lim->start_ms;
	for (size_t i = 0; i < z->n_waits; i++)
		if (at == 0 || z->waits[i].deadline < at)
			at = z->waits[i].deadline;
	if (z->phase == ZL_READY && z->warm_out > 0 && !z->warm_paused && (at == 0 || z->warm_deadline < at))
		at = z->warm_deadline;
	if (z->timer && at == z->timer_at)
		return;
	if (z->timer)
		loop_timer_cancel(z->loop, z->timer);
	z->timer = 0;
	if (at > 0) {
		double ms = at - loop_now_ms();
		z->timer = loop_timer(z->loop, ms > 0 ? ms : 0, timer_fired, z);
		z->timer_at = at;
	}
}

static void drop_wait(struct zlink *z, size_t i)
{
	if (z->waits[i].pidfd >= 0)
		close(z->waits[i].pidfd);
	z->waits[i] = z->waits[--z->n_waits];
}

static void timer_fired(void *arg)
{
	struct zlink *z = arg;
	z->timer = 0;
	double now = loop_now_ms();
	if ((z->phase == ZL_JAIL || z->phase == ZL_PYTHON) && now >= z->started + z->lim->start_ms) {
		lose(z, true, "it did not start within %.0f s", z->lim->start_ms / 1000);
		return;
	}
	for (size_t i = 0; i < z->n_waits; i++) {
		struct wait *w = &z->waits[i];
		if (now < w->deadline)
			continue;
		if (w->kind == W_SPAWN) {
			lose(z, true, "no answer to the spawn of session process %d within %.0f s", w->id, z->lim->spawn_ms / 1000);
			return;
		}
		if (w->kind == W_SETTLE) {
			lose(z, true, "no answer to the clean-up after a call (pid %d) within %.0f s", (int)w->pid,
			     z->lim->settle_ms / 1000);
			return;
		}
		/* An exit report is due only once the process is gone (SIGKILL
		 * can take a while on a process in uninterruptible sleep). */
		if (kproc_exited(w->pidfd)) {
			lose(z, true, "it did not report the exit of pid %d within %.0f s", (int)w->pid, z->lim->exit_ms / 1000);
			return;
		}
		w->deadline = now + z->lim->exit_ms;
	}
	if (z->phase == ZL_READY && z->warm_out > 0 && !z->warm_paused && now >= z->warm_deadline) {
		lose(z, true, "no warm-up answer within %.0f s", z->lim->warm_ms / 1000);
		return;
	}
	arm_timer(z);
}

/* ------------------------------------------------------------ sending */

static void flush(struct zlink *z)
{
	while (z->oq) {
		struct out *o = z->oq;
		ssize_t n;
		if (o->off == 0 && o->nfds > 0) {
			union {
				char buf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
				struct cmsghdr align;
			} ctl;
			memset(&ctl, 0, sizeof ctl);
			struct iovec iov = { .iov_base = o->buf, .iov_len = o->len };
			struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
					     .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)o->nfds) };
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)o->nfds);
			memcpy(CMSG_DATA(c), o->fds, sizeof(int) * (size_t)o->nfds);
			n = sendmsg(z->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		} else {
			n = send(z->fd, o->buf + o->off, o->len - o->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			loop_watch(z->loop, z->fd, POLLIN | POLLOUT, zl_event, z);
			return;
		}
		if (n < 0) {
			/* Its end is closed: what it sent before is still to be
			 * read (its last W_EXITED, a W_FATAL), then the end of
			 * the stream says it is gone. */
			free_queue(z);
			loop_watch(z->loop, z->fd, POLLIN, zl_event, z);
			return;
		}
		if (o->off == 0)
			for (int i = 0; i < o->nfds; i++)
				close(o->fds[i]);
		o->nfds = 0;
		o->off += (size_t)n;
		if (o->off < o->len)
			continue;
		z->oq = o->next;
		if (!z->oq)
			z->oq_tail = NULL;
		z->oq_bytes -= o->len;
		z->oq_msgs--;
		free(o->buf);
		free(o);
	}
	loop_watch(z->loop, z->fd, POLLIN, zl_event, z);
}

int zlink_send(struct zlink *z, uint32_t type, const char *json, const int *fds, int nfds)
{
	if (!z || z->phase == ZL_DOWN)
		return -EPIPE;
	if (z->phase == ZL_BROKEN || z->fd < 0)
		return 0; /* on its way out: the lost event follows */
	size_t len = json ? strlen(json) : 0;
	if (nfds < 0 || nfds > WIRE_MAX_FDS || len > WIRE_MAX_PAYLOAD)
		return -EMSGSIZE;
	/* Attack: a zygote that stops reading, then makes the server write
	 * (every W_EXITED it sends is answered by a sweep): the server's
	 * writes, blocking, would have hung it for good. */
	if (z->oq_bytes + len + 12 > z->lim->out_bytes || z->oq_msgs >= z->lim->out_msgs) {
		lose(z, true, "it does not read what the server sends (%zu messages wait)", z->oq_msgs);
		return 0;
	}
	struct out *o = xcalloc(1, sizeof *o);
	o->len = len + 12;
	o->buf = xmalloc(o->len);
	uint32_t hdr[3] = { WIRE_MAGIC, type, (uint32_t)len };
	memcpy(o->buf, hdr, sizeof hdr);
	if (len)
		memcpy(o->buf + 12, json, len);
	for (int i = 0; i < nfds; i++) {
		o->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
		if (o->fds[i] < 0) {
			int err = -errno;
			for (int k = 0; k < i; k++)
				close(o->fds[k]);
			free(o->buf);
			free(o);
			return err;
		}
		o->nfds = i + 1;
	}
	if (z->oq_tail)
		z->oq_tail->next = o;
	else
		z->oq = o;
	z->oq_tail = o;
	z->oq_bytes += o->len;
	z->oq_msgs++;
	if (z->oq == o)
		flush(z);
	return 0;
}

static struct wait *add_wait(struct zlink *z, int kind, double ms)
{
	if (z->n_waits == MAX_WAITS) {
		lose(z, true, "more than %d requests unanswered", MAX_WAITS);
		return NULL;
	}
	struct wait *w = &z->waits[z->n_waits++];
	*w = (struct wait){ .kind = kind, .pidfd = -1, .deadline = loop_now_ms() + ms };
	return w;
}

int zlink_spawn(struct zlink *z, int id, const char *json, const int *fds, int nfds)
{
	if (!z || z->phase != ZL_READY)
		return z && z->phase == ZL_BROKEN ? 0 : -EPIPE;
	unsigned long long since = kproc_now_ticks();
	int r = zlink_send(z, W_SPAWN, json, fds, nfds);
	struct wait *w = r == 0 && z->phase == ZL_READY ? add_wait(z, W_SPAWN, z->lim->spawn_ms) : NULL;
	if (w) {
		w->id = id;
		w->since = since;
		set_expect(z);
		arm_timer(z);
	}
	return r;
}

int zlink_settle(struct zlink *z, pid_t pid, const char *json)
{
	if (!z || z->phase != ZL_READY)
		return z && z->phase == ZL_BROKEN ? 0 : -EPIPE;
	int r = zlink_send(z, W_SETTLE, json, NULL, 0);
	struct wait *w = r == 0 && z->phase == ZL_READY ? add_wait(z, W_SETTLE, z->lim->settle_ms) : NULL;
	if (w) {
		w->pid = pid;
		set_expect(z);
		arm_timer(z);
	}
	return r;
}

void zlink_await_exit(struct zlink *z, pid_t pid, int pidfd)
{
	if (!z || z->phase != ZL_READY || pid <= 0 || pidfd < 0)
		return;
	for (size_t i = 0; i < z->n_waits; i++)
		if (z->waits[i].kind == W_EXITED && z->waits[i].pid == pid)
			return;
	int dup = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
	if (dup < 0)
		return;
	struct wait *w = add_wait(z, W_EXITED, z->lim->exit_ms);
	if (!w) {
		close(dup);
		return;
	}
	w->pid = pid;
	w->pidfd = dup;
	arm_timer(z);
}

void zlink_warm_sent(struct zlink *z, int n)
{
	if (!z || z->phase != ZL_READY || n <= 0)
		return;
	if (z->warm_out == 0 || z->warm_paused)
		z->warm_deadline = loop_now_ms() + z->lim->warm_ms;
	z->warm_out += n;
	set_expect(z);
	arm_timer(z);
}

void zlink_warm_paused(struct zlink *z, bool paused)
{
	if (!z || paused == z->warm_paused)
		return;
	z->warm_paused = paused;
	if (!paused)
		z->warm_deadline = loop_now_ms() + z->lim->warm_ms;
	if (z->phase == ZL_READY)
		arm_timer(z);
}

/* ------------------------------------------------------------ reading */

static const char *type_name(uint32_t t)
{
	switch (t) {
	case W_JAIL: return "W_JAIL";
	case W_READY: return "W_READY";
	case W_FATAL: return "W_FATAL";
	case W_SPAWNED: return "W_SPAWNED";
	case W_EXITED: return "W_EXITED";
	case W_SETTLED: return "W_SETTLED";
	case W_WARMED: return "W_WARMED";
	default: return "a message type the zygote never sends";
	}
}

/* The jail is built: the zygote's own process, as the kernel says, from
 * now on (the sessions' parent, the root the watchdog reads through).  It
 * sends its own pidfd with the report, and the server pins it only once
 * the kernel says it names the process found below the one the server
 * started: zpid itself, or zpid's one child in the new pid namespace.
 * Attack: a pidfd of another process (a host process, a child it forked)
 * would make the server signal and watch that one as the zygote. */
static void on_jail(struct zlink *z, struct wire_msg *m)
{
	struct zmsg_jail jm;
	struct err e = { 0 };
	if (zmsg_jail_decode(m->data, m->len, &jm, &e) < 0) {
		lose(z, true, "%s", e.msg);
		return;
	}
	pid_t zh = kproc_zygote(z->zpid);
	int pfd = m->nfds == 1 ? m->fds[0] : -1;
	struct kproc k;
	int kr = pfd >= 0 ? kproc_read(pfd, &k) : -EBADF;
	if (zh <= 0 || kr < 0 || k.host != zh || (zh != z->zpid && k.ppid != z->zpid)) {
		zmsg_jail_free(&jm);
		if (zh <= 0)
			lose(z, true, "its process cannot be found below the one the server started");
		else if (m->nfds != 1)
			lose(z, true, "its jail report came without the pidfd of its process");
		else if (kr == 0)
			lose(z, true, "its jail report came with the pidfd of process %d, not of its own (%d)", (int)k.host, (int)zh);
		else
			lose(z, true, "its jail report came with a pidfd that does not name its process: %s",
			     kr == -EBADF ? "the descriptor is no pidfd" : kr == -ESRCH ? "its process has exited"
										: "it names a thread, not a process");
		return;
	}
	m->fds[0] = -1;
	z->zhpid = zh;
	z->zpidfd = pfd;
	z->phase = jm.enforceable ? ZL_PYTHON : ZL_IDLE;
	z->ev->jail(z->arg, jm.enforceable, jm.nsfree, jm.why, jm.report);
	zmsg_jail_free(&jm);
}

static void on_ready(struct zlink *z, const struct wire_msg *m)
{
	struct zmsg_ready r;
	struct err e = { 0 };
	if (zmsg_ready_decode(m->data, m->len, &r, &e) < 0) {
		lose(z, true, "%s", e.msg);
		return;
	}
	z->phase = ZL_READY;
	z->ev->ready(z->arg, r.start_ms);
}

static void on_fatal(struct zlink *z, const struct wire_msg *m)
{
	struct zmsg_fatal f;
	struct err e = { 0 };
	if (zmsg_fatal_decode(m->data, m->len, &f, &e) < 0) {
		lose(z, true, "%s", e.msg);
		return;
	}
	z->phase = ZL_IDLE;
	z->ev->fatal(z->arg, f.message);
	zmsg_fatal_free(&f);
}

static size_t find_wait(struct zlink *z, int kind, int id, pid_t pid)
{
	for (size_t i = 0; i < z->n_waits; i++)
		if (z->waits[i].kind == kind && (kind == W_SPAWN ? z->waits[i].id == id : z->waits[i].pid == pid))
			return i;
	return SIZE_MAX;
}

/* The answer to a spawn: acted on only for a spawn the server asked for,
 * and its pidfd only once the kernel confirms that it names a child of
 * the zygote born after the request.
 * Attack: a W_SPAWNED for an id the server never asked for, carrying a
 * pidfd of a host process (which pidfd_open reached without namespaces),
 * made a root server SIGKILL that process as an unwanted orphan. */
static void on_spawned(struct zlink *z, struct wire_msg *m)
{
	struct zmsg_spawned rep;
	struct err e = { 0 };
	if (zmsg_spawned_decode(m->data, m->len, &rep, &e) < 0) {
		lose(z, true, "%s", e.msg);
		return;
	}
	int id = rep.id;
	pid_t pid = rep.pid;
	size_t at = find_wait(z, W_SPAWN, id, 0);
	if (at == SIZE_MAX) {
		lose(z, true, "a spawn report for session process %d, which the server never asked for", id);
		return;
	}
	unsigned long long since = z->waits[at].since;
	drop_wait(z, at);
	if (pid <= 0 || m->nfds == 0) {
		if (pid > 0 || m->nfds > 0) {
			lose(z, true, "a spawn report with a pid and no pidfd");
			return;
		}
		z->ev->spawned(z->arg, id, -1, NULL, false); /* it could not fork */
		return;
	}
	struct kproc k;
	char why[160];
	int r = kproc_confirm(m->fds[0], z->zhpid, pid, since, &k, why, sizeof why);
	if (r == -ESRCH) {
		/* Exited already (it died at once): nothing to signal. */
		z->ev->spawned(z->arg, id, -1, NULL, true);
		return;
	}
	if (r < 0) {
		lose(z, true, "a spawn report whose pidfd is not the new session's: %s", why);
		return;
	}
	int pidfd = m->fds[0];
	m->fds[0] = -1;
	z->ev->spawned(z->arg, id, pidfd, &k, false);
}

static void on_exited(struct zlink *z, const struct wire_msg *m)
{
	struct zmsg_exited x;
	struct err e = { 0 };
	if (zmsg_exited_decode(m->data, m->len, &x, &e) < 0) {
		lose(z, true, "%s", e.msg);
		return;
	}
	/* A kill's exit report is in, once the kernel agrees the process has
	 * exited (a report for a live one waits on). */
	size_t at = find_wait(z, W_EXITED, 0, x.pid);
	if (at != SIZE_MAX && kproc_exited(z->waits[at].pidfd))
		drop_wait(z, at);
	z->ev->exited(z->arg, x.pid, x.status, x.status_known, x.epoch);
}

static void on_settled(struct zlink *z, const struct wire_msg *m)
{
	struct zmsg_settled rep;
	struct err e = { 0 };
	if (zmsg_settled_decode(m->data, m->len, &rep, &e) < 0) {
		lose(z, true, "%s", e.msg);
		return;
	}
	size_t at = find_wait(z, W_SETTLE, 0, rep.pid);
	if (at == SIZE_MAX) {
		lose(z, true, "a clean-up report the server did not ask for");
		return;
	}
	drop_wait(z, at);
	z->ev->settled(z->arg, rep.pid);
}

static void on_warmed(struct zlink *z, const struct wire_msg *m)
{
	struct zmsg_warmed w;
	struct err e = { 0 };
	if (zmsg_warmed_decode(m->data, m->len, &w, &e) < 0) {
		lose(z, true, "%s", e.msg);
		return;
	}
	bool due = z->ev->warmed(z->arg, &w);
	zmsg_warmed_free(&w);
	if (!due) {
		lose(z, true, "a warm-up answer for a name it was not sent");
		return;
	}
	z->warm_out--;
	z->warm_deadline = loop_now_ms() + z->lim->warm_ms;
}

static void dispatch(struct zlink *z, struct wire_msg *m)
{
	/* Each message's codec (proto/zmsg.h) is its check. */
	switch (m->type) {
	case W_JAIL:
		on_jail(z, m);
		return;
	case W_READY:
		on_ready(z, m);
		return;
	case W_FATAL:
		on_fatal(z, m);
		return;
	case W_SPAWNED:
		on_spawned(z, m);
		return;
	case W_EXITED:
		on_exited(z, m);
		return;
	case W_SETTLED:
		on_settled(z, m);
		return;
	case W_WARMED:
		on_warmed(z, m);
		return;
	}
}

static void read_some(struct zlink *z)
{
	for (int budget = 0; budget < READ_BUDGET && z->fd >= 0 && z->phase != ZL_BROKEN; budget++) {
		set_expect(z);
		struct wire_msg m;
		int r = wire_reader_step(&z->rd, z->fd, &m);
		if (r == 0)
			break;
		if (r == -EPIPE) {
			lose(z, false, "end of stream");
			return;
		}
		if (r < 0) {
			uint32_t type, len;
			memcpy(&type, z->rd.hdr + 4, 4);
			memcpy(&len, z->rd.hdr + 8, 4);
			if (r == -EMSGSIZE)
				lose(z, true, "a %s of %u bytes, over its size", type_name(type), len);
			else if (r == -EPROTO)
				lose(z, true, "%s (type %u) where the server expected none", type_name(type), type);
			else
				lose(z, false, "%s", strerror(-r));
			return;
		}
		dispatch(z, &m);
		wire_msg_free(&m);
	}
	if (z->fd >= 0 && z->phase != ZL_BROKEN)
		arm_timer(z);
}

static void zl_event(void *arg, int fd, short revents)
{
	struct zlink *z = arg;
	(void)fd;
	if ((revents & POLLOUT) && z->oq)
		flush(z);
	if (z->fd >= 0 && (revents & (POLLIN | POLLHUP | POLLERR)))
		read_some(z);
}

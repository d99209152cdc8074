/* The output queue (out.h).  One mutex guards the queue; the writer thread
 * takes a chunk of the first line, writes it with the lock released, and
 * records the time of each byte written (the client's progress), which the
 * loop's stall check and out_drain read.
 *
 * Why a thread rather than a non-blocking stdout: O_NONBLOCK is a flag of
 * the open file description, which stdout shares with whoever gave it (a
 * terminal shares it with the shell and with our own stdin); a Node client's
 * stdout is a socket, a Python client's a pipe: a thread writes the same
 * blocking way to every kind of stream and changes no flag anyone else
 * sees.  A line with nothing queued before it is first offered to the
 * stream by the loop itself, in a write that never waits (out_line). */
#include "out.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"

/* What one write hands the kernel: small enough that a client reading
 * slowly is seen to read (each chunk written is progress). */
#define OUT_CHUNK ((size_t)64 << 10)
/* How long out_stop waits for a write in flight to end. */
#define OUT_STOP_MS 200.0

struct msg {
	struct msg *next;
	char *data;            /* the line and its newline */
	size_t len, off;       /* off: bytes already written */
};

enum out_mode { OUT_OFF, OUT_ON };

static struct {
	pthread_mutex_t mu;
	pthread_cond_t more;   /* to the writer: a line, or quit */
	pthread_cond_t moved;  /* to out_drain: bytes written, the queue's end */
	struct msg *head, *tail;
	size_t waiting;        /* bytes queued, not yet written */
	bool busy;             /* the writer writes from head, unlocked */
	bool drop_head;        /* free head once that write returns */
	bool quit;
	bool cut;              /* the client was cut off: lines are dropped */
	int failed;            /* errno of a failed write: the client is gone */
	double progress;       /* the last byte written, or when the queue began */
	/* The loop thread's own. */
	enum out_mode mode;
	bool gone_told;
	bool no_nowait;        /* the stream refused RWF_NOWAIT: the writer writes all */
	struct out_config cfg;
	uint64_t timer;        /* the stall check, armed while lines wait */
	char why[256];
	pthread_t th;
} O = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void free_msg(struct msg *m)
{
	free(m->data);
	free(m);
}

/* Drops every queued line; the one being written is freed when its write
 * returns (the writer holds it).  With the lock held. */
static void drop_locked(void)
{
	struct msg *m = O.head;
	if (m && O.busy) {
		O.drop_head = true;
		m = m->next;
		O.head->next = NULL;
		O.tail = O.head;
	} else {
		O.head = O.tail = NULL;
	}
	while (m) {
		struct msg *next = m->next;
		free_msg(m);
		m = next;
	}
	O.waiting = 0;
}

/* A blocking write of up to n bytes.  EAGAIN only when someone made the
 * shared description non-blocking (a terminal shares it with stdin): then
 * this thread, and only it, waits for room. */
static ssize_t write_some(int fd, const char *p, size_t n)
{
	for (;;) {
		ssize_t w = write(fd, p, n);
		if (w > 0)
			return w;
		if (w == 0) {
			errno = EIO; /* no room will ever come: not a loop */
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			struct pollfd pf = { .fd = fd, .events = POLLOUT };
			if (poll(&pf, 1, -1) < 0 && errno != EINTR)
				return -1;
			continue;
		}
		return -1;
	}
}

/* Waits for the writer's next move, until the CLOCK_MONOTONIC time `until`
 * (ms) at the latest.  With the lock held. */
static void wait_moved(double until)
{
	struct timespec ts = { .tv_sec = (time_t)(until / 1000.0) };
	ts.tv_nsec = (long)((until - (double)ts.tv_sec * 1000.0) * 1e6);
	if (ts.tv_nsec < 0)
		ts.tv_nsec = 0;
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_nsec = 999999999L;
	pthread_cond_timedwait(&O.moved, &O.mu, &ts);
}

static void *writer(void *unused)
{
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_mutex_lock(&O.mu);
	for (;;) {
		while (!O.head && !O.quit)
			pthread_cond_wait(&O.more, &O.mu);
		if (!O.head)
			break;
		struct msg *m = O.head;
		size_t n = m->len - m->off < OUT_CHUNK ? m->len - m->off : OUT_CHUNK;
		const char *p = m->data + m->off;
		O.busy = true;
		pthread_mutex_unlock(&O.mu);
		/* Cancellable only here, where no lock is held: out_stop
		 * cancels a write the client never lets end. */
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		ssize_t w = write_some(O.cfg.fd, p, n);
		int err = errno;
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		pthread_mutex_lock(&O.mu);
		O.busy = false;
		if (w < 0) {
			O.failed = err ? err : EIO;
			O.drop_head = true;
		} else {
			m->off += (size_t)w;
			O.progress = loop_now_ms();
			if (!O.drop_head)
				O.waiting -= (size_t)w;
		}
		if (O.drop_head || m->off == m->len) {
			O.head = m->next;
			if (!O.head)
				O.tail = NULL;
			free_msg(m);
			O.drop_head = false;
		}
		if (O.failed)
			drop_locked();
		pthread_cond_broadcast(&O.moved);
	}
	pthread_mutex_unlock(&O.mu);
	return NULL;
}

static void write_now(const char *p, size_t left)
{
	while (left) {
		ssize_t n = write_some(O.cfg.fd, p, left);
		if (n < 0)
			return; /* the client is gone; stdin EOF will follow */
		p += n;
		left -= (size_t)n;
	}
}

bool out_start(const struct out_config *c)
{
	if (O.mode != OUT_OFF)
		return false;
	O.cfg = *c;
	O.head = O.tail = NULL;
	O.waiting = 0;
	O.busy = O.drop_head = O.quit = O.cut = O.gone_told = O.no_nowait = false;
	O.failed = 0;
	O.timer = 0;
	if (!O.cfg.cap)
		O.cfg.cap = OUT_CAP_DEFAULT;
	if (O.cfg.stall_ms <= 0)
		O.cfg.stall_ms = OUT_STALL_MS_DEFAULT;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* loop_now_ms's clock */
	pthread_cond_init(&O.more, NULL);
	pthread_cond_init(&O.moved, &ca);
	pthread_condattr_destroy(&ca);
	/* No signal lands on the writer: the loop reads them from its
	 * signalfd, and one taken here would be lost to it. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(&O.th, NULL, writer, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		log_warn("cannot start the thread that writes replies (%s): a client that stops reading will stop the server",
			 strerror(r));
		return false;
	}
	O.mode = OUT_ON;
	return true;
}

static void fire_cut(void *unused)
{
	if (O.cfg.cut)
		O.cfg.cut(O.cfg.arg, O.why);
}

/* Armed while lines wait: when nothing was written for stall_ms, the
 * client is cut off; else it looks again when that could first be so. */
static void stall_check(void *unused)
{
	O.timer = 0;
	pthread_mutex_lock(&O.mu);
	if (O.cut || O.failed || !O.waiting) {
		pthread_mutex_unlock(&O.mu);
		return;
	}
	double idle = loop_now_ms() - O.progress;
	if (idle < O.cfg.stall_ms) {
		pthread_mutex_unlock(&O.mu);
		O.timer = loop_timer(O.cfg.loop, O.cfg.stall_ms - idle, stall_check, NULL);
		return;
	}
	size_t waiting = O.waiting;
	drop_locked();
	O.cut = true;
	pthread_mutex_unlock(&O.mu);
	snprintf(O.why, sizeof O.why, "the client has read nothing of its replies for %g s (%zu bytes waited)",
		 O.cfg.stall_ms / 1000.0, waiting);
	fire_cut(NULL);
}

void out_line(const char *s, size_t len)
{
	if (O.mode == OUT_OFF) {
		O.cfg.fd = STDOUT_FILENO;
		/* One buffer with the newline: a line is never split around
		 * another process's write. */
		char *buf = xmalloc(len + 1);
		memcpy(buf, s, len);
		buf[len] = '\n';
		write_now(buf, len + 1);
		free(buf);
		return;
	}
	struct msg *m = xmalloc(sizeof *m);
	*m = (struct msg){ .data = xmalloc(len + 1), .len = len + 1 };
	memcpy(m->data, s, len);
	m->data[len] = '\n';
	pthread_mutex_lock(&O.mu);
	if (O.mode != OUT_ON || O.cut || O.failed) {
		int failed = O.failed;
		pthread_mutex_unlock(&O.mu);
		free_msg(m);
		if (failed && !O.gone_told) {
			O.gone_told = true;
			log_info("the client's stdout is closed (%s): replies are dropped", strerror(failed));
		}
		return;
	}
	/* A lone line always waits, whatever its size; more than cap bytes
	 * left unread is a client that does not read. */
	if (O.waiting && O.waiting + m->len > O.cfg.cap) {
		size_t total = O.waiting + m->len;
		drop_locked();
		O.cut = true;
		pthread_mutex_unlock(&O.mu);
		free_msg(m);
		snprintf(O.why, sizeof O.why, "the client has left %zu MiB of replies unread (at most %zu MiB may wait)",
			 total >> 20, O.cfg.cap >> 20);
		/* From the loop: the caller is in the middle of a reply. */
		loop_timer(O.cfg.loop, 0, fire_cut, NULL);
		return;
	}
	/* Nothing waits before it: the stream is offered the line at once,
	 * from this thread, without waiting for room (RWF_NOWAIT: a flag of
	 * this one write, not of the shared description).  A warm call's
	 * reply then reaches the client without waking the writer (measured:
	 * 10 to 30 us back to back, more after a pause).  What the stream
	 * does not take at once (a client that reads slowly, or not at all)
	 * goes to the writer from where this write stopped, so the loop
	 * never waits for the client either way. */
	if (!O.head && !O.busy && !O.no_nowait) {
		struct iovec v = { .iov_base = m->data, .iov_len = m->len };
		ssize_t w = pwritev2(O.cfg.fd, &v, 1, -1, RWF_NOWAIT);
		if (w == (ssize_t)m->len) {
			O.progress = loop_now_ms();
			pthread_mutex_unlock(&O.mu);
			free_msg(m);
			return;
		}
		if (w > 0)
			m->off = (size_t)w;
		else if (w < 0 && (errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS))
			O.no_nowait = true; /* a terminal, an older kernel's pipe: the writer's way only */
	}
	if (!O.waiting)
		O.progress = loop_now_ms();
	O.waiting += m->len - m->off;
	if (O.tail)
		O.tail->next = m;
	else
		O.head = m;
	O.tail = m;
	pthread_cond_signal(&O.more);
	pthread_mutex_unlock(&O.mu);
	if (!O.timer)
		O.timer = loop_timer(O.cfg.loop, O.cfg.stall_ms, stall_check, NULL);
}

bool out_drain(double stall_ms)
{
	if (O.mode != OUT_ON)
		return true;
	size_t dropped = 0;
	bool ok;
	pthread_mutex_lock(&O.mu);
	for (;;) {
		if (O.cut || O.failed) {
			ok = false;
			break;
		}
		if (!O.head) {
			ok = true;
			break;
		}
		double until = O.progress + stall_ms;
		if (loop_now_ms() >= until) {
			dropped = O.waiting;
			drop_locked();
			O.cut = true;
			ok = false;
			snprintf(O.why, sizeof O.why, "the client has read nothing of its replies for %g s (%zu bytes waited)",
				 stall_ms / 1000.0, dropped);
			/* Told when the loop runs again (before an exec that cannot
			 * happen); at exit it never does. */
			loop_timer(O.cfg.loop, 0, fire_cut, NULL);
			break;
		}
		wait_moved(until);
	}
	pthread_mutex_unlock(&O.mu);
	if (dropped)
		log_warn("%s: they are dropped", O.why);
	return ok;
}

void out_stop(void)
{
	if (O.mode != OUT_ON)
		return;
	if (O.timer)
		loop_timer_cancel(O.cfg.loop, O.timer);
	O.timer = 0;
	pthread_mutex_lock(&O.mu);
	O.quit = true;
	drop_locked();
	pthread_cond_signal(&O.more);
	/* A write in flight may still end (the client reads, or is gone). */
	double until = loop_now_ms() + OUT_STOP_MS;
	while (O.busy && loop_now_ms() < until) {
		wait_moved(until);
	}
	bool blocked = O.busy;
	pthread_mutex_unlock(&O.mu);
	/* A writer blocked on a client that reads nothing is cancelled in its
	 * write (the one place it can be): the line it was writing stays
	 * unfinished, and no thread is left behind. */
	if (blocked)
		pthread_cancel(O.th);
	pthread_join(O.th, NULL);
	if (O.head) /* the line that was in flight: all the queue still held */
		free_msg(O.head);
	O.head = O.tail = NULL;
	O.busy = O.drop_head = false;
	pthread_cond_destroy(&O.more);
	pthread_cond_destroy(&O.moved);
	O.mode = OUT_OFF;
}

size_t out_waiting(void)
{
	pthread_mutex_lock(&O.mu);
	size_t n = O.waiting;
	pthread_mutex_unlock(&O.mu);
	return n;
}

#include "loop.h"

#include "../common/util.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

struct watch {
	int fd;
	short events;
	loop_fd_cb cb;
	void *arg;
};

struct timer {
	uint64_t id;
	double at;
	loop_timer_cb cb;
	void *arg;
};

struct loop {
	struct watch *w;
	size_t nw, capw;
	struct timer *t;
	size_t nt, capt;
	uint64_t next_id;
	bool stop;
	struct pollfd *pfd;
	size_t cappfd;
	void (*after)(void *arg);
	void *after_arg;
};

void loop_after_each(struct loop *l, void (*fn)(void *arg), void *arg)
{
	l->after = fn;
	l->after_arg = arg;
}

double loop_now_ms(void)
{
	return mono_ms();
}

struct loop *loop_new(void)
{
	/* Timers of tens of microseconds (the supervisor's looks at a session
	 * it is stopping) woke 150 us late with the default 50 us slack. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	return xcalloc(1, sizeof(struct loop));
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	free(l->w);
	free(l->t);
	free(l->pfd);
	free(l);
}

/* Out of memory ends the process (common/util.h): a watch or a timer
 * that silently failed to register would be a call that never answers. */
static void grow(void **v, size_t *cap, size_t need, size_t sz)
{
	if (need <= *cap)
		return;
	size_t n = *cap ? *cap * 2 : 16;
	while (n < need)
		n *= 2;
	*v = xreallocarray(*v, n, sz);
	*cap = n;
}

void loop_watch(struct loop *l, int fd, short events, loop_fd_cb cb, void *arg)
{
	for (size_t i = 0; i < l->nw; i++)
		if (l->w[i].fd == fd) {
			l->w[i] = (struct watch){ fd, events, cb, arg };
			return;
		}
	grow((void **)&l->w, &l->capw, l->nw + 1, sizeof *l->w);
	l->w[l->nw++] = (struct watch){ fd, events, cb, arg };
}

void loop_unwatch(struct loop *l, int fd)
{
	for (size_t i = 0; i < l->nw; i++)
		if (l->w[i].fd == fd) {
			l->w[i] = l->w[--l->nw];
			return;
		}
}

uint64_t loop_timer(struct loop *l, double ms, loop_timer_cb cb, void *arg)
{
	grow((void **)&l->t, &l->capt, l->nt + 1, sizeof *l->t);
	uint64_t id = ++l->next_id;
	l->t[l->nt++] = (struct timer){ id, loop_now_ms() + ms, cb, arg };
	return id;
}

void loop_timer_cancel(struct loop *l, uint64_t id)
{
	for (size_t i = 0; i < l->nt; i++)
		if (l->t[i].id == id) {
			l->t[i] = l->t[--l->nt];
			return;
		}
}

void loop_stop(struct loop *l)
{
	l->stop = true;
}

static void run_timers(struct loop *l)
{
	double now = loop_now_ms();
	for (;;) {
		size_t best = l->nt;
		for (size_t i = 0; i < l->nt; i++)
			if (l->t[i].at <= now && (best == l->nt || l->t[i].at < l->t[best].at))
				best = i;
		if (best == l->nt)
			return;
		struct timer t = l->t[best];
		l->t[best] = l->t[--l->nt];
		t.cb(t.arg);
		if (l->after)
			l->after(l->after_arg);
		if (l->stop)
			return;
	}
}

void loop_run(struct loop *l)
{
	while (!l->stop) {
		/* To the microsecond (ppoll): the supervisor looks again at a
		 * session 0.1 ms later, which poll's milliseconds would make 1. */
		double timeout = -1;
		double now = loop_now_ms();
		for (size_t i = 0; i < l->nt; i++) {
			double d = l->t[i].at - now;
			if (d < 0)
				d = 0;
			if (timeout < 0 || d < timeout)
				timeout = d;
		}
		struct timespec ts = { 0 };
		if (timeout >= 0) {
			/* Rounded up (a timer never fires early), and a timer
			 * due now is a poll that does not sleep. */
			long long us = (long long)(timeout * 1000.0 + 0.999);
			ts.tv_sec = (time_t)(us / 1000000);
			ts.tv_nsec = (long)(us % 1000000) * 1000;
		}
		grow((void **)&l->pfd, &l->cappfd, l->nw + 1, sizeof *l->pfd);
		size_t n = l->nw;
		for (size_t i = 0; i < n; i++)
			l->pfd[i] = (struct pollfd){ .fd = l->w[i].fd, .events = l->w[i].events };
		int r = ppoll(l->pfd, n, timeout >= 0 ? &ts : NULL, NULL);
		if (r < 0 && errno != EINTR)
			return;
		for (size_t i = 0; r > 0 && i < n && !l->stop; i++) {
			if (!l->pfd[i].revents)
				continue;
			/* The callback may have removed or replaced watches: look the
			 * fd up again rather than trusting index i. */
			for (size_t k = 0; k < l->nw; k++)
				if (l->w[k].fd == l->pfd[i].fd) {
					struct watch w = l->w[k];
					w.cb(w.arg, w.fd, l->pfd[i].revents);
					if (l->after)
						l->after(l->after_arg);
					break;
				}
		}
		if (!l->stop)
			run_timers(l);
	}
	l->stop = false; /* the next loop_run runs again (the unit tests) */
}

/* See wswatch.h. */
#include "wswatch.h"

#include <stdlib.h>

#include "../common/util.h"
#include "artifacts.h"
#include "../rpc/work.h"

struct wswatch {
	struct loop *loop;
	struct work *work;
	const struct workspace *ws;
	char *scratch;           /* or NULL */
	unsigned long long limit, base, scratch_bytes;
	/* Bytes the server itself adds meanwhile (a snapshot it writes), now
	 * and when the baseline was taken (wswatch_allow). */
	unsigned long long extra, extra_at_base;
	bool have_base;
	void (*over)(void *arg, unsigned long long bytes);
	void *arg;
	uint64_t timer;
	struct ws_job *job;      /* the walk in progress, or NULL */
};

struct ws_job {
	struct job j;
	const struct workspace *ws;
	char *scratch;           /* a copy: the job may outlive the watch */
	struct wswatch *w;       /* not touched off the loop, nor once abandoned */
	unsigned long long bytes, scratch_bytes;
	bool complete;
	double ms;
};

static void walk_run(struct job *j)
{
	struct ws_job *wj = (struct ws_job *)j;
	double t0 = loop_now_ms();
	if (art_disk_usage(wj->ws, 0, &wj->bytes, &wj->complete, NULL) < 0)
		wj->bytes = 0;
	bool complete;
	if (wj->scratch && art_dir_usage(wj->scratch, 0, &wj->scratch_bytes, &complete) < 0)
		wj->scratch_bytes = 0;
	wj->ms = loop_now_ms() - t0;
}

static void walk_done(struct job *j, bool abandoned);

static void walk_start(void *arg)
{
	struct wswatch *w = arg;
	w->timer = 0;
	struct ws_job *wj = xcalloc(1, sizeof *wj);
	wj->j.run = walk_run;
	wj->j.done = walk_done;
	wj->ws = w->ws;
	wj->scratch = w->scratch ? xstrdup(w->scratch) : NULL;
	wj->w = w;
	w->job = wj;
	work_submit(w->work, &wj->j);
}

static void walk_done(struct job *j, bool abandoned)
{
	struct ws_job *wj = (struct ws_job *)j;
	struct wswatch *w = wj->w;
	unsigned long long bytes = wj->bytes + wj->scratch_bytes, scratch = wj->scratch_bytes;
	double ms = wj->ms;
	free(wj->scratch);
	free(wj);
	if (abandoned)
		return;
	w->job = NULL;
	w->scratch_bytes = scratch;
	if (!w->have_base) {
		w->base = bytes;
		w->extra_at_base = w->extra;
		w->have_base = true;
	} else if (bytes > w->limit + w->extra && bytes > w->base + (w->extra - w->extra_at_base)) {
		w->over(w->arg, bytes); /* may call wswatch_stop(w) */
		return;
	}
	double next = 4 * ms > WSWATCH_MIN_MS ? 4 * ms : WSWATCH_MIN_MS;
	w->timer = loop_timer(w->loop, next, walk_start, w);
}

struct wswatch *wswatch_start(struct loop *loop, struct work *work, const struct workspace *ws, const char *scratch,
			      unsigned long long limit_bytes, void (*over)(void *arg, unsigned long long bytes), void *arg)
{
	struct wswatch *w = xcalloc(1, sizeof *w);
	w->loop = loop;
	w->work = work;
	w->ws = ws;
	w->scratch = scratch && *scratch ? xstrdup(scratch) : NULL;
	w->limit = limit_bytes;
	w->over = over;
	w->arg = arg;
	/* The first walk (the baseline) after WSWATCH_MIN_MS, not at once: a
	 * short call walks nothing (the end of every call is judged against
	 * the snapshot taken before it), and a long one loses at most what it
	 * wrote in that time to the baseline, which only delays its stop. */
	w->timer = loop_timer(loop, WSWATCH_MIN_MS, walk_start, w);
	return w;
}

void wswatch_allow(struct wswatch *w, unsigned long long extra)
{
	if (w && extra > w->extra)
		w->extra = extra;
}

void wswatch_stop(struct wswatch *w)
{
	if (!w)
		return;
	if (w->timer)
		loop_timer_cancel(w->loop, w->timer);
	if (w->job)
		work_abandon(&w->job->j);
	free(w->scratch);
	free(w);
}

unsigned long long wswatch_scratch_bytes(const struct wswatch *w)
{
	return w ? w->scratch_bytes : 0;
}

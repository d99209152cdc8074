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
	char **outside;          /* art_outside_dirs: the scratch one first */
	bool has_scratch;
	unsigned long long limit, base, scratch_bytes;
	/* Bytes the server itself adds meanwhile (a snapshot it writes), now
	 * and when the baseline was taken (wswatch_allow). */
	unsigned long long extra, extra_at_base;
	bool have_base;
	void (*over)(void *arg, unsigned long long bytes, const char *unseen);
	void *arg;
	uint64_t timer;
	struct ws_job *job;      /* the walk in progress, or NULL */
};

struct ws_job {
	struct job j;
	const struct workspace *ws;
	char **outside;          /* a copy: the job may outlive the watch */
	bool has_scratch;
	struct wswatch *w;       /* not touched off the loop, nor once abandoned */
	struct art_usage u;
	unsigned long long scratch_bytes;
	double ms;
};

static void walk_run(struct job *j)
{
	struct ws_job *wj = (struct ws_job *)j;
	double t0 = loop_now_ms();
	art_limit_usage(wj->ws, true, (const char *const *)wj->outside, wj->has_scratch, &wj->u, &wj->scratch_bytes);
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
	wj->outside = art_dirs_dup((const char *const *)w->outside);
	wj->has_scratch = w->has_scratch;
	wj->w = w;
	w->job = wj;
	work_submit(w->work, &wj->j);
}

static void walk_done(struct job *j, bool abandoned)
{
	struct ws_job *wj = (struct ws_job *)j;
	struct wswatch *w = wj->w;
	unsigned long long bytes = wj->u.blocks, scratch = wj->scratch_bytes;
	double ms = wj->ms;
	char why[600];
	if (wj->u.unseen)
		art_unseen_text(wj->u.unseen, "", wj->u.where, why, sizeof why);
	bool unseen = wj->u.unseen != 0;
	art_dirs_free(wj->outside);
	free(wj);
	if (abandoned)
		return;
	w->job = NULL;
	w->scratch_bytes = scratch;
	if (unseen) {
		/* Not seen is not zero: the limit cannot be shown to hold. */
		w->over(w->arg, bytes, why); /* may call wswatch_stop(w) */
		return;
	}
	if (!w->have_base) {
		w->base = bytes;
		w->extra_at_base = w->extra;
		w->have_base = true;
	} else if (bytes > w->limit + w->extra && bytes > w->base + (w->extra - w->extra_at_base)) {
		w->over(w->arg, bytes, NULL); /* may call wswatch_stop(w) */
		return;
	}
	double next = 4 * ms > WSWATCH_MIN_MS ? 4 * ms : WSWATCH_MIN_MS;
	w->timer = loop_timer(w->loop, next, walk_start, w);
}

struct wswatch *wswatch_start(struct loop *loop, struct work *work, const struct workspace *ws, const char *scratch,
			      const char *const *fs_write, size_t n, unsigned long long limit_bytes,
			      void (*over)(void *arg, unsigned long long bytes, const char *unseen), void *arg)
{
	struct wswatch *w = xcalloc(1, sizeof *w);
	w->loop = loop;
	w->work = work;
	w->ws = ws;
	w->has_scratch = scratch && *scratch;
	w->outside = art_outside_dirs(ws, scratch, fs_write, n);
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
	art_dirs_free(w->outside);
	free(w);
}

unsigned long long wswatch_scratch_bytes(const struct wswatch *w)
{
	return w ? w->scratch_bytes : 0;
}

/* The timing loop the C floors share: n timed runs of one step after some
 * untimed ones (warm-up), then "median_us p99_us n" on stdout. */
#ifndef PSM_BENCH_TIMING_H
#define PSM_BENCH_TIMING_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* n timed runs of step after `warm` untimed ones, each after think_ms of
 * sleep when think_ms > 0 (an agent's think time).  step returns 0, or -1
 * to stop the benchmark (then this returns -1). */
static inline int time_steps_paced(int n, int warm, double think_ms, int (*step)(void *), void *ctx)
{
	double *t = malloc(sizeof *t * (size_t)n);
	if (!t)
		return -1;
	struct timespec ts = { .tv_sec = (time_t)(think_ms / 1000),
			       .tv_nsec = (long)((think_ms - 1000.0 * (double)(time_t)(think_ms / 1000)) * 1e6) };
	for (int i = 0; i < n + warm; i++) {
		if (think_ms > 0)
			nanosleep(&ts, NULL);
		double a = now_us();
		if (step(ctx) < 0) {
			free(t);
			return -1;
		}
		if (i >= warm)
			t[i - warm] = now_us() - a;
	}
	qsort(t, (size_t)n, sizeof *t, cmp_double);
	printf("%.3f %.3f %d\n", t[n / 2], t[(int)(n * 0.99)], n);
	free(t);
	return 0;
}

/* Back to back, after 100 untimed runs. */
static inline int time_steps(int n, int (*step)(void *), void *ctx)
{
	return time_steps_paced(n, 100, 0, step, ctx);
}

#endif

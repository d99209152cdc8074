/* The timing loop the C floors share: n timed runs of one step after 100
 * untimed ones (warm-up), then "median_us p99_us n" on stdout. */
#ifndef PSM_BENCH_TIMING_H
#define PSM_BENCH_TIMING_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* step returns 0, or -1 to stop the benchmark (then this returns -1). */
static int time_steps(int n, int (*step)(void *), void *ctx)
{
	double *t = malloc(sizeof *t * (size_t)n);
	if (!t)
		return -1;
	for (int i = 0; i < n + 100; i++) {
		double a = now_us();
		if (step(ctx) < 0) {
			free(t);
			return -1;
		}
		if (i >= 100)
			t[i - 100] = now_us() - a;
	}
	qsort(t, (size_t)n, sizeof *t, cmp_double);
	printf("%.3f %.3f %d\n", t[n / 2], t[(int)(n * 0.99)], n);
	free(t);
	return 0;
}

#endif

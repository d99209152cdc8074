/* What fresh memory costs after the process has given memory back and
 * waited: the time to write N MB of a new anonymous mapping, right after
 * an equal mapping was written and unmapped, and after 0.5 to 5 s of
 * idleness in between.  On a virtual machine whose balloon driver reports
 * free pages to the host (Linux's free page reporting: free blocks of
 * 2^page_reporting_order pages, reported about 2 s after they are freed),
 * the host takes those pages back, and the next write to them faults in
 * the host too: fresh memory is cheap within a second of a free and
 * several times dearer after it.  Bare metal shows no step.
 *
 * Why it is in the bench: the agent loop's calls allocate and free large
 * arrays, the checkpoint's fork and the trim before it make the session
 * take fresh pages more often than a process without checkpoints, and a
 * call that comes after think time finds them cold.  This prints how large
 * that step is on the machine the bench runs on, so that the loop's
 * numbers can be read against it.  It asserts nothing.
 *
 *   build/bench/freshmem [MB [ROUNDS]]     (defaults 256 and 3) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Maps n bytes, advised for huge pages or against them, writes every byte
 * and unmaps it; the write's time in ms, or a negative value when the
 * kernel refuses the mapping. */
static double touch(size_t n, int huge)
{
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	madvise(p, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	double t = now_ms();
	memset(p, 1, n);
	double d = now_ms() - t;
	munmap(p, n);
	return d;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

#define NWAITS 6
#define MAX_ROUNDS 15

int main(int argc, char **argv)
{
	long mb = argc > 1 ? atol(argv[1]) : 256;
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	if (mb < 16 || mb > 8192 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: freshmem [MB (16 to 8192) [ROUNDS (1 to %d)]]\n", MAX_ROUNDS);
		return 2;
	}
	size_t n = (size_t)mb << 20;
	static const double waits[NWAITS] = { 0, 0.5, 1, 2, 3, 5 };
	double ms[2][NWAITS][MAX_ROUNDS];

	char order[32] = "";
	FILE *f = fopen("/sys/module/page_reporting/parameters/page_reporting_order", "r");
	if (f) {
		if (!fgets(order, sizeof order, f))
			order[0] = 0;
		fclose(f);
		order[strcspn(order, "\n")] = 0;
	}
	/* Rounds outermost, so that a noisy minute spreads over every row. */
	for (int r = 0; r < rounds; r++)
		for (int w = 0; w < NWAITS; w++)
			for (int huge = 0; huge < 2; huge++) {
				/* The block before: written and given back, so that
				 * the timed one is fresh memory freed W s ago. */
				if (touch(n, huge) < 0) {
					fprintf(stderr, "freshmem: cannot map %ld MB\n", mb);
					return 1;
				}
				usleep((useconds_t)(waits[w] * 1e6));
				ms[huge][w][r] = touch(n, huge);
			}

	printf("| fresh anonymous memory, %ld MB written | idle after the last free | median ms [lowest to highest] | GB/s | / no wait |\n",
	       mb);
	printf("|---|---:|---:|---:|---:|\n");
	for (int huge = 1; huge >= 0; huge--) {
		double base = 0;
		for (int w = 0; w < NWAITS; w++) {
			double *v = ms[huge][w];
			qsort(v, (size_t)rounds, sizeof *v, cmp);
			double med = v[rounds / 2];
			if (w == 0)
				base = med;
			printf("| %s | %.1f s | %.1f [%.1f to %.1f] | %.2f | %.2f× |\n",
			       huge ? "huge pages (MADV_HUGEPAGE)" : "small pages (MADV_NOHUGEPAGE)", waits[w], med, v[0],
			       v[rounds - 1], (double)n / 1e9 / (med / 1e3), base > 0 ? med / base : 0);
		}
	}
	if (order[0])
		printf("\nfree page reporting: page_reporting_order %s (a balloon driver that uses it reports free blocks of "
		       "2^%s pages to the host about 2 s after they are freed; whether one does, the rows above tell)\n",
		       order, order);
	else
		printf("\nfree page reporting: not in this kernel (no /sys/module/page_reporting): no step is expected\n");
	return 0;
}

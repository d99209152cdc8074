/* Floor: what one page copied after a fork costs on this machine.  A
 * checkpoint is a fork of the session, so the first write to each page of
 * the session after it is a copy-on-write fault; the agent loop's price of
 * checkpoints on against off is, for a large part, that count times this
 * cost.  This cost is the machine's, not ours, and it moves by a factor of
 * three or more between virtual machines (and from one minute to the next
 * on one of them), so the bench prints it beside the loop's rows.
 *
 * Each round maps MB of memory in small pages (MADV_NOHUGEPAGE), writes
 * it, forks a child that holds it, writes one byte of every page again in
 * the parent (the timed part: one copy a page), then lets the child go.
 * Prints "median_us p99_us n" of the cost a page over the rounds, and the
 * same for the write without a fork (no copy) on stderr.
 *
 *   build/bench/floor_cow [ROUNDS [MB]]     (defaults 20 and 64) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "timing.h"

#define PAGE 4096
#define MAX_ROUNDS 1000

/* One byte of every page of p[0..n) written; its time in us a page. */
static double write_pages(volatile char *p, size_t n)
{
	double t = now_us();
	for (size_t i = 0; i < n; i += PAGE)
		p[i]++;
	return (now_us() - t) / (double)(n / PAGE);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20;
	long mb = argc > 2 ? atol(argv[2]) : 64;
	if (rounds < 3 || rounds > MAX_ROUNDS || mb < 4 || mb > 4096) {
		fprintf(stderr, "usage: floor_cow [ROUNDS (3 to %d) [MB (4 to 4096)]]\n", MAX_ROUNDS);
		return 2;
	}
	size_t n = (size_t)mb << 20;
	static double copy[MAX_ROUNDS], plain[MAX_ROUNDS];
	for (int r = 0; r < rounds; r++) {
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			perror("floor_cow: mmap");
			return 1;
		}
		madvise(p, n, MADV_NOHUGEPAGE);
		memset(p, 1, n);
		int gate[2];
		if (pipe(gate) < 0) {
			perror("floor_cow: pipe");
			return 1;
		}
		pid_t child = fork();
		if (child < 0) {
			perror("floor_cow: fork");
			return 1;
		}
		if (child == 0) { /* holds the pages until the parent has written them */
			char b;
			close(gate[1]);
			_exit(read(gate[0], &b, 1) < 0);
		}
		close(gate[0]);
		copy[r] = write_pages(p, n);
		close(gate[1]);
		waitpid(child, NULL, 0);
		plain[r] = write_pages(p, n); /* the same pages, now this process's alone */
		munmap(p, n);
	}
	qsort(copy, (size_t)rounds, sizeof *copy, cmp_double);
	qsort(plain, (size_t)rounds, sizeof *plain, cmp_double);
	int p99 = (rounds * 99) / 100;
	printf("%.3f %.3f %d\n", copy[rounds / 2], copy[p99 < rounds ? p99 : rounds - 1], rounds);
	fprintf(stderr, "floor_cow: the same write without a fork: %.3f us a page\n", plain[rounds / 2]);
	return 0;
}

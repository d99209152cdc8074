/* Floor 1: a 64-byte message round trip between two
 * processes over a pair of pipes (the cheapest thing the server could ever
 * do per call).  Prints "median_us p99_us n" on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int full_read(int fd, char *b, size_t n)
{
	while (n) {
		ssize_t r = read(fd, b, n);
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	if (n < 10)
		n = 10;
	int to[2], from[2];
	char msg[64];
	memset(msg, 'x', sizeof msg);
	if (pipe(to) < 0 || pipe(from) < 0)
		return 1;
	pid_t pid = fork();
	if (pid == 0) {
		close(to[1]);
		close(from[0]);
		while (full_read(to[0], msg, sizeof msg) == 0)
			if (write(from[1], msg, sizeof msg) != (ssize_t)sizeof msg)
				_exit(1);
		_exit(0);
	}
	close(to[0]);
	close(from[1]);
	double *t = malloc(sizeof *t * (size_t)n);
	for (int i = 0; i < n + 100; i++) {
		double a = now_us();
		if (write(to[1], msg, sizeof msg) != (ssize_t)sizeof msg || full_read(from[0], msg, sizeof msg) < 0)
			return 1;
		if (i >= 100) /* warm-up */
			t[i - 100] = now_us() - a;
	}
	close(to[1]);
	waitpid(pid, NULL, 0);
	qsort(t, (size_t)n, sizeof *t, cmp);
	printf("%.3f %.3f %d\n", t[n / 2], t[(int)(n * 0.99)], n);
	return 0;
}

/* Floor 1: a 64-byte message round trip between two
 * processes over a pair of pipes (the cheapest thing the server could ever
 * do per call).  Prints "median_us p99_us n" on stdout.  With a second
 * argument THINK_MS, each round trip comes after THINK_MS of sleep (both
 * processes idle), as a call after an agent's think time does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "timing.h"

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

struct pipes {
	int to, from;
	char *msg; /* 64 bytes */
};

static int round_trip(void *arg)
{
	struct pipes *p = arg;
	if (write(p->to, p->msg, 64) != 64 || full_read(p->from, p->msg, 64) < 0)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	double think_ms = argc > 2 ? atof(argv[2]) : 0;
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
	struct pipes pp = { to[1], from[0], msg };
	if (think_ms > 0) {
		if (time_steps_paced(n, 3, think_ms, round_trip, &pp) < 0)
			return 1;
	} else if (time_steps(n, round_trip, &pp) < 0) {
		return 1;
	}
	close(to[1]);
	waitpid(pid, NULL, 0);
	return 0;
}

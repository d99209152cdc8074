/* Jail layer 1: file descriptors and environment.
 *
 * Everything the server had open (its MCP stdin/stdout, log files, other
 * zygotes' sockets) is closed except the fds the caller keeps; stdin becomes
 * /dev/null; the environment is replaced by the caller's minimal one.  fds 1
 * and 2 are left as the caller set them (the zygote points both at its log;
 * each session at its pipes): the caller must not leave the MCP stdout there. */
#include "fds.h"

#include "../common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* Closes [lo, hi]; close_range when the kernel has it (5.9), else one by
 * one up to the fd limit. */
static void close_span(int lo, int hi)
{
	if (lo > hi)
		return;
	if (syscall(SYS_close_range, (unsigned)lo, (unsigned)hi, 0) == 0)
		return;
	long max = sysconf(_SC_OPEN_MAX);
	if (max < 0 || max > 1 << 20)
		max = 1 << 20;
	for (long fd = lo; fd <= hi && fd < max; fd++)
		close((int)fd);
}

int jail_fds_apply(const struct jail_config *c, struct jail_report *r, struct err *e)
{
	struct jail_layer *l = &r->layer[JL_FDS];
	int keep[64];
	size_t n = 0;
	if (c->n_keep_fds > 62)
		return err_set(e, -E2BIG, "jail: too many fds to keep (%zu)", c->n_keep_fds);
	for (size_t i = 0; i < c->n_keep_fds; i++)
		if (c->keep_fds[i] > 2)
			keep[n++] = c->keep_fds[i];
	qsort(keep, n, sizeof *keep, cmp_int);

	/* Leaked descriptors are the classic sandbox escape: a directory fd
	 * opened outside the jail defeats the mount tree (openat(fd, "..")),
	 * a socket reaches the server. */
	int next = 3;
	for (size_t i = 0; i < n; i++) {
		close_span(next, keep[i] - 1);
		next = keep[i] + 1;
		/* Kept fds must not leak into programs that shell_exec runs. */
		int fl = fcntl(keep[i], F_GETFD);
		if (fl < 0)
			return err_sys(e, -errno, "jail: fd %d to keep is not open", keep[i]);
		fcntl(keep[i], F_SETFD, fl | FD_CLOEXEC);
	}
	close_span(next, ~0U >> 1);

	cleanup_fd int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_sys(e, -errno, "jail: open /dev/null");
	if (fd == 0)
		steal_fd(&fd); /* stdin was closed: it is stdin now */
	else if (dup2(fd, 0) < 0)
		return err_sys(e, -errno, "jail: stdin from /dev/null");

	/* The server's environment may hold secrets (tokens, API keys). */
	if (clearenv() != 0)
		return err_set(e, -ENOMEM, "jail: clearenv failed");
	size_t nenv = 0;
	for (const char *const *p = c->env; p && *p; p++) {
		const char *eq = strchr(*p, '=');
		if (!eq || eq == *p)
			return err_set(e, -EINVAL, "jail: environment entry without a name: %.40s", *p);
		char name[256];
		size_t k = (size_t)(eq - *p);
		if (k >= sizeof name)
			return err_set(e, -EINVAL, "jail: environment name too long");
		memcpy(name, *p, k);
		name[k] = '\0';
		if (setenv(name, eq + 1, 1) < 0)
			return err_sys(e, -errno, "jail: setenv %s", name);
		nenv++;
	}
	l->state = JS_APPLIED;
	snprintf(l->detail, sizeof l->detail,
		 "all fds closed but 0-2 and %zu kept; stdin /dev/null; %zu environment variables", n, nenv);
	return 0;
}

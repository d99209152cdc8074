/* Ending the processes that user code left behind: see procs.h. */
#include "procs.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <limits.h>
#include <unistd.h>

#include "../common/pdir.h"
#include "../common/pstat.h"
#include "../common/util.h"

struct proc {
	pid_t pid, ppid;
	unsigned long long start; /* clock ticks after boot: tells a reused pid */
	char state;
	bool exiting; /* PF_EXITING: in its exit, it runs no code of anyone's */
};

#define PF_EXITING_FLAG 0x00000004UL /* the kernel's PF_EXITING (include/linux/sched.h) */

struct table {
	struct proc *p;
	size_t n, cap;
};

static int by_pid(const void *a, const void *b)
{
	pid_t x = ((const struct proc *)a)->pid, y = ((const struct proc *)b)->pid;
	return (x > y) - (x < y);
}

bool procs_live_task(const char *proc, pid_t pid, char *out, size_t n, char *state)
{
	char path[256];
	struct pdir d;
	snprintf(path, sizeof path, "%s/%d/task", proc, (int)pid);
	if (pdir_open(&d, AT_FDCWD, path) < 0)
		return false;
	bool found = false;
	char stopped[24] = "";
	for (const char *tid; !found && (tid = pdir_next(&d));) {
		struct pstat ps;
		if (tid[0] < '1' || tid[0] > '9' || strlen(tid) >= sizeof stopped)
			continue;
		snprintf(path, sizeof path, "%s/%d/task/%s/stat", proc, (int)pid, tid);
		if (pstat_read(-1, path, &ps) < 0 || ps.state == 'Z' || ps.state == 'X')
			continue;
		/* A thread that runs (not stopped) stands for the process, so
		 * that it counts as stopped only when all are. */
		if (ps.state == 'T' || ps.state == 't') {
			if (!stopped[0])
				snprintf(stopped, sizeof stopped, "%s", tid);
			continue;
		}
		snprintf(out, n, "%s/%d/task/%s", proc, (int)pid, tid);
		*state = ps.state;
		found = true;
	}
	pdir_close(&d);
	if (!found && stopped[0]) {
		snprintf(out, n, "%s/%d/task/%s", proc, (int)pid, stopped);
		*state = 'T';
		found = true;
	}
	return found;
}

/* pid's stat under proc, or under the directory procfd when it is >= 0;
 * with kept, through a descriptor kept from the last read (pcache.h: the
 * server's scan of a zygote's pid namespace on every call; never in the
 * zygote, whose descriptors its sessions would inherit). */
static bool read_stat(int procfd, const char *proc, pid_t pid, struct proc *out, bool kept)
{
	char path[256];
	struct pstat ps;
	if (procfd >= 0)
		snprintf(path, sizeof path, "%d/stat", (int)pid);
	else
		snprintf(path, sizeof path, "%s/%d/stat", proc, (int)pid);
	if ((kept && procfd >= 0 ? pstat_read_kept(procfd, proc, path, &ps) : pstat_read(procfd, path, &ps)) < 0)
		return false;
	*out = (struct proc){ .pid = pid, .ppid = ps.ppid, .state = ps.state, .start = ps.start,
			      .exiting = (ps.flags & PF_EXITING_FLAG) != 0 };
	/* Its first thread exited while others run on (pstat_gone): the
	 * others' state is the process's, and it is not in its exit. */
	if (pstat_headless(&ps)) {
		char dir[256], st;
		out->state = procs_live_task(proc, pid, dir, sizeof dir, &st) ? st : 'Z';
		out->exiting = out->state == 'Z';
	}
	return true;
}

static int scan_at(const char *proc, struct table *t, bool kept)
{
	t->n = 0;
	struct pdir d;
	int rc = pdir_open(&d, AT_FDCWD, proc);
	if (rc < 0)
		return rc;
	for (const char *name; (name = pdir_next(&d));) {
		if (name[0] < '1' || name[0] > '9')
			continue;
		struct proc pr;
		const char *bad = NULL;
		pid_t pid = (pid_t)strtonum(name, 1, INT_MAX, &bad);
		if (bad || !read_stat(d.fd, proc, pid, &pr, kept))
			continue; /* gone meanwhile */
		if (t->n == t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 64;
			t->p = xreallocarray(t->p, cap, sizeof *t->p);
			t->cap = cap;
		}
		t->p[t->n++] = pr;
	}
	pdir_close(&d);
	/* An empty table has no array (the procfs of a pid namespace whose
	 * processes all ended): qsort and bsearch must not see it. */
	if (t->n > 1)
		qsort(t->p, t->n, sizeof *t->p, by_pid);
	return 0;
}

static int scan(struct table *t)
{
	return scan_at("/proc", t, false);
}

static const struct proc *find(const struct table *t, pid_t pid)
{
	struct proc key = { .pid = pid };
	return t->n ? bsearch(&key, t->p, t->n, sizeof *t->p, by_pid) : NULL;
}

static bool kept(pid_t pid, const pid_t *keep, size_t nkeep)
{
	for (size_t i = 0; i < nkeep; i++)
		if (keep[i] == pid)
			return true;
	return false;
}

/* Below `parent`, and not under a kept direct child of it, nor under one
 * born in the tick `born_by` or later (the list may not know it: see
 * procs_end_below_by). */
static bool is_target(const struct table *t, const struct proc *p, pid_t parent, const pid_t *keep, size_t nkeep,
		      unsigned long long born_by)
{
	const struct proc *q = p;
	for (int depth = 0; depth < 4096; depth++) {
		if (q->pid == parent || q->pid <= 1)
			return false;
		if (q->ppid == parent)
			return !kept(q->pid, keep, nkeep) && q->start < born_by;
		q = find(t, q->ppid);
		if (!q)
			return false;
	}
	return false;
}

struct mark {
	pid_t pid;
	unsigned long long start;
};

static bool is_marked(const struct mark *m, size_t n, const struct proc *p)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].pid == p->pid && m[i].start == p->start)
			return true;
	return false;
}

/* Whether /proc shows our own pid namespace.  A /proc mounted for another
 * one (a server started as pid 1 of a fresh pid namespace with the host's
 * /proc still in place) names other processes by the same numbers: pid 1
 * there is the host's init, and "below pid 1" would be every daemon. */
static bool proc_is_ours(void)
{
	char buf[32];
	ssize_t n = readlink("/proc/self", buf, sizeof buf - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return atoi(buf) == (int)getpid();
}

int procs_list_below(const char *proc, pid_t parent, const pid_t *keep, size_t nkeep, pid_t **out, size_t *n)
{
	struct table t = { 0 };
	*out = NULL;
	*n = 0;
	int rc = scan_at(proc, &t, true);
	if (rc == 0 && t.n)
		*out = xcalloc(t.n, sizeof **out);
	for (size_t i = 0; rc == 0 && i < t.n; i++) {
		const struct proc *p = &t.p[i];
		if (p->state != 'Z' && p->state != 'X' && is_target(&t, p, parent, keep, nkeep, ULLONG_MAX))
			(*out)[(*n)++] = p->pid;
	}
	free(t.p);
	return rc;
}

int procs_end_below(pid_t parent, const pid_t *keep, size_t nkeep, bool reap)
{
	return procs_end_below_by(parent, keep, nkeep, reap, ULLONG_MAX);
}

int procs_end_below_by(pid_t parent, const pid_t *keep, size_t nkeep, bool reap, unsigned long long born_by)
{
	struct table t = { 0 };
	struct mark *marks = NULL;
	size_t nmarks = 0, cap = 0, counted = 0;
	int rc = 0;

	if (!proc_is_ours())
		return -EXDEV;

	/* Stop first, kill after: a stopped process cannot fork, so a fork
	 * loop cannot outrun the scans, and nothing is reparented (which
	 * would hide where it came from) while the tree is being read. */
	int quiet = 0;
	for (int round = 0; round < 1000; round++) {
		if ((rc = scan(&t)) < 0)
			goto out;
		size_t fresh = 0, running = 0;
		for (size_t i = 0; i < t.n; i++) {
			const struct proc *p = &t.p[i];
			bool dead = p->state == 'Z' || p->state == 'X';
			if ((dead && !reap) || !is_target(&t, p, parent, keep, nkeep, born_by))
				continue;
			if (is_marked(marks, nmarks, p)) {
				/* kill() returns before the stop takes effect: one in
				 * the middle of fork() finishes it, and its child may
				 * not be in this scan yet. */
				if (!dead && p->state != 'T' && p->state != 't')
					running++;
				continue;
			}
			if (nmarks == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				/* Not xrealloc: out of memory here, ending what was
				 * already found matters more than this process's
				 * rule (kill_all ends them, then it says ENOMEM). */
				struct mark *nm = realloc(marks, ncap * sizeof *nm);
				if (!nm) {
					rc = -ENOMEM;
					goto kill_all; /* end at least those found */
				}
				marks = nm;
				cap = ncap;
			}
			marks[nmarks++] = (struct mark){ p->pid, p->start };
			/* One already in its exit is waited for like the others but
			 * not counted: nobody left it running.  A saver that has
			 * closed its pipe to the server is one for a few
			 * milliseconds, while the kernel frees its memory; counted,
			 * every save at rest was logged as leaving a process. */
			if (!p->exiting)
				counted++;
			if (!dead)
				kill(p->pid, SIGSTOP);
			fresh++;
		}
		/* Done after two scans in a row found every one stopped and
		 * nothing new: a scan is not atomic, and a child forked just
		 * before its parent stopped can take a pid below the scan's
		 * position (pids wrap) and be missed by the scan that saw the
		 * parent stopped; the next scan starts after all stopped, so
		 * it sees everything they forked. */
		quiet = (!fresh && !running) ? quiet + 1 : 0;
		if (quiet == 2)
			break;
		if (!fresh && running) {
			/* Only the stop of some is pending. */
			struct timespec ms = { 0, 1000000 };
			nanosleep(&ms, NULL);
		}
	}
kill_all:
	for (size_t i = 0; i < nmarks; i++)
		kill(marks[i].pid, SIGKILL);

	/* Each ends as a child of `parent` (its own parent is killed too, and
	 * `parent` is the subreaper above them): wait until none is left.
	 * Without reaping, until each is dead (a zombie): a SIGKILL is only
	 * sent when kill() returns, and the caller says they are ended. */
	for (int idle = 0; nmarks && idle < (reap ? 5000 : 1000);) {
		if (scan(&t) < 0)
			break;
		size_t left = 0, reaped = 0;
		for (size_t i = 0; i < nmarks; i++) {
			const struct proc *p = find(&t, marks[i].pid);
			if (!p || p->start != marks[i].start || (!reap && (p->state == 'Z' || p->state == 'X')))
				continue;
			left++;
			if (!reap)
				continue;
			if (p->ppid == parent && waitpid(p->pid, NULL, 0) == p->pid)
				reaped++;
		}
		if (!left)
			break;
		if (!reaped) {
			struct timespec ms = { 0, 1000000 };
			nanosleep(&ms, NULL);
			idle++;
		}
	}
	if (rc == 0)
		rc = (int)counted;
out:
	free(t.p);
	free(marks);
	return rc;
}

int procs_signal_below(pid_t parent, const pid_t *keep, size_t nkeep, int sig)
{
	if (!proc_is_ours())
		return -EXDEV;
	struct table t = { 0 };
	int rc = scan(&t);
	int sent = 0;
	for (size_t i = 0; rc == 0 && i < t.n; i++) {
		const struct proc *p = &t.p[i];
		if (p->state == 'Z' || p->state == 'X' || !is_target(&t, p, parent, keep, nkeep, ULLONG_MAX))
			continue;
		/* The pid is checked once more through a pidfd opened before the
		 * check: a process that exited after the scan leaves its pid
		 * free for another, and this is a signal the server sends
		 * (root, on a host): the same start time after the open means
		 * the pidfd is the process the scan saw. */
		int fd = (int)syscall(SYS_pidfd_open, p->pid, 0);
		if (fd < 0)
			continue;
		struct proc now;
		if (read_stat(-1, "/proc", p->pid, &now, false) && now.start == p->start &&
		    syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) == 0)
			sent++;
		close(fd);
	}
	free(t.p);
	return rc < 0 ? rc : sent;
}

/* Per-call CPU time and peak memory from /proc.  Everything read here comes
 * from the kernel, not from the session; the only thing the session controls
 * is its command name (inside the parentheses of /proc/PID/stat, possibly
 * with ')' and spaces in it), so stat is parsed from the last ')'. */
#include "usage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/pcache.h"
#include "../common/pdir.h"
#include "../common/pstat.h"
#include "../common/util.h"

/* A session may hold at most max_processes processes; a hostile one must
 * not make the server walk an unbounded tree. */
#define USAGE_MAX_PROCS 256

pid_t pidfd_pid(int pidfd)
{
	char path[64], buf[1024];
	if (pidfd < 0)
		return -1;
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
	if (read_small(path, buf, sizeof buf) <= 0)
		return -1;
	const char *p = strstr(buf, "\nPid:");
	long pid = p ? strtol(p + 5, NULL, 10) : -1;
	return pid > 0 ? (pid_t)pid : -1;
}

/* Signals the process behind a pidfd: no pid reuse can redirect it.  Where
 * pidfd_send_signal is missing (valgrind does not know it), the pid from
 * /proc/self/fdinfo is used instead. */
int pidfd_signal(int pidfd, int sig)
{
	if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) == 0)
		return 0;
	if (errno != ENOSYS)
		return -1;
	pid_t pid = pidfd_pid(pidfd);
	if (pid <= 0) {
		errno = ESRCH;
		return -1;
	}
	return kill(pid, sig);
}

/* utime + stime + cutime + cstime of one process, in ms; < 0 if gone.
 * ps: its stat as read (for the caller's listing of its threads), or
 * NULL. */
static double proc_cpu_ms(pid_t pid, struct pstat *out)
{
	char path[64];
	struct pstat ps;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (pstat_read_kept(AT_FDCWD, NULL, path, &ps) < 0)
		return -1;
	if (out)
		*out = ps;
	long long ticks = (long long)(ps.utime + ps.stime) + ps.cutime + ps.cstime;
	if (ticks < 0)
		return -1;
	long hz = sysconf(_SC_CLK_TCK);
	return (double)ticks * 1000.0 / (double)(hz > 0 ? hz : 100);
}

/* VmHWM of one process, in kB; < 0 if gone (or a zombie). */
static long proc_hwm_kb(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (pcache_read(AT_FDCWD, NULL, path, buf, sizeof buf) <= 0)
		return -1;
	const char *p = strstr(buf, "\nVmHWM:");
	return p ? strtol(p + 7, NULL, 10) : -1;
}

/* The descendants of pid (children of each of its threads, recursively),
 * at most max, leaving out skip and everything below it; returns how many
 * were stored. */
static size_t descendants(pid_t pid, const struct pstat *pid_ps, pid_t skip, pid_t *out, size_t max)
{
	size_t n = 0;
	pid_t queue[USAGE_MAX_PROCS];
	size_t qn = 0, qi = 0;
	queue[qn++] = pid;
	while (qi < qn && n < max) {
		pid_t cur = queue[qi++];
		char path[64];
		snprintf(path, sizeof path, "/proc/%d", (int)cur);
		struct pdir d;
		if (pdir_open_tasks_seen(&d, -1, path, cur == pid ? pid_ps : NULL) < 0)
			continue;
		for (const char *tid; n < max && (tid = pdir_next(&d));) {
			char cpath[96], buf[4096];
			snprintf(cpath, sizeof cpath, "%.20s/children", tid);
			if (pdir_read(&d, cpath, buf, sizeof buf) <= 0)
				continue;
			char *s = buf, *end;
			for (long c; n < max && (c = strtol(s, &end, 10)) > 0; s = end) {
				if (c == skip)
					continue;
				out[n++] = (pid_t)c;
				if (qn < USAGE_MAX_PROCS)
					queue[qn++] = (pid_t)c;
			}
		}
		pdir_close(&d);
	}
	return n;
}

/* The CPU time (ms) of pid and its descendants, and with hwm_kb their
 * summed high-water marks (kB), in one walk of the tree; the frozen
 * checkpoint (skip) and what is below it (its saver) are left out, at the
 * start of a call as at its end: a saver's pickling is neither the call's
 * work nor, counted at one end only, a part of it taken away.  -1 when pid
 * itself cannot be read, or is no longer the process behind pidfd (read,
 * then asked: alive after the read, its pid was never another's). */
static double tree_usage(pid_t pid, int pidfd, pid_t skip, long *hwm_kb)
{
	if (pid <= 0)
		return -1;
	struct pstat ps;
	double cpu = proc_cpu_ms(pid, &ps);
	long hwm = hwm_kb ? proc_hwm_kb(pid) : 0;
	if (cpu < 0 || hwm < 0)
		return -1;
	pid_t kids[USAGE_MAX_PROCS];
	size_t n = descendants(pid, &ps, skip, kids, USAGE_MAX_PROCS);
	for (size_t i = 0; i < n; i++) {
		double c = proc_cpu_ms(kids[i], NULL);
		if (c > 0)
			cpu += c;
		long k = hwm_kb ? proc_hwm_kb(kids[i]) : -1;
		if (k > 0)
			hwm += k;
	}
	if (pidfd_signal(pidfd, 0) < 0)
		return -1;
	if (hwm_kb)
		*hwm_kb = hwm;
	return cpu;
}

void usage_begin(struct usage *u, pid_t hpid, int pidfd, pid_t ckpt_hpid)
{
	/* No pidfd yet: the session process is being forked for this call.
	 * Its CPU time counts from the fork and its high-water mark is its
	 * own, so zero is the right start. */
	*u = (struct usage){ .begun = true, .cpu_start_ms = 0 };
	if (pidfd < 0)
		return;
	u->cpu_start_ms = tree_usage(hpid, pidfd, ckpt_hpid, NULL);
	if (u->cpu_start_ms < 0)
		return;
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/clear_refs", (int)hpid);
	u->peak_reset = pcache_write(path, "5", 1) == 1;
}

void usage_end(struct usage *u, pid_t hpid, int pidfd, pid_t ckpt_hpid)
{
	if (!u->begun || u->ended)
		return;
	u->ended = true;
	if (u->cpu_start_ms < 0 || pidfd < 0)
		return;
	long hwm = 0;
	double cpu = tree_usage(hpid, pidfd, ckpt_hpid, &hwm);
	if (cpu < 0)
		return;
	u->cpu_ms = cpu > u->cpu_start_ms ? cpu - u->cpu_start_ms : 0;
	u->peak_mb = (double)hwm / 1024.0;
	u->known = true;
}

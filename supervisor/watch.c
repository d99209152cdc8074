/* The sessions seen from outside: see watch.h. */
#include "watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/pcache.h"
#include "../common/pdir.h"
#include "../common/pstat.h"
#include "../common/util.h"
#include "../interp/procs.h"
#include "../jail/layer.h"
#include "../jail/ns.h"

int watch_pidfd(int pidfd, pid_t *host, pid_t *ns)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
	if (read_small(path, buf, sizeof buf) < 0)
		return -EBADF;
	const char *p = strstr(buf, "\nPid:");
	if (!p)
		return -EBADF; /* a pipe, a socket... sent where a pidfd belongs */
	long h = strtol(p + 5, NULL, 10);
	if (h <= 0)
		return -ESRCH;
	*host = *ns = (pid_t)h;
	const char *q = strstr(buf, "\nNSpid:");
	if (q) {
		q += 7;
		for (;;) {
			char *end;
			long v = strtol(q, &end, 10);
			if (end == q)
				break;
			*ns = (pid_t)v;
			q = end;
		}
	}
	return 0;
}

pid_t watch_ppid(pid_t pid)
{
	char path[64];
	struct pstat ps;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	return pstat_read(-1, path, &ps) < 0 ? -ESRCH : ps.ppid;
}

/* The CPU time a thread has used: the scheduler's nanoseconds
 * (schedstat, readable by anyone, also for a process that is not
 * dumpable) plus utime and stime in ticks, so that a kernel without
 * schedstat still shows a thread that ran. */
static uint64_t thread_run(const struct pdir *task, const char *tid, const struct pstat *ps)
{
	char path[32], buf[128];
	unsigned long long ns = 0;
	snprintf(path, sizeof path, "%.16s/schedstat", tid);
	if (pdir_read(task, path, buf, sizeof buf) > 0)
		sscanf(buf, "%llu", &ns);
	return (uint64_t)ns + ps->utime + ps->stime;
}

int watch_idle(pid_t pid, struct watch_look *last)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d", (int)pid);
	struct pdir d;
	int rc = pdir_open_tasks(&d, -1, path);
	if (rc < 0) {
		last->valid = false;
		return rc;
	}
	bool asleep = true;
	struct watch_look now = { .valid = true };
	int cpu = sched_getcpu();
	bool here = false;
	for (const char *tid; asleep && (tid = pdir_next(&d));) {
		if (tid[0] < '1' || tid[0] > '9')
			continue;
		snprintf(path, sizeof path, "%.16s/stat", tid);
		struct pstat ps;
		if (!pdir_one_stat(&d, tid, &ps) && pstat_read_kept(d.fd, d.path, path, &ps) < 0)
			continue; /* a thread that ended meanwhile */
		/* Asleep means S (an interruptible wait, as in recvmsg on the
		 * control socket) or stopped.  R runs; D counts as busy too.
		 * Attack: a cell that sent a made-up result and went on
		 * appending to a file was seen in D (waiting on the disk or
		 * on writeback throttling) often enough to be frozen as if
		 * idle, after 1.8 s of a 3 s timeout, and its result was
		 * believed. */
		if (!(ps.state == 'S' || ps.state == 'T' || ps.state == 't'))
			asleep = false;
		if (ps.state == 'R' && ps.processor == cpu)
			here = true;
		now.n++;
		now.tids += strtoull(tid, NULL, 10) * 2654435761u;
		now.run += thread_run(&d, tid, &ps);
	}
	/* A listing cut short saw only some threads: not a look. */
	if (d.err)
		asleep = false;
	pdir_close(&d);
	/* And none of its threads ran since the previous look: a busy thread
	 * caught between two steps of its work in S has used CPU time by the
	 * next look; one blocked for the whole interval has not. */
	bool same = last->valid && asleep && now.n == last->n && now.tids == last->tids && now.run == last->run;
	*last = asleep ? now : (struct watch_look){ .here = here };
	return same;
}

static bool listed(pid_t p, const pid_t *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (set[i] == p)
			return true;
	return false;
}

/* Every child of every thread of pid, from /proc/PID/task/TID/children:
 * 1 when each is in ok[] or has exited (a zombie), 0 when one is not,
 * -errno when the kernel does not say (no such file: CONFIG_PROC_CHILDREN
 * off).  With stopped set, also 0 when a thread of pid is not stopped. */
static int children_within(pid_t pid, const pid_t *ok, size_t n_ok, bool stopped, bool *all_stopped)
{
	char path[96], buf[4096];
	snprintf(path, sizeof path, "/proc/%d", (int)pid);
	struct pdir d;
	int r = pdir_open_tasks(&d, -1, path);
	if (r < 0)
		return r;
	r = 1;
	for (const char *tid; r == 1 && (tid = pdir_next(&d));) {
		if (tid[0] < '1' || tid[0] > '9')
			continue;
		if (stopped) {
			snprintf(path, sizeof path, "%.16s/stat", tid);
			struct pstat ps;
			if ((pdir_one_stat(&d, tid, &ps) || pstat_read_kept(d.fd, d.path, path, &ps) == 0) && ps.state != 'T' &&
			    ps.state != 't') {
				*all_stopped = false;
				r = 0;
				break;
			}
		}
		snprintf(path, sizeof path, "%.16s/children", tid);
		ssize_t len = pdir_read(&d, path, buf, sizeof buf);
		if (len < 0) {
			r = (int)len;
			break;
		}
		if ((size_t)len >= sizeof buf - 1) {
			r = 0; /* more than we read: not judged here */
			break;
		}
		for (char *q = buf, *end; r == 1; q = end) {
			long c = strtol(q, &end, 10);
			if (end == q)
				break;
			if (listed((pid_t)c, ok, n_ok))
				continue;
			struct pstat ps;
			snprintf(path, sizeof path, "/proc/%ld/stat", c);
			if (pstat_read_kept(AT_FDCWD, NULL, path, &ps) == 0 && pstat_gone(&ps))
				continue;
			r = 0;
		}
	}
	if (r == 1 && d.err)
		r = 0; /* a listing cut short: not judged here */
	pdir_close(&d);
	return r;
}

int watch_quiet(pid_t pid, pid_t keep, pid_t dying, pid_t zygote, const pid_t *known, size_t n_known)
{
	bool all_stopped = true;
	/* What the dying child holds first: it cannot fork any more (a fork
	 * fails once SIGKILL is pending), and its children, when it exits,
	 * go to pid, whose list is read after. */
	if (dying > 0) {
		int d = children_within(dying, NULL, 0, false, &all_stopped);
		if (d == 0)
			return -EEXIST;
		if (d < 0 && d != -ENOENT)
			return d;
	}
	pid_t ok[2] = { keep, dying };
	int r = children_within(pid, ok, 2, true, &all_stopped);
	if (r <= 0)
		return r < 0 ? r : all_stopped ? -EEXIST : 0;
	r = children_within(zygote, known, n_known, false, &all_stopped);
	return r < 0 ? r : r == 0 ? -EEXIST : 1;
}

long watch_cpu_ms(pid_t pid)
{
	char path[64];
	struct pstat ps;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (pstat_read_kept(AT_FDCWD, NULL, path, &ps) < 0)
		return -ESRCH;
	long long ticks = (long long)(ps.utime + ps.stime);
	long hz = sysconf(_SC_CLK_TCK);
	return (long)(ticks * 1000 / (hz > 0 ? hz : 100));
}

static uint64_t status_kb(const char *status, const char *key)
{
	const char *p = strstr(status, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

struct inos {
	ino_t ino[256];
	size_t n;
};

static bool seen_ino(struct inos *s, ino_t ino)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->ino[i] == ino)
			return true;
	if (s->n < sizeof s->ino / sizeof s->ino[0])
		s->ino[s->n++] = ino;
	return false;
}

/* memfds are memory that no RSS shows until mapped: count each open one by
 * its size (once, however many processes hold it). */
static uint64_t memfd_bytes(const char *dir, struct inos *seen)
{
	char path[300];
	snprintf(path, sizeof path, "%s/fd", dir);
	struct pdir d;
	if (pdir_open(&d, AT_FDCWD, path) < 0)
		return 0;
	uint64_t sum = 0;
	int budget = 4096; /* a process may hold up to RLIMIT_NOFILE fds */
	for (const char *name; budget-- > 0 && (name = pdir_next(&d));) {
		char link[64];
		ssize_t n = readlinkat(d.fd, name, link, sizeof link - 1);
		if (n < 7)
			continue;
		link[n] = 0;
		struct stat st;
		if (strncmp(link, "/memfd:", 7) == 0 && fstatat(d.fd, name, &st, 0) == 0 && !seen_ino(seen, st.st_ino))
			sum += (uint64_t)st.st_blocks * 512;
	}
	pdir_close(&d);
	return sum;
}

/* The jail's private tmpfs at `rel` inside the session's root: its files are
 * host memory.  Not counted when it is the host's own directory (the jail
 * without a mount namespace has none of its own). */
static uint64_t tmpfs_bytes(pid_t pid, const char *rel)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/root%s", (int)pid, rel);
	struct statfs fs;
	struct stat in, host;
	if (statfs(path, &fs) < 0 || fs.f_type != TMPFS_MAGIC || stat(path, &in) < 0)
		return 0;
	if (stat(rel, &host) == 0 && host.st_dev == in.st_dev)
		return 0;
	return (uint64_t)(fs.f_blocks - fs.f_bfree) * (uint64_t)fs.f_bsize;
}

/* pid's status (proc/PID/status) in buf, and in dir the directory its own
 * files are read from: proc/PID, or for a process whose first thread
 * exited while others run on, a running thread's task directory, whose
 * status is then read instead (the leader's shows no memory, its fd/ no
 * descriptor: pstat_gone says why that matters).  false when it is gone. */
static bool own_files(const char *proc, pid_t pid, char *dir, size_t n, char *buf, size_t cap, bool cached)
{
	char path[300];
	snprintf(dir, n, "%s/%d", proc, (int)pid);
	snprintf(path, sizeof path, "%s/status", dir);
	if ((cached ? pcache_read(AT_FDCWD, NULL, path, buf, cap) : read_small(path, buf, cap)) < 0)
		return false;
	const char *st = strstr(buf, "\nState:");
	if (!st)
		return true;
	st += 7;
	st += strspn(st, " \t");
	struct pstat ps = { .state = *st, .num_threads = (long)status_kb(buf, "\nThreads:") };
	if (!pstat_headless(&ps))
		return true;
	char state;
	if (!procs_live_task(proc, pid, dir, n, &state))
		return false;
	snprintf(path, sizeof path, "%s/status", dir);
	return read_small(path, buf, cap) >= 0;
}

/* pid's threads and resident pages added to *u, from its status; dir as
 * own_files sets it.  false when it is gone. */
static bool add_status(const char *proc, pid_t pid, struct footprint *u, char *dir, size_t n)
{
	char buf[4096];
	if (!own_files(proc, pid, dir, n, buf, sizeof buf, true))
		return false;
	uint64_t threads = status_kb(buf, "\nThreads:");
	u->tasks += threads ? (long)threads : 1;
	u->anon += status_kb(buf, "\nRssAnon:") * 1024;
	u->shmem += status_kb(buf, "\nRssShmem:") * 1024;
	return true;
}

static bool add_proc(const char *proc, pid_t pid, struct footprint *u, struct inos *seen)
{
	char dir[256];
	if (!add_status(proc, pid, u, dir, sizeof dir))
		return false;
	u->memfd += memfd_bytes(dir, seen);
	return true;
}

/* The checkpoint's resident pages, most of them shared with the session:
 * what its copy could cost at most (not in the total). */
static uint64_t copy_rss(const char *proc, pid_t ckpt)
{
	char path[256], buf[4096];
	snprintf(path, sizeof path, "%s/%d/status", proc, (int)ckpt);
	if (ckpt > 0 && pcache_read(AT_FDCWD, NULL, path, buf, sizeof buf) >= 0)
		return (status_kb(buf, "\nRssAnon:") + status_kb(buf, "\nRssShmem:")) * 1024;
	return 0;
}

int watch_session_rss(const char *proc, pid_t root, pid_t skip, struct footprint *u)
{
	memset(u, 0, sizeof *u);
	char dir[256];
	if (!add_status(proc, root, u, dir, sizeof dir))
		return -ESRCH;
	u->copy_rss = copy_rss(proc, skip);
	u->total = u->anon + u->shmem;
	return 0;
}

bool watch_proc_root(pid_t zygote, char *buf, size_t n)
{
	snprintf(buf, n, "/proc/%d/root/proc", (int)zygote);
	/* Readable, a procfs, and not ours (each pid namespace's procfs is
	 * a mount of its own). */
	struct statfs fs;
	struct stat a, b;
	if (zygote > 0 && statfs(buf, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC && stat(buf, &a) == 0 &&
	    stat("/proc", &b) == 0 && a.st_dev != b.st_dev && access(buf, R_OK | X_OK) == 0)
		return true;
	snprintf(buf, n, "/proc");
	return false;
}

static int footprint_seen(const char *proc, pid_t zygote, pid_t root, pid_t skip, pid_t dying, bool lone,
			  struct footprint *u, struct inos *seen);

int watch_footprint(const char *proc, pid_t zygote, pid_t root, pid_t skip, pid_t dying, bool lone, struct footprint *u)
{
	struct inos *seen = xcalloc(1, sizeof *seen);
	int rc = footprint_seen(proc, zygote, root, skip, dying, lone, u, seen);
	free(seen);
	return rc;
}

/* A process's proportional share of the anonymous pages it maps (Pss_Anon
 * of smaps_rollup, Linux 5.9+; Pss before that), in bytes; -errno when it
 * cannot be read (the process is not dumpable and this server has no
 * CAP_SYS_PTRACE over it). */
static int64_t pss_anon(const char *dir)
{
	char path[300], buf[4096];
	snprintf(path, sizeof path, "%s/smaps_rollup", dir);
	ssize_t n = read_small(path, buf, sizeof buf);
	if (n <= 0)
		return n < 0 ? n : -EIO;
	const char *p = strstr(buf, "\nPss_Anon:");
	if (p)
		return (int64_t)strtoull(p + 10, NULL, 10) * 1024;
	p = strstr(buf, "\nPss:");
	return p ? (int64_t)strtoull(p + 5, NULL, 10) * 1024 : -EIO;
}

/* A process's proportional shares from smaps_rollup (Linux 5.9+: the
 * Pss_Anon and Pss_Shmem lines): each page it maps counts divided by the
 * number of processes that map it, so that over a set of processes a page
 * they share counts once.  0, -ESRCH when the process is gone, -EACCES when
 * this server may not read it (a session is not dumpable: only a caller
 * with CAP_SYS_PTRACE over it may), -ENOTSUP when the kernel does not split
 * Pss so. */
static int pss_shares(const char *dir, uint64_t *anon, uint64_t *shmem)
{
	char path[300], buf[4096];
	snprintf(path, sizeof path, "%s/smaps_rollup", dir);
	ssize_t n = read_small(path, buf, sizeof buf);
	if (n < 0)
		return n == -ENOENT ? -ESRCH : n == -EPERM ? -EACCES : (int)n;
	if (n == 0)
		return -ESRCH; /* an exited process (a zombie) maps nothing */
	const char *a = strstr(buf, "\nPss_Anon:"), *m = strstr(buf, "\nPss_Shmem:");
	if (!a || !m)
		return -ENOTSUP;
	*anon = strtoull(a + 10, NULL, 10) * 1024;
	*shmem = strtoull(m + 11, NULL, 10) * 1024;
	return 0;
}

/* The processes below root but the checkpoint (skip) and a copy being
 * ended (dying), each left out with what is below it; none listed where
 * the caller knows that nothing is below root (lone). */
static int list_below(const char *proc, pid_t root, pid_t skip, pid_t dying, bool lone, pid_t **below, size_t *n)
{
	if (lone) {
		*below = NULL;
		*n = 0;
		return 0;
	}
	pid_t keep[2];
	size_t nk = 0;
	if (skip > 0)
		keep[nk++] = skip;
	if (dying > 0)
		keep[nk++] = dying;
	return procs_list_below(proc, root, keep, nk, below, n);
}

int watch_footprint_pss(const char *proc, pid_t zygote, pid_t root, pid_t skip, pid_t dying, bool lone, struct footprint *u)
{
	memset(u, 0, sizeof *u);
	pid_t *below = NULL;
	size_t n = 0;
	int rc = list_below(proc, root, skip, dying, lone, &below, &n);
	if (rc < 0)
		return rc;
	struct inos *seen = xcalloc(1, sizeof *seen);
	/* The session's processes, then its checkpoint (its own pages only:
	 * what is below it is a save, with a watchdog of its own). */
	for (size_t i = 0; i <= n + 1 && rc == 0; i++) {
		pid_t p = i == 0 ? root : i <= n ? below[i - 1] : skip;
		if (p <= 0)
			continue;
		char dir[256], buf[4096];
		if (!own_files(proc, p, dir, sizeof dir, buf, sizeof buf, false))
			continue; /* gone meanwhile */
		uint64_t a = 0, m = 0;
		int r = pss_shares(dir, &a, &m);
		if (r == -ESRCH)
			continue;
		if (r < 0) {
			rc = r;
			break;
		}
		if (i > n) {
			u->copy = a + m;
			continue;
		}
		uint64_t threads = status_kb(buf, "\nThreads:");
		u->tasks += threads ? (long)threads : 1;
		u->anon += a;
		u->shmem += m;
		u->memfd += memfd_bytes(dir, seen);
	}
	free(seen);
	free(below);
	if (rc < 0)
		return rc;
	u->tmpfs = tmpfs_bytes(zygote, "/tmp") + tmpfs_bytes(zygote, "/dev/shm");
	u->pss = true;
	u->total = u->anon + u->shmem + u->memfd + u->tmpfs + u->copy;
	return 0;
}

/* CPU time (ms) of pid and of the children it has waited for. */
static long cpu_with_children_ms(const char *proc, pid_t pid)
{
	char path[256];
	struct pstat ps;
	snprintf(path, sizeof path, "%s/%d/stat", proc, (int)pid);
	if (pstat_read(-1, path, &ps) < 0)
		return 0;
	long hz = sysconf(_SC_CLK_TCK);
	long long ticks = (long long)(ps.utime + ps.stime) + (ps.cutime > 0 ? ps.cutime : 0) + (ps.cstime > 0 ? ps.cstime : 0);
	return (long)(ticks * 1000 / (hz > 0 ? hz : 100));
}

int watch_save_footprint(const char *proc, pid_t zygote, pid_t session, pid_t ckpt, pid_t dying, struct footprint *u,
			 struct save_footprint *v)
{
	memset(v, 0, sizeof *v);
	struct inos *seen = xcalloc(1, sizeof *seen);
	int rc = footprint_seen(proc, zygote, session, ckpt, dying, false, u, seen);
	pid_t *below = NULL;
	size_t n = 0;
	if (rc == 0)
		rc = procs_list_below(proc, ckpt, NULL, 0, &below, &n);
	v->pss = true;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		char dir[256], buf[4096];
		if (!own_files(proc, below[i], dir, sizeof dir, buf, sizeof buf, false))
			continue; /* gone meanwhile */
		uint64_t threads = status_kb(buf, "\nThreads:");
		v->tasks += threads ? (long)threads : 1;
		v->shmem += status_kb(buf, "\nRssShmem:") * 1024;
		v->memfd += memfd_bytes(dir, seen);
		v->cpu_ms += cpu_with_children_ms(proc, below[i]);
		int64_t pa = v->pss ? pss_anon(dir) : -1;
		if (pa < 0) {
			/* One unreadable: all by RssAnon (the caller compares
			 * like with like). */
			if (v->pss) {
				v->pss = false;
				v->anon = 0;
				for (size_t k = 0; k < i; k++) {
					char d2[256], b2[4096];
					if (own_files(proc, below[k], d2, sizeof d2, b2, sizeof b2, false))
						v->anon += status_kb(b2, "\nRssAnon:") * 1024;
				}
			}
			v->anon += status_kb(buf, "\nRssAnon:") * 1024;
		} else {
			v->anon += (uint64_t)pa;
		}
	}
	free(below);
	free(seen);
	return rc;
}

static int footprint_seen(const char *proc, pid_t zygote, pid_t root, pid_t skip, pid_t dying, bool lone,
			  struct footprint *u, struct inos *seen)
{
	memset(u, 0, sizeof *u);
	pid_t *below = NULL;
	size_t n = 0;
	int rc = list_below(proc, root, skip, dying, lone, &below, &n);
	if (rc < 0)
		return rc;
	/* Gone: what list_below says when it lists. */
	if (!add_proc(proc, root, u, seen) && lone)
		return -ESRCH;
	for (size_t i = 0; i < n; i++)
		add_proc(proc, below[i], u, seen);
	u->copy_rss = copy_rss(proc, skip);
	u->tmpfs = tmpfs_bytes(zygote, "/tmp") + tmpfs_bytes(zygote, "/dev/shm");
	/* Counted as the sum: pages of a memfd or tmpfs file that are also
	 * mapped count twice, which errs on the side of the limit. */
	u->total = u->anon + u->shmem + u->memfd + u->tmpfs;
	free(below);
	return 0;
}

static void reads_of(pid_t pid, bool *fds, bool *pss);

/* The probe of a server that has CAP_SYS_PTRACE where it runs (root): a
 * child of its own, not dumpable, as a session is.  Or, for a server not
 * run by root without namespaces (dumpable), a child that stays dumpable,
 * as its sessions then do (jail_config.stay_readable): only the kernel's
 * answer decides (an LSM may still refuse). */
static void sees_own_child(bool dumpable, bool *fds, bool *pss)
{
	*fds = *pss = false;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0) {
		/* Dumpable or not, as a session is; then wait for the
		 * parent's look (it closes its end). */
		char c = 0;
		close(p[0]);
		prctl(PR_SET_DUMPABLE, dumpable ? 1 : 0, 0, 0, 0);
		if (write(p[1], &c, 1) == 1)
			pause();
		_exit(0);
	}
	close(p[1]);
	char c;
	if (pid > 0 && read(p[0], &c, 1) == 1)
		reads_of(pid, fds, pss);
	close(p[0]);
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
}

/* What this server reads of process pid: its descriptors (fds: the
 * directory listed and an entry's link read, which the kernel checks apart:
 * root without CAP_SYS_PTRACE lists a root-owned directory by its DAC
 * capabilities but reads no link of a process that is not dumpable) and
 * its proportional shares (pss). */
static void reads_of(pid_t pid, bool *fds, bool *pss)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	*fds = false;
	DIR *d = opendir(path);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d)) && de->d_name[0] == '.')
			;
		char link[64 + sizeof de->d_name];
		snprintf(link, sizeof link, "%s/%s", path, de ? de->d_name : "");
		*fds = !de || readlink(link, buf, sizeof buf) >= 0;
		closedir(d);
	}
	snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
	*pss = read_small(path, buf, sizeof buf) > 0 && strstr(buf, "\nPss_Anon:");
}

/* The probe of a server not run by root, in the situation of its sessions:
 * a child that enters the owner namespace as the zygote's start does
 * (jail/ns.c: jail_ns_owner_enter), execs this binary (watch_probe_main:
 * there it makes a user and a mount namespace below, as the jail does, and
 * becomes not dumpable, as a session does), and is looked at from here.
 * Only what the kernel lets this server read decides; the child's word
 * only says that it got that far. */
static void sees_owner_child(bool *fds, bool *pss)
{
	*fds = *pss = false;
	if (geteuid() == 0)
		return;
	jail_knobs_read();
	if (jail_disabled("userns"))
		return; /* the jail makes no user namespace: neither does this */
	char self[4096];
	ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
	if (k <= 0)
		return;
	self[k] = '\0';
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != parent || jail_ns_owner_enter() < 0)
			_exit(0);
		char fdarg[16];
		snprintf(fdarg, sizeof fdarg, "%d", p[1]);
		fcntl(p[1], F_SETFD, 0);
		char *argv[] = { "python-sandbox-mcp", (char *)WATCH_PROBE_ARG, fdarg, NULL };
		char *envp[] = { NULL };
		exec_self(self, argv, envp);
		_exit(0);
	}
	close(p[1]);
	if (pid > 0) {
		/* The child writes at once or exits (the end closes): bounded
		 * anyway, a server never hangs on its start. */
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		char c = 0;
		if (poll(&pf, 1, 10000) == 1 && read(p[0], &c, 1) == 1 && c == 'y')
			reads_of(pid, fds, pss);
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	close(p[0]);
}

int watch_probe_main(const char *fdarg)
{
	char *end;
	long fd = strtol(fdarg, &end, 10);
	if (*end || fd < 3 || fd > 1024)
		return 2;
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* The jail's user namespace (a child of the owner namespace) and its
	 * mount namespace: where a session's credentials are.  Without a
	 * mount namespace the jail would run without namespaces, where this
	 * server counts by resident pages as before. */
	char c = jail_ns_owner_enter() == 0 && unshare(CLONE_NEWNS) == 0 &&
		 prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 ? 'y' : 'n';
	if (write((int)fd, &c, 1) == 1 && c == 'y')
		pause();
	return 0;
}

static bool probed;    /* the probes below ran (once) */
static bool sees_fds;  /* the sessions' /proc/PID/fd */
static bool sees_pss;  /* the sessions' smaps_rollup */
static bool owner_ns;  /* the zygote starts in the owner namespace */
static bool stay_readable; /* sessions stay dumpable without namespaces */

static void probe(void)
{
	if (probed)
		return;
	probed = true;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sees_owner_child(&sees_fds, &sees_pss);
	owner_ns = sees_pss;
	if (!owner_ns && geteuid() == 0) {
		/* Root: the same check opens both. */
		sees_own_child(false, &sees_fds, &sees_pss);
	} else if (!owner_ns) {
		/* Not root and no owner namespace: the jail runs without
		 * namespaces, as this server's uid; its sessions stay
		 * dumpable where that lets this server read them. */
		sees_own_child(true, &sees_fds, &sees_pss);
		stay_readable = sees_fds || sees_pss;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	log_debug("the sessions' smaps_rollup %s, their descriptors %s (probed in %.1f ms%s)",
		  sees_pss ? "readable" : "not readable", sees_fds ? "readable" : "not readable",
		  (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
		  owner_ns ? ", the zygote starts in a user namespace of its own" : "");
}

bool watch_sees_pss(void)
{
	probe();
	return sees_pss;
}

bool watch_owner_ns(void)
{
	probe();
	return owner_ns;
}

bool watch_stay_readable(void)
{
	probe();
	return stay_readable;
}

/* A cgroup v2 memory controller is usable when this process's own cgroup is
 * on the unified hierarchy, offers "memory" and can be written by us. */
static bool cgroup2_memory_delegated(void)
{
	char buf[4096], path[4400];
	if (read_small("/proc/self/cgroup", buf, sizeof buf) < 0)
		return false;
	const char *p = strncmp(buf, "0::", 3) == 0 ? buf + 3 : strstr(buf, "\n0::");
	if (!p)
		return false;
	if (p != buf + 3)
		p += 4;
	const char *nl = strchr(p, '\n');
	int len = nl ? (int)(nl - p) : (int)strlen(p);
	struct statfs fs;
	if (statfs("/sys/fs/cgroup", &fs) < 0 || fs.f_type != CGROUP2_SUPER_MAGIC)
		return false;
	snprintf(path, sizeof path, "/sys/fs/cgroup%.*s/cgroup.controllers", len, p);
	char ctl[512];
	if (read_small(path, ctl, sizeof ctl) < 0 || !strstr(ctl, "memory"))
		return false;
	snprintf(path, sizeof path, "/sys/fs/cgroup%.*s/cgroup.subtree_control", len, p);
	return access(path, W_OK) == 0;
}

void watch_describe_memory(long memory_mb, long max_processes, FILE *out)
{
	fprintf(out,
		"memory: memory_mb (%ld MB) bounds each session as a whole: the server sums its processes' "
		"RssAnon, RssShmem, open memfds and the private /tmp and /dev/shm every %d to %d ms (the nearer "
		"the limit, the more often) and stops the call (status memory, rolled back, its children "
		"first); RLIMIT_DATA binds each process; cgroup v2 memory controller: %s\n",
		memory_mb, WATCH_NEAR_MS, WATCH_MAX_INTERVAL_MS,
		cgroup2_memory_delegated() ? "delegated, not used (the watchdog holds)" : "not delegated here");
	bool sees = watch_sees_pss();
	const char *why = !sees ? (geteuid() == 0 ? "a root without CAP_SYS_PTRACE (a container that dropped it): run the "
						   "server as another user (the image's default, uid 1000) or add "
						   "CAP_SYS_PTRACE to count by proportional shares"
					    : "run by a user other than root without user namespaces (the namespace-free "
					      "mode), where the kernel refused even the reading of a dumpable process of "
					      "its own uid (a security module's rule)")
			  : watch_owner_ns() ? "run by a user other than root: the zygote is started in a user namespace this "
					      "server owns, whose memory it may read"
			  : watch_stay_readable() ? "run by a user other than root without user namespaces (the namespace-free "
						   "mode): its sessions run as its own uid and stay dumpable, each in a "
						   "Landlock domain of its own that keeps the other sessions out"
					    : "root: CAP_SYS_PTRACE";
	fprintf(out, "memory counted by: %s (%s)\n", sees
		? "proportional shares near the limit (smaps_rollup: a page the session's processes share counts once, "
		  "and its checkpoint's copy of the pages the session changed counts too)"
		: "resident pages (this server cannot read its sessions' smaps_rollup: a page shared by a session's "
		  "processes counts in each, and the checkpoint, whose own pages it cannot tell, is given up for "
		  "the rest of a call when the session with all of it could be over memory_mb: that call has no rollback, "
		  "and its reply says so)", why);
	/* Refused in every mode: zstart.c (send_config) says why. */
	fprintf(out, "memfds: memfd_create refused in the sandbox: a memfd sent over a socket and closed is memory "
		     "that no process holds, which no look at the session's processes could count (files under /tmp "
		     "and /dev/shm are counted wherever their descriptors are)\n");
	fprintf(out, "processes: max_processes (%ld) per session, counted by the same watchdog; "
		"RLIMIT_NPROC for all sessions together\n", max_processes);
}

double watch_fill_bytes(double ms)
{
	static long cpus;
	if (!cpus && (cpus = sysconf(_SC_NPROCESSORS_ONLN)) < 1)
		cpus = 1;
	return WATCH_FILL_BYTES_PER_S_PER_CPU * (double)cpus * ms / 1000.0;
}

double watch_next_ms(const struct footprint *u, uint64_t limit, long max_tasks)
{
	if (u->tasks * 2 > max_tasks)
		return WATCH_INTERVAL_MS;
	uint64_t tol = limit / 10 > (64ull << 20) ? limit / 10 : 64ull << 20;
	double room = limit + tol > u->total ? (double)(limit + tol - u->total) : 0.0;
	double ms = room / watch_fill_bytes(1.0);
	/* Attack: with 20 ms as the floor, six forked children touching
	 * 160 MB each (2 GB/s a CPU) were seen at 335 MB under memory_mb 256,
	 * past its 64 MB of tolerance. */
	return ms < WATCH_NEAR_MS ? WATCH_NEAR_MS : ms > WATCH_MAX_INTERVAL_MS ? WATCH_MAX_INTERVAL_MS : ms;
}

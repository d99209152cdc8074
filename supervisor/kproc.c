/* The kernel's word on a pidfd from below: see kproc.h. */
#include "kproc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/pcache.h"
#include "../common/pstat.h"
#include "../common/util.h"

unsigned long long kproc_now_ticks(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	long hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		hz = 100;
	/* The kernel rounds a start time down to its tick the same way. */
	unsigned long long ns = (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
	return ns / (1000000000ull / (unsigned long long)hz);
}

/* The value after "\nKEY:" in a /proc text, the last number of the line
 * when last is set (NSpid lists one pid per namespace level). */
static bool field(const char *buf, const char *key, bool last, long *out)
{
	char k[32];
	snprintf(k, sizeof k, "\n%s:", key);
	const char *p = strstr(buf, k); /* never the first line in fdinfo or status */
	if (!p)
		return false;
	p += strlen(k);
	bool got = false;
	for (;;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		*out = v;
		got = true;
		p = end;
		if (!last || *p == '\n')
			break;
	}
	return got;
}

/* The pid a pidfd names now, from fdinfo: > 0, -ESRCH when it exited,
 * -EBADF when fd is no pidfd. */
static int fdinfo_pids(int pidfd, pid_t *host, pid_t *ns)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", pidfd);
	if (pidfd < 0 || read_small(path, buf, sizeof buf) < 0)
		return -EBADF;
	long h, n;
	if (!field(buf, "Pid", false, &h))
		return -EBADF; /* a pipe, a socket, a file sent where a pidfd belongs */
	if (h <= 0)
		return -ESRCH;
	*host = *ns = (pid_t)h;
	if (field(buf, "NSpid", true, &n) && n > 0)
		*ns = (pid_t)n;
	return 0;
}

int kproc_read(int pidfd, struct kproc *p)
{
	char path[64], buf[2048];
	pid_t host, ns;
	int r = fdinfo_pids(pidfd, &host, &ns);
	if (r < 0)
		return r;
	snprintf(path, sizeof path, "/proc/%d/status", (int)host);
	long tgid;
	if (read_small(path, buf, sizeof buf) < 0 || !field(buf, "Tgid", false, &tgid))
		return -ESRCH;
	if (tgid != host)
		return -EPERM; /* a thread's pidfd (PIDFD_THREAD): not a process */
	/* Its parent and its start time (field 22). */
	snprintf(path, sizeof path, "/proc/%d/stat", (int)host);
	struct pstat ps;
	if (pstat_read(-1, path, &ps) < 0)
		return -ESRCH;
	/* Still the same process: a pid is not reused while its process
	 * exists (a zombie included), and the pidfd pins the process. */
	pid_t h2, n2;
	if (fdinfo_pids(pidfd, &h2, &n2) < 0 || h2 != host)
		return -ESRCH;
	*p = (struct kproc){ .host = host, .ns = ns, .ppid = ps.ppid, .start = ps.start };
	return 0;
}

int kproc_confirm(int pidfd, pid_t parent, pid_t ns_claim, unsigned long long since, struct kproc *out,
		  char *why, size_t n)
{
	struct kproc k;
	int r = kproc_read(pidfd, &k);
	if (r == -ESRCH) {
		snprintf(why, n, "its process has exited");
		return r;
	}
	if (r == -EBADF) {
		snprintf(why, n, "the descriptor is no pidfd");
		return r;
	}
	if (r < 0) {
		snprintf(why, n, "the pidfd names a thread, not a process");
		return r;
	}
	if (parent <= 0 || k.ppid != parent) {
		snprintf(why, n, "the pidfd names process %d, whose parent is %d, not %d", (int)k.host, (int)k.ppid, (int)parent);
		return -EPERM;
	}
	if (ns_claim > 0 && k.ns != ns_claim) {
		snprintf(why, n, "the pidfd names pid %d, the message says %d", (int)k.ns, (int)ns_claim);
		return -EPERM;
	}
	if (k.start < since) {
		snprintf(why, n, "the pidfd names process %d, which started before the request", (int)k.host);
		return -EPERM;
	}
	*out = k;
	return 0;
}

bool kproc_exited(int pidfd)
{
	pid_t h, ns;
	if (fdinfo_pids(pidfd, &h, &ns) == -EBADF)
		return false;
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP));
}

/* The kernel's task flags (linux/sched.h): do_exit has begun; a fatal
 * signal was taken. */
#define KPROC_PF_EXITING 0x00000004UL
#define KPROC_PF_SIGNALED 0x00000400UL

/* The mask of pending signals after "\nKEY:" in /proc/PID/status. */
static bool pending_mask(const char *buf, const char *key, unsigned long long *mask)
{
	char k[16];
	snprintf(k, sizeof k, "\n%s:", key);
	const char *p = strstr(buf, k);
	return p && sscanf(p + strlen(k), " %llx", mask) == 1;
}

/* The pidfd polls readable: its process has exited. */
static bool polls_exited(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };
	return pidfd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP));
}

bool kproc_dying(int pidfd, pid_t host, int *sig)
{
	*sig = 0;
	char path[64], buf[4096];
	struct pstat ps;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)host);
	int r = host > 0 ? pstat_read_kept(AT_FDCWD, NULL, path, &ps) : -ESRCH;
	/* Looked at after /proc was read: not exited now, the pid was still
	 * its process's then (a pid is reused only once its process is
	 * reaped). */
	if (polls_exited(pidfd))
		return true;
	/* Its state and flags (field 9, readable without ptrace rights). */
	if (r < 0)
		return false;
	char state = ps.state;
	unsigned long flags = ps.flags;
	if (flags & KPROC_PF_SIGNALED)
		*sig = -1;
	if (state == 'Z' || state == 'X' || state == 'x' || (flags & (KPROC_PF_EXITING | KPROC_PF_SIGNALED)))
		return true;
	/* Stopped (a frozen copy), it has no SIGKILL pending: the signal
	 * wakes a stopped process as it is sent.  Awake, it may have one. */
	if (state == 'T' || state == 't')
		return false;
	snprintf(path, sizeof path, "/proc/%d/status", (int)host);
	unsigned long long own = 0, shared = 0, kill_bit = 1ULL << (SIGKILL - 1);
	bool killed = pcache_read(AT_FDCWD, NULL, path, buf, sizeof buf) > 0 && pending_mask(buf, "SigPnd", &own) &&
		      pending_mask(buf, "ShdPnd", &shared) && ((own | shared) & kill_bit);
	if (polls_exited(pidfd))
		return true;
	if (killed)
		*sig = SIGKILL;
	return killed;
}

bool kproc_pipe_reader(int fd)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);
	return fl >= 0 && (fl & O_ACCMODE) == O_RDONLY && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

/* The only child of pid, or -errno (none, several, unreadable). */
static pid_t only_child(pid_t pid)
{
	char path[96], buf[256];
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
	if (read_small(path, buf, sizeof buf) < 0)
		return -ESRCH;
	char *end;
	long c = strtol(buf, &end, 10);
	if (end == buf || c <= 0)
		return -ESRCH;
	while (*end == ' ' || *end == '\n')
		end++;
	return *end ? -EEXIST : (pid_t)c;
}

/* How many pid namespaces pid's NSpid line lists, and its last pid. */
static int ns_levels(pid_t pid, long *last)
{
	char path[64], buf[2048];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (read_small(path, buf, sizeof buf) < 0)
		return -ESRCH;
	const char *p = strstr(buf, "\nNSpid:");
	if (!p)
		return 1; /* a kernel without NSpid: no nested namespace to see */
	p += 7;
	int k = 0;
	for (;;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			break;
		*last = v;
		k++;
		p = end;
		if (*p == '\n')
			break;
	}
	return k;
}

pid_t kproc_zygote(pid_t zpid)
{
	char a[64], b[64], pa[64], pb[96];
	snprintf(pa, sizeof pa, "/proc/%d/ns/pid", (int)zpid);
	snprintf(pb, sizeof pb, "/proc/%d/ns/pid_for_children", (int)zpid);
	ssize_t na = readlink(pa, a, sizeof a - 1), nb = readlink(pb, b, sizeof b - 1);
	bool known = na > 0 && nb > 0;
	if (known && na == nb && memcmp(a, b, (size_t)na) == 0)
		return zpid; /* no pid namespace of its own: it is the zygote */
	/* It made a pid namespace (or its links cannot be read): then it
	 * forked once, into that namespace, and waits (the intermediate of
	 * jail/ns.c); that one child is pid 1 there, one level deeper
	 * than zpid. */
	pid_t c = only_child(zpid);
	long zl = 0, cl = 0;
	int zlev = ns_levels(zpid, &zl), clev = c > 0 ? ns_levels(c, &cl) : -ESRCH;
	if (c > 0 && clev == zlev + 1 && cl == 1)
		return c;
	if (!known && zlev > 0 && (c < 0 || clev <= zlev))
		return zpid; /* the links unreadable, and no deeper child */
	return c > 0 ? -ESRCH : c;
}

/* The kernel's OOM killer, when the memory cgroup is full, ends the process
 * with the highest score: its memory (shared pages count in each process
 * that maps them) plus oom_score_adj, from -1000 to 1000 thousandths of
 * the limit.  What each kill costs here: the saver, a save tried again
 * later; the copy, nothing while the session rests (copy_died takes it
 * again), and the state only when the call running then fails too; the
 * session, its call (rolled back to the copy); the zygote, the process of
 * every session (back from disk at the next call); the server, everything.
 * So the saver and then the copy are offered first: theirs is raised
 * (raising needs no privilege; writing another process's does, or the
 * same user and a dumpable process: so this works for a root server, in
 * either jail mode, and for a server run by another user without
 * namespaces, whose sessions stay dumpable (jail_config.stay_readable);
 * elsewhere the file cannot be opened and this is a no-op, said at debug
 * level).
 * Lowered only for a copy resumed as the session, back to the session's
 * (OOM_ADJ_SESSION: the server's own, which the sandbox inherits), never
 * raised for the session, the zygote or the server. */
void oom_offer(pid_t hpid, pid_t parent, int pidfd, int adj)
{
	char path[64];
	static int own = -1001;
	if (adj == OOM_ADJ_SESSION) {
		if (own == -1001) {
			FILE *f = fopen("/proc/self/oom_score_adj", "re");
			if (!f || fscanf(f, "%d", &own) != 1 || own < -1000 || own > 1000)
				own = 0;
			if (f)
				fclose(f);
		}
		adj = own;
	}
	bool same = false;
	int fd = -1;
	if (pidfd >= 0) {
		/* Opened first: still alive after that (its pidfd), the file is
		 * that very process's (its pid could not be reused meanwhile). */
		snprintf(path, sizeof path, "/proc/%d/oom_score_adj", (int)hpid);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		same = fd >= 0 && !kproc_exited(pidfd);
	} else {
		/* A child of the frozen `parent`, which cannot reap it: its
		 * directory, opened first, is checked to be one. */
		snprintf(path, sizeof path, "/proc/%d", (int)hpid);
		int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct pstat ps;
		same = dir >= 0 && pstat_read(dir, "stat", &ps) == 0 && ps.ppid == parent;
		fd = same ? openat(dir, "oom_score_adj", O_WRONLY | O_CLOEXEC) : -1;
		if (dir >= 0)
			close(dir);
	}
	char v[16];
	int len = snprintf(v, sizeof v, "%d", adj);
	if (!same || fd < 0 || write(fd, v, (size_t)len) != len)
		log_debug("cannot raise the oom_score_adj of process %d: %s", (int)hpid,
			  fd < 0 ? strerror(errno) : same ? strerror(errno) : "not the process meant");
	if (fd >= 0)
		close(fd);
}

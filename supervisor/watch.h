/* The sessions seen from outside: what the kernel says about a session's
 * processes (/proc, pidfds), never what the session says about itself.  The
 * supervisor uses it to learn who a pidfd names, to check that a session is
 * idle before it freezes it, and as the memory and process watchdog while a
 * call runs. */
#ifndef SUPERVISOR_WATCH_H
#define SUPERVISOR_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* The process behind a pidfd, from the kernel's /proc/self/fdinfo: its pid
 * here (host) and in the innermost pid namespace (the zygote's).  0, or
 * -ESRCH when it has exited, -EBADF when fd is no pidfd. */
int watch_pidfd(int pidfd, pid_t *host, pid_t *ns);

/* The parent of pid, or -errno. */
pid_t watch_ppid(pid_t pid);

/* What a look at a process's threads saw, to compare with the next look. */
struct watch_look {
	bool valid;          /* false: no earlier look (or it saw one busy) */
	long n;              /* threads */
	uint64_t tids, run;  /* their ids and their CPU time, summed */
	bool here;           /* a thread was runnable on the CPU of the caller (preempted by it) */
};

/* 1 when every thread of pid sleeps (S) or is stopped, now and at the
 * previous look *last, and none of them has run in between; 0 otherwise
 * (the first look after *last is zeroed never says 1); -errno when pid is
 * gone.  *last becomes this look. */
int watch_idle(pid_t pid, struct watch_look *last);

/* Whether the zygote's sweep can be spared after pid was sent SIGSTOP,
 * from the kernel's lists of children: 1 when every thread of pid is
 * stopped, pid's only children are keep (its checkpoint, spared with what
 * is below it, as the sweep spares it), dying (a child the server sent
 * SIGKILL, 0 for none; it must have no child of its own) or zombies, and
 * every child of the zygote is one of known[] (the sessions and
 * checkpoints) or a zombie; 0 when a thread of pid is not stopped yet;
 * -EEXIST when something else is there; -errno when the kernel does not
 * say.  Pids are host pids; 0 in keep or dying matches nothing. */
int watch_quiet(pid_t pid, pid_t keep, pid_t dying, pid_t zygote, const pid_t *known, size_t n_known);


/* CPU time (user and system, ms) used so far by pid's threads, or -errno. */
long watch_cpu_ms(pid_t pid);

/* How often the supervisor measures a running call's processes: the first
 * look of a call, and while they run more than half of max_processes ... */
#define WATCH_INTERVAL_MS 20
/* ... at least this often while their memory is near its limit (a look of
 * a session's few processes costs the server tens of microseconds, its
 * smaps_rollup counts are spaced by their own cost: see limits.c) ... */
#define WATCH_NEAR_MS 4
/* ... and at most this far apart while they are far below. */
#define WATCH_MAX_INTERVAL_MS 250
/* The fastest a process can grow the memory it holds, per CPU: fallocate
 * into a memfd, measured at 12.5 GB/s on one core of the test machine;
 * touching fresh anonymous pages, one byte each from a Python loop, is
 * 2 GB/s there (160 MB in 77 ms). */
#define WATCH_FILL_BYTES_PER_S_PER_CPU 16000000000.0

struct footprint {
	long tasks;        /* processes and threads */
	uint64_t anon;     /* RssAnon summed, bytes */
	uint64_t shmem;    /* RssShmem summed (shared, memfd and tmpfs pages mapped) */
	uint64_t memfd;    /* memfds the processes hold open, by their size */
	uint64_t tmpfs;    /* what the jail's private /tmp and /dev/shm hold */
	uint64_t copy;     /* pss: the checkpoint's proportional share */
	uint64_t total;    /* all of the above */
	uint64_t copy_rss; /* not pss: the checkpoint's RssAnon + RssShmem, not in total */
	bool pss;          /* anon, shmem and copy are proportional shares */
};

/* The most memory the machine's processes can fill in ms milliseconds,
 * all CPUs at WATCH_FILL_BYTES_PER_S_PER_CPU. */
double watch_fill_bytes(double ms);

/* When to look next (ms) after a look that found u, under a memory limit of
 * limit bytes and max_tasks processes and threads: soon enough that the
 * session, filling memory as fast as the machine allows on every CPU, has
 * not passed the limit by more than the tolerance (a tenth of it, at least
 * 64 MB), but not sooner than WATCH_NEAR_MS, and never later than
 * WATCH_MAX_INTERVAL_MS.  WATCH_INTERVAL_MS once past half of max_tasks. */
double watch_next_ms(const struct footprint *u, uint64_t limit, long max_tasks);

/* Where the jail's processes are cheapest to read: the procfs of its pid
 * namespace as the zygote (host pid zygote) sees it, which lists the jail's
 * processes only, under their pids in the jail; "/proc" (host pids) when
 * that cannot be read.  Writes the path to buf; true when it is the jail's. */
bool watch_proc_root(pid_t zygote, char *buf, size_t n);

/* What the session rooted at `root` uses now, leaving out the subtrees of
 * `skip` (its frozen checkpoint) and `dying` (the one it replaced, killed
 * and still exiting: it only gives memory back); 0 for none; pids as `proc`
 * shows them.  lone: the caller knows that nothing else is below root (the
 * freeze's quiet check), which is then not listed.  The jail's /tmp and
 * /dev/shm are found below the zygote's root.  0 or -errno. */
int watch_footprint(const char *proc, pid_t zygote, pid_t root, pid_t skip, pid_t dying, bool lone, struct footprint *u);

/* The session process's own part of watch_footprint, by two small reads:
 * its threads (tasks), RssAnon and RssShmem (total: their sum), and its
 * checkpoint's copy_rss (skip, 0 for none).  Its memfds, the jail's tmpfs
 * and the processes below it are not read (0).  0, or -ESRCH when it is
 * gone. */
int watch_session_rss(const char *proc, pid_t root, pid_t skip, struct footprint *u);

/* The same, counted as the host holds it: each process's proportional
 * share of the anonymous and shared-memory pages it maps (smaps_rollup's
 * Pss_Anon and Pss_Shmem), so that a page the session's processes and its
 * checkpoint share counts once (a forked worker's copy-on-write pages, the
 * checkpoint's copy of the state), and the checkpoint's own share is in
 * u->copy and in the total: the pages the session changed since the copy
 * was taken cost their old version there too.  Reads every page table of
 * those processes (about 8 ms a GB of 4 kB pages on a loaded machine: see
 * limits.c for how often).  -EACCES when the server may not read a
 * session's smaps_rollup (not root, no CAP_SYS_PTRACE), -ENOTSUP on a
 * kernel before 5.9: the caller counts by watch_footprint then. */
int watch_footprint_pss(const char *proc, pid_t zygote, pid_t root, pid_t skip, pid_t dying, bool lone, struct footprint *u);

/* What a session's save uses (the processes below its frozen checkpoint:
 * the saver and whatever the code run by pickling started). */
struct save_footprint {
	long tasks;        /* processes and threads */
	uint64_t anon;     /* Pss_Anon summed when pss, else RssAnon summed */
	uint64_t shmem;    /* RssShmem summed */
	uint64_t memfd;    /* memfds they hold that the session does not */
	long cpu_ms;       /* their CPU time and that of the children they waited for */
	bool pss;          /* every one's proportional share could be read */
};

/* The session's footprint as watch_footprint (its checkpoint's subtree
 * left out) in *u, and that subtree's, the checkpoint itself left out, in
 * *v; memfds held by both count once.  0 or -errno. */
int watch_save_footprint(const char *proc, pid_t zygote, pid_t session, pid_t ckpt, pid_t dying, struct footprint *u,
			 struct save_footprint *v);

/* Whether this process can read its sessions' smaps_rollup (and list their
 * descriptors), which, for a process that is not dumpable, opens only
 * for a caller with CAP_SYS_PTRACE in the user namespace its memory was
 * made in.  Root has it (not in a container that dropped it); a server run
 * by another user has it where the zygote is exec'd in a user namespace the
 * server owns (watch_owner_ns); without namespaces, a server run by another
 * user reads sessions that stay dumpable (watch_stay_readable).  Probed once, on a process in a session's
 * situation; the answer is cached.  Without it the watchdog counts by
 * resident pages (see watch.c). */
bool watch_sees_pss(void);
/* Whether this server reads its sessions only because they stay dumpable
 * (not root, without namespaces): the zygote's jail_config.stay_readable. */
bool watch_stay_readable(void);
/* Whether the zygote is to be exec'd in the owner namespace
 * (jail_ns_owner_enter): a server not run by root whose probe read a
 * process there.  Decided by the same probe. */
bool watch_owner_ns(void);
/* The probe's process (watch.c): this binary started with WATCH_PROBE_ARG
 * and a descriptor number. */
#define WATCH_PROBE_ARG "--owner-ns-probe"
int watch_probe_main(const char *fdarg);

/* Writes to out what bounds a session's memory as a whole on this machine
 * (for --check): the watchdog above, how memfds are held to it, and
 * whether a cgroup v2 memory controller is delegated to this process. */
void watch_describe_memory(long memory_mb, long max_processes, FILE *out);

#endif

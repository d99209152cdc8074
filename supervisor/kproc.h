/* What the kernel says about a process named by a pidfd that came from
 * below (the zygote's W_SPAWNED, a session's W_CHECKPOINT).
 *
 * Every process below the server can run code nobody approved, and any of
 * them can put any pidfd it holds in a message: a pidfd of a host process
 * (where pidfd_open reaches one), of the zygote, of another session, of a
 * child it forked long before.  So a pidfd is acted on (signalled, watched,
 * counted) only once the kernel confirms that it names the process the
 * server asked for: a live thread-group leader whose parent is the expected
 * process (a host pid the server learned from the kernel, never from a
 * message), whose pid in its own namespace is the one claimed, and which
 * was born after the request.  The message's own claims are only ever
 * compared with that, never used. */
#ifndef SUPERVISOR_KPROC_H
#define SUPERVISOR_KPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The clock of a process's start time in /proc/PID/stat (CLOCK_BOOTTIME,
 * in clock ticks): taken just before a request is sent, a process that
 * answers it must have started at this tick or later. */
unsigned long long kproc_now_ticks(void);

struct kproc {
	pid_t host;  /* its pid in this (the server's) pid namespace */
	pid_t ns;    /* in its innermost pid namespace (the zygote's) */
	pid_t ppid;  /* its parent, in this pid namespace */
	unsigned long long start; /* its start time, in clock ticks since boot */
};

/* Who pidfd names, as the kernel says (/proc/self/fdinfo, /proc/PID/stat,
 * /proc/PID/status), read so that the answer is about that very process
 * (the pidfd still names a live process after /proc was read, so its pid
 * was not reused meanwhile).  0; -EBADF when fd is no pidfd (a pipe, a
 * socket, a file); -ESRCH when the process has exited; -EPERM when it
 * names a thread that is not its process's leader. */
int kproc_read(int pidfd, struct kproc *p);

/* 0 when pidfd names a live process whose parent is `parent` (host pid),
 * whose pid in its own namespace is ns_claim (not compared when <= 0) and
 * which started at or after `since` (kproc_now_ticks before the request);
 * *out is filled.  -ESRCH when it has exited (nothing to act on, and
 * nothing a signal could reach); any other negative errno when it is some
 * other process, with why (at most n bytes) saying how it differs. */
int kproc_confirm(int pidfd, pid_t parent, pid_t ns_claim, unsigned long long since, struct kproc *out,
		  char *why, size_t n);

/* Whether the process behind pidfd has exited (the pidfd polls readable);
 * false for a live process and for a descriptor that is no pidfd. */
bool kproc_exited(int pidfd);

/* Whether the process behind pidfd (host: its pid here, as the kernel
 * said when it was confirmed) is ending, or has ended, without the pidfd
 * saying so yet: a SIGKILL sent to it a moment ago leaves it pending, then
 * the kernel's flags say it is exiting (unmapping a large process takes
 * milliseconds) before its pidfd polls readable.  *sig: the signal seen
 * pending (SIGKILL), -1 when a fatal signal was taken (which one /proc
 * does not say), 0 otherwise.  False when it lives on, or when /proc does
 * not say (then only its exit tells).  /proc is read before the pidfd is
 * looked at, so the answer is about that very process.  For a stopped
 * process (the usual case) one read of /proc/PID/stat and one poll. */
bool kproc_dying(int pidfd, pid_t host, int *sig);

/* Whether fd is the read end of a pipe (or FIFO): what a saver's state
 * comes on, and nothing else the server could be made to read from. */
bool kproc_pipe_reader(int fd);

/* The zygote's pid in this namespace, from the kernel: zpid itself (the
 * child the server forked), or, when zpid forked into a new pid namespace
 * (the jail's pid 1), its one child there.  -errno when neither holds
 * (zpid gone, or the pid namespace's first process not found). */
pid_t kproc_zygote(pid_t zpid);

/* Raises the oom_score_adj of process hpid (host pid) to adj, once the
 * kernel says it is the one meant: alive while its pidfd is, or (pidfd
 * -1) a child of `parent`.  For the copy and the saver only, and
 * OOM_ADJ_SESSION for a copy resumed as the session. */
void oom_offer(pid_t hpid, pid_t parent, int pidfd, int adj);
#define OOM_ADJ_COPY 50
#define OOM_ADJ_SAVER 1000
#define OOM_ADJ_SESSION (-2000) /* the server's own value */

#endif

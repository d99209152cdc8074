/* The kernel's view of a session, for the replay log's decision
 * (replay.c): what a cell did past the session's memory. */
#ifndef SUPERVISOR_KVIEW_H
#define SUPERVISOR_KVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct session;
struct cell_result;

/* A cell is logged only when its effect stays in the session's memory.
 * What the kernel shows of the session, read when the cell is sent and
 * again at its freeze (both times the process is stopped), tells effects
 * the code's words do not name (a function defined earlier does them):
 *   - the bytes it wrote through write(2) and its kin (/proc/PID/io
 *     wchar: files anywhere, pipes, sockets written as files, and what
 *     the children it reaped wrote) beyond the bytes the server read
 *     from its stdout and stderr: a file appended to, a database, a
 *     program's output file;
 *   - a child reaped during the cell (the children's page faults and CPU
 *     time in /proc/PID/stat only grow when one is waited for), or one
 *     still there at the freeze: a program started;
 *   - its descriptors (/proc/PID/fdinfo): one opened and kept (a socket,
 *     a file), one closed, or one whose offset or flags moved.  Every
 *     descriptor the cell found open was there when the last checkpoint
 *     was forked, which shares its offset: `rows = list(f)` run again on
 *     the resumed copy reads from where the first run stopped.
 * The control socket is read and written with recvmsg and sendmsg, which
 * the counters leave out.  A socket sent to and closed within the cell
 * shows in none of these: the words and the session's audit hook (its
 * result's effect) see those, and with no network granted nothing leaves
 * the sandbox anyway.  Whatever cannot be read counts as an effect: a
 * checkpoint.  io and fdinfo need ptrace's read access (kview_read). */
#define KV_FDS 256

struct kfd {
	int fd;
	int mnt;
	unsigned flags;
	unsigned long long pos, ino;
};

#define KV_KIDS 16

struct kview {
	bool valid;          /* its stat and its children */
	bool own;            /* its io and fdinfo: only with ptrace's read access */
	int threads;         /* its threads (with valid) */
	unsigned long long wchar, cminflt, cmajflt;
	unsigned long long minflt; /* its own minor faults (with valid): what the replay log prices */
	long long rss;             /* its resident pages (with valid) */
	unsigned long long cpu_ticks; /* its user and system time, clock ticks (with valid) */
	/* Its children (host pids: the checkpoint is one, and the one it
	 * replaced until the session reaps it), with the page faults each
	 * adds to cminflt and cmajflt when it is reaped, and its wchar. */
	int nkids;
	pid_t kid[KV_KIDS];
	unsigned long long kid_flt[KV_KIDS], kid_maj[KV_KIDS];
	unsigned long long kid_wchar[KV_KIDS]; /* what each had written, added when it is reaped */
	/* Its main thread's schedstat line (kview_runs), read with the rest
	 * before the pidfd's look: runs_known false when unreadable. */
	bool runs_known;
	char runs[96];
	int n;
	struct kfd fd[KV_FDS];
};

/* Reads the view of the stopped session s (kv->valid false when its stat
 * or children cannot be read or the pidfd no longer names it; kv->own
 * false when its io or descriptors cannot).  io_denied (or NULL): kept by
 * the caller for the session's current process; set when its io was
 * refused, and then its io and descriptors are not tried again (kv->own
 * false). */
void kview_read(const struct session *s, struct kview *kv, bool *io_denied);

/* What the call did past the session's memory between views a and b, with
 * `output` the bytes the server read from its stdout and stderr and r its
 * result (the session's word where kv->own is false); NULL when nothing,
 * else why (n bytes) with the reason. */
const char *kview_effect(const struct kview *a, const struct kview *b, unsigned long long output,
			 const struct cell_result *r, char *why, size_t n);

/* What the kernel counts of the session's main thread's runs (its
 * schedstat line: time on a CPU in ns, time waiting for one, times put on
 * one) into line; false when it cannot be read, says nothing (all zero),
 * or the process is no longer the one the pidfd names.  For a process
 * with one thread, an unchanged line says it has not run in between. */
bool kview_runs(const struct session *s, char *line, size_t n);

#endif

/* The link to the zygote, from the trusted side.
 *
 * The zygote runs whatever the interpreter's start-up runs (a venv's .pth
 * files, the import-time code of every module it holds), so it is as
 * hostile as a session: it can write any frame on its socket, with any
 * descriptor it holds.  The link treats it the way the session stream is
 * treated: it knows where the zygote is in its exchange with the server
 * (its phase, and what the server asked and has not had answered: spawns,
 * settles, warm-up names, exit reports of processes it killed), accepts
 * only the messages that state expects, each with its own size and number
 * of descriptors, and runs a timer on every wait.  Anything else (a type
 * the state does not expect, an answer to a request never made, a body
 * that does not parse, a pidfd the kernel does not confirm, a wait that
 * outlives its timer, a zygote that stops reading) breaks the link: the
 * supervisor ends that zygote and starts a new one.
 *
 * What reaches the supervisor is checked: a spawned session's pidfd only
 * once the kernel confirmed it names a new child of the zygote (kproc.h);
 * numbers and strings by type and length.  No path ever comes from below. */
#ifndef SUPERVISOR_ZLINK_H
#define SUPERVISOR_ZLINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/zmsg.h"
#include "../rpc/loop.h"
#include "kproc.h"

/* How long the server waits for each answer of the zygote, and how much may
 * wait unread in its direction.  The defaults (zlink_defaults) are
 * generous: a loaded machine, a sanitizer build, a font cache built at the
 * first start, a learned module's import step that a spawn waits behind.
 * The tests and the fuzzer pass shorter ones. */
struct zlink_limits {
	double start_ms;   /* from the exec to W_READY (180 s) */
	double spawn_ms;   /* W_SPAWN to W_SPAWNED (60 s) */
	double settle_ms;  /* W_SETTLE to W_SETTLED (60 s) */
	double exit_ms;    /* a process killed through its pidfd to its W_EXITED (60 s) */
	double warm_ms;    /* between two W_WARMED while names wait and no call runs (180 s) */
	size_t out_msgs;   /* messages queued unread (2048) */
	size_t out_bytes;  /* bytes queued unread (4 MiB) */
	double linger_ms;  /* the end of its link to its exit, waited for before the loss is told (5 s) */
};
extern const struct zlink_limits zlink_defaults;

/* What the link reports: on the loop only, from its own handler of the
 * zygote's socket; never from inside a zlink_* call.  Strings are sanitized and bounded; they live for the call. */
struct zlink_events {
	/* W_JAIL, the first message: the jail is built; the report was made
	 * before the interpreter started.  The zygote's host pid is known
	 * (zlink_zygote) from now on. */
	void (*jail)(void *arg, bool enforceable, bool nsfree, const char *why, const char *report);
	/* W_READY: the interpreter is up and every session can be forked. */
	void (*ready)(void *arg, double start_ms);
	/* W_FATAL before W_READY: the zygote could not start. */
	void (*fatal)(void *arg, const char *msg);
	/* The answer to zlink_spawn(id): pidfd (now the callee's) names the
	 * new session, as the kernel confirmed (k); -1 when the zygote could
	 * not fork, or the process had already exited (gone). */
	void (*spawned)(void *arg, int id, int pidfd, const struct kproc *k, bool gone);
	/* W_EXITED: the zygote reaped pid (in its namespace).  The status is
	 * the zygote's word (the kernel tells it to the parent only): use it
	 * for what the reply says, and confirm the exit itself by a pidfd. */
	void (*exited)(void *arg, pid_t pid, int status, bool status_known, unsigned long long epoch);
	/* The answer to zlink_settle(pid). */
	void (*settled)(void *arg, pid_t pid);
	/* W_WARMED, decoded: false when that name was not waiting for an
	 * answer (the link then breaks). */
	bool (*warmed)(void *arg, const struct zmsg_warmed *w);
	/* The link is down: the zygote broke its protocol (broken, with why)
	 * or its socket ended.  The link is closed already; the supervisor
	 * ends the zygote's processes and decides about a new one. */
	void (*lost)(void *arg, bool broken, const char *why);
};

struct zlink;

/* lim: NULL for zlink_defaults; else it must outlive the link. */
struct zlink *zlink_new(struct loop *l, const struct zlink_events *ev, void *arg, const struct zlink_limits *lim);
/* Closes the link if open; no event afterwards. */
void zlink_free(struct zlink *z);

/* A new zygote: fd is the server's end of its socket (made non-blocking
 * here; the link owns it), zpid the process the server forked. */
void zlink_attach(struct zlink *z, int fd, pid_t zpid);
/* Closes the link without an event (the server ends the zygote itself). */
void zlink_close(struct zlink *z);
bool zlink_open(const struct zlink *z);
/* The zygote's host pid, from the kernel (kproc_zygote), once W_JAIL is
 * in; 0 before. */
pid_t zlink_zygote(const struct zlink *z);

/* Sends a message that asks for no answer (W_SWEEP, W_WARM).  Queued when
 * the zygote does not read at once, within a bound; a zygote that lets the
 * queue pass it is broken (the event comes on the loop).  0, or -EPIPE
 * when there is no link. */
int zlink_send(struct zlink *z, uint32_t type, const char *json, const int *fds, int nfds);
/* W_SPAWN for session id (json: its body; fds: ctrl, stdout, stderr): the
 * answer is awaited, under the spawn timer. */
int zlink_spawn(struct zlink *z, int id, const char *json, const int *fds, int nfds);
/* W_SETTLE for the session whose pid (in the zygote's namespace) is pid. */
int zlink_settle(struct zlink *z, pid_t pid, const char *json);
/* The server killed the process pid (zygote's namespace) behind pidfd: its
 * exit report is due once it has exited (a dup of pidfd is kept). */
void zlink_await_exit(struct zlink *z, pid_t pid, int pidfd);
/* The learned warm-up: n more names sent (each answered by one W_WARMED),
 * and whether a call runs (the zygote then starts nothing new, so no
 * answer is awaited meanwhile). */
void zlink_warm_sent(struct zlink *z, int n);
void zlink_warm_paused(struct zlink *z, bool paused);

#endif

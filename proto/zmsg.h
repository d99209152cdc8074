/* The messages between the server and the zygote (W_CONFIG, the first, is
 * in config.h): one struct per type, encoded by the side that sends it and
 * decoded by the other, so a field is added in one place and the compiler
 * checks both ends.
 *
 * Every process below the server may run code nobody approved, the zygote
 * too (a venv's .pth file, a module's import-time code): each decoder is
 * the check of a message from there (private.h has the rule: every field
 * of its type and within its range, or the message is refused with an
 * error naming the field; sizes and descriptors are judged by the reader
 * before, in supervisor/zlink.c).  What the server then believes of a pid
 * is the kernel's word (supervisor/kproc.h), never the message's.  The
 * messages the server sends down are decoded by the zygote through the
 * same checks.
 *
 * Encoders return the message's payload, malloc'd, never NULL (out of
 * memory ends the process: common/util.h).  Decoders return 0, or -EPROTO
 * with e naming the field. */
#ifndef PROTO_ZMSG_H
#define PROTO_ZMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/err.h"
#include "wire.h"

/* W_SPAWN, server -> zygote; descriptors: the session's control socket,
 * its stdout and its stderr (write ends).  Fork session `name`.  The
 * zygote hands the body, encoded again from what it decoded, to the
 * bootstrap's session_init (interp/bootstrap/session.py reads name and seed). */
struct zmsg_spawn {
	int id;                 /* the server's spawn id, answered in W_SPAWNED */
	char name[PROTO_NAME_MAX + 1];
	long long seed;         /* limits.seed: random and numpy.random */
	bool checkpoint;        /* limits.checkpoint: the session forks its checkpoints */
	unsigned long long persist_cap; /* the largest state its saver writes, in bytes; 0: none */
};
char *zmsg_spawn_encode(const struct zmsg_spawn *m);
int zmsg_spawn_decode(const void *data, size_t len, struct zmsg_spawn *m, struct err *e);

/* W_SPAWNED, zygote -> server; descriptor: the session's pidfd (none when
 * the fork failed). */
struct zmsg_spawned {
	int id;                 /* the W_SPAWN it answers */
	pid_t pid;              /* in the zygote's pid namespace; -1: the fork failed */
	char error[160];        /* why it failed, or "" (sanitized, cut) */
};
char *zmsg_spawned_encode(const struct zmsg_spawned *m);
int zmsg_spawned_decode(const void *data, size_t len, struct zmsg_spawned *m, struct err *e);

/* W_EXITED, zygote -> server: it reaped a child. */
struct zmsg_exited {
	pid_t pid;              /* in its namespace */
	int status;             /* the wait status, when status_known */
	bool status_known;
	unsigned long long epoch; /* how many children it has reaped, this one counted */
};
char *zmsg_exited_encode(const struct zmsg_exited *m);
int zmsg_exited_decode(const void *data, size_t len, struct zmsg_exited *m, struct err *e);

/* How many pids a sweep or a settle names: two per session (its process
 * and its checkpoint), at most 256 sessions, with room. */
#define ZMSG_PIDS_MAX 1024

/* W_SWEEP, server -> zygote: end every child of the zygote but these (what
 * a dead session's code left, reparented to it).  Stale, and skipped, when
 * the zygote has reaped more children since (epoch). */
struct zmsg_sweep {
	unsigned long long epoch;
	unsigned long long born_by; /* the clock tick the list was made at (kproc_now_ticks):
				     * what was born later is not judged by it */
	pid_t keep[ZMSG_PIDS_MAX]; /* the live sessions and checkpoints, zygote's namespace */
	size_t n_keep;
};
char *zmsg_sweep_encode(const struct zmsg_sweep *m);
int zmsg_sweep_decode(const void *data, size_t len, struct zmsg_sweep *m, struct err *e);

/* W_SETTLE, server -> zygote: end what the call left below the frozen
 * session `pid` but its checkpoint `keep`; and, with the list of every
 * session and checkpoint (has_all, when the server's view is whole), the
 * zygote's other children too, as a sweep of that epoch would. */
struct zmsg_settle {
	pid_t pid;
	pid_t keep;             /* 0: none */
	unsigned long long epoch;
	unsigned long long born_by; /* for all[], as in a sweep */
	bool has_all;
	pid_t all[ZMSG_PIDS_MAX];
	size_t n_all;
};
char *zmsg_settle_encode(const struct zmsg_settle *m);
int zmsg_settle_decode(const void *data, size_t len, struct zmsg_settle *m, struct err *e);

/* W_SETTLED, zygote -> server: the answer to W_SETTLE. */
struct zmsg_settled {
	pid_t pid;              /* the settle's (0: it could not read it) */
	int ended;              /* how many processes it ended */
};
char *zmsg_settled_encode(const struct zmsg_settled *m);
int zmsg_settled_decode(const void *data, size_t len, struct zmsg_settled *m, struct err *e);

/* W_JAIL, zygote -> server, its first message: the jail's report, made
 * before the interpreter started.  Decoded, the strings point into the
 * message (decoded) until zmsg_jail_free. */
struct zmsg_jail {
	bool enforceable;       /* the jail holds what the policy needs */
	bool nsfree;            /* Landlock and seccomp without namespaces */
	const char *why;        /* not enforceable: why (sanitized, one line, cut), or "" */
	const char *report;     /* the layers as applied (sanitized, lines, cut), or "" */
	void *decoded;
};
char *zmsg_jail_encode(const struct zmsg_jail *m);
int zmsg_jail_decode(const void *data, size_t len, struct zmsg_jail *m, struct err *e);
void zmsg_jail_free(struct zmsg_jail *m);

/* W_READY, zygote -> server: the interpreter is up (after W_JAIL). */
struct zmsg_ready {
	double start_ms;        /* how long it took, or -1 */
};
char *zmsg_ready_encode(const struct zmsg_ready *m);
int zmsg_ready_decode(const void *data, size_t len, struct zmsg_ready *m, struct err *e);

/* W_FATAL, zygote -> server, before W_READY: it cannot start.  Decoded,
 * message points into the message (decoded) until zmsg_fatal_free. */
struct zmsg_fatal {
	const char *message;    /* sanitized, cut to 1 KiB; "unknown error" when it gave none */
	void *decoded;
};
char *zmsg_fatal_encode(const struct zmsg_fatal *m);
int zmsg_fatal_decode(const void *data, size_t len, struct zmsg_fatal *m, struct err *e);
void zmsg_fatal_free(struct zmsg_fatal *m);

/* A module's name in the learned warm-up (a dotted identifier). */
#define ZMSG_MODULE_MAX 128

/* W_WARMED, zygote -> server: the outcome for one name it was sent.  The
 * bootstrap's probe makes the outcome (interp/bootstrap/warmup.py, warm_probe:
 * ok, why, ms, steps, longest_ms); the zygote puts it through this
 * decoder and sends what the encoder makes of it, with the name.
 * Decoded, why points into the message (decoded) until zmsg_warmed_free. */
struct zmsg_warmed {
	char name[ZMSG_MODULE_MAX + 1];
	bool ok;                /* loaded in the zygote */
	const char *why;        /* refused: why (sanitized, cut to 300 bytes), or NULL */
	double ms;              /* the time it took, or -1 */
	long steps;             /* the imports it made, or -1 */
	double longest_ms;      /* the longest of them, or -1 */
	void *decoded;
};
char *zmsg_warmed_encode(const struct zmsg_warmed *m);
int zmsg_warmed_decode(const void *data, size_t len, struct zmsg_warmed *m, struct err *e);
void zmsg_warmed_free(struct zmsg_warmed *m);

/* How many names one W_WARM carries (the server sends at most the names
 * it learned and one cell's report). */
#define ZMSG_WARM_NAMES 64

/* W_WARM, server -> zygote: names to load while idle (learned warm-up),
 * and (has_pause) whether a call runs, so that it starts nothing new. */
struct zmsg_warm {
	char names[ZMSG_WARM_NAMES][ZMSG_MODULE_MAX + 1];
	size_t n_names;
	bool has_pause, pause;
};
char *zmsg_warm_encode(const struct zmsg_warm *m);
int zmsg_warm_decode(const void *data, size_t len, struct zmsg_warm *m, struct err *e);

#endif

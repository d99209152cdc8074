/* Learned warm-up, the zygote's side (docs/WARMUP.md).
 *
 * The server sends W_WARM with module names that sessions of this project
 * imported.  While idle, the zygote tries each name in a throw-away fork
 * (the probe: bootstrap warm_probe), and only when the probe found it to be
 * installed code that loads in time, without threads and without any file
 * from outside the installation, imports it in itself, one module per step
 * between the server's requests (bootstrap warm_step).  Each name's outcome
 * goes back as W_WARMED. */
#ifndef INTERP_WARM_H
#define INTERP_WARM_H

#include <stdbool.h>
#include <sys/types.h>

struct wire_msg;

/* Queues the names of a W_WARM message (bounded; the rest is dropped). */
void warm_enqueue(const struct wire_msg *m);
/* The probe's pipe to poll, or -1. */
int warm_fd(void);
/* The timeout for the zygote's poll: -1 nothing to do, 0 work is ready,
 * else the ms until the probe's deadline. */
int warm_timeout(void);
/* One step of work (start a probe, read its answer, import one module),
 * when nothing from the server waits.  ctrl and sfd are closed in the
 * probe. */
void warm_work(int ctrl, int sfd);
/* The zygote reaped pid: true when it was the probe (not a session). */
bool warm_reaped(pid_t pid);
/* The probe's pid while it runs, else 0 (kept by the zygote's sweeps). */
pid_t warm_probe_pid(void);
/* In a child the zygote forked (a session, a probe): the signal mask and
 * SIGCHLD's flags a plain process starts with (interp/zygote.c). */
void session_child_signals(void);

#endif

/* When a saved session's state is saved: once the session has rested long
 * enough, not after every call.
 *
 * A save pickles the whole state (a fork of the checkpoint, persist.c), so
 * a save after every call costs a state's worth of CPU per call: 780 ms a
 * call for a 4M-row DataFrame on the test machine, where the call itself
 * took 300.  A session that is working (calls coming one after another)
 * replaces its state faster than it is worth saving, so its checkpoints are
 * taken without a saver, and the latest state is saved once the session
 * has been idle for the delay below; at exit (end of input, SIGTERM,
 * SIGINT, SIGHUP) at once.  What a SIGKILL of the server loses is then the
 * calls that ended less than the delay before it (and the one whose save
 * was still running): the delay is the bound of that promise.
 *
 * The delay is priced by the last save: SAVE_IDLE_FACTOR times what it
 * took, so that a session whose calls are further apart than the delay
 * (the saves run after each of them) spends at most about a fifth of its
 * wall-clock time saving; at least SAVE_IDLE_MIN_MS, at most
 * SAVE_IDLE_MAX_MS. */
#ifndef SUPERVISOR_SAVEPACE_H
#define SUPERVISOR_SAVEPACE_H

#include <stdint.h>

#include "../rpc/loop.h"

#define SAVE_IDLE_MIN_MS 5000.0
#define SAVE_IDLE_MAX_MS 10000.0
#define SAVE_IDLE_FACTOR 5.0

struct save_pace {
	double last_save_ms; /* what the last save took, start to rename (0: none yet) */
	uint64_t timer;      /* the pending save, or 0 */
};

/* The idle time after which the state is saved. */
double save_pace_delay(const struct save_pace *p);
/* A save ended whole after ms milliseconds: the next delay is priced by it. */
void save_pace_saved(struct save_pace *p, double ms);
/* A save was cut short by a call after ms milliseconds: it costs at least
 * that much, so the next rest is at least as long as that makes it (saves
 * that calls keep cutting short wait for longer rests, up to the bound). */
void save_pace_cut(struct save_pace *p, double ms);
/* The session rests with a state not on disk: fn(arg) is called once it
 * has rested for the delay (a pending call is moved back). */
void save_pace_arm(struct save_pace *p, struct loop *l, loop_timer_cb fn, void *arg);
/* A call came, or the session is gone: no save pending.  Safe to repeat. */
void save_pace_cancel(struct save_pace *p, struct loop *l);
/* Called by fn: the timer is spent. */
void save_pace_fired(struct save_pace *p);

#endif

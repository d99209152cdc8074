/* Work the server does for a request that reads what the sandbox wrote
 * (walking, hashing, validating, reading files for a reply) runs here, on a
 * small pool of worker threads, never on the event loop: a workspace of
 * huge or sparse files must not delay a ping or another session's timeout.
 *
 * A job is a struct the caller embeds `struct job` in.  run() executes on a
 * worker thread and may touch only the job itself and what never changes
 * after start-up (the workspace handle, the policy); done() executes later
 * on the loop thread and owns the job from then on (it frees it).  An owner
 * that goes away first calls work_abandon(): done() is then called with
 * abandoned = true and must only free.  Without a pool (the unit tests and
 * the in-process fuzzer, which never run the loop), work_submit runs both
 * at once, in the caller's thread. */
#ifndef RPC_WORK_H
#define RPC_WORK_H

#include <stdbool.h>

#include "loop.h"

struct job {
	void (*run)(struct job *j);
	void (*done)(struct job *j, bool abandoned);
	bool abandoned;       /* loop thread only */
	struct job *next;     /* the pool's queues */
};

struct work;

/* Starts nthreads workers; their completions are delivered through l. */
struct work *work_new(struct loop *l, int nthreads);
/* Stops the workers (after the job each is running) and calls done() of
 * every job not yet delivered with abandoned = true.  NULL-safe. */
void work_free(struct work *w);

/* Queues j (w may be NULL: see above).  Never fails: when the pool is
 * stopped the job is run in the caller's thread. */
void work_submit(struct work *w, struct job *j);
/* The owner no longer wants j's result: done() will only free it. */
void work_abandon(struct job *j);

#endif

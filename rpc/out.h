/* The server's output stream: every line stdout carries, queued in order and
 * written by a thread of its own, so that the event loop never waits on the
 * client.  A client that stops reading must not stop the server: while a
 * reply waits, every timer (a call's timeout, the memory watchdog, the
 * saves) keeps firing.
 *
 * The queue is bounded: a client that leaves more than `cap` bytes unread,
 * or reads nothing of what waits for `stall_ms`, is cut off: what waits is
 * dropped, later lines are dropped, and cut() is called once, from the loop
 * (never from inside out_line, so the caller of a reply is not re-entered).
 *
 * Before out_start (the unit tests, the fuzzers, which never run the loop)
 * out_line writes at once, in the caller's thread, as a blocking write. */
#ifndef RPC_OUT_H
#define RPC_OUT_H

#include <stdbool.h>
#include <stddef.h>

#include "loop.h"

#define OUT_CAP_DEFAULT ((size_t)64 << 20)   /* bytes a client may leave unread */
#define OUT_STALL_MS_DEFAULT 120000.0        /* how long it may read nothing */
#define OUT_EXIT_MS 5000.0                   /* the wait for the last lines at exit */

struct out_config {
	struct loop *loop;
	int fd;                /* the stream; left as it is (flags and all) */
	size_t cap;            /* 0: OUT_CAP_DEFAULT */
	double stall_ms;       /* <= 0: OUT_STALL_MS_DEFAULT */
	/* The client was cut off; why says by what, in a sentence. */
	void (*cut)(void *arg, const char *why);
	void *arg;
};

/* Starts the writer (again, after out_stop).  False (and lines are written
 * at once, as before out_start) when no thread can be started.  Lines are
 * queued from the loop's thread only. */
bool out_start(const struct out_config *c);
/* Queues one line: len bytes of s (copied) and a newline, written whole and
 * after every line queued before it. */
void out_line(const char *s, size_t len);
/* Blocks until every queued line is written, the stream fails or is cut
 * off, or nothing of it was read for stall_ms.  True when all was written.
 * Run only where the loop may wait (at exit, before an exec). */
bool out_drain(double stall_ms);
/* After out_drain: stops the writer, dropping what it could not write (a
 * write the client has not let end within a moment is cancelled).  Lines
 * are then written at once again, as before out_start. */
void out_stop(void);
/* Bytes queued and not yet written. */
size_t out_waiting(void);

#endif

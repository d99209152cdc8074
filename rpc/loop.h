/* A small single-threaded event loop: fd watches and one-shot timers over
 * poll(2).  The server is one thread so that no lock guards its state, and
 * fork() of the zygote is safe. */
#ifndef RPC_LOOP_H
#define RPC_LOOP_H

#include <stdint.h>

typedef void (*loop_fd_cb)(void *arg, int fd, short revents);
typedef void (*loop_timer_cb)(void *arg);

struct loop;

struct loop *loop_new(void);
void loop_free(struct loop *l);

/* Watches fd for events (POLLIN...).  One watch per fd.  Never fails:
 * out of memory ends the process (common/util.h). */
void loop_watch(struct loop *l, int fd, short events, loop_fd_cb cb, void *arg);
void loop_unwatch(struct loop *l, int fd);

/* Calls cb once after ms milliseconds.  Returns an id (> 0) for
 * loop_timer_cancel; never fails, as loop_watch. */
uint64_t loop_timer(struct loop *l, double ms, loop_timer_cb cb, void *arg);
void loop_timer_cancel(struct loop *l, uint64_t id);

/* Runs until loop_stop (which it then clears). */
void loop_run(struct loop *l);
void loop_stop(struct loop *l);

double loop_now_ms(void); /* CLOCK_MONOTONIC */

/* Calls fn after every callback the loop runs (NULL: none): an observer of
 * the state between two events, for the tests (the supervisor's
 * state-change log); the server sets none. */
void loop_after_each(struct loop *l, void (*fn)(void *arg), void *arg);

#endif

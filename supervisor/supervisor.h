/* The supervisor: the zygote and the sessions, seen from the trusted side.
 * It forks the zygote, asks it for session processes, sends them cells,
 * drains their output, enforces timeouts, limits and cancellations, and
 * rolls a session back to its checkpoint.  It knows nothing of MCP: what a
 * run needs from above (the workspace before and after, the reply) goes
 * through the run's events (struct run_events), which the layer that
 * submitted it implements. */
#ifndef SUPERVISOR_SUPERVISOR_H
#define SUPERVISOR_SUPERVISOR_H

/* The lines around the jail's report that a --check-session server writes
 * on stderr (mcp/check.c reads them). */
#define CHECK_JAIL_BEGIN "psm-check: jail report follows"
#define CHECK_JAIL_END "psm-check: jail report ends"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../policy/policy.h"
#include "../rpc/loop.h"
#include "../files/fsafe.h"
#include "../proto/result.h"
#include "callstatus.h"
#include "usage.h"
#include "warmup.h"

#define SESSION_NAME_MAX 64
/* A progress event every this many ms while a run that asked for them runs. */
#define PROGRESS_MS 4000.0

struct run;
struct work;
struct zlink_limits;

/* What a run needs from the layer that submitted it.  Each is called on the
 * loop; none may call sup_submit, sup_cancel or sup_free from inside. */
struct run_events {
	/* Before the cell is sent (and again if it is sent again to another
	 * process): take what is needed to tell the run's files later (a
	 * snapshot of the workspace), then call ready(r, arg), at once or
	 * later on the loop. */
	void (*prepare)(struct run *r, void (*ready)(struct run *r, void *arg), void *arg);
	/* The cell is over (its result is in, or its process is gone): find
	 * what it made, then call ready(r, arg). */
	void (*collect)(struct run *r, void (*ready)(struct run *r, void *arg), void *arg);
	/* An image the session should downscale: its path relative to the
	 * workspace in rel; false when there is none left. */
	bool (*next_thumb)(struct run *r, char *rel, size_t size);
	/* What the session sent for that image (untrusted bytes). */
	void (*thumb)(struct run *r, const unsigned char *data, size_t len);
	/* Every PROGRESS_MS while it runs, when r->wants_progress: a value
	 * that only grows, the seconds since the cell was sent, and the last
	 * line it printed (untrusted, may be empty). */
	void (*progress)(struct run *r, double progress, double elapsed_s, const char *last_line);
	/* The run is over: its outcome is in r, which is the callee's now. */
	void (*done)(struct run *r);
	/* A run dropped unfinished (cancelled while queued, or the supervisor
	 * ends): free it, no outcome. */
	void (*drop)(struct run *r);
};

/* One execution of a cell, from submission to outcome.  The layer above
 * embeds it in its own request and sets the first block. */
struct run {
	/* The request. */
	char session[SESSION_NAME_MAX + 1];
	char *code;              /* owned: freed by the owner */
	double timeout_ms;
	bool reset;              /* discard the session's state first */
	/* fork_from: a new session starts as a copy of this one's state, or
	 * "" (the caller checked sup_fork_check). */
	char fork_from[SESSION_NAME_MAX + 1];
	bool wants_progress;
	const struct run_events *ev;

	/* The outcome, filled by the supervisor. */
	int cell;
	double t_start, duration_ms;
	enum call_status status; /* CALL_PENDING until decided */
	int exit_code;
	enum call_state state;   /* STATE_PENDING until decided */
	bool new_session;
	/* The session's result, decoded (proto/result.h: every field held to
	 * its type and bound; the strings still as the session wrote them), or
	 * NULL: none came, or it no longer stands. */
	struct cell_result *result;
	char *out_text, *err_text;
	bool out_truncated, err_truncated;
	/* Display paths of the full logs, as out_text and err_text name them
	 * (outbuf_finish), or NULL. */
	char *out_log, *err_log;
	char *note;              /* extra line for the model, or NULL */
	unsigned long long ws_bytes; /* CALL_LIMITS: the workspace's size then */
	/* The workspace's files before and after the run (ev->collect fills
	 * them from its snapshots): the end-of-call workspace check.  Without
	 * namespaces they include the private temp directory (sup_scratch),
	 * scratch_bytes of ws_bytes at the stop. */
	unsigned long long ws_before, ws_after, scratch_after, scratch_bytes;
	/* What the walks after the run could not see (too deep, too many
	 * entries, unreadable), or "": counts as over max_workspace_mb. */
	char unseen_after[600];
	/* CALL_LIMITS for the workspace: what could not be seen, or "". */
	char ws_unseen[600];
	/* The diff of those snapshots found a file created, modified or
	 * deleted (ev->collect sets it; when unsure, true): a cell that wrote
	 * is never run a second time (replay.c). */
	bool ws_changed;
	struct usage usage;      /* CPU time and peak memory of this run */
	bool cancelled;          /* no reply may be sent */
	bool over_limit;         /* ended by the server's watchdog (denied_by limits) */
	int signal;              /* CALL_CRASHED: the signal that ended the process, or 0 */
	bool broke_protocol;     /* ended by the server for what it sent */
	/* CALL_TIMEOUT: the cell had finished, and its images were still
	 * being downscaled for the reply (thumb_ms allowed for that). */
	bool thumb_late;
	double thumb_ms;

	/* The supervisor's own. */
	bool started;            /* the session said it received the cell */
	int resends;             /* sent again after the process died unstarted */
	bool prepared;           /* ev->prepare is done for this attempt */
	bool collected;          /* ev->collect is done */
	bool waiting;            /* an ev->prepare or ev->collect is running */
	bool finish_pending;     /* finishing waits for ev->collect */
	bool fork_done;          /* fork_from: the copy is made (or to be restored) */
	bool forked;             /* the first call of a copy: its state is "forked" */
	struct run *next;
};

/* What the supervisor needs to know of the server.  Every pointer must
 * outlive the supervisor. */
struct sup_config {
	struct loop *loop;
	const struct policy *policy;
	const struct workspace *ws;
	bool approved;           /* the project's policy is approved (workspace trust) */
	const char *venv;        /* or NULL */
	bool venv_pth_off;       /* the venv's .pth files are not run (zconfig) */
	bool venv_withheld;      /* the project's venv is not approved (zconfig) */
	double timeout_s;        /* --timeout, or <= 0 */
	long memory_mb;          /* --memory, or <= 0 */
	bool check_session;      /* --check's own server: the jail report to stderr */
	enum warmup_mode warmup; /* --warmup (warmup.h) */
	const char *self_exe;    /* this binary, exec'd as the zygote */
	/* The timers and bounds of the zygote's link (zlink.h), and the first
	 * delay before a zygote is started again (then doubled...): NULL and 0
	 * for the defaults; shorter ones for the tests and the fuzzer. */
	const struct zlink_limits *zlink;
	double restart_ms;
	/* The fuzzer's zygote (test/fuzz/fuzz_zygote.c): starts a process that
	 * plays the zygote on zygote_end (server_end is the server's, to close
	 * there) and returns its pid (the parent's side only; -1 when none);
	 * NULL: fork and exec self_exe. */
	pid_t (*fake_zygote)(void *arg, int zygote_end, int server_end);
	/* Called after a run or a save of a session ended (at the end of its
	 * input the server waits for sup_busy to turn false), or NULL. */
	void (*ended)(void *arg);
	void *arg;
};

struct sup *sup_new(const struct sup_config *cfg);
/* The worker threads that watch the workspace's size during a run (NULL:
 * not watched); set after sup_start, since the zygote is forked before any
 * thread exists. */
void sup_set_work(struct sup *sup, struct work *work);
/* Forks the zygote (which warms up in the background). */
int sup_start(struct sup *sup, struct err *e);
/* No interpreter for this server: every run ends with `why` (for the
 * in-process fuzzing of the dispatcher, which must not fork). */
void sup_disable(struct sup *sup, const char *why);
/* Ends every session and the zygote, and waits for them.  A run whose end
 * was decided but not yet handed over gets its done first; every other
 * run still held is dropped. */
void sup_free(struct sup *sup);

/* Takes r until r->ev->done or r->ev->drop. */
void sup_submit(struct sup *sup, struct run *r);
/* Frees what the supervisor filled in r (its outcome, note and result); r
 * itself and its request stay the caller's. */
void run_outcome_free(struct run *r);
/* Cancels the first run (running or queued) for which match(r, key) holds:
 * true when one was found.  A running one ends with r->cancelled set, a
 * queued one is dropped. */
bool sup_cancel(struct sup *sup, bool (*match)(const struct run *r, const void *key), const void *key);
/* The exit code of the session's last execution; false when none. */
bool sup_last_exit(struct sup *sup, const char *session, int *exit_code);
/* The sessions whose code ran in this server's life, most recent last call
 * first, as "co2 (last exit 0), scratch (last exit 1)" in list (cut to n),
 * and the most recent one's name in latest ("" when none).  Returns how
 * many there are. */
int sup_sessions_ran(struct sup *sup, char *list, size_t n, char *latest, size_t latest_n);
/* The names of the sessions this server holds, as "a, b, c" (cut to n). */
void sup_session_names(struct sup *sup, char *list, size_t n);
/* Each session's name, phase, process life and owed checkpoint, for the
 * tests' state-change log ("name phase/life/due; ..."). */
void sup_states(const struct sup *sup, char *buf, size_t n);
/* How many events about a session's process no row of its life table took
 * (each a bug, logged) in this process's life: the tests want 0. */
unsigned sup_life_refused(void);
/* How many sessions wait on their live process with no deadline armed for
 * the phase they are in (each logged): the tests look after every event
 * and want 0. */
unsigned sup_deadlines_missing(const struct sup *sup);
int sup_count_sessions(struct sup *sup);
/* Whether any run is running or queued. */
bool sup_busy(struct sup *sup);
/* Whether the state of a call that ended is not on disk yet but is on its
 * way there: a save running, a checkpoint (which starts one) being taken,
 * or a save sup_shutdown would start.  The server waits for these before
 * it exits. */
bool sup_saving(struct sup *sup);
/* The server is exiting: starts the saves that were cut short or never
 * started (each session's state after its last call), so that sup_saving
 * turns false once every state is on disk.  Calls still run. */
void sup_shutdown(struct sup *sup);
/* Logs at warn level, for each session, the state that could not be saved
 * before exit (called when the time for saving is over). */
void sup_report_unsaved(struct sup *sup);
bool sup_session_exists(struct sup *sup, const char *session);
/* The namespace-free mode's private temp directory (TMPDIR on the host),
 * which counts against max_workspace_mb with the workspace; NULL with
 * namespaces (the jail's /tmp is a capped tmpfs of its own) or before the
 * zygote is ready. */
const char *sup_scratch(const struct sup *sup);
/* Whether `session` may start as a copy of `parent` (fork_from): the parent
 * is a live session of this server or has a saved state, and the session
 * does not exist (neither live nor saved, unless reset discards it).  0, or
 * -1 with the reason, in words for the reply, in why. */
int sup_fork_check(struct sup *sup, const char *parent, const char *session, bool reset, char *why, size_t n);

#endif

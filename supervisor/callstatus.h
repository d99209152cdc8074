/* What a call ended as (status) and what it left of the session's state,
 * each an enum with one table: the name on the wire, the exit code, and
 * whether the session rolls back.  Add a status here and the reply, the
 * output schema and the rollback rule all follow. */
#ifndef SUPERVISOR_CALLSTATUS_H
#define SUPERVISOR_CALLSTATUS_H

#include <stdbool.h>
#include <stddef.h>

enum call_status {
	CALL_PENDING,   /* not decided yet (0, so a new call starts here) */
	CALL_OK,
	CALL_ERROR,     /* a Python exception, or the call could not run */
	CALL_TIMEOUT,
	CALL_CANCELLED,
	CALL_CRASHED,   /* the process died: a signal, os._exit, a seccomp kill */
	CALL_MEMORY,    /* MemoryError at the memory limit */
	CALL_LIMITS,    /* the workspace outgrew limits.max_workspace_mb */
	CALL_STATUS_COUNT
};

enum call_state {
	STATE_PENDING,  /* not decided yet */
	STATE_KEPT,
	STATE_ROLLED_BACK,
	STATE_NEW,
	STATE_RESTORED, /* the first call after a restart loaded the saved state */
	STATE_FORKED,   /* the first call of a copy of another session (fork_from) */
	CALL_STATE_COUNT
};

struct call_status_info {
	const char *name;       /* "ok", "timeout"... as in the reply */
	int exit_code;          /* the reply's exit_code; -1: the process's own */
	bool rolls_back;        /* the session returns to its state before the call */
	const char *error_type; /* error.type when the session gave none */
};

extern const struct call_status_info call_status_table[CALL_STATUS_COUNT];
extern const char *const call_state_names[CALL_STATE_COUNT];

static inline const char *call_status_name(enum call_status s)
{
	return call_status_table[s].name;
}

static inline const char *call_state_name(enum call_state s)
{
	return call_state_names[s];
}

/* The exit code of a call that ended as s: the table's, or, for a status
 * whose code is the process's own, 128 + the signal that ended it (or its
 * exit status, at least 1); 128 + SIGKILL when the death is not known. */
int call_status_exit_code(enum call_status s, int wstatus, bool wstatus_known);

/* The name of a signal that ended a session's process ("SIGSEGV") and what
 * it usually means there, for the reply. */
const char *call_signal_name(int sig);
const char *call_signal_meaning(int sig);

/* Python's faulthandler report at the end of text (the stderr of a call
 * whose process crashed): "Fatal Python error: ...", the frames of the
 * thread that crashed, and the list of extension modules.  Its byte range
 * in *start and *end (the end of text when nothing follows it); into
 * frames (fn bytes), its "  File ..." lines but the bootstrap's, most
 * recent first; into where (wn bytes), the innermost frame, and the
 * innermost frame of the cell's own code when that is another ("string_at
 * (ctypes/__init__.py, line 519), called from <cell 3> line 4 in f").
 * False when text holds no such report.  text is what the session wrote:
 * only ever copied, bounded. */
bool call_fault_report(const char *text, size_t *start, size_t *end, char *frames, size_t fn, char *where, size_t wn);

#endif

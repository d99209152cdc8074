/* Each session's history, kept by the server: every call that reached the
 * interpreter, in order, with its code, what became of the state, what the
 * reply carried and the files it wrote with their SHA-256.  It is the
 * server's record, never the session's word: it lives in the user's state
 * directory ($XDG_STATE_HOME/python-sandbox-mcp/history/), outside
 * everything the sandbox can write or read, one directory per workspace,
 * one append-only file of JSON lines per session.  The server holds one
 * directory descriptor and nothing per call: a record is appended and
 * forgotten.  The export (export.c) and verify_outputs read it back. */
#ifndef MCP_HISTORY_H
#define MCP_HISTORY_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../files/fsafe.h"
#include "../policy/policy.h"

/* Each of stdout, stderr, the value and the traceback is kept up to this
 * many bytes per call (head and tail around a marker, as the reply). */
#define HISTORY_TEXT_MAX (64u << 10)
/* A session's file stops growing here: later calls are not recorded and
 * the last record says so (the export and the provenance then say the
 * history is incomplete). */
#define HISTORY_FILE_MAX (512ull << 20)
/* Files listed per call (the reply's own cap). */
#define HISTORY_FILES_MAX 1000
/* What one call may hash of the files it wrote: past it, a file's sha256
 * is null (never a guess). */
#define HISTORY_HASH_BUDGET (1ull << 30)

struct history;

/* Where the history of this project is, and whether it can be kept.  Never
 * NULL; when it cannot be kept, history_on is false and history_why_off
 * says why. policy_source and policy_sha256 (may be "") name the policy in
 * force; venv (may be NULL) is where the interpreter's packages are. */
struct history *history_open(const struct workspace *ws, const struct policy *pol, const char *policy_source,
			     const char *policy_sha256, const char *venv);
/* The same for reading only (the export): never creates anything. */
struct history *history_open_read(const char *workspace_abs, char *why, size_t whyn);
void history_free(struct history *h);
bool history_on(const struct history *h);
const char *history_why_off(const struct history *h);
const char *history_dir(const struct history *h);

/* One call, as the reply carried it. */
struct hist_image {
	const char *b64;
	const char *mime;
};

struct hist_call {
	const char *session;
	int cell;
	const char *code;
	const char *status;      /* ok, error, timeout... */
	const char *state;       /* kept, rolled_back, new, restored, forked */
	bool reset;              /* the call asked for reset: a new history */
	const char *fork_from;   /* the parent of a forked call, else "" */
	double duration_ms, timeout_s;
	const char *out, *err, *result;           /* may be NULL */
	const char *etype, *emsg, *etb;           /* may be NULL */
	const struct hist_image *images;
	size_t n_images;
	const cJSON *files;      /* [{path, sha256|null, bytes, change}] */
};

/* Adds {path: disp, sha256 (null past the budget: never a guess), bytes,
 * change} to files for the file rel of the workspace, charging what it read
 * to *budget; at most HISTORY_FILES_MAX entries.  (On a worker.) */
void history_hash_file(const struct workspace *ws, const char *rel, const char *disp, double bytes, bool created,
		       cJSON *files, off_t *budget);

/* A call that asked for reset, whether or not it reached the interpreter:
 * the session's history starts again. */
void history_reset(struct history *h, const char *session);
/* Appends one call (on the loop; a few small writes).  Failures are
 * logged, never the call's. */
void history_record(struct history *h, const struct hist_call *c);

/* --------------------------------------------------------------- reading */

/* Opens the session's file for reading: a FILE, or NULL with errno (ENOENT:
 * no history for that session). */
FILE *history_read(const struct history *h, const char *session);
/* The sessions that have a history, as a NULL-terminated list (caller
 * frees each and the list). */
char **history_sessions(const struct history *h);
/* The image of a record ({"sha256", "mime"}) as base64, or NULL. */
char *history_image(const struct history *h, const char *sha256);

/* The next record of f (one JSON line, parsed), or NULL at the end.  A line
 * that is not a JSON object is skipped (*bad counts them). */
cJSON *history_next(FILE *f, size_t *bad);

/* The cells of a session's history whose effect is in its state now, and
 * the calls that were rolled back or lost between them, in order. */
enum hist_kind { HK_CELL, HK_ROLLED_BACK, HK_LOST };
struct hist_entry {
	enum hist_kind kind;
	int cell;
	long offset;             /* the record's line in the file */
	int lost_at;             /* HK_LOST: the cell whose state replaced them */
	int last;                /* HK_LOST: the last cell lost (cell is the first) */
	const char *why;         /* HK_LOST: "new", "restored", "forked", or "unrecorded"
	                          * (cells 1 to last ran before the history was kept) */
};
struct hist_lineage {
	struct hist_entry *v;
	size_t n, cap;
	cJSON *start;            /* the first record (the session's start), or NULL */
	bool full;               /* the file reached HISTORY_FILE_MAX */
	size_t bad;              /* lines that could not be read */
};
/* Reads f from its start. 0, or -errno. */
int history_lineage(FILE *f, struct hist_lineage *out);
void history_lineage_free(struct hist_lineage *l);
/* The record at offset. */
cJSON *history_at(FILE *f, long offset);

/* The provenance of a file: the last recorded call, in the history of any
 * session of the workspace (`session`'s first: it keeps a tie), that wrote
 * `path` (as the reply names it: "workspace/outputs/a.png"); its session,
 * cell, code_sha256 and state when it wrote the bytes of sha256 (the file
 * as it is now), else NULL (written by something else, or changed since). */
cJSON *history_provenance(const struct history *h, const char *session, const char *path, const char *sha256);

#endif

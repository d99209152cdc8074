/* A cell's result (W_RESULT, session -> server): the one definition of its
 * shape.  The bootstrap builds it (interp/bootstrap/cells.py, _wire_result: the
 * one place on the Python side that names its keys and holds them to the
 * bounds below); the session's C side encodes one of its own only when the
 * bootstrap itself failed (interp/session.c); the server decodes it here,
 * once, as untrusted: it comes from the process that ran the user's code,
 * which can write any frame it likes on its control socket.  The readers
 * (supervisor/state.c, saved.c, warmup.c, mcp/exec.c) see only the struct.
 * test/unit/test_result.c runs real cells through the bootstrap in the
 * embedded interpreter and decodes what they send, so a key or a bound
 * changed on one side only fails there.
 *
 * The body, a JSON object (a key this codec does not know is ignored):
 *
 *   status     required: "ok" (the cell ran to its end), "error" (it
 *              raised) or "memory" (it ran out of memory: the server rolls
 *              the session back)
 *   result     the repr of the cell's last expression, or null
 *   error      null, or an object: what the cell raised
 *     type       required, 1 to RESULT_TYPE_MAX bytes: the exception's class
 *     message    str(exception), or null
 *     traceback  the formatted traceback, or null
 *     denied_by  the permission that refused it ("fs_write", "limits"...),
 *                at most RESULT_WORD_MAX bytes, or null
 *     hint       what to do instead, at most RESULT_HINT_MAX bytes, or null
 *     limit      the limit that stopped it, "key: value", at most
 *                RESULT_LIMIT_MAX bytes, or null
 *   imports    the modules the cell imported that the zygote lacked (the
 *              learned warm-up's report; supervisor/warmup.c judges each
 *              name): at most RESULT_IMPORTS_MAX names of 1 to
 *              RESULT_MODULE_MAX bytes
 *   import_read  optional boolean, absent for false: an import of the cell
 *              read beyond the installed Python (a module of the project or
 *              the workspace, a name not found); supervisor/replay.c then
 *              checkpoints instead of logging the cell for replay
 *   effect     optional string of at most RESULT_EFFECT_MAX bytes: what the
 *              cell did past the session's memory as its own audit hook and
 *              /proc/self saw it (a write, a socket, a program, a database,
 *              a descriptor opened, closed or moved), or absent
 *   wchar      optional integer, 0 or more: the bytes the session wrote
 *              through write(2) and its kin during the cell, as its own
 *              /proc/self/io counts them (absent: not known).  Both are the
 *              session's word about its own rollback: supervisor/replay.c
 *              uses wchar only when it cannot read the process's counters
 *              itself, and checkpoints the cell when either says so
 *   restore    only in the call that carried a saved state: an object
 *     verified   required boolean: the server's verdict was good, the state
 *                was loaded
 *     restored   the names that came back: at most RESULT_LISTED_MAX, each
 *                1 to RESULT_VAR_MAX bytes
 *     failed     [name, why] of each name that did not load; the name
 *                RESULT_SNAPSHOT_FAILED when the snapshot as a whole could
 *                not be read (then nothing came back)
 *     unsaved    [name, why] of each name the save had left out
 *                (both: at most RESULT_LISTED_MAX pairs, the name 1 to
 *                RESULT_VAR_MAX bytes, the reason at most RESULT_WHY_MAX)
 *     restored_more, failed_more, unsaved_more
 *                how many names each list left out (0 to INT_MAX)
 *
 * A string longer than its bound, a list longer than its, a field of
 * another type, a status not in the list: the whole result is refused,
 * with an error that names the field ("a W_RESULT whose \"error.type\" is
 * not a string (it is the number 5)"), and the server ends the session as
 * one that broke its protocol.  The bootstrap cuts every string to its
 * bound before it sends, so a cell's own values (a 10 kB class name, a
 * message with a lone surrogate) never do.  The long texts (result,
 * message, traceback) are bounded by the frame alone: the server reads a
 * result frame of at most 64 KiB plus 12 bytes per max_output_chars
 * (supervisor/state.c), and the bootstrap caps the repr by that limit.
 * The strings are as the session sent them: whoever shows one sanitizes
 * and cuts it. */
#ifndef PROTO_RESULT_H
#define PROTO_RESULT_H

#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"

#define RESULT_TYPE_MAX 256
#define RESULT_WORD_MAX 32
#define RESULT_HINT_MAX 4096
#define RESULT_LIMIT_MAX 64
/* The bootstrap's _imports_of keeps this many; supervisor/warmup.c takes
 * as many from one report. */
#define RESULT_IMPORTS_MAX 16
#define RESULT_MODULE_MAX 128
#define RESULT_EFFECT_MAX 128
/* A reply names 30 of a list and counts the rest. */
#define RESULT_LISTED_MAX 32
#define RESULT_VAR_MAX 256
#define RESULT_WHY_MAX 512
#define RESULT_SNAPSHOT_FAILED "(the snapshot)" /* bootstrap _SNAPSHOT_FAILED */

/* The largest result frame the server reads (supervisor/state.c): 64 KiB
 * and 12 bytes per character of the output limit (JSON may spend that
 * much on one: two \uXXXX escapes), counted to at most 2^19 characters.
 * The bootstrap (_result_frame_max) cuts its texts to fit. */
static inline unsigned result_frame_max(long max_output_chars)
{
	long chars = max_output_chars > 0 && max_output_chars < (1L << 19) ? max_output_chars : 1L << 19;
	return (unsigned)(64 * 1024 + chars * 12);
}

enum result_status {
	RESULT_OK,
	RESULT_ERROR,
	RESULT_MEMORY,
};
/* "ok", "error", "memory": the status as the message spells it. */
const char *result_status_name(enum result_status s);

struct cell_result {
	enum result_status status;
	const char *value;       /* "result", or NULL */
	bool has_error;
	struct result_error {
		/* each NULL when absent; type is never NULL with has_error */
		const char *type, *message, *traceback, *denied_by, *hint, *limit;
	} error;
	const char *imports[RESULT_IMPORTS_MAX];
	size_t n_imports;
	bool import_read;
	const char *effect;      /* or NULL */
	long long wchar;         /* -1 when absent */
	bool has_restore;
	struct result_restore {
		bool verified;
		const char *restored[RESULT_LISTED_MAX];
		size_t n_restored;
		const char *failed[RESULT_LISTED_MAX][2];  /* name, why */
		size_t n_failed;
		const char *unsaved[RESULT_LISTED_MAX][2]; /* name, why */
		size_t n_unsaved;
		int restored_more, failed_more, unsaved_more;
	} restore;
	void *decoded;           /* result_decode: what the strings point into */
};

/* The payload, malloc'd, never NULL.  The caller keeps to the bounds
 * (a count past its array's size is taken as the size). */
char *result_encode(const struct cell_result *r);
/* 0, or -EPROTO with e naming the field (r is then empty: status ok,
 * nothing else). */
int result_decode(const void *data, size_t len, struct cell_result *r, struct err *e);
/* Frees what result_decode kept; r is empty. */
void result_free(struct cell_result *r);
/* result_decode into a new struct (NULL, with e naming the field, when the
 * body is refused), and its end (NULL-safe). */
struct cell_result *result_parse(const void *data, size_t len, struct err *e);
void result_destroy(struct cell_result *r);

/* The saver's summary: the first record of a saved state's stream, the
 * one part of it the server reads (for the next reply's note; the rest is
 * only stored).  The saver runs the user's pickling code (__reduce__), so
 * it is as untrusted as a result and held to the same bounds:
 *
 *   unsaved       [name, why] of each name the save left out: at most
 *                 RESULT_LISTED_MAX pairs, the name 1 to RESULT_VAR_MAX
 *                 bytes, the reason at most RESULT_WHY_MAX
 *   unsaved_more  how many it left out beyond the list (0 to INT_MAX)
 *
 * Built by the bootstrap's save_state (through _wire_list, as a result's
 * lists are). */
struct save_summary {
	const char *unsaved[RESULT_LISTED_MAX][2];
	size_t n_unsaved;
	int unsaved_more;
	void *decoded; /* what the strings point into */
};
/* 0, or -EPROTO with e naming the field (s is then empty). */
int save_summary_decode(const void *data, size_t len, struct save_summary *s, struct err *e);
void save_summary_free(struct save_summary *s);

#endif

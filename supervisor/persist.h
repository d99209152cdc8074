/* Saved sessions, the trusted side.
 *
 * Once a session has rested (savepace.h) and at exit, not after each call,
 * a fork of the session's checkpoint (inside the jail) pickles the state and streams it over a pipe to the server, which writes
 * it under workspace/.sessions/NAME/state.snap and appends a trailer: the
 * length, the time, the execution count, an id of the key and an
 * HMAC-SHA256 tag made with a key that only the server can read
 * ($XDG_STATE_HOME/python-sandbox-mcp/key).  To restore, the server streams
 * the file into a fresh session over a pipe while it checks the tag, and
 * sends its verdict after the last byte: the session unpickles only bytes
 * the server has just authenticated, never a file it opened itself.
 *
 * The bytes are the session's own business (the server parses only the
 * short summary the saver puts first, for the reply's note, as untrusted
 * text): what the tag proves is that this server wrote them for this workspace and
 * this session name, not that they are harmless, which is why they are only
 * ever loaded inside the jail. */
#ifndef SUPERVISOR_PERSIST_H
#define SUPERVISOR_PERSIST_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/err.h"
#include "../policy/policy.h"
#include "../files/fsafe.h"
#include "../rpc/loop.h"

/* The first bytes a saver writes: magic then the little-endian length of
 * what follows, so an over-large state is refused before it is sent. */
#define PERSIST_SAVE_MAGIC "PSMSAVE1"
#define PERSIST_SAVE_HEADER 16

/* A large state comes in pieces instead, so that a save costs what changed
 * since the last one, not the whole state: "PSMSAVE2", the length of the
 * state, then for each piece in order either
 *   'N', its length (4 bytes, 1 to PIECE_MAX), its label (16 bytes), its bytes
 *   'S', its length, its label: a piece of the last save, not sent again.
 * The label is the saver's name for the bytes (a digest it computes); the
 * server never trusts it as one: it takes an 'S' piece only from the
 * pieces it wrote for that session and tagged itself, so a saver that
 * lies about a label gets its own earlier bytes back, nothing else.  The
 * server tells the saver which labels it holds (ptable_known_hex) when it
 * asks for the save.  The pieces concatenated are the same body as a
 * PSMSAVE1 stream's, and a restore streams exactly that.
 *
 * On disk: the pieces in workspace/.sessions/NAME/pieces.GEN, appended
 * save after save, each with its own tag, and state.snap a manifest of
 * them (where each piece is, its length, label, nonce and tag) under the
 * same kind of trailer as a whole snapshot.  A save that would leave more
 * dead bytes in the pieces file than live ones writes a new one whole
 * (the saver is offered no label) and removes the old. */
#define PERSIST_PIECES_MAGIC "PSMSAVE2"
#define PIECE_MAX (1u << 20)
/* Pieces smaller than this are always sent: not worth a label. */
#define PIECE_KNOWN_MIN (64u << 10)

/* The pieces of a session's last save, as the server wrote them: kept by
 * the supervisor between saves, to take the 'S' pieces of the next one. */
struct ptable;
void ptable_free(struct ptable *t);
/* The labels a saver may name instead of sending (32 hex digits each, the
 * pieces of at least PIECE_KNOWN_MIN bytes), allocated; NULL when the next
 * save should be whole (no table, or the pieces file holds more dead bytes
 * than live ones). */
char *ptable_known_hex(const struct ptable *t);

struct persist;

/* Reads (or creates) the key.  Always returns an object (NULL only when out
 * of memory); when saving cannot be trusted on this machine it is off and
 * persist_why_off says why.  policy->limits.persist false: off. */
struct persist *persist_new(const struct workspace *ws, const struct policy *p);
void persist_free(struct persist *p);
bool persist_on(const struct persist *p);
const char *persist_why_off(const struct persist *p);
/* The key's path (for --check and the logs), or "". */
const char *persist_key_path(const struct persist *p);

/* ---------------------------------------------------------------- saving */

struct psave_result {
	int status;       /* 0 saved; -EFBIG over persist_mb; other -errno failed */
	uint64_t bytes;   /* the state's size (announced when over the cap) */
	double ms;        /* from the start of the stream to the rename */
	char msg[300];    /* why it failed, in words for the reply and the logs */
	/* The saver's summary record (JSON, untrusted, NUL-terminated), valid
	 * during the callback only; NULL when it sent none or a long one. */
	const char *summary;
	/* A save in pieces that succeeded: its pieces, for the next save.
	 * The callback owns it (ptable_free).  NULL otherwise. */
	struct ptable *table;
	/* The save failed because of the table it was given (a piece it
	 * named is not there, the pieces file was changed): the next save
	 * should be whole. */
	bool drop_table;
	uint64_t written; /* bytes written to disk (pieces: only the new ones) */
	/* The snapshot's nonce, which names it: a journal saved after it
	 * names it too (pjournal_write). */
	unsigned char nonce[16];
};

typedef void (*psave_done_fn)(void *arg, const struct psave_result *r);

struct psave;

/* Starts pumping the saver's stream from fd (owned: closed when done) into
 * .sessions/NAME/.state.tmp; renamed to state.snap once whole.  base: the
 * table of the session's last save in pieces (copied; may be NULL), from
 * which a save in pieces takes the pieces the saver names.  cells is
 * the execution count the state belongs to (kept in the authenticated
 * trailer).  done is called once, unless the save is abandoned first.
 * NULL when the save cannot even start (then done is not called, and e
 * says why). */
struct psave *psave_start(struct persist *p, struct loop *l, const char *name, uint32_t cells, int fd,
			  const struct ptable *base, psave_done_fn done, void *arg, struct err *e);
/* Bytes of the state written so far (the workspace grows by as much while
 * the save runs).  0 for NULL. */
uint64_t psave_written(const struct psave *s);
/* Every byte of snapshot the server has written since it started, all
 * sessions together: what it adds to .sessions is not a call's growth. */
uint64_t persist_written_all(const struct persist *p);
/* Bytes of the state taken in so far, written or (in pieces) named as
 * kept from the last save.  0 for NULL. */
uint64_t psave_received(const struct psave *s);
/* The size the saver announced (0 until its header is in, or for NULL). */
uint64_t psave_total(const struct psave *s);
/* Stops reading, removes the temporary file; state.snap keeps the last
 * complete save.  NULL-safe. */
void psave_abandon(struct psave *s);

/* Removes the session's saved state (reset: true).  0 or -errno. */
int persist_discard(struct persist *p, const char *name);
/* Whether the session has a snapshot on disk (not checked). */
bool persist_has(struct persist *p, const char *name);

/* ---------------------------------------------------------------- restoring */

struct prestore;

/* Opens the session's snapshot: 0 with *out NULL when there is none; 1 with
 * *out ready to stream; -errno when one exists but is refused (e says why,
 * in words for the reply).  The file is removed, unless the code is
 * -EKEYREJECTED (written with another key) or -EFBIG (over persist_mb,
 * judged by its size before anything is read): those are left for the
 * next save to replace. */
int prestore_open(struct persist *p, const char *name, struct prestore **out, struct err *e);
uint64_t prestore_bytes(const struct prestore *r);
uint32_t prestore_cells(const struct prestore *r);
double prestore_age_s(const struct prestore *r);
/* The layout of the body (1: an older server's, without the summary
 * record; 2), for the session that loads it. */
int prestore_format(const struct prestore *r);
/* Milliseconds since the stream started. */
double prestore_ms(const struct prestore *r);

/* verdict: 1 the bytes matched their tag (the session was told to load
 * them); 0 they did not (the session was told to drop them, the file is
 * removed); -errno the stream broke (the session stopped reading). */
typedef void (*prestore_done_fn)(void *arg, int verdict);

/* Starts the restore.  Returns how many descriptors it put in fds for the
 * session (the caller sends them and closes its copies), or -errno:
 * - 2, direct: fds[0] the snapshot itself (read-only, another open of it)
 *   and fds[1] a socket.  The session reads the body from the file,
 *   saying on the socket how far it has read (8-byte little-endian
 *   offsets, the last one the body's length), and reads the verdict there,
 *   one byte, Y or N.  Only under the server's lease on the file
 *   (prestore_open).
 * - 1, streamed: the read end of a pipe that brings the body, then the
 *   verdict byte. */
int prestore_start(struct prestore *r, struct loop *l, prestore_done_fn done, void *arg, int fds[2]);
bool prestore_direct(const struct prestore *r);
/* Every restore of p streamed, never read directly (tests of the stream). */
void persist_stream_only(struct persist *p);
/* Stops the stream (done is not called) and frees r.  NULL-safe. */
void prestore_free(struct prestore *r);
/* The nonce of the snapshot's trailer (zeros for an older server's v1). */
const unsigned char *prestore_nonce(const struct prestore *r);
/* After a good verdict on a snapshot in pieces, its table (owned by the
 * caller), so that the next save sends only what changed; else NULL. */
struct ptable *prestore_table(struct prestore *r);

/* ---------------------------------------------------------------- journals
 *
 * A save at rest after cells that the replay log only logged (their effect
 * stays in the session's memory; supervisor/replay.c) need not pickle the
 * state again: the state is the snapshot's plus those cells, so the server
 * writes the cells instead, next to the snapshot they follow
 * (workspace/.sessions/NAME/journal).  A restore loads the snapshot and
 * runs them again, comparing each one's output with the first run's, as a
 * rollback does.  The journal names its snapshot (the nonce of its
 * trailer and its execution count) and carries a tag of its own under the
 * server's key: a journal planted or changed by a cell, or left from
 * another snapshot, is never run. */

#define JOURNAL_MAX_CELLS 256
/* The most a journal file may take: the replay log's bounds (its code,
 * then each cell's fixed part and the text shown of its output). */
#define JOURNAL_MAX_BYTES ((size_t)(1u << 20) + JOURNAL_MAX_CELLS * 512u + 4096u)
#define JOURNAL_SHOWN_MAX 400

struct journal_cell {
	int cell;
	int status;           /* enum call_status, as it ended the first time */
	bool whole;           /* the digest covers its whole output */
	double ms;            /* its first run's duration (what bounds a run again) */
	unsigned char digest[32];
	char *code;
	char *shown;          /* the start of its output, for a note; may be NULL */
};

void journal_cells_free(struct journal_cell *v, size_t n);
/* Writes the journal of cells v[0..n) after the snapshot named by
 * snap_nonce and snap_cells (a temporary file, synced, renamed into
 * place): 0, or -errno with e saying why (the snapshot stays whole).
 * *bytes: the file's size. */
int pjournal_write(struct persist *p, const char *name, const unsigned char snap_nonce[16], uint32_t snap_cells,
		   const struct journal_cell *v, size_t n, size_t *bytes, struct err *e);
/* Reads the journal that follows the snapshot named by snap_nonce and
 * snap_cells: 1 with *v, *n (allocated) when there is one and its tag
 * holds; 0 when there is none, or one of another snapshot (removed);
 * -errno when it is refused (removed; e says why, for the reply). */
int pjournal_read(struct persist *p, const char *name, const unsigned char snap_nonce[16], uint32_t snap_cells,
		  struct journal_cell **v, size_t *n, struct err *e);

#endif

/* What the key, the save and the restore of saved sessions share
 * (persist.c, persist_save.c, persist_restore.c): the snapshot's layout on
 * disk and the server's persist object.  persist.h is the face (each of
 * the three includes it first); no other file includes this one. */
#ifndef SUPERVISOR_PERSIST_FORMAT_H
#define SUPERVISOR_PERSIST_FORMAT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "../common/err.h"
#include "../common/hmac.h"

#define KEY_LEN 32
/* The trailer: magic, the body's length, when it was made, the execution
 * count, then the tag.  v2 puts the key's id and a nonce before its tag, a
 * Poly1305 tag under a key used once (persist_tag_begin); v1 (an HMAC-SHA256 tag,
 * no key id) is still read, so that a snapshot written by an older server
 * is restored. */
#define TRAILER1_MAGIC "PSMSNAP1"
#define TRAILER1_LEN (8 + 8 + 8 + 8 + HMAC_LEN)
#define TRAILER_MAGIC "PSMSNAP2"
#define KEYID_LEN 8
#define NONCE_LEN 16
#define TRAILER_LEN (8 + 8 + 8 + 8 + KEYID_LEN + NONCE_LEN + POLY1305_LEN)
/* v3: the same trailer after a manifest of pieces (persist.h) instead of
 * the body itself; the tag covers the manifest (tag version 3). */
#define TRAILER3_MAGIC "PSMSNAP3"
/* The manifest: the body's length, the pieces file's generation, the
 * number of pieces, then per piece its offset in the file (8), length (4),
 * label (16), nonce (16) and tag (16). */
#define MANIFEST_HEAD 24
#define MANIFEST_ENTRY 60
/* A piece's tag: version 4 of persist_tag_begin, under a one-time key of
 * its own nonce (the save's nonce with its index mixed in). */
#define TAG_PIECE 4
#define TAG_MANIFEST 3
/* A journal's tag (persist_journal.c): its own domain and one-time keys. */
#define TAG_JOURNAL 5
/* The saver's first record, a short JSON summary (what could not be
 * pickled), read by the server for the next reply; a longer one is only
 * saved. */
#define SUMMARY_MAX (64u << 10)
#define SNAP_NAME "state.snap"
#define TMP_NAME ".state.tmp"
#define JOURNAL_NAME "journal"
#define JOURNAL_TMP ".journal.tmp"
#define CHUNK (1u << 20)
/* Work done per wake-up of the event loop, so that a gigabyte-sized save
 * never keeps the server from answering other requests for long. */
#define BUDGET (8u << 20)

struct pentry {
	uint64_t off;
	uint32_t len;
	unsigned char label[16], nonce[NONCE_LEN], tag[POLY1305_LEN];
};

struct ptable {
	uint64_t gen;       /* pieces.GEN */
	dev_t dev;          /* that file, as the server wrote it */
	ino_t ino;
	uint64_t end;       /* its length after the save */
	uint64_t live;      /* bytes of it the table names */
	uint64_t body;      /* the state's length: the pieces' sum */
	size_t n;
	struct pentry *v;
	struct pentry **sorted; /* by label then length (ptable_find), or NULL */
};

/* The most pieces a state of body bytes may come in: a saver cuts each
 * record of at least PIECE_KNOWN_MIN bytes into pieces of PIECE_MAX and
 * packs the others together, so two per PIECE_KNOWN_MIN.  Attack: a saver
 * that sends a state of 1 GiB in one-byte pieces, to grow the server's
 * table and the manifest past any bound. */
static inline uint64_t pieces_max(uint64_t body)
{
	return 4 + 2 * (body / PIECE_KNOWN_MIN);
}

struct ptable *ptable_dup(const struct ptable *t);
/* The piece of t with that label and length, or NULL. */
const struct pentry *ptable_find(struct ptable *t, const unsigned char label[16], uint32_t len);
/* The manifest of t (MANIFEST_HEAD + n * MANIFEST_ENTRY bytes), allocated. */
unsigned char *ptable_encode(const struct ptable *t, size_t *len);
/* Reads a manifest already authenticated: NULL with e set when it does not
 * hold together (lengths, counts, bounds). */
struct ptable *ptable_decode(const unsigned char *b, size_t len, uint64_t cap, struct err *e);
/* pieces.GEN's name. */
void pieces_name(uint64_t gen, char *buf, size_t n);
/* Removes the pieces files of dir but pieces.keep (keep 0: all). */
void pieces_drop(int dir, uint64_t keep);
/* A generation above `above` and above every pieces file of dir: a new
 * file never overwrites one that the snapshot on disk may still name. */
uint64_t pieces_next_gen(int dir, uint64_t above);

struct persist {
	const struct workspace *ws;
	bool on;
	char why[400];
	char key_path[PATH_MAX + 8];
	unsigned char key[KEY_LEN];
	/* What the trailer says of the key, so that a snapshot made with
	 * another key (another user, a new XDG_STATE_HOME) is told apart from
	 * one whose bytes were changed: a MAC of a fixed text, which tells
	 * nothing about the key itself. */
	unsigned char keyid[KEYID_LEN];
	uint64_t cap;
	uint64_t mem_cap; /* limits.memory_mb, in bytes */
	bool stream_only; /* every restore streamed (persist_stream_only) */
	uint64_t written_all; /* persist_written_all */
};

static inline void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static inline uint64_t now_unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Starts the tag of a snapshot of the session name (persist.c says what it
 * covers); NULL when libcrypto fails. */
struct hmac *persist_tag_begin(const struct persist *p, int version, const char *name, uint64_t len,
			       uint64_t created, uint64_t cells, const unsigned char nonce[NONCE_LEN]);
/* The session's directory, created private when create; an open descriptor
 * or -errno (e says why). */
int persist_session_dir(const struct persist *p, const char *name, bool create, struct err *e);

#endif

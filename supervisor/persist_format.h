/* What the key, the save and the restore of saved sessions share
 * (persist.c, persist_save.c, persist_restore.c): the snapshot's layout on
 * disk and the server's persist object.  persist.h is the face (each of
 * the three includes it first); no other file includes this one. */
#ifndef SUPERVISOR_PERSIST_FORMAT_H
#define SUPERVISOR_PERSIST_FORMAT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
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
/* The saver's first record, a short JSON summary (what could not be
 * pickled), read by the server for the next reply; a longer one is only
 * saved. */
#define SUMMARY_MAX (64u << 10)
#define SNAP_NAME "state.snap"
#define TMP_NAME ".state.tmp"
#define CHUNK (1u << 20)
/* Work done per wake-up of the event loop, so that a gigabyte-sized save
 * never keeps the server from answering other requests for long. */
#define BUDGET (8u << 20)

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

/* Capture of one stream (stdout or stderr) of one execution, in bounded
 * memory whatever the code prints: the head and a tail ring are kept, and
 * once the output outgrows what the reply may show, everything goes to a
 * log file under workspace/.logs/ as well.  That file is capped too (the
 * policy's max_file_mb): past the cap its head stays, the last part is kept
 * in a ring, and at the end a marker saying how much was left out and that
 * last part are appended, so a cell printing forever cannot fill the disk
 * through the server. */
#ifndef SUPERVISOR_OUTBUF_H
#define SUPERVISOR_OUTBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "../common/hmac.h"
#include "../files/fsafe.h"

struct outbuf {
	const struct workspace *ws;
	size_t limit;              /* characters shown in the reply */
	unsigned char *head;
	size_t head_len, head_cap;
	unsigned char *tail;       /* ring of the last tail_cap bytes */
	size_t tail_cap, tail_pos;
	unsigned long long total_bytes, total_chars;
	unsigned long long bad_bytes;  /* bytes no text holds (outbuf_binary) */
	unsigned long long text_run;   /* bytes fed since the last of those */
	unsigned long long text_first; /* bytes fed before the first of those */
	int log_fd;                /* -1 until needed */
	bool log_failed;
	unsigned long long log_cap;     /* bytes the log file may hold */
	unsigned long long log_written; /* bytes in the file so far */
	unsigned char *log_tail;   /* ring of the last bytes once past the head */
	size_t log_tail_cap;
	unsigned long long log_tail_pos; /* bytes that went into the ring */
	char log_rel[192];         /* ".logs/default-3.stdout.log" */
	char last_line[240];       /* the latest complete or partial line */
	size_t last_len;
	bool line_done;            /* the next byte starts a new line */
	/* A keyed SHA-256 of every byte fed since the reset, whatever the
	 * reply shows of them: what the replay compares (outbuf_digest). */
	struct hmac *hash;
	unsigned char digest[HMAC_LEN];
	bool digest_ok;
};

/* limit: characters in the reply; log_cap: bytes of the log file. */
void outbuf_init(struct outbuf *ob, const struct workspace *ws, size_t limit, unsigned long long log_cap);
void outbuf_free(struct outbuf *ob);

/* Starts a new execution; log_rel names the log file should one be needed. */
void outbuf_reset(struct outbuf *ob, const char *log_rel);

void outbuf_feed(struct outbuf *ob, const unsigned char *data, size_t len);

/* The text for the reply (text_for_model: valid UTF-8, controls escaped,
 * progress bars at their last state; malloc'd), whether it was cut, and
 * the log file's path as the reply shows it (ws_display_path; malloc'd,
 * NULL when none was written): the path the text names, which becomes the
 * run's out_log or err_log.  A run of the same code again writes a log of
 * its own, so two texts of the same output differ only there: what the
 * replay's comparison of outputs leaves out.  Binary output (outbuf_binary)
 * is one line saying how many bytes and which log file holds them, with
 * the lines of text written before the bytes above it and those written
 * after them below it. */
char *outbuf_finish(struct outbuf *ob, bool *truncated, char **shown);

/* The digest of the whole stream of the last execution, once
 * outbuf_finish ran: false when it could not be computed (then no two
 * streams may be called the same). */
bool outbuf_digest(const struct outbuf *ob, unsigned char out[HMAC_LEN]);

/* Whether the output so far is binary rather than text: at least 16 bytes,
 * and more than a tenth, that are not UTF-8 or are controls text does not
 * use. */
bool outbuf_binary(const struct outbuf *ob);

#endif

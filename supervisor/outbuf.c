#include "outbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/util.h"
#include "../common/text.h"

/* The part of a capped log kept at its end, at most: held in memory until
 * the call ends, so it is small. */
#define LOG_TAIL_MAX (1u << 20)
/* Room left at the end of a capped log for the marker. */
#define LOG_MARKER_MAX 400

void outbuf_init(struct outbuf *ob, const struct workspace *ws, size_t limit, unsigned long long log_cap)
{
	memset(ob, 0, sizeof *ob);
	ob->ws = ws;
	ob->limit = limit;
	ob->log_cap = log_cap < 4096 ? 4096 : log_cap;
	/* A character is at most 4 bytes: the head holds the whole reply's
	 * worth, the tail the last half of it. */
	ob->head_cap = limit * 4 + 4;
	ob->tail_cap = limit * 2 + 4;
	ob->head = xmalloc(ob->head_cap);
	ob->tail = xmalloc(ob->tail_cap);
	ob->log_fd = -1;
}

static void log_close(struct outbuf *ob);

void outbuf_free(struct outbuf *ob)
{
	log_close(ob);
	free(ob->head);
	free(ob->tail);
	free(ob->log_tail);
	ob->head = ob->tail = ob->log_tail = NULL;
	hmac_free(ob->hash);
	ob->hash = NULL;
}

void outbuf_reset(struct outbuf *ob, const char *log_rel)
{
	log_close(ob);
	ob->log_failed = false;
	ob->log_written = 0;
	ob->log_tail_pos = 0;
	ob->head_len = ob->tail_pos = 0;
	ob->total_bytes = ob->total_chars = ob->bad_bytes = ob->text_run = ob->text_first = 0;
	ob->last_len = 0;
	ob->line_done = false;
	ob->last_line[0] = 0;
	snprintf(ob->log_rel, sizeof ob->log_rel, "%s", log_rel);
	static const unsigned char key[] = "python-sandbox-mcp output stream";
	hmac_free(ob->hash);
	ob->hash = hmac_new(key, sizeof key - 1);
	ob->digest_ok = false;
}

bool outbuf_digest(const struct outbuf *ob, unsigned char out[HMAC_LEN])
{
	if (!ob->digest_ok)
		return false;
	memcpy(out, ob->digest, HMAC_LEN);
	return true;
}

/* The stream's digest is final: fed bytes after this are not in it. */
static void digest_final(struct outbuf *ob)
{
	ob->digest_ok = ob->hash && hmac_final(ob->hash, ob->digest) == 0;
	hmac_free(ob->hash);
	ob->hash = NULL;
}

static void log_write(struct outbuf *ob, const unsigned char *p, size_t len)
{
	while (len && !ob->log_failed) {
		ssize_t n = write(ob->log_fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* Disk full or quota: the reply still carries head and tail,
			 * and says the full log could not be kept. */
			log_warn("output log %s: %s", ob->log_rel, strerror(n < 0 ? errno : ENOSPC));
			ob->log_failed = true;
			return;
		}
		p += n;
		len -= (size_t)n;
		ob->log_written += (unsigned long long)n;
	}
}

/* The bytes of the head part of the file: the cap less the kept tail and
 * the marker. */
static unsigned long long log_head_max(const struct outbuf *ob)
{
	unsigned long long tail = ob->log_cap / 2 < LOG_TAIL_MAX ? ob->log_cap / 2 : LOG_TAIL_MAX;
	return ob->log_cap - tail - LOG_MARKER_MAX;
}

/* Appends to the log within its cap: the head goes to the file, the rest
 * into the tail ring (the last log_tail_cap bytes win). */
static void log_append(struct outbuf *ob, const unsigned char *p, size_t len)
{
	unsigned long long head_max = log_head_max(ob);
	if (ob->log_written < head_max && !ob->log_tail_pos) {
		size_t n = head_max - ob->log_written < len ? (size_t)(head_max - ob->log_written) : len;
		log_write(ob, p, n);
		p += n;
		len -= n;
	}
	if (!len || ob->log_failed)
		return;
	if (!ob->log_tail) {
		ob->log_tail_cap = (size_t)(ob->log_cap - head_max - LOG_MARKER_MAX);
		ob->log_tail = xmalloc(ob->log_tail_cap ? ob->log_tail_cap : 1);
	}
	if (len > ob->log_tail_cap) {
		ob->log_tail_pos += len - ob->log_tail_cap;
		p += len - ob->log_tail_cap;
		len = ob->log_tail_cap;
	}
	while (len) {
		size_t at = (size_t)(ob->log_tail_pos % ob->log_tail_cap);
		size_t n = ob->log_tail_cap - at < len ? ob->log_tail_cap - at : len;
		memcpy(ob->log_tail + at, p, n);
		ob->log_tail_pos += n;
		p += n;
		len -= n;
	}
}

/* Ends the log file: when it reached its cap, the marker and the kept tail
 * go at its end. */
static void log_close(struct outbuf *ob)
{
	if (ob->log_fd < 0)
		return;
	if (ob->log_tail_pos && !ob->log_failed) {
		size_t kept = ob->log_tail_pos < ob->log_tail_cap ? (size_t)ob->log_tail_pos : ob->log_tail_cap;
		char marker[LOG_MARKER_MAX];
		snprintf(marker, sizeof marker,
			 "\n[... %llu bytes left out: this log keeps the first %llu and the last %zu bytes "
			 "(limits.max_file_mb caps the server's logs too) ...]\n",
			 ob->log_tail_pos - kept, ob->log_written, kept);
		log_write(ob, (const unsigned char *)marker, strlen(marker));
		size_t start = ob->log_tail_pos < ob->log_tail_cap ? 0 : (size_t)(ob->log_tail_pos % ob->log_tail_cap);
		size_t first = kept < ob->log_tail_cap - start ? kept : ob->log_tail_cap - start;
		log_write(ob, ob->log_tail + start, first);
		log_write(ob, ob->log_tail, kept - first);
	}
	close(ob->log_fd);
	ob->log_fd = -1;
	ob->log_tail_pos = 0;
	free(ob->log_tail);
	ob->log_tail = NULL;
}

/* Opens the log under a name that is free: an earlier log (another run, or
 * a session that was reset and counts its cells from 1 again) is never
 * overwritten, and a name the code planted (a symlink, a hard link) is
 * skipped, never written through (O_CREAT|O_EXCL, no symlink followed). */
static void log_open(struct outbuf *ob)
{
	if (ob->log_fd >= 0 || ob->log_failed)
		return;
	struct err e = { 0 };
	int fd = ws_create_new(ob->ws, ob->log_rel, sizeof ob->log_rel, &e);
	if (fd < 0) {
		log_warn("output log %s: %s", ob->log_rel, e.msg);
		ob->log_failed = true;
		return;
	}
	ob->log_fd = fd;
	log_append(ob, ob->head, ob->head_len);
}

/* Bytes that no text holds: not UTF-8 (a sequence cut by the chunk's end
 * counts too, a bias of a few bytes), NUL and the controls that text does
 * not use (tab, newline, carriage return, backspace, form feed and the
 * escape of colours are text's). */
static size_t binary_bytes(const unsigned char *p, size_t len, size_t *first, size_t *after_last)
{
	size_t bad = 0;
	*after_last = 0;
	*first = len;
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = utf8_decode(p + i, len - i, &cp);
		if (n == 0 || (cp < 0x20 && !strchr("\t\n\r\b\f\x1b", (int)cp))) {
			if (!bad)
				*first = i;
			bad++;
			n = 1;
			*after_last = i + 1;
		}
		i += n;
	}
	return bad;
}

void outbuf_feed(struct outbuf *ob, const unsigned char *data, size_t len)
{
	ob->total_chars += utf8_chars((const char *)data, len);
	size_t first_bad, after;
	size_t bad = binary_bytes(data, len, &first_bad, &after);
	if (!ob->bad_bytes)
		ob->text_first = ob->total_bytes + first_bad;
	ob->total_bytes += len;
	if (ob->hash)
		hmac_update(ob->hash, data, len);
	ob->bad_bytes += bad;
	ob->text_run = bad ? len - after : ob->text_run + len;

	if (ob->log_fd >= 0 || ob->log_failed) {
		log_append(ob, data, len);
	} else if (ob->head_len + len <= ob->head_cap) {
		memcpy(ob->head + ob->head_len, data, len);
		ob->head_len += len;
	} else {
		size_t room = ob->head_cap - ob->head_len;
		memcpy(ob->head + ob->head_len, data, room);
		ob->head_len += room;
		log_open(ob);
		log_append(ob, data + room, len - room);
	}

	/* The tail ring always holds the last tail_cap bytes. */
	const unsigned char *p = data;
	size_t n = len;
	if (n > ob->tail_cap) {
		p += n - ob->tail_cap;
		n = ob->tail_cap;
	}
	size_t first = ob->tail_cap - ob->tail_pos % ob->tail_cap;
	if (first > n)
		first = n;
	memcpy(ob->tail + ob->tail_pos % ob->tail_cap, p, first);
	memcpy(ob->tail, p + first, n - first);
	ob->tail_pos += n;

	/* The latest non-empty line, for progress notifications: only the
	 * bytes before this chunk's trailing newlines and after the newline
	 * before them matter (memrchr, not a loop over every byte). */
	size_t stop = len;
	while (stop && (data[stop - 1] == '\n' || data[stop - 1] == '\r'))
		stop--;
	if (stop > 0) {
		const unsigned char *nl = memrchr(data, '\n', stop);
		size_t from = nl ? (size_t)(nl - data) + 1 : 0;
		if (nl || ob->line_done)
			ob->last_len = 0;
		for (size_t i = from; i < stop; i++) {
			if (data[i] == '\r')
				ob->last_len = 0; /* a progress bar's next state */
			else if (ob->last_len + 1 < sizeof ob->last_line)
				ob->last_line[ob->last_len++] = (char)data[i];
		}
	}
	if (len)
		ob->line_done = stop < len || (stop == 0 && ob->line_done);
	ob->last_line[ob->last_len] = 0;
}

static unsigned char *tail_bytes(const struct outbuf *ob, size_t *len)
{
	size_t n = ob->tail_pos < ob->tail_cap ? ob->tail_pos : ob->tail_cap;
	unsigned char *out = xmalloc(n + 1);
	size_t start = ob->tail_pos < ob->tail_cap ? 0 : ob->tail_pos % ob->tail_cap;
	for (size_t i = 0; i < n; i++)
		out[i] = ob->tail[(start + i) % ob->tail_cap];
	*len = n;
	return out;
}

bool outbuf_binary(const struct outbuf *ob)
{
	return ob->bad_bytes >= 16 && ob->bad_bytes * 10 > ob->total_bytes;
}

/* The log file's path as the reply shows it (ws_display_path; malloc'd). */
static char *log_shown(const struct outbuf *ob)
{
	char disp[512];
	if (ws_display_path(ob->ws, ob->log_rel, disp, sizeof disp) == 0)
		return xstrdup(disp);
	return xasprintf("%s/%s", ob->ws->display, ob->log_rel);
}

/* The text written after the last binary byte (a line printed after a
 * dump: what the cell says about it), at most the last BINARY_TEXT_MAX
 * characters of it, escaped; NULL when there is no whole line. */
#define BINARY_TEXT_MAX 1000
static char *text_after_binary(const struct outbuf *ob)
{
	size_t have;
	unsigned char *t = tail_bytes(ob, &have);
	if (!t)
		return NULL;
	size_t n = ob->text_run < have ? (size_t)ob->text_run : have;
	size_t from = have - n;
	from += utf8_suffix((const char *)t + from, n, BINARY_TEXT_MAX);
	while (from < have && (t[from] == '\n' || t[from] == '\r'))
		from++;
	/* Only whole lines count as text said after the dump: the last few
	 * bytes of random data that happen to be valid UTF-8 are not. */
	bool line = from < have && memchr(t + from, '\n', have - from);
	char *s = line ? text_for_model(t + from, have - from, true, NULL) : NULL;
	free(t);
	return s;
}

/* The whole lines of text written before the first binary byte (what the
 * cell said before the dump), at most the first BINARY_TEXT_MAX characters
 * of them, escaped; NULL when there is no whole line.  They are at the
 * start of the head, which holds the first bytes of the output. */
static char *text_before_binary(const struct outbuf *ob)
{
	size_t n = ob->text_first < ob->head_len ? (size_t)ob->text_first : ob->head_len;
	const unsigned char *nl = n ? memrchr(ob->head, '\n', n) : NULL;
	if (!nl)
		return NULL;
	size_t len;
	char *s = text_for_model(ob->head, (size_t)(nl - ob->head) + 1, true, &len);
	if (s)
		s[utf8_prefix(s, len, BINARY_TEXT_MAX)] = 0;
	return s;
}

/* Binary output (an image written to stdout, os.urandom): thousands of
 * escapes would tell the model nothing; it is told the size and where the
 * bytes are, between the text written before them and after them. */
static char *binary_summary(struct outbuf *ob, char **shown)
{
	log_open(ob);
	bool saved = ob->log_fd >= 0 && !ob->log_failed;
	log_close(ob);
	if (saved)
		*shown = log_shown(ob);
	char *before = text_before_binary(ob), *after = text_after_binary(ob);
	size_t bl = before ? strlen(before) : 0;
	char *sum = xasprintf("%s%s[%llu bytes of binary output (not text); %s%s]\n%s%s", before ? before : "",
			      bl && before[bl - 1] != '\n' ? "\n" : "", ob->total_bytes,
			      saved ? "the bytes are in " : "the bytes could not be saved", saved ? *shown : "",
			      after ? "the text written after them:\n" : "", after ? after : "");
	free(before);
	free(after);
	return sum;
}

char *outbuf_finish(struct outbuf *ob, bool *truncated, char **shown)
{
	*truncated = false;
	*shown = NULL;
	digest_final(ob);
	if (outbuf_binary(ob)) {
		*truncated = true;
		return binary_summary(ob, shown);
	}
	if (ob->total_bytes <= ob->head_cap && ob->total_chars <= ob->limit)
		return text_for_model(ob->head, ob->head_len, true, NULL);

	*truncated = true;
	log_open(ob);
	if (ob->log_fd >= 0 && !ob->log_failed)
		*shown = log_shown(ob);
	log_close(ob);

	size_t hl, tl, traw;
	char *h = text_for_model(ob->head, ob->head_len, true, &hl);
	unsigned char *t = tail_bytes(ob, &traw);
	char *ts = text_for_model(t, traw, true, &tl);
	free(t);
	if (!h || !ts) {
		free(h);
		free(ts);
		return NULL;
	}
	size_t half = ob->limit / 2;
	size_t hcut = utf8_prefix(h, hl, half);
	/* Start the tail at a character boundary (the ring may begin mid
	 * sequence, which sanitizing turned into U+FFFD: skip those). */
	size_t tcut = utf8_suffix(ts, tl, half);
	unsigned long long kept = utf8_chars(h, hcut) + utf8_chars(ts + tcut, tl - tcut);
	unsigned long long omitted = ob->total_chars > kept ? ob->total_chars - kept : 0;
	char *marker = xasprintf("\n[... %llu characters omitted (%llu in all); %s%s ...]\n", omitted, ob->total_chars,
				 *shown ? "full output in " : "the full output could not be saved", *shown ? *shown : "");
	size_t ml = strlen(marker);
	char *out = xmalloc(hcut + ml + (tl - tcut) + 1);
	memcpy(out, h, hcut);
	memcpy(out + hcut, marker, ml);
	memcpy(out + hcut + ml, ts + tcut, tl - tcut);
	out[hcut + ml + tl - tcut] = 0;
	free(marker);
	free(h);
	free(ts);
	return out;
}

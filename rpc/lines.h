/* Line framing of the input stream: bytes in, complete lines out, in
 * bounded memory.  A line longer than the limit is dropped (too_long is
 * called once) and reading resumes at the next newline. */
#ifndef RPC_LINES_H
#define RPC_LINES_H

#include <stdbool.h>
#include <stddef.h>

#define LINES_HEAD_MAX 4096

struct lines {
	size_t max;            /* the longest line kept, in bytes */
	char *buf;             /* the line being assembled */
	size_t len, cap;
	bool discarding;       /* inside an over-long line */
	void (*line)(void *arg, char *line, size_t len);
	/* An over-long line: called once, with its first bytes (at most
	 * LINES_HEAD_MAX), so that the reply can carry the request's id. */
	void (*too_long)(void *arg, const char *head, size_t len);
	void *arg;
};

/* Feeds n bytes; calls line() for each complete one (without its newline). */
void lines_feed(struct lines *l, const char *buf, size_t n);
/* End of input: a last line without a newline is handed over too. */
void lines_end(struct lines *l);
/* The partial line being assembled (NULL when none, or being dropped). */
const char *lines_partial(const struct lines *l, size_t *len);
void lines_free(struct lines *l);

#endif

/* The size of a reply as a client's model sees it.  Clients cap what they
 * pass on of a tool result (Codex: about 10,000 bytes or 256 lines; Claude
 * Code: 25,000 tokens) and cut the middle out of anything longer, without
 * saying where the rest is.  So the server keeps each reply within a budget
 * itself (--max-reply-kb), cutting the long parts to their head and tail
 * with a line that says how much was left out and where the whole text is. */
#ifndef MCP_BUDGET_H
#define MCP_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

/* The default: under Codex's 10,000 bytes with room for what it adds (its
 * "Wall time" lines, links as JSON). */
#define REPLY_DEFAULT_KB 9
/* Lines per KiB of budget: 9 KiB allows 225 lines, under Codex's 256. */
#define REPLY_LINES_PER_KB 25

/* Bytes and lines of text (a last line without a newline counts). */
size_t text_lines(const char *text);

/* Shares `total` among n parts that want want[i] each: no part gets more
 * than it wants, and what one does not use goes to the others (water
 * filling).  out[i] receives each share. */
void budget_share(const size_t *want, size_t n, size_t total, size_t *out);

/* How to cut a text. */
struct clip_spec {
	size_t max_bytes, max_lines;
	const char *where;              /* "the whole output is in F", or NULL */
	unsigned long long total_chars; /* the whole text's, when text is only a part of it; 0: text is whole */
	size_t gap_from, gap_to;        /* an earlier cut's marker line in text, left out in any case (gap_to 0: none) */
};

/* text within cs->max_bytes and cs->max_lines: itself when it fits, else
 * its head and its tail around one line "[... N characters omitted (M in
 * all); WHERE ...]".  Cuts fall between lines where they can, and never
 * inside a UTF-8 character.  Returns a malloc'd string; *clipped tells
 * whether anything was left out. */
char *budget_clip(const char *text, const struct clip_spec *cs, bool *clipped);

/* The line of text that holds marker (an earlier cut's), as the span
 * [*from, *to) with the newline before it; false when there is none. */
bool budget_find_cut(const char *text, const char *marker, size_t *from, size_t *to);

#endif

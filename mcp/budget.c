/* A reply's size (budget.h). */
#include "budget.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/text.h"
#include "../common/util.h"

size_t text_lines(const char *text)
{
	size_t n = 0, len = strlen(text);
	for (const char *p = text; (p = memchr(p, '\n', len - (size_t)(p - text))); p++)
		n++;
	return n + (len && text[len - 1] != '\n');
}

void budget_share(const size_t *want, size_t n, size_t total, size_t *out)
{
	size_t left = total, open = n;
	for (size_t i = 0; i < n; i++)
		out[i] = 0;
	/* Each round gives every part still wanting an equal share of what is
	 * left; parts that want less take only that, and the rest goes round
	 * again.  At most n rounds: each one satisfies a part or spends all. */
	while (open && left) {
		size_t share = left / open, given = 0;
		if (!share)
			share = 1;
		open = 0;
		for (size_t i = 0; i < n && given < left; i++) {
			if (out[i] >= want[i])
				continue;
			size_t add = want[i] - out[i] < share ? want[i] - out[i] : share;
			if (add > left - given)
				add = left - given;
			out[i] += add;
			given += add;
			if (out[i] < want[i])
				open++;
		}
		left -= given;
		if (!given)
			break;
	}
}

/* Back from p to the start of a UTF-8 character. */
static size_t char_start(const char *s, size_t p)
{
	while (p > 0 && ((unsigned char)s[p] & 0xC0) == 0x80)
		p--;
	return p;
}

/* A line longer than what is left of a budget is cut inside when enough
 * is left to be worth showing; else the budget stops before it. */
#define PARTIAL_MIN 80

/* Where a head of at most max_bytes and max_lines ends: after the last
 * whole line that fits, or inside the next one. */
static size_t head_end(const char *s, size_t len, size_t max_bytes, size_t max_lines)
{
	size_t end = 0, lines = 0;
	while (end < len && lines < max_lines) {
		const char *nl = memchr(s + end, '\n', len - end);
		size_t next = nl ? (size_t)(nl - s) + 1 : len;
		if (next > max_bytes) {
			if (max_bytes - end >= PARTIAL_MIN || end == 0)
				end = char_start(s, max_bytes < len ? max_bytes : len);
			break;
		}
		end = next;
		lines++;
	}
	return end;
}

/* Where a tail of at most max_bytes and max_lines begins, not before
 * `from`: before the first whole line that fits, or inside the one
 * before it. */
static size_t tail_start(const char *s, size_t len, size_t from, size_t max_bytes, size_t max_lines)
{
	size_t start = len, lines = 0;
	/* A last line without its newline is a line too. */
	size_t scan = len && s[len - 1] == '\n' ? len - 1 : len;
	while (start > from && lines < max_lines) {
		size_t prev = scan;
		while (prev > from && s[prev - 1] != '\n')
			prev--;
		if (len - prev > max_bytes) {
			if (max_bytes - (len - start) >= PARTIAL_MIN || start == len) {
				size_t p = len - max_bytes;
				while (p < len && ((unsigned char)s[p] & 0xC0) == 0x80)
					p++;
				start = p < from ? from : p;
			}
			break;
		}
		start = prev;
		lines++;
		if (prev == from)
			break;
		scan = prev - 1;
	}
	return start;
}

static size_t newlines(const char *s, size_t from, size_t to)
{
	size_t n = 0;
	for (size_t i = from; i < to; i++)
		n += s[i] == '\n';
	return n;
}

char *budget_clip(const char *text, const struct clip_spec *cs, bool *clipped)
{
	size_t len = strlen(text), lines = text_lines(text);
	*clipped = false;
	if (len <= cs->max_bytes && lines <= cs->max_lines)
		return xstrdup(text);
	*clipped = true;
	unsigned long long total = cs->total_chars ? cs->total_chars : utf8_chars(text, len);
	/* The marker takes one line and at most its own length (counted with
	 * the whole text's numbers, and the newline it may need before it). */
	const char *sep = cs->where ? "; " : "", *where = cs->where ? cs->where : "";
	int mlen = 1 + snprintf(NULL, 0, "[... %llu characters omitted (%llu in all)%s%.400s ...]\n", total, total, sep, where);
	size_t room = cs->max_bytes > (size_t)mlen ? cs->max_bytes - (size_t)mlen : 0;
	size_t lroom = cs->max_lines > 1 ? cs->max_lines - 1 : 0;
	/* An earlier cut's marker is left out in any case: the new one says
	 * what the two together left out. */
	bool gap = cs->gap_to > cs->gap_from && cs->gap_to <= len;
	size_t h = head_end(text, gap ? cs->gap_from : len, room / 2, (lroom + 1) / 2);
	size_t hl = newlines(text, 0, h) + (h && text[h - 1] != '\n');
	size_t t = tail_start(text, len, gap && cs->gap_to > h ? cs->gap_to : h, room - h, lroom > hl ? lroom - hl : 0);
	unsigned long long shown = utf8_chars(text, h) + utf8_chars(text + t, len - t);
	char marker[600];
	snprintf(marker, sizeof marker, "%s[... %llu characters omitted (%llu in all)%s%.400s ...]\n", h && text[h - 1] != '\n' ? "\n" : "",
		 total > shown ? total - shown : 0, total, sep, where);
	return xasprintf("%.*s%s%s", (int)h, text, marker, text + t);
}

bool budget_find_cut(const char *text, const char *marker, size_t *from, size_t *to)
{
	const char *m = strstr(text, marker);
	if (!m)
		return false;
	/* The marker's whole line, from the newline before it. */
	const char *start = m;
	while (start > text && start[-1] != '\n')
		start--;
	if (start > text)
		start--;
	const char *end = strchr(m, '\n');
	*from = (size_t)(start - text);
	*to = end ? (size_t)(end - text) + 1 : strlen(text);
	return true;
}

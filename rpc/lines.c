/* Line framing of the input stream (lines.h). */
#include "lines.h"

#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "../common/util.h"

void lines_feed(struct lines *l, const char *buf, size_t n)
{
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(buf + i, '\n', n - i);
		size_t chunk = nl ? (size_t)(nl - (buf + i)) : n - i;
		if (!l->discarding) {
			if (l->len + chunk > l->max) {
				/* Bounded memory: an over-long message is dropped, the
				 * client told once, and reading resumes at the next
				 * line. */
				char head[LINES_HEAD_MAX];
				size_t hn = l->len < sizeof head ? l->len : sizeof head;
				memcpy(head, l->buf, hn);
				size_t more = chunk < sizeof head - hn ? chunk : sizeof head - hn;
				memcpy(head + hn, buf + i, more);
				l->discarding = true;
				l->len = 0;
				l->too_long(l->arg, head, hn + more);
			} else {
				if (l->len + chunk + 1 > l->cap) {
					size_t cap = l->cap ? l->cap : 65536;
					while (cap < l->len + chunk + 1)
						cap *= 2;
					l->buf = xrealloc(l->buf, cap);
					l->cap = cap;
				}
				memcpy(l->buf + l->len, buf + i, chunk);
				l->len += chunk;
			}
		}
		i += chunk;
		if (nl) {
			i++;
			if (!l->discarding)
				l->line(l->arg, l->buf, l->len);
			l->discarding = false;
			l->len = 0;
			if (l->cap > (1u << 20)) {
				/* Give back the memory of a large message. */
				free(l->buf);
				l->buf = NULL;
				l->cap = 0;
			}
		}
	}
}

void lines_end(struct lines *l)
{
	if (l->len && !l->discarding)
		l->line(l->arg, l->buf, l->len);
	l->len = 0;
}

const char *lines_partial(const struct lines *l, size_t *len)
{
	*len = l->len;
	return l->len && !l->discarding ? l->buf : NULL;
}

void lines_free(struct lines *l)
{
	free(l->buf);
	l->buf = NULL;
	l->len = l->cap = 0;
}

#include "text.h"

#include <netinet/in.h>
#include <resolv.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "util.h"

size_t utf8_decode(const unsigned char *p, size_t avail, uint32_t *cp_out)
{
	unsigned char c = p[0];
	if (c < 0x80) {
		*cp_out = c;
		return c ? 1 : 0;
	}
	size_t n;
	uint32_t cp;
	if (c >= 0xC2 && c <= 0xDF) {
		n = 2;
		cp = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		n = 3;
		cp = c & 0x0F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (avail < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3F);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	*cp_out = cp;
	return n;
}

static size_t seq_len(const unsigned char *p, size_t avail)
{
	uint32_t cp;
	return utf8_decode(p, avail, &cp);
}

size_t utf8_invalid_at(const unsigned char *buf, size_t len)
{
	for (size_t i = 0; i < len;) {
		size_t n = seq_len(buf + i, len - i);
		if (!n)
			return i;
		i += n;
	}
	return len;
}

bool utf8_valid(const unsigned char *buf, size_t len)
{
	return utf8_invalid_at(buf, len) == len;
}

char *utf8_sanitize(const unsigned char *buf, size_t len, size_t *out_len)
{
	/* Worst case: every byte becomes the 3-byte U+FFFD. */
	char *out = xmalloc(len * 3 + 1);
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		size_t n = seq_len(buf + i, len - i);
		if (n) {
			memcpy(out + o, buf + i, n);
			o += n;
			i += n;
		} else {
			memcpy(out + o, "\xEF\xBF\xBD", 3);
			o += 3;
			i++;
		}
	}
	out[o] = 0;
	if (out_len)
		*out_len = o;
	return out;
}

size_t utf8_chars(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			n++;
	return n;
}

size_t utf8_prefix(const char *s, size_t len, size_t n)
{
	size_t i = 0, seen = 0;
	while (i < len) {
		if (((unsigned char)s[i] & 0xC0) != 0x80) {
			if (seen == n)
				break;
			seen++;
		}
		i++;
	}
	return i;
}

size_t utf8_suffix(const char *s, size_t len, size_t n)
{
	if (n == 0)
		return len;
	size_t i = len, seen = 0;
	while (i > 0) {
		i--;
		if (((unsigned char)s[i] & 0xC0) != 0x80 && ++seen == n)
			break;
	}
	return i;
}

/* The result is sized for what it holds: head, marker, tail.  (Writing
 * the marker into the sanitised copy would only fit because that copy is
 * allocated for the worst case.) */
char *utf8_clip(const char *s, size_t max_chars, bool keep_tail)
{
	static const char marker[] = "\n[... cut ...]\n";
	size_t len;

	if (!s)
		return NULL;
	char *t = utf8_sanitize((const unsigned char *)s, strlen(s), &len);
	if (!t || utf8_chars(t, len) <= max_chars)
		return t;
	size_t head = utf8_prefix(t, len, keep_tail ? max_chars / 3 : max_chars);
	size_t tail = keep_tail ? utf8_suffix(t, len, max_chars - max_chars / 3) : len;
	size_t mlen = sizeof marker - (keep_tail ? 1 : 2); /* no newline at the very end */
	char *out = xmalloc(head + mlen + (len - tail) + 1);
	memcpy(out, t, head);
	memcpy(out + head, marker, mlen);
	memcpy(out + head + mlen, t + tail, len - tail);
	out[head + mlen + len - tail] = '\0';
	free(t);
	return out;
}

/* glibc's resolver library has the RFC 4648 encoder (b64_ntop). */
char *base64_encode(const unsigned char *buf, size_t len)
{
	size_t olen = (len + 2) / 3 * 4 + 1;
	char *out = xmalloc(olen);

	if (b64_ntop(buf, len, out, olen) < 0) {
		free(out);
		return NULL;
	}
	return out;
}

/* Unicode's format characters (category Cf, as of Unicode 15.1) and the
 * line and paragraph separators, less ZWNJ and ZWJ (which Persian and the
 * Indic scripts need, and emoji sequences join with), plus the
 * supplementary variation selectors: all invisible, and each can change or
 * hide what a reader sees (Trojan Source's bidi overrides, zero-width
 * spaces, the tag characters that smuggle instructions to a model). */
static const uint32_t hidden_ranges[][2] = {
	{ 0x00AD, 0x00AD }, { 0x0600, 0x0605 }, { 0x061C, 0x061C }, { 0x06DD, 0x06DD },
	{ 0x070F, 0x070F }, { 0x0890, 0x0891 }, { 0x08E2, 0x08E2 }, { 0x180E, 0x180E },
	{ 0x200B, 0x200B }, { 0x200E, 0x200F }, { 0x2028, 0x202E }, { 0x2060, 0x2064 },
	{ 0x2066, 0x206F }, { 0xFEFF, 0xFEFF }, { 0xFFF9, 0xFFFB }, { 0x110BD, 0x110BD },
	{ 0x110CD, 0x110CD }, { 0x13430, 0x1343F }, { 0x1BCA0, 0x1BCA3 }, { 0x1D173, 0x1D17A },
	{ 0xE0001, 0xE0001 }, { 0xE0020, 0xE007F }, { 0xE0100, 0xE01EF },
};

bool text_hidden(uint32_t cp)
{
	if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
		return true;
	for (size_t i = 0; i < sizeof hidden_ranges / sizeof hidden_ranges[0]; i++)
		if (cp >= hidden_ranges[i][0] && cp <= hidden_ranges[i][1])
			return true;
	return false;
}

/* The byte range [a, b) of one line (no newline in it) with its carriage
 * returns taken as a terminal does for a progress bar: what follows the
 * last one that has something after it.  "\r\n" ends a line as "\n". */
static void last_state(const unsigned char *buf, size_t *a, size_t b)
{
	size_t end = b;
	while (end > *a && buf[end - 1] == '\r')
		end--;
	const unsigned char *cr = end > *a ? memrchr(buf + *a, '\r', end - *a) : NULL;
	if (cr)
		*a = (size_t)(cr - buf) + 1;
}

char *text_for_model(const unsigned char *buf, size_t len, bool collapse_cr, size_t *out_len)
{
	/* Worst case: every byte becomes "\xNN" (4 bytes), or a 4-byte code
	 * point "\UNNNNNNNN" (10). */
	char *out = xmalloc(len * 4 + len / 4 * 6 + 1);
	size_t o = 0;
	for (size_t ls = 0; ls < len;) {
		const unsigned char *nl = memchr(buf + ls, '\n', len - ls);
		size_t le = nl ? (size_t)(nl - buf) : len;
		size_t a = ls, b = le;
		if (collapse_cr) {
			last_state(buf, &a, b);
			while (b > a && buf[b - 1] == '\r')
				b--;
		}
		for (size_t i = a; i < b;) {
			uint32_t cp;
			size_t n = utf8_decode(buf + i, b - i, &cp);
			if (n == 0 || (cp < 0x80 && cp != '\t' && text_hidden(cp))) {
				o += (size_t)sprintf(out + o, "\\x%02x", buf[i]);
				i++;
				continue;
			}
			if (cp >= 0x80 && text_hidden(cp))
				o += (size_t)sprintf(out + o, cp > 0xFFFF ? "\\U%08x" : "\\u%04x", (unsigned)cp);
			else {
				memcpy(out + o, buf + i, n);
				o += n;
			}
			i += n;
		}
		if (nl)
			out[o++] = '\n';
		ls = le + 1;
	}
	out[o] = 0;
	if (out_len)
		*out_len = o;
	return out;
}

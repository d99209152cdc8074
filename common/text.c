#include "text.h"

#include <netinet/in.h>
#include <resolv.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when invalid.
 * Overlong forms, surrogates and code points above U+10FFFF are invalid. */
static size_t seq_len(const unsigned char *p, size_t avail)
{
	unsigned char c = p[0];
	if (c < 0x80)
		return c ? 1 : 0;
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
	return n;
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
	char *out = malloc(len * 3 + 1);
	if (!out)
		return NULL;
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
	char *out = malloc(head + mlen + (len - tail) + 1);
	if (out) {
		memcpy(out, t, head);
		memcpy(out + head, marker, mlen);
		memcpy(out + head + mlen, t + tail, len - tail);
		out[head + mlen + len - tail] = '\0';
	}
	free(t);
	return out;
}

/* glibc's resolver library has the RFC 4648 encoder (b64_ntop). */
char *base64_encode(const unsigned char *buf, size_t len)
{
	size_t olen = (len + 2) / 3 * 4 + 1;
	char *out = malloc(olen);

	if (out && b64_ntop(buf, len, out, olen) < 0) {
		free(out);
		return NULL;
	}
	return out;
}

#include "text.h"

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

bool utf8_valid(const unsigned char *buf, size_t len)
{
	for (size_t i = 0; i < len;) {
		size_t n = seq_len(buf + i, len - i);
		if (!n)
			return false;
		i += n;
	}
	return true;
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

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const unsigned char *buf, size_t len)
{
	size_t olen = (len + 2) / 3 * 4;
	char *out = malloc(olen + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)buf[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)buf[i + 1] << 8;
		if (i + 2 < len)
			v |= buf[i + 2];
		out[o++] = b64[(v >> 18) & 63];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = i + 1 < len ? b64[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < len ? b64[v & 63] : '=';
	}
	out[o] = 0;
	return out;
}

static int b64val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;
	return p ? (int)(p - b64) : -1;
}

long base64_decode(const char *s, size_t len, unsigned char **out)
{
	*out = NULL;
	while (len && s[len - 1] == '=')
		len--;
	if (len % 4 == 1)
		return -1;
	unsigned char *o = malloc(len / 4 * 3 + 3);
	if (!o)
		return -1;
	size_t n = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (size_t i = 0; i < len; i++) {
		int v = b64val(s[i]);
		if (v < 0) {
			free(o);
			return -1;
		}
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			o[n++] = (unsigned char)(acc >> bits);
		}
	}
	*out = o;
	return (long)n;
}

#include "escape.h"
#include "text.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *esc_bytes(char *out, size_t outsz, const void *p, size_t n, size_t max)
{
	const unsigned char *b = p;
	size_t o = 0;
	bool cut = n > max;

	if (outsz == 0)
		return out;
	if (cut)
		n = max;
	for (size_t i = 0; i < n; i++) {
		bool plain = b[i] >= 0x20 && b[i] < 0x7f && b[i] != '\\';
		/* Room for this byte, then for "..." and the NUL. */
		if (o + (plain ? 1 : 4) + 4 > outsz) {
			cut = true;
			break;
		}
		if (plain)
			out[o++] = (char)b[i];
		else
			o += (size_t)snprintf(out + o, outsz - o, "\\x%02x", b[i]);
	}
	if (cut && o + 4 <= outsz) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

int esc_name(char *out, size_t outsz, const char *name)
{
	const unsigned char *b = (const unsigned char *)name;
	size_t n = strlen(name), o = 0;
	bool escaped = false;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t l = utf8_decode(b + i, n - i, &cp);
		char tmp[16];
		size_t tl;
		if (l == 0) {
			/* Python's surrogateescape: os.listdir names it so. */
			tl = (size_t)snprintf(tmp, sizeof tmp, "\\udc%02x", b[i]);
			l = 1;
		} else if (cp == '\\') {
			tl = (size_t)snprintf(tmp, sizeof tmp, "\\\\");
		} else if (text_hidden(cp) && cp <= 0xFF) {
			tl = (size_t)snprintf(tmp, sizeof tmp, "\\x%02x", (unsigned)cp);
		} else if (text_hidden(cp)) {
			tl = (size_t)snprintf(tmp, sizeof tmp, cp > 0xFFFF ? "\\U%08x" : "\\u%04x", (unsigned)cp);
		} else {
			memcpy(tmp, b + i, l);
			tl = l;
		}
		if (tl != l || memcmp(tmp, b + i, l) != 0)
			escaped = true;
		if (o + tl >= outsz)
			return -ENAMETOOLONG;
		memcpy(out + o, tmp, tl);
		o += tl;
		i += l;
	}
	if (o >= outsz)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return escaped ? 1 : 0;
}

static int hexn(const char *p, int n, uint32_t *v)
{
	*v = 0;
	for (int i = 0; i < n; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		*v = *v * 16 + (uint32_t)d;
	}
	return 0;
}

static size_t utf8_encode(uint32_t cp, char *p)
{
	if (cp < 0x80) {
		p[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		p[0] = (char)(0xC0 | (cp >> 6));
		p[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		p[0] = (char)(0xE0 | (cp >> 12));
		p[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		p[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	p[0] = (char)(0xF0 | (cp >> 18));
	p[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	p[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	p[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

int unesc_name(char *out, size_t outsz, const char *shown)
{
	size_t o = 0;
	for (const char *p = shown; *p;) {
		char tmp[8];
		size_t tl = 0, used = 1;
		uint32_t cp;
		if (p[0] == '\\' && p[1] == '\\') {
			tmp[0] = '\\';
			tl = 1;
			used = 2;
		} else if (p[0] == '\\' && p[1] == 'x' && hexn(p + 2, 2, &cp) == 0) {
			tl = utf8_encode(cp, tmp);
			used = 4;
		} else if (p[0] == '\\' && (p[1] == 'u' || p[1] == 'U') && hexn(p + 2, p[1] == 'u' ? 4 : 8, &cp) == 0) {
			used = p[1] == 'u' ? 6 : 10;
			if (cp >= 0xDC80 && cp <= 0xDCFF) {
				tmp[0] = (char)(cp & 0xFF); /* a byte that is not UTF-8 */
				tl = 1;
			} else if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF || cp == 0) {
				return -EINVAL;
			} else {
				tl = utf8_encode(cp, tmp);
			}
		} else {
			tmp[0] = *p; /* not an escape: as written */
			tl = 1;
		}
		if (tl == 1 && tmp[0] == '\0')
			return -EINVAL;
		if (o + tl >= outsz)
			return -ENAMETOOLONG;
		memcpy(out + o, tmp, tl);
		o += tl;
		p += used;
	}
	out[o] = '\0';
	return 0;
}

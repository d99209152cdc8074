/* Text helpers: bytes from the sandbox made safe for JSON, base64. */
#ifndef COMMON_TEXT_H
#define COMMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Returns a malloc'd NUL-terminated copy of buf with every invalid UTF-8
 * sequence (and NUL bytes) replaced by U+FFFD, so what Python printed can
 * always be carried inside a JSON string.  *out_len may be NULL. */
char *utf8_sanitize(const unsigned char *buf, size_t len, size_t *out_len);

/* Number of code points in a valid UTF-8 string. */
size_t utf8_chars(const char *s, size_t len);

/* Byte offset just past the first n code points of s (len bytes). */
size_t utf8_prefix(const char *s, size_t len, size_t n);

/* Byte offset where the last n code points of s begin. */
size_t utf8_suffix(const char *s, size_t len, size_t n);

/* s made safe (utf8_sanitize) and bounded to max_chars code points: past
 * the bound, "[... cut ...]" on a line of its own replaces the end, or with
 * keep_tail the middle (a third kept before it, the rest after it: the end
 * of a traceback is the line that matters).  malloc'd; NULL for NULL. */
char *utf8_clip(const char *s, size_t max_chars, bool keep_tail);

/* Strict UTF-8: no overlong form, no surrogate, nothing above U+10FFFF,
 * no NUL.  utf8_invalid_at gives the offset of the first bad byte, or len. */
bool utf8_valid(const unsigned char *buf, size_t len);
size_t utf8_invalid_at(const unsigned char *buf, size_t len);

/* Base64 (RFC 4648, with padding); malloc'd, NUL-terminated. */
char *base64_encode(const unsigned char *buf, size_t len);

#endif

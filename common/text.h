/* Text helpers: bytes from the sandbox made safe for JSON, base64. */
#ifndef COMMON_TEXT_H
#define COMMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The code point of the valid UTF-8 sequence at p into *cp; its length
 * (1..4), or 0 when invalid (overlong, surrogate, above U+10FFFF, NUL). */
size_t utf8_decode(const unsigned char *p, size_t avail, uint32_t *cp);

/* Whether a code point must never reach the model as it is: C0 and C1
 * controls, DEL, and the invisible format characters that can fake or hide
 * text (bidi embeddings, overrides and isolates, zero-width spaces, BOM,
 * the tag block).  ZWJ and ZWNJ are not among them. */
bool text_hidden(uint32_t cp);

/* What the sandbox wrote, as the model is shown it (a stream, a repr, a
 * traceback): valid UTF-8 in which every byte that is not UTF-8 and every
 * control character but tab and newline is written \xNN (the byte), and
 * every other text_hidden code point \uNNNN or \UNNNNNNNN, readable and
 * inert.  With collapse_cr, a line's carriage returns keep only its last
 * state, as a terminal shows a progress bar ("\r\n" ends a line). */
char *text_for_model(const unsigned char *buf, size_t len, bool collapse_cr, size_t *out_len);

/* Base64 (RFC 4648, with padding); malloc'd, NUL-terminated. */
char *base64_encode(const unsigned char *buf, size_t len);

#endif

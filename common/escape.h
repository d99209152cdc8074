/* Quoting untrusted bytes (names from a policy file, bytes of a file the
 * sandbox wrote) for a message: printable ASCII as is, every other byte and
 * the backslash as \xNN, so nothing in a message can end a line, move a
 * terminal's cursor or pass for a quote. */
#ifndef COMMON_ESCAPE_H
#define COMMON_ESCAPE_H

#include <stddef.h>

/* Writes at most max bytes of p (n long) into out, escaped, with "..."
 * when it was cut (longer than max, or out too small); always
 * NUL-terminated when outsz > 0.  Returns out. */
const char *esc_bytes(char *out, size_t outsz, const void *p, size_t n, size_t max);

#endif

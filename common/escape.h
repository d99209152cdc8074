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

/* A file name (or a path) as the model is shown it and may write it back.
 * Printable UTF-8 without a backslash stays as it is (0).  Anything else is
 * written as the body of a Python string literal that names the same bytes
 * (1): the backslash as \\, controls, C1 and the invisible format
 * characters (text_hidden) as \xNN, \uNNNN or \UNNNNNNNN, and each byte
 * that is not UTF-8 as \udcNN, Python's surrogateescape, as os.listdir()
 * names it, so that open("...") of what is shown opens the file.
 * -ENAMETOOLONG when out is too small. */
int esc_name(char *out, size_t outsz, const char *name);

/* The inverse, for a path the model sends back: \\, \xNN, \uNNNN,
 * \UNNNNNNNN (\udcNN: the byte NN); any other backslash stays as
 * written.  -EINVAL for a NUL or a lone surrogate, -ENAMETOOLONG. */
int unesc_name(char *out, size_t outsz, const char *shown);

#endif

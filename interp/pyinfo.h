/* What the embedded interpreter is, read without starting it: the server
 * never initialises Python, and the export must not run a project's code
 * to name its versions. */
#ifndef INTERP_PYINFO_H
#define INTERP_PYINFO_H

#include <stddef.h>

/* The version of the CPython this binary embeds ("3.11.7"); not
 * thread-safe the first time (the server calls it once, on the loop). */
const char *py_embedded_version(void);

/* The version of an installed distribution ("numpy") as its metadata
 * directory names it (numpy-1.24.2.dist-info or .egg-info), looked for in
 * the interpreter's site directories and, when venv is not NULL, in the
 * venv's lib/python3.X/site-packages first.  Writes "" when not found. */
void py_dist_version(const char *dist, const char *venv, char *out, size_t n);

#endif

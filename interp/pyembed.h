/* Starting the embedded CPython (isolated, UTF-8) and calling into the
 * bootstrap module. */
#ifndef INTERP_PYEMBED_H
#define INTERP_PYEMBED_H

#include <stddef.h>

#include "../common/err.h"

/* Initialises the interpreter and imports the embedded bootstrap as _psm. */
int py_start(struct err *e);

/* Calls _psm.<fn>(arg) and returns its result: a str as UTF-8 or bytes, in
 * a malloc'd buffer (*out, *len; NUL-terminated).  *is_bytes tells which.
 * On a Python exception, returns -EINVAL with the exception in e. */
int py_call(const char *fn, const char *arg, char **out, size_t *len, int *is_bytes, struct err *e);

#endif

/* One error convention for the whole code base: functions return 0 (or a
 * non-negative value) on success and a negative errno on failure, and put a
 * human-readable message that says what to change into a caller-supplied
 * struct err.  The MCP layer turns these into JSON-RPC errors in one place. */
#ifndef COMMON_ERR_H
#define COMMON_ERR_H

#include <stddef.h>

struct err {
	int code;        /* negative errno, 0 when unset */
	char msg[768];   /* NUL-terminated, never longer than the buffer */
};

/* Sets e (when non-NULL) and returns code, so callers can write
 * `return err_set(e, -EINVAL, "...", ...);`.  code must be negative. */
int err_set(struct err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like err_set, and appends ": strerror(-code)". */
int err_sys(struct err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefixes the existing message with "prefix: " (for adding context). */
void err_prefix(struct err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void err_clear(struct err *e);

#endif

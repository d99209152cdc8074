#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vset(struct err *e, int code, const char *fmt, va_list ap)
{
	e->code = code;
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
}

int err_set(struct err *e, int code, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vset(e, code, fmt, ap);
		va_end(ap);
	}
	return code;
}

int err_sys(struct err *e, int code, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vset(e, code, fmt, ap);
		va_end(ap);
		size_t n = strlen(e->msg);
		snprintf(e->msg + n, sizeof e->msg - n, ": %s", strerror(-code));
	}
	return code;
}

void err_prefix(struct err *e, const char *fmt, ...)
{
	if (!e)
		return;
	char pre[256], old[sizeof e->msg];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof pre, fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof old);
	/* Bounded pieces: 255 + 2 + 500 < sizeof e->msg. */
	snprintf(e->msg, sizeof e->msg, "%.255s: %.500s", pre, old);
}

void err_clear(struct err *e)
{
	if (e) {
		e->code = 0;
		e->msg[0] = '\0';
	}
}

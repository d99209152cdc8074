/* See vdetail.h. */
#include "vdetail.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void vr_set(struct vresult *r, bool ok, const char *fmt, ...)
{
	va_list ap;

	r->ok = ok;
	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof r->detail, fmt, ap);
	va_end(ap);
}

/* Appends to r->detail, silently stopping at its end. */
void vr_append(struct vresult *r, const char *fmt, ...)
{
	size_t n = strlen(r->detail);
	va_list ap;

	if (n + 1 >= sizeof r->detail)
		return;
	va_start(ap, fmt);
	vsnprintf(r->detail + n, sizeof r->detail - n, fmt, ap);
	va_end(ap);
}



bool vr_starts(const unsigned char *p, size_t len, const char *lit)
{
	size_t n = strlen(lit);
	return len >= n && memcmp(p, lit, n) == 0;
}

bool vr_is_ws(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

const unsigned char *vr_find(const unsigned char *p, const unsigned char *end, const char *lit)
{
	size_t n = strlen(lit);
	if ((size_t)(end - p) < n)
		return NULL;
	return memmem(p, (size_t)(end - p), lit, n);
}

/* Temporary: weak stand-ins until policy/jail*.c lands.  No isolation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../policy/jail.h"

__attribute__((weak)) int jail_enter(const struct jail_config *c, struct jail_report *r, struct err *e)
{
	clearenv();
	for (const char *const *p = c->env; p && *p; p++)
		putenv((char *)(uintptr_t)*p);
	memset(r, 0, sizeof *r);
	r->enforceable = 1;
	return 0;
}

__attribute__((weak)) int jail_session_enter(struct err *e)
{
	return 0;
}

__attribute__((weak)) const char *const *jail_default_runtime_paths(void)
{
	static const char *const p[] = { "/usr", NULL };
	return p;
}

__attribute__((weak)) char *jail_report_describe(const struct jail_report *r)
{
	return strdup("jail: not yet implemented (no isolation)");
}

__attribute__((weak)) int jail_check(const struct jail_config *c, FILE *out)
{
	fprintf(out, "jail: not yet implemented (no isolation)\n");
	return 1;
}

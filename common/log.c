#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum log_level log_threshold = LOG_INFO;
static char prefix[32] = "python-sandbox-mcp";

static const char *const names[] = { "debug", "info", "notice", "warning", "error" };

int log_level_parse(const char *s)
{
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcasecmp(s, names[i]) == 0)
			return (int)i;
	if (strcasecmp(s, "warn") == 0)
		return LOG_WARNING;
	if (!strcasecmp(s, "critical") || !strcasecmp(s, "alert") || !strcasecmp(s, "emergency"))
		return LOG_ERROR;
	return -1;
}

void log_set_prefix(const char *p)
{
	snprintf(prefix, sizeof prefix, "%s", p);
}

void log_msg(enum log_level l, const char *fmt, ...)
{
	if (l < log_threshold)
		return;
	char buf[2048];
	int n = snprintf(buf, sizeof buf, "%s[%d] %s: ", prefix, (int)getpid(), names[l]);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof buf)
		vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	va_end(ap);
	size_t len = strnlen(buf, sizeof buf - 2);
	buf[len++] = '\n';
	/* One write(2) per line so lines of several processes do not interleave. */
	ssize_t w = write(STDERR_FILENO, buf, len);
	(void)w;
}

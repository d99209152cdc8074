/* Logging to stderr only: stdout belongs to the MCP stream. */
#ifndef COMMON_LOG_H
#define COMMON_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_NOTICE, LOG_WARNING, LOG_ERROR };

extern enum log_level log_threshold;

/* Parses "debug", "info", "notice", "warning" (or "warn"), "error";
 * the MCP levels critical/alert/emergency map to error.  -1 when unknown. */
int log_level_parse(const char *s);
void log_set_prefix(const char *prefix); /* e.g. "zygote" */

void log_msg(enum log_level l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif

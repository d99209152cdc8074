#include "callstatus.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

const struct call_status_info call_status_table[CALL_STATUS_COUNT] = {
	[CALL_PENDING] = { "pending", 1, false, "SessionError" },
	[CALL_OK] = { "ok", 0, false, "Note" },
	[CALL_ERROR] = { "error", 1, false, "SessionError" },
	[CALL_TIMEOUT] = { "timeout", 124, true, "Timeout" },
	[CALL_CANCELLED] = { "cancelled", 130, true, "Cancelled" },
	[CALL_CRASHED] = { "crashed", -1, true, "SessionError" },
	[CALL_MEMORY] = { "memory", 137, true, "SessionError" },
	/* 128 + SIGXFSZ: what the kernel does to a process past its file size
	 * limit, here for the workspace as a whole. */
	[CALL_LIMITS] = { "limits", 153, true, "WorkspaceLimit" },
};

const char *const call_state_names[CALL_STATE_COUNT] = {
	[STATE_PENDING] = "pending",
	[STATE_KEPT] = "kept",
	[STATE_ROLLED_BACK] = "rolled_back",
	[STATE_NEW] = "new",
	[STATE_RESTORED] = "restored",
	[STATE_FORKED] = "forked",
};

int call_status_exit_code(enum call_status s, int wstatus, bool wstatus_known)
{
	if (call_status_table[s].exit_code >= 0)
		return call_status_table[s].exit_code;
	if (wstatus_known && WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	if (wstatus_known && WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus) ? WEXITSTATUS(wstatus) : 1;
	return 128 + SIGKILL;
}

static const struct {
	int sig;
	const char *name, *meaning;
} signals[] = {
	{ SIGSEGV, "SIGSEGV", "segmentation fault: an invalid memory access, in a C extension or through ctypes" },
	{ SIGBUS, "SIGBUS", "bus error: a bad memory access, such as a mapped file that was truncated" },
	{ SIGABRT, "SIGABRT", "abort: a C library or extension called abort() (a failed assertion, a corrupted heap), or os.abort()" },
	{ SIGFPE, "SIGFPE", "arithmetic exception: an integer division by zero in C code" },
	{ SIGILL, "SIGILL", "illegal instruction: code built for another processor, or a deliberate trap" },
	{ SIGSYS, "SIGSYS", "a system call the sandbox refuses by ending the process" },
	{ SIGKILL, "SIGKILL", "killed from outside the session, or by the kernel when memory ran out" },
	{ SIGTERM, "SIGTERM", "asked to end, by the code itself or from outside" },
	{ SIGINT, "SIGINT", "interrupted" },
	{ SIGHUP, "SIGHUP", "hang-up" },
	{ SIGPIPE, "SIGPIPE", "a write to a pipe nobody reads" },
	{ SIGXCPU, "SIGXCPU", "over its CPU time limit" },
	{ SIGXFSZ, "SIGXFSZ", "over the file size limit (max_file_mb)" },
	{ SIGUSR1, "SIGUSR1", "a signal the code did not handle" },
	{ SIGUSR2, "SIGUSR2", "a signal the code did not handle" },
	{ SIGALRM, "SIGALRM", "an alarm the code set and did not handle" },
	{ SIGTRAP, "SIGTRAP", "a breakpoint trap" },
};

const char *call_signal_name(int sig)
{
	for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
		if (signals[i].sig == sig)
			return signals[i].name;
	return "a signal";
}

const char *call_signal_meaning(int sig)
{
	for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++)
		if (signals[i].sig == sig)
			return signals[i].meaning;
	return "a signal it did not handle";
}

/* "  File \"F\", line N in FUNC" -> its parts; false for any other line. */
static bool frame_parts(const char *l, size_t n, const char **file, size_t *fl, const char **rest, size_t *rl)
{
	static const char pre[] = "  File \"";
	if (n < sizeof pre || strncmp(l, pre, sizeof pre - 1) != 0)
		return false;
	*file = l + sizeof pre - 1;
	const char *q = memchr(*file, '"', n - (sizeof pre - 1));
	if (!q || (size_t)(q - l) + 3 > n || strncmp(q, "\", ", 3) != 0)
		return false;
	*fl = (size_t)(q - *file);
	*rest = q + 3; /* "line N in FUNC" */
	*rl = n - (size_t)(*rest - l);
	return true;
}

bool call_fault_report(const char *text, size_t *start, size_t *end, char *frames, size_t fn, char *where, size_t wn)
{
	static const char head[] = "Fatal Python error: ";
	const char *b = NULL;
	for (const char *p = text; (p = strstr(p, head)); p++)
		if (p == text || p[-1] == '\n')
			b = p;
	if (!b || fn == 0 || wn == 0)
		return false;
	*start = (size_t)(b - text);
	*end = strlen(text);
	size_t fo = 0;
	frames[0] = where[0] = '\0';
	char inner[300] = "", cell[200] = "";
	for (const char *l = b; *l;) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l);
		const char *next = nl ? nl + 1 : l + n;
		const char *file, *rest;
		size_t flen, rlen;
		if (strncmp(l, "Extension modules: ", 19) == 0) {
			*end = (size_t)(next - text);
			break;
		}
		if (frame_parts(l, n, &file, &flen, &rest, &rlen) && !(flen == 15 && strncmp(file, "<psm-bootstrap>", 15) == 0)) {
			if (fo + n + 2 < fn) {
				memcpy(frames + fo, l, n);
				fo += n;
				frames[fo++] = '\n';
				frames[fo] = '\0';
			}
			bool is_cell = flen > 6 && strncmp(file, "<cell ", 6) == 0;
			if (!inner[0]) {
				/* The library's file by its last two parts:
				 * ctypes/__init__.py, numpy/core/... */
				const char *f = file;
				int slashes = 0;
				for (const char *x = file + flen; x > file; x--)
					if (x[-1] == '/' && ++slashes == 2) {
						f = x;
						break;
					}
				const char *in = rlen > 3 ? memmem(rest, rlen, " in ", 4) : NULL;
				if (is_cell)
					snprintf(inner, sizeof inner, "%.*s %.*s", (int)flen, file, (int)rlen, rest);
				else if (in)
					snprintf(inner, sizeof inner, "%.*s (%.*s, %.*s)", (int)(rlen - (size_t)(in + 4 - rest)), in + 4,
						 (int)(flen - (size_t)(f - file)), f, (int)(in - rest), rest);
				else
					snprintf(inner, sizeof inner, "%.*s, %.*s", (int)flen, file, (int)rlen, rest);
				if (is_cell)
					snprintf(cell, sizeof cell, "-");
			} else if (!cell[0] && is_cell) {
				snprintf(cell, sizeof cell, "%.*s %.*s", (int)flen, file, (int)rlen, rest);
			}
		}
		l = next;
	}
	if (!inner[0])
		return true;
	if (cell[0] && strcmp(cell, "-") != 0)
		snprintf(where, wn, "%s, called from %s", inner, cell);
	else
		snprintf(where, wn, "%s", inner);
	return true;
}

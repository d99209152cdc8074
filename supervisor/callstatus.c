#include "callstatus.h"

#include <signal.h>
#include <stddef.h>
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

enum call_status call_status_parse(const char *name)
{
	for (int i = CALL_OK; name && i < CALL_STATUS_COUNT; i++)
		if (strcmp(name, call_status_table[i].name) == 0)
			return (enum call_status)i;
	return CALL_ERROR;
}

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

/* --check: starts this binary as a server, runs the jail's probes in a real
 * session through MCP, prints the jail's report (mode, layers, what the mode
 * does not give, remedies) and the probes' results.  Changes nothing on the
 * host.  See check.c. */
#ifndef MCP_CHECK_H
#define MCP_CHECK_H

#include <stdio.h>

#include "../policy/policy.h"

struct check_opts {
	const struct policy *policy; /* as loaded, resolved and tightened */
	const char *root;            /* canonical ROOT */
	const char *workspace;       /* absolute; may not exist (a stand-in is used) */
	const char *skill_path;      /* --skill as given, or NULL (the same default applies) */
	const char *venv;            /* canonical --venv, or NULL */
	double timeout_s;            /* < 0: not given */
	long memory_mb;              /* < 0: not given */
	const char *self_exe;        /* this binary */
};

/* Prints to f; returns the exit status: 0 when the policy is enforced,
 * every probe was refused and the server could serve (its workspace exists
 * or can be made), 1 otherwise. */
int check_run(const struct check_opts *o, FILE *f);

/* What to do when the workspace cannot be made (said by --check and by the
 * server's refusal of every call). */
#define WS_REMEDY "Pass --workspace DIR with a directory this user can write (for example --workspace /tmp/psm-workspace), " \
		  "or start the server where the project root is writable"

#endif

/* The --trust and --untrust commands (the user's side of workspace trust;
 * the rules are in policy/trust.h).  Each returns the process's exit
 * status: 0 done, 1 the user declined, 2 an error or nothing to approve. */
#ifndef MCP_TRUST_CLI_H
#define MCP_TRUST_CLI_H

#include <stdbool.h>

#include "../policy/trust.h"

/* What --trust approves. */
struct trust_cli_args {
	bool project;            /* the policy comes from a file */
	const char *root, *workspace;
	bool skill_given;        /* --skill: the approval command names it */
	const char *venv;        /* ROOT/.interpreter-venv (or --venv DIR), or NULL */
	bool venv_given;         /* --venv: nothing to approve */
	const char *const *writable; /* where the sandboxed code can write */
	bool yes;                /* --yes: approve without asking */
};

/* Shows the policy p (resolved) and what it grants beyond the built-in
 * policy, and the project's venv with its fingerprint, asks on the
 * terminal unless yes, and records what needs it: the file's real path and
 * SHA-256, the venv's real path and fingerprint, for ROOT. */
int trust_cli_approve(struct policy *p, const struct trust_cli_args *a);

/* Removes the approvals of ROOT: of the file at skill_path (NULL: none
 * found) and of the project's venv. */
int trust_cli_revoke(const char *skill_path, const char *root, const char *workspace);

#endif

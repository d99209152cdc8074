/* The --trust and --untrust commands (the user's side of workspace trust;
 * the rules are in policy/trust.h).  Each returns the process's exit
 * status: 0 done, 1 the user declined, 2 an error or nothing to approve. */
#ifndef MCP_TRUST_CLI_H
#define MCP_TRUST_CLI_H

#include <stdbool.h>

#include "../policy/trust.h"

/* Shows the policy p (resolved; from a file when project) and what it
 * grants beyond the built-in policy, asks on the terminal unless yes, and
 * records the file's path and SHA-256 in the user's store. */
int trust_cli_approve(struct policy *p, bool project, const char *root, const char *workspace,
		      bool skill_given, bool yes);

/* Removes every approval of the file at skill_path (NULL: none found). */
int trust_cli_revoke(const char *skill_path, const char *root, const char *workspace);

#endif

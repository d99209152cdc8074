/* --trust and --untrust: the user approves (or withdraws the approval of)
 * one exact project policy file on this machine.  See policy/trust.h. */
#include "trust_cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PFX "python-sandbox-mcp: "

/* Reads one answer from the terminal; true for y or yes. */
static bool ask_yes(void)
{
	char line[64];
	fputs("Approve this exact file on this machine? [y/N] ", stdout);
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		return false;
	line[strcspn(line, "\r\n")] = '\0';
	return strcmp(line, "y") == 0 || strcmp(line, "Y") == 0 || strcmp(line, "yes") == 0 ||
	       strcmp(line, "Yes") == 0 || strcmp(line, "YES") == 0;
}

int trust_cli_approve(struct policy *p, bool project, const char *root, const char *workspace,
		      bool skill_given, bool yes)
{
	struct trust_state t;
	struct err e = { 0 };
	char *desc = NULL, *shown = NULL;
	int status = 2;

	if (!project) {
		fprintf(stderr, PFX "--trust: %s has no project policy (neither .agents/skills/code-interpreter-sandbox-executor/SKILL.md "
			"nor .claude/skills/code-interpreter-sandbox-executor/SKILL.md); the built-in policy is in use and needs no approval. "
			"Pass --root with the project, or --skill with the file\n", root);
		return 2;
	}
	desc = policy_describe(p);
	if (trust_decide(&t, p, true, root, workspace, skill_given, &e) < 0) {
		fprintf(stderr, PFX "--trust: %s\n", e.msg);
		goto out;
	}
	printf("%s\n", desc ? desc : "");
	/* The path comes from the file system: no terminal escapes. */
	shown = trust_clean(t.path);
	printf("file: %s\nsha256: %s\n", shown ? shown : "?", t.hex);
	if (!t.asked.keys) {
		printf("It asks for nothing beyond the built-in policy: it applies as it is, no approval is needed.\n");
		status = 0;
		goto out;
	}
	printf("\nIt grants, beyond the built-in policy (withheld until you approve it):\n%s", t.asked.text);
	if (t.approved) {
		printf("\nThis exact file is already approved on this machine (%s).\n", t.store);
		status = 0;
		goto out;
	}
	/* The approval is the user's decision: a script (or an agent's shell
	 * tool, which has no terminal) must say --yes explicitly, so an
	 * instruction hidden in a project cannot have it approved by simply
	 * running the command. */
	if (!yes) {
		if (!isatty(STDIN_FILENO)) {
			fprintf(stderr, PFX "--trust asks for confirmation on a terminal, and stdin is not one: "
				"review the policy above, then run the command in a terminal, or add --yes to approve without asking\n");
			goto out;
		}
		if (!ask_yes()) {
			printf("Not approved: nothing was recorded.\n");
			status = 1;
			goto out;
		}
	}
	if (trust_approve(t.path, t.hex, root, workspace, &e) < 0) {
		fprintf(stderr, PFX "--trust: %s\n", e.msg);
		goto out;
	}
	printf("Approved: %s (sha256 %s), recorded in %s.\n"
	       "Restart the MCP server (or the agent) for it to take effect; any change to the file withdraws the approval.\n",
	       shown ? shown : "?", t.hex, t.store);
	status = 0;
out:
	free(shown);
	free(desc);
	trust_state_free(&t);
	return status;
}

int trust_cli_revoke(const char *skill_path, const char *root, const char *workspace)
{
	struct err e = { 0 };
	char store[PATH_MAX + 16];
	char *real, *shown;
	int n;

	if (!skill_path) {
		fprintf(stderr, PFX "--untrust: %s has no project policy file; pass --skill with the file whose approval to remove\n", root);
		return 2;
	}
	/* A file that is gone is named by its absolute path as it was. */
	real = realpath(skill_path, NULL);
	if (!real && skill_path[0] == '/')
		real = strdup(skill_path);
	if (!real) {
		fprintf(stderr, PFX "--untrust: %s: %s; pass its absolute path with --skill\n", skill_path, strerror(errno));
		return 2;
	}
	if (trust_store_path(store, sizeof store, &e) < 0 || (n = trust_revoke(real, root, workspace, &e)) < 0) {
		fprintf(stderr, PFX "--untrust: %s\n", e.msg);
		free(real);
		return 2;
	}
	shown = trust_clean(real);
	if (n)
		printf("Approval removed: %s is no longer approved on this machine (%s).\n", shown ? shown : "?", store);
	else
		printf("%s was not approved on this machine (%s): nothing to remove.\n", shown ? shown : "?", store);
	free(shown);
	free(real);
	return 0;
}

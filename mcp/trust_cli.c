/* --trust and --untrust: the user approves (or withdraws the approval of)
 * one exact project policy file on this machine.  See policy/trust.h. */
#include "trust_cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../common/util.h"

#define PFX "python-sandbox-mcp: "

/* Reads one answer from the terminal; true for y or yes. */
static bool ask_yes(const char *what)
{
	char line[64];
	printf("Approve %s on this machine, for this project? [y/N] ", what);
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		return false;
	line[strcspn(line, "\r\n")] = '\0';
	return strcmp(line, "y") == 0 || strcmp(line, "Y") == 0 || strcmp(line, "yes") == 0 ||
	       strcmp(line, "Yes") == 0 || strcmp(line, "YES") == 0;
}

/* What --trust shows of the policy; whether it needs an approval. */
static bool show_policy(const struct trust_state *t, const struct policy *p)
{
	if (!t->project) {
		printf("The policy is the built-in one: nothing to approve there.\n");
		return false;
	}
	char *desc = policy_describe(p), *shown = trust_clean(t->path);
	printf("%s\nfile: %s\nsha256: %s\n", desc ? desc : "", shown ? shown : "?", t->hex);
	free(desc);
	free(shown);
	if (!t->asked.keys) {
		printf("It asks for nothing beyond the built-in policy: it applies as it is, no approval is needed.\n");
		return false;
	}
	printf("\nIt grants, beyond the built-in policy (withheld until you approve it):\n%s", t->asked.text);
	if (t->approved) {
		printf("This exact file is already approved on this machine for this project.\n");
		return false;
	}
	return true;
}

/* What --trust shows of the venv; whether it needs an approval. */
static bool show_venv(const struct trust_state *t)
{
	const struct trust_venv *v = &t->venv;
	if (!v->path)
		return false;
	char *shown = trust_clean(v->path);
	printf("\nvirtual environment: %s\n", shown ? shown : "?");
	free(shown);
	if (v->files)
		printf("fingerprint: %s, of the files that run when its site-packages are added:\n%s", v->hex, v->files);
	if (v->given) {
		printf("It is named with --venv, the user's own word: it needs no approval.\n");
		return false;
	}
	if (v->why[0]) {
		shown = trust_clean(v->why);
		printf("%s\n", shown ? shown : "");
		free(shown);
		return false;
	}
	printf("Its packages are importable, and its .pth files run, in each session (inside the sandbox, never in the "
	       "server or the zygote). A project's venv is the project's code: unapproved, the interpreter runs without it.\n");
	if (v->approved) {
		printf("This exact venv is already approved on this machine for this project.\n");
		return false;
	}
	return true;
}

int trust_cli_approve(struct policy *p, const struct trust_cli_args *a)
{
	struct trust_state t;
	struct err e = { 0 };
	int status = 2;

	if (!a->project && !a->venv) {
		fprintf(stderr, PFX "--trust: %s has no project policy (neither .agents/skills/code-interpreter-sandbox-executor/SKILL.md "
			"nor .claude/skills/code-interpreter-sandbox-executor/SKILL.md) and no .interpreter-venv; the built-in policy is in "
			"use and needs no approval. Pass --root with the project, or --skill with the file\n", a->root);
		return 2;
	}
	if (trust_decide(&t, p, a->project, a->root, a->workspace, a->skill_given, &e) < 0 ||
	    trust_decide_venv(&t, a->venv, a->venv_given, a->root, a->workspace, a->writable, a->skill_given, &e) < 0) {
		fprintf(stderr, PFX "--trust: %s\n", e.msg);
		goto out;
	}
	bool policy = show_policy(&t, p), venv = show_venv(&t);
	if (!policy && !venv) {
		status = t.venv.why[0] && !t.venv.given ? 2 : 0;
		goto out;
	}
	const char *what = policy && venv ? "this exact file and this venv" : policy ? "this exact file" : "this venv";
	/* The approval is the user's decision: a script (or an agent's shell
	 * tool, which has no terminal) must say --yes explicitly, so an
	 * instruction hidden in a project cannot have it approved by simply
	 * running the command. */
	if (!a->yes) {
		if (!isatty(STDIN_FILENO)) {
			fprintf(stderr, PFX "--trust asks for confirmation on a terminal, and stdin is not one: "
				"review the above, then run the command in a terminal, or add --yes to approve without asking\n");
			goto out;
		}
		if (!ask_yes(what)) {
			printf("Not approved: nothing was recorded.\n");
			status = 1;
			goto out;
		}
	}
	if ((policy && trust_approve(TRUST_KIND_SKILL, a->root, t.path, t.hex, a->workspace, &e) < 0) ||
	    (venv && trust_approve(TRUST_KIND_VENV, a->root, t.venv.path, t.venv.hex, a->workspace, &e) < 0)) {
		fprintf(stderr, PFX "--trust: %s\n", e.msg);
		goto out;
	}
	printf("Approved %s for the project %s, recorded in %s.\n"
	       "Restart the MCP server (or the agent) for it to take effect; any change %s withdraws the approval.\n",
	       what, a->root, t.store,
	       policy && venv ? "to either" : policy ? "to the file" : "to the venv's pyvenv.cfg or start-up files");
	status = 0;
out:
	trust_state_free(&t);
	return status;
}

int trust_cli_revoke(const char *skill_path, const char *root, const char *workspace)
{
	struct err e = { 0 };
	char store[PATH_MAX + 16];
	char *real = NULL, *shown = NULL;
	int n = 0, nv;

	if (trust_store_path(store, sizeof store, &e) < 0) {
		fprintf(stderr, PFX "--untrust: %s\n", e.msg);
		return 2;
	}
	if (skill_path) {
		/* A file that is gone is named by its absolute path as it was. */
		real = realpath(skill_path, NULL);
		if (!real && skill_path[0] == '/')
			real = xstrdup(skill_path);
		if (!real) {
			fprintf(stderr, PFX "--untrust: %s: %s; pass its absolute path with --skill\n", skill_path, strerror(errno));
			return 2;
		}
		if ((n = trust_revoke(TRUST_KIND_SKILL, root, real, workspace, &e)) < 0) {
			fprintf(stderr, PFX "--untrust: %s\n", e.msg);
			free(real);
			return 2;
		}
		shown = trust_clean(real);
	}
	/* The venv's approvals of this project go with it, whatever their path. */
	if ((nv = trust_revoke(TRUST_KIND_VENV, root, NULL, workspace, &e)) < 0) {
		fprintf(stderr, PFX "--untrust: %s\n", e.msg);
		free(shown);
		free(real);
		return 2;
	}
	if (!skill_path && nv == 0) {
		fprintf(stderr, PFX "--untrust: %s has no project policy file and no approved venv; pass --skill with the file whose "
			"approval to remove\n", root);
		return 2;
	}
	if (skill_path && n)
		printf("Approval removed: %s is no longer approved on this machine for this project (%s).\n", shown ? shown : "?", store);
	else if (skill_path)
		printf("%s was not approved on this machine for this project (%s): nothing to remove.\n", shown ? shown : "?", store);
	if (nv)
		printf("Approval removed: the project's venv is no longer approved on this machine (%s).\n", store);
	free(shown);
	free(real);
	return 0;
}

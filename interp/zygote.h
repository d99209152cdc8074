/* The zygote: the jailed process that holds a warm interpreter and forks one
 * child per session (docs/ARCHITECTURE.md).  The server forks it at start and
 * never initialises Python itself. */
#ifndef INTERP_ZYGOTE_H
#define INTERP_ZYGOTE_H

#include "../policy/policy.h"

struct zygote_config {
	const struct policy *policy;
	const char *root;              /* canonical ROOT (Python's cwd) */
	const char *workspace;         /* canonical workspace */
	const char *workspace_display; /* "workspace" or the absolute path */
	const char *venv;              /* the venv each session adds, or NULL */
	bool venv_pth_off;             /* sessions add it without running its .pth files */
	bool venv_withheld;            /* the project's venv exists, not approved (for hints) */
	int ctrl;                      /* stream socket to the server */
	bool check;                    /* for --check: change nothing on the host */
	bool no_memfd;                 /* refuse memfd_create (jail_config) */
	bool stay_readable;            /* sessions stay dumpable without namespaces (jail_config) */
	const char *scratch;           /* the server's scratch directory for the namespace-free mode, or NULL */
};

/* The zygote is a fresh image of this binary (fork + exec of
 * /proc/self/exe --zygote-fd N): none of the server's memory is inside the
 * jail, and tools such as valgrind can follow the server alone.  It reads
 * one W_CONFIG message, rebuilds the policy from the same text, and runs
 * zygote_main.  Returns only on a bad configuration (exit status). */
int zygote_exec_main(int ctrl);

struct jail_config;
/* The jail configuration the zygote applies (also used by --check). */
void zygote_jail_config(const struct zygote_config *zc, struct jail_config *jc);

/* Runs in the server's freshly forked child: applies the jail, starts
 * Python, imports the stack, then serves W_SPAWN requests until the server
 * goes away.  Never returns. */
__attribute__((noreturn)) void zygote_main(const struct zygote_config *zc);

#endif

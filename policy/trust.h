/* Workspace trust: a project's own SKILL.md cannot grant itself more than
 * the built-in policy (the ceiling) until the user approves that exact
 * file on this machine.
 *
 * A project is often someone else's code (a cloned repository, a pull
 * request under review), and its SKILL.md is written by whoever wrote the
 * project.  Without a ceiling, a repository could ship net_access: true and
 * shell_exec: true and, with instructions hidden in its files for the
 * agent, send the user's data away.  So an unapproved project policy is
 * cut down, key by key, to the tighter of itself and the ceiling; the user
 * approves with `python-sandbox-mcp --trust`, which records the file's
 * absolute path and SHA-256 in a store of the user's own
 * ($XDG_CONFIG_HOME/python-sandbox-mcp/trusted).  Any change to the file
 * changes its hash and withdraws the approval.
 *
 * "Tighter", key by key:
 *   shell_exec, net_access   true only when both say true.
 *   fs_read                  each path the project lists is kept when the
 *                            ceiling lets it be read (true: inside ROOT or
 *                            the workspace; a list: under one of its
 *                            entries); the others are withheld.  true under
 *                            a ceiling of false or a list becomes that.
 *   fs_write                 each directory is kept when the ceiling lets
 *                            it be written ("workspace": inside the
 *                            workspace); "workspace" under a ceiling of
 *                            false is false.
 *   fs_read_deny             the union of both lists (the built-in
 *                            secrets apply in every case).
 *   limits                   the smaller of the two for timeout_s,
 *                            max_timeout_s, memory_mb, max_output_chars,
 *                            max_processes, max_file_mb, max_sessions,
 *                            max_workspace_mb, persist_mb.
 *                            checkpoint, seed and persist grant nothing:
 *                            the project's values stay. */
#ifndef POLICY_TRUST_H
#define POLICY_TRUST_H

#include <stdbool.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include "../common/err.h"
#include "policy.h"
#include "trust_venv.h"

/* The keys that can be withheld, as bits (names as in denied_by). */
enum trust_key {
	TRUST_FS_READ = 1u << 0,
	TRUST_FS_WRITE = 1u << 1,
	TRUST_SHELL_EXEC = 1u << 2,
	TRUST_NET_ACCESS = 1u << 3,
	TRUST_LIMITS = 1u << 4,
};

/* What a project policy asked for beyond the ceiling. */
struct trust_report {
	unsigned keys; /* enum trust_key bits; 0: nothing beyond the ceiling */
	char *text;    /* one line per withheld grant, "- net_access: true\n";
	                * NULL when keys is 0; owned */
};

void trust_report_free(struct trust_report *r);

/* Cuts p down to the tighter of p and ceiling, key by key, and says in *r
 * what was withheld.  Both policies must have been through policy_resolve
 * against the same ROOT; root and workspace are canonical.  With apply
 * false, p is left as it is and *r only reports. */
int trust_ceiling(struct policy *p, const struct policy *ceiling, const char *root,
		  const char *workspace, bool apply, struct trust_report *r, struct err *e);

/* The SHA-256 of text, as 64 lowercase hex digits and a NUL. */
void trust_hash(const char *text, size_t len, char hex[65]);

/* The store: $XDG_CONFIG_HOME/python-sandbox-mcp/trusted.  It is refused
 * (a negative errno, e says why) when it or its directory is a symlink,
 * belongs to another user, is writable by others, or lies inside ROOT or
 * the workspace, where the sandboxed code or the project could write it. */
int trust_store_path(char *out, size_t size, struct err *e);

/* What an approval names: a project's policy file, or its virtual
 * environment.  Either is recorded for the project's ROOT and the real path
 * of the file or directory (after every symlink), so that one project's
 * approval never stands for another's. */
enum trust_kind { TRUST_KIND_SKILL, TRUST_KIND_VENV };

/* 1 when `path` (absolute, canonical) is approved for ROOT `root` with
 * exactly this hash, 0 when not, a negative errno when the store is
 * refused.  An approval of a policy file recorded by an earlier version
 * (its path and hash only) counts for a ROOT that holds the file. */
int trust_lookup(enum trust_kind kind, const char *root, const char *path, const char *hex,
		 const char *workspace, struct err *e);

/* Records (root, path, hex), replacing any other approval of the same
 * kind, root and path. */
int trust_approve(enum trust_kind kind, const char *root, const char *path, const char *hex,
		  const char *workspace, struct err *e);

/* Removes every approval of (kind, root, path), of any path when path is
 * NULL.  Returns how many were removed (0 or more) or a negative errno. */
int trust_revoke(enum trust_kind kind, const char *root, const char *path, const char *workspace,
		 struct err *e);

/* The shell command that approves the file, for messages: single-quoted
 * paths.  skill_given: whether --skill must be part of it.  Caller frees. */
char *trust_command(const char *root, const char *skill, bool skill_given);

/* s with control bytes written as \xNN, for showing a path on a terminal
 * or to the agent.  Caller frees (NULL when out of memory). */
char *trust_clean(const char *s);

/* Whether denied_by `name` ("net_access", "fs_read", ...) is a key in
 * `keys`. */
bool trust_key_withheld(unsigned keys, const char *name);


/* ---- the decision at start-up ------------------------------------------ */

/* What the server decided about the project's venv (ROOT/.interpreter-venv,
 * or --venv DIR). */
struct trust_venv {
	char *path;         /* its real path; NULL: no venv; owned */
	bool given;         /* --venv: the user's own word, nothing to approve */
	bool approved;      /* given, or approved with this fingerprint */
	bool pth_off;       /* it lies where the sandboxed code can write: its
	                     * site-packages are importable, its .pth files are
	                     * not run (what a cell planted there would run in
	                     * every later session) */
	char hex[65];       /* the fingerprint (trust_venv_fingerprint) */
	char *files;        /* the files it covers, for --trust and --check; owned */
	char why[900];      /* why it cannot be approved, or "" */
};

/* What the server decided about a project policy. */
struct trust_state {
	bool project;       /* the policy came from a file, not the built-in one */
	bool approved;      /* that exact file is approved on this machine */
	unsigned withheld;  /* keys cut down to the ceiling (0 when approved) */
	struct trust_report asked; /* what the file asks beyond the ceiling */
	char hex[65];       /* the file's SHA-256 (of the very bytes parsed) */
	char *path;         /* its canonical path; owned */
	char *source;       /* its path as found (ROOT/.agents/...); owned */
	char *command;      /* the command that approves it; owned */
	char store[PATH_MAX + 16];  /* the approval store, for messages */
	char store_err[768];/* why the store was refused, or "" */
	char *note;         /* for the agent and the log; NULL when nothing
	                     * is withheld; owned */
	struct policy *ceiling; /* the built-in policy, resolved; owned */
	struct trust_venv venv; /* the project's venv (trust_decide_venv) */
};

/* Decides: when p comes from a file (project) and asks for more than the
 * built-in policy, looks the file up in the store and, unless it is
 * approved, cuts p down (trust_ceiling).  p must have been through
 * policy_resolve; root and workspace are canonical; skill_given says the
 * file was named with --skill (the approval command then names it too). */
int trust_decide(struct trust_state *t, struct policy *p, bool project, const char *root,
		 const char *workspace, bool skill_given, struct err *e);

/* Decides about a venv, after trust_decide: `venv` is --venv DIR (given)
 * or ROOT/.interpreter-venv when that exists, canonical; NULL for none.
 * The default venv is the project's code: it is used only when approved
 * (ROOT, its real path, its fingerprint); unapproved, t->venv.path stays
 * set, t->venv.approved false, and t->note says so.  `writable` lists the
 * directories the sandboxed code can write (NULL-terminated): a venv below
 * one of them is used without its .pth files.  Sets t->command when
 * trust_decide did not. */
int trust_decide_venv(struct trust_state *t, const char *venv, bool given, const char *root,
		      const char *workspace, const char *const *writable, bool skill_given, struct err *e);

/* Whether the interpreter uses the venv t->venv.path. */
bool trust_venv_used(const struct trust_state *t);

/* Prints the ceiling, the project's request and the approval state (for
 * --check).  `requested` is the description of the file as written. */
void trust_print(const struct trust_state *t, const char *requested, FILE *out);

void trust_state_free(struct trust_state *t);

#endif

/* The policy: what a SKILL.md frontmatter allows (docs/TOOLS.md).
 *
 * Parsed with libyaml into a struct policy; every error names the file, the
 * line and the key.  The policy is immutable once loaded, except that CLI
 * flags may tighten its limits (policy_tighten) and policy_resolve makes its
 * path lists absolute. */
#ifndef POLICY_POLICY_H
#define POLICY_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "../common/err.h"

enum fs_read_mode {
	FS_READ_ROOT,      /* true: ROOT read-only (plus the workspace) */
	FS_READ_WORKSPACE, /* false: the workspace only */
	FS_READ_LIST,      /* a list of paths (absolute, or relative to ROOT) */
};

enum fs_write_mode {
	FS_WRITE_WORKSPACE, /* "workspace" */
	FS_WRITE_NONE,      /* false: nothing writable */
	FS_WRITE_LIST,      /* a list of directories inside ROOT */
};

struct policy_limits {
	double timeout_s;       /* default 30 */
	double max_timeout_s;   /* default 600 */
	long memory_mb;         /* default 2048 */
	long max_output_chars;  /* default 8000 */
	long max_processes;     /* default 64 */
	long max_file_mb;       /* default 512 */
	long max_sessions;      /* default 8 */
	long max_workspace_mb;  /* default 4096: disk the workspace may take */
	bool checkpoint;        /* default true */
	long seed;              /* default 0 */
	bool persist;           /* default true: save sessions, restore after a restart */
	long persist_mb;        /* default 1024: cap on one session's snapshot */
};

struct policy {
	char *source; /* the file it came from, or "<built-in SKILL.md>" */
	char *text;   /* the text it was parsed from (handed to the zygote, which
	               * parses the very same bytes: no second read of the file) */
	size_t text_len;

	enum fs_read_mode fs_read;
	char **fs_read_paths; /* FS_READ_LIST only; owned */
	size_t n_fs_read_paths;
	unsigned *fs_read_lines; /* the file's line of each entry, for messages; NULL
				  * once the list no longer matches the file; owned */

	enum fs_write_mode fs_write;
	char **fs_write_paths; /* FS_WRITE_LIST only; owned */
	size_t n_fs_write_paths;
	unsigned *fs_write_lines; /* as fs_read_lines */

	/* Globs relative to ROOT that the code can never read, on top of the
	 * built-in list of well-known secrets (secret_names.c); owned. */
	char **fs_read_deny;
	size_t n_fs_read_deny;

	bool shell_exec; /* false: execve/execveat refused */
	bool net_access; /* false: no socket to any network */

	struct policy_limits limits;

	/* Informational frontmatter (owned, may be NULL). */
	char *name;
	char *description;
};

/* The built-in list of well-known secrets (secret_names.c), NULL-terminated,
 * and whether a path relative to ROOT matches it or p->fs_read_deny. */
const char *const *secrets_builtin(void);
bool secrets_match(const struct policy *p, const char *rel);

/* Parses a whole SKILL.md (frontmatter between "---" lines, then a body).
 * `source` names the file in messages.  Returns 0 and *out (caller frees
 * with policy_free) or a negative errno with e->msg like
 * "SKILL.md:14: permissions.fs_write: expected \"workspace\", false or a list
 * of directories, got 42". */
int policy_parse(const char *text, size_t len, const char *source,
		 struct policy **out, struct err *e);

/* Reads and parses a file (size-capped). */
int policy_load_file(const char *path, struct policy **out, struct err *e);

/* The policy of the project's own SKILL.md, which is embedded in the binary. */
int policy_builtin(struct policy **out, struct err *e);

/* Makes list paths absolute against root (realpath where they exist), and
 * checks that every fs_write directory lies inside root. */
int policy_resolve(struct policy *p, const char *root, struct err *e);

/* CLI flags can only tighten: a value larger than the policy's is an error.
 * Pass a negative value for "not given". */
int policy_tighten(struct policy *p, double timeout_s, long memory_mb, struct err *e);

/* A multi-line human-readable description (for the start-up log and
 * --check).  Caller frees. */
char *policy_describe(const struct policy *p);

void policy_free(struct policy *p);

#endif

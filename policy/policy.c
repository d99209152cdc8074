/* The policy parser: SKILL.md frontmatter -> struct policy.
 *
 * Split along the schema: frontmatter.c reads the frontmatter into a tree
 * of nodes, permissions.c and limits.c check their sections (and resolve
 * the paths, tighten the limits), describe.c says the result in words;
 * this file holds the top-level keys, the defaults and the entry points.
 *
 * The frontmatter is read with libyaml's event API into a small tree of
 * nodes that carry their line numbers, then the tree is checked against a
 * strict schema: every error names FILE:LINE: KEY, says what is wrong and
 * what to write instead.  Everything is bounded: the file (1 MiB), the
 * frontmatter (64 KiB), the nesting depth, the node count and the path
 * lists; anchors and aliases are refused outright.
 *
 * Decisions (see also the comments at each check):
 * - Booleans are the YAML 1.2 core spellings only: true/True/TRUE and
 *   false/False/FALSE, unquoted and untagged.  yes/no/on/off/y/n are an
 *   error that says to write true or false: YAML 1.1 and 1.2 parsers
 *   disagree on them, and a permission must mean one thing.  A quoted
 *   "true" is a string, hence a type error.
 * - Integers are plain decimal (no leading zeros, no 0x/0o, no
 *   underscores): "0755"-style values are octal in YAML 1.1 and decimal in
 *   YAML 1.2.  1.5 (or 2048.0) for an integer key is a type error.  Numbers
 *   are decimal ints or floats; .inf and .nan are refused.
 * - fs_read: [] means the same as fs_read: false (the workspace only) and
 *   fs_write: [] the same as fs_write: false (nothing writable); both are
 *   stored as that mode, so no consumer sees an empty list.
 * - Minimums: memory_mb 64, max_output_chars 200, max_processes 4 (the
 *   interpreter and numpy's libraries start threads, and threads count),
 *   max_file_mb 1, max_sessions 1..256, timeout_s/max_timeout_s
 *   0.001..86400 seconds.
 * - Duplicate keys in the frontmatter, permissions or limits are errors.
 * - An empty frontmatter, or an empty `permissions:`/`limits:`, is an error
 *   (delete the key to get the defaults). */
#include "private.h"

#include "../common/escape.h"
#include "../common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

extern const char builtin_skill_md[];
extern const unsigned long builtin_skill_md_len;

static const char *const top_keys[] = {
	"name", "description", "metadata", "license", "version", "allowed-tools",
	"compatibility", "triggers", "permissions", "limits", NULL
};
#define TOP_KEYS "name, description, metadata, license, version, allowed-tools, " \
		 "compatibility, triggers, permissions, limits"

void strv_free(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static int parse_top(const struct pctx *c, const struct ynode *root, struct policy *p,
		     struct lines *ln)
{
	char key[256], buf[SHOW_MAX * 4 + 40];
	int rc;

	if (root->kind != Y_MAP)
		return fm_err(c, root->line, NULL,
			    "the frontmatter must be a mapping of keys (%s), got %s", TOP_KEYS,
			    fm_show(root, buf, sizeof buf));
	for (size_t i = 0; i < root->n; i += 2) {
		const struct ynode *k = root->kids[i], *v = root->kids[i + 1];
		rc = fm_mapping_key(c, root, i, NULL, key, sizeof key);
		if (rc < 0)
			return rc;
		if (fm_eq(k, "permissions")) {
			rc = perm_parse(c, v, p, ln);
		} else if (fm_eq(k, "limits")) {
			rc = limits_parse(c, v, p);
		} else if (fm_eq(k, "name")) {
			rc = fm_want_text(c, v, key, &p->name);
		} else if (fm_eq(k, "description")) {
			rc = fm_want_text(c, v, key, &p->description);
		} else if (fm_eq(k, "metadata")) {
			if (v->kind != Y_MAP && !fm_is_null(v))
				rc = fm_err(c, v->line, key, "expected a mapping, got %s",
					  fm_show(v, buf, sizeof buf));
		} else if (fm_in(k, top_keys)) {
			/* free-form: license, version, allowed-tools, ... */
		} else if (fm_in(k, policy_perm_keys)) {
			rc = fm_err(c, k->line, key,
				  "unknown top-level key; it is a permission: indent it under permissions:");
		} else {
			if (limits_known(k))
				rc = fm_err(c, k->line, key,
					  "unknown top-level key; it is a limit: indent it under limits:");
			else
				rc = fm_err(c, k->line, key,
					  "unknown top-level key; accepted keys: " TOP_KEYS);
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* ---- public API ------------------------------------------------------ */

static void set_defaults(struct policy *p)
{
	p->fs_read = FS_READ_ROOT;
	p->fs_write = FS_WRITE_WORKSPACE;
	p->shell_exec = false;
	p->net_access = false;
	p->limits = (struct policy_limits){
		.timeout_s = 30,
		.max_timeout_s = 600,
		.memory_mb = 2048,
		.max_output_chars = 8000,
		.max_processes = 64,
		.max_file_mb = 512,
		.max_sessions = 8,
		.max_workspace_mb = 4096,
		.checkpoint = true,
		.seed = 0,
		.persist = true,
		.persist_mb = 1024,
	};
}

void policy_free(struct policy *p)
{
	if (!p)
		return;
	free(p->fs_read_lines);
	free(p->fs_write_lines);
	strv_free(p->fs_read_paths, p->n_fs_read_paths);
	strv_free(p->fs_write_paths, p->n_fs_write_paths);
	strv_free(p->fs_read_deny, p->n_fs_read_deny);
	free(p->source);
	free(p->text);
	free(p->name);
	free(p->description);
	free(p);
}

int policy_parse(const char *text, size_t len, const char *source,
		 struct policy **out, struct err *e)
{
	struct pctx c = { .src = source ? source : "<policy>", .e = e };
	struct lines ln = { NULL, NULL };
	struct ynode *root = NULL;
	struct policy *p;
	int rc;

	if (!out)
		return err_set(e, -EINVAL, "policy_parse: no output");
	*out = NULL;
	if (!text)
		return err_set(e, -EINVAL, "%s: no text", c.src);
	if (len > MAX_FILE_BYTES)
		return err_set(e, -EFBIG,
			       "%s: the file is larger than 1 MiB (%zu bytes); a SKILL.md should be a few KiB",
			       c.src, len);
	rc = fm_find(&c, text, len);
	if (rc < 0)
		return rc;
	rc = fm_load_tree(&c, &root);
	if (rc < 0)
		return rc;

	p = xcalloc(1, sizeof *p);
	set_defaults(p);
	p->source = xstrdup(c.src);
	p->text = xmalloc(len + 1);
	memcpy(p->text, text, len);
	p->text[len] = '\0';
	p->text_len = len;
	rc = parse_top(&c, root, p, &ln);
	if (rc < 0)
		goto out_policy;
	p->fs_read_lines = ln.read;
	p->fs_write_lines = ln.write;
	ynode_free(root);
	*out = p;
	return 0;
out_policy:
	free(ln.read);
	free(ln.write);
	policy_free(p);
	ynode_free(root);
	return rc;
}

int policy_load_file(const char *path, struct policy **out, struct err *e)
{
	struct stat st;
	size_t len = 0;

	if (!out)
		return err_set(e, -EINVAL, "policy_load_file: no output");
	*out = NULL;
	/* O_NONBLOCK: a FIFO given as --skill must not hang the start-up;
	 * it is refused below as not a regular file. */
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT)
			return err_set(e, -ENOENT, "%s: the file does not exist", path);
		return err_sys(e, -errno, "%s: cannot open", path);
	}
	if (fstat(fd, &st) < 0)
		return err_sys(e, -errno, "%s: cannot stat", path);
	if (!S_ISREG(st.st_mode))
		return err_set(e, -EINVAL, "%s: not a regular file; pass a SKILL.md file", path);
	if (st.st_size > (off_t)MAX_FILE_BYTES)
		return err_set(e, -EFBIG,
			       "%s: the file is larger than 1 MiB (%lld bytes); a SKILL.md should be a few KiB",
			       path, (long long)st.st_size);
	/* Read up to one byte over the cap: the file may grow after fstat. */
	cleanup_free char *buf = xmalloc(MAX_FILE_BYTES + 1);
	for (;;) {
		ssize_t r = read(fd, buf + len, MAX_FILE_BYTES + 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return err_sys(e, -errno, "%s: cannot read", path);
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > MAX_FILE_BYTES)
			return err_set(e, -EFBIG,
				       "%s: the file is larger than 1 MiB; a SKILL.md should be a few KiB",
				       path);
	}
	return policy_parse(buf, len, path, out, e);
}

int policy_builtin(struct policy **out, struct err *e)
{
	return policy_parse(builtin_skill_md, (size_t)builtin_skill_md_len,
			    "<built-in SKILL.md>", out, e);
}
